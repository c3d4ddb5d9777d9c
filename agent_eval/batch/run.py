"""One batch end to end: its lease, its preparation, its schedule and its cleanup.

Every problem before the first run (configuration, engine, images, suite,
packing, consumer, the placement's own) ends the batch as ``not-run`` with a
minimal receipt and its reasons (:mod:`agent_eval.batch.preflight`); nothing
is ever pulled. After that the schedule writes the receipt after every run.
Containers of the batch are removed by label, the placement closed and the
batch's work directory deleted whatever happens (a consumer kept in the
consumer cache stays there, read-only to every container, for the next
batch of the same inputs).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval.batch.lease import HeldLease, held
from agent_eval.batch.ports import Placement
from agent_eval.batch.preflight import Preflight, Prepared, Reused, is_self_test
from agent_eval.batch.progress import Phase, PhaseSteps, ProgressEvent
from agent_eval.batch.receipt_book import ReceiptNotWritten, describe_failure
from agent_eval.batch.resume import runner_config_digest
from agent_eval.batch.schedule import SharedSlots, SlotShare, run_schedule
from agent_eval.batch.signals import Stop
from agent_eval.batch.station import LocalPlacement, NotReady, default_slots
from agent_eval.batch.workdir import WORK_ROOT, make_work_dir, remove_work_dir
from agent_eval.engine import ContainerEngine, remove_leftovers
from agent_eval.errors import AgentEvalError, ConfigError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.layout import RunDirectory
from agent_eval.models import BatchStatus, Receipt, RunnerConfig
from agent_eval.project import Project
from agent_eval.verification.protocol import VerifierContext, VerifierFactory

__all__ = [
    "BatchOutcome",
    "SeveralOutcome",
    "is_self_test",
    "run_batch",
    "run_batches",
    "shared_configs",
]

EXIT_RECEIPT_NOT_WRITTEN = 3
_LAPS: dict[Phase, str] = {"cluster": "preflight", "packing": "pack", "verifier": "consumer"}
"""The phase whose time a preparing phase's adds to (the others, their own)."""


@dataclass(frozen=True)
class BatchOutcome:
    """What eval-agent prints and how it exits."""

    status: BatchStatus
    receipt: Path
    first_successes: int
    final_successes: int
    phase_seconds: Mapping[str, float] = field(default_factory=dict)
    """Wall time of each phase that ran: preflight, pack, consumer, schedule."""
    reasons: tuple[str, ...] = ()
    """Why it did not complete (the receipt's reasons)."""
    receipt_written: bool = True
    """False when not even the final receipt could be written (the disk is full)."""

    @property
    def exit_code(self) -> int:
        """0 completed (qualified or not), 2 not-run, 3 no final receipt, 1 stopped early."""
        if not self.receipt_written:
            return EXIT_RECEIPT_NOT_WRITTEN
        return {"completed": 0, "not-run": 2}.get(self.status, 1)


def _now() -> datetime:
    return datetime.now(UTC)


def run_batch(
    config_path: Path,
    project: Project,
    *,
    verifier_factory: VerifierFactory[VerifierContext],
    connect: Callable[[str | None], ContainerEngine],
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], datetime] = _now,
    progress: Callable[[ProgressEvent], None] = lambda _event: None,
    notice: Callable[[str], None] = lambda _line: None,
    only: Sequence[str] = (),
    remote: Placement | None = None,
    repetitions: int | None = None,
    resume: Path | None = None,
) -> BatchOutcome:
    """Run one whole batch and return where its receipt is; it never ends ``running``.

    With *only* (task ids or run ids), just those runs run: the receipt
    records the selection and the batch can never qualify. With *repetitions*, each
    task runs that many times instead of as the suite declares: a measurement batch,
    which can be compared but never qualifies. With *resume* (a finished batch's run
    directory), only the runs its chain left without a valid final verdict run, in a new
    batch bound to the same identities (:mod:`agent_eval.batch.resume`). With *remote* (a cluster's
    placement), the runs execute on its nodes, prepared after the driver's own
    preflight, and a node that cannot be prepared ends the batch ``not-run``;
    without, on this machine, the driver's engine equipped with a verifier
    from *verifier_factory* (:class:`~agent_eval.batch.station.LocalPlacement`).
    *connect* gives the engine at the config's ``runtimePath`` (the caller
    picks the implementation); one that cannot be reached ends it ``not-run``.

    The batch holds a lease on its run directory for as long as it runs.
    Everything from connecting to the engine on runs inside one cleanup: the
    batch's containers (by label) and its work directory are removed whatever
    happens, and the lease is given up only once that is confirmed. Before its
    own first run it reaps the batches whose owner died (*notice* hears what
    was reaped, and any receipt that could not be written). A problem before
    the first run, the verifier's preparation included, ends the batch as
    ``not-run`` with a receipt naming it; a signal
    (:class:`~agent_eval.batch.signals.Stop`, KeyboardInterrupt) there, as
    ``interrupted``; afterwards the schedule closes the receipt (see
    :func:`~agent_eval.batch.schedule.run_schedule`). A cleanup that fails is
    added to the reasons and makes the status ``infrastructure-failure``.
    """
    batch = _new_batch(
        config_path,
        project,
        ports=_Ports(connect, environ, clock, progress, notice),
        placement=remote or LocalPlacement(verifier_factory),
        only=tuple(only),
        repetitions=repetitions,
        resume=resume,
    )
    with held(batch.evidence.root, batch.batch_id, clock) as lease:
        batch.lease = lease
        outcome, cleaned_up = batch.run()
        if outcome.receipt_written and cleaned_up:
            try:
                lease.release()
            except OSError as exc:
                # The batch is over and said so; the lease stays for the reaper.
                notice(f"the lease could not be given up: {exc.strerror}")
    return outcome


def _new_batch(
    config_path: Path, project: Project, *, ports: _Ports, placement: Placement, **options: Any
) -> _Batch:
    """A batch with a fresh id, its run directory made (and nothing in it yet)."""
    started = ports.clock()
    batch_id = f"{started.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4()}"
    batch = _Batch(
        project=project,
        config_path=config_path,
        batch_id=batch_id,
        started=started,
        evidence=RunDirectory(project.evidence / batch_id),
        work_dir=project.evidence / WORK_ROOT / batch_id,
        ports=ports,
        placement=placement,
        **options,
    )
    batch.evidence.root.mkdir(parents=True, exist_ok=False)
    return batch


SHARED_FIELDS = ("runtimePath", "verifierImage", "concurrency")
"""What the runner configs of one command must agree on: they run on one engine, their
submissions are checked by one verifier against one consumer, in one set of slots."""


def shared_configs(config_paths: Sequence[Path]) -> list[RunnerConfig]:
    """The runner configs of one command running several runners, each read and checked.

    They share the engine (``runtimePath``), the verifier (``verifierImage``) and the
    slots (``concurrency``); the library, the suite and the project are the command's
    own, one for all.

    Raises:
        ConfigError: A config cannot be read, is named twice, says what another says
            (the same runner identity: one matrix row), or differs from the first in a
            shared field (the file and the field are named).
    """
    configs: list[RunnerConfig] = []
    seen: dict[str, Path] = {}
    identities: dict[str, Path] = {}
    for path in config_paths:
        where = path.resolve()
        if str(where) in seen:
            raise ConfigError(f"{path}: the runner config is named twice")
        seen[str(where)] = path
        config = read_model(path, RunnerConfig, what="runner config")
        digest = runner_config_digest(config)
        if digest in seen:
            raise ConfigError(f"{path}: the same runner config as {seen[digest]}")
        seen[digest] = path
        identity = json.dumps(
            [config.expectedRunner.model_dump(mode="json"),
             config.expectedModel.model_dump(mode="json")], sort_keys=True,
        )  # fmt: skip
        if identity in identities:
            raise ConfigError(
                f"{path}: expectedRunner and expectedModel are those of {identities[identity]}: "
                "each runner of one command is one agent, one row of its matrix"
            )
        identities[identity] = path
        if configs:
            first, first_path = configs[0], config_paths[0]
            for name in SHARED_FIELDS:
                if getattr(config, name) != getattr(first, name):
                    raise ConfigError(
                        f"{path}: {name} is {getattr(config, name)!r}, not "
                        f"{getattr(first, name)!r} as in {first_path}: the runners of one "
                        "command share the engine, the verifier and the slots"
                    )
        configs.append(config)
    return configs


@dataclass(frozen=True)
class SeveralOutcome:
    """The batches of one command that ran several runners, in the order of their configs."""

    outcomes: tuple[BatchOutcome, ...]
    order: tuple[tuple[int, str], ...] = ()
    """Every run in the order it was given a slot: (the config's index, the run id)."""

    @property
    def exit_code(self) -> int:
        """The worst of the batches': 3 no final receipt, 2 not-run, 1 stopped early, 0."""
        codes = {o.exit_code for o in self.outcomes}
        for code in (EXIT_RECEIPT_NOT_WRITTEN, 2, 1):
            if code in codes:
                return code
        return 0


def run_batches(
    config_paths: Sequence[Path],
    project: Project,
    *,
    verifier_factory: VerifierFactory[VerifierContext],
    connect: Callable[[str | None], ContainerEngine],
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], datetime] = _now,
    progress: Callable[[ProgressEvent], None] = lambda _event: None,
    notice: Callable[[str], None] = lambda _line: None,
    only: Sequence[str] = (),
    repetitions: int | None = None,
) -> SeveralOutcome:
    """Run one batch per runner config over one preparation and one set of slots.

    The configs are checked together first (:func:`shared_configs`; nothing is made
    when they cannot share). Then each batch is prepared as :func:`run_batch` prepares
    one, in order, except that the library is packed and the consumer prepared by the
    first alone: the others copy its archives into their own evidence and use its
    consumer. When any cannot be prepared, none runs: the others are closed ``not-run``
    (or ``interrupted``, after a signal) naming it. Otherwise their schedules run at
    once, in a thread each, their runs handed the shared slots in turn
    (:class:`~agent_eval.batch.schedule.SharedSlots`); a signal is forwarded to every
    schedule, which closes its receipt. Each batch keeps its own lease, receipt,
    retries, stops and cleanup, exactly as a batch of its own. *only* and
    *repetitions* apply to every batch, as :func:`run_batch` applies them to one.

    Raises:
        ConfigError: The configs cannot share one command (see :func:`shared_configs`).
    """
    configs = shared_configs(config_paths)
    ports = [
        _Ports(connect, environ, clock, _Labelled.of(progress, i, len(configs)), notice)
        for i in range(len(configs))
    ]
    batches = [
        _new_batch(
            path,
            project,
            ports=ports[i],
            placement=LocalPlacement(verifier_factory),
            only=tuple(only),
            repetitions=repetitions,
        )
        for i, path in enumerate(config_paths)
    ]
    slots = SharedSlots(configs[0].concurrency or default_slots(), len(batches))
    with contextlib.ExitStack() as leases:
        for batch in batches:
            batch.lease = leases.enter_context(held(batch.evidence.root, batch.batch_id, clock))
        _run_together(batches, slots)
        results = [batch.finish() for batch in batches]
        for batch, (outcome, cleaned_up) in zip(batches, results, strict=True):
            if outcome.receipt_written and cleaned_up and batch.lease is not None:
                try:
                    batch.lease.release()
                except OSError as exc:
                    notice(f"the lease could not be given up: {exc.strerror}")
    return SeveralOutcome(tuple(o for o, _ in results), tuple(slots.order))


def _run_together(batches: list[_Batch], slots: SharedSlots) -> None:
    """Prepare every batch, then run their schedules at once; each ends with a final receipt."""
    failed: _Batch | None = None
    stop: str | None = None
    try:
        for batch in batches:
            reused = None if batch is batches[0] else Reused.of(_prepared(batches[0]))
            batch.closing(functools.partial(batch.prepare, reused))
            if batch.final is not None:
                failed = batch
                break
    except (Stop, KeyboardInterrupt) as exc:  # between two batches' preparations
        stop = exc.reason if isinstance(exc, Stop) else "interrupted by the operator (Ctrl-C)"
    if failed is not None or stop is not None:
        for batch in batches:
            if batch.final is None:
                batch.closing(functools.partial(_not_started, batch, failed, stop))
        return
    threads = [_ScheduleThread(batch, SlotShare(slots, i)) for i, batch in enumerate(batches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        # Waited for on an event, not by join: a signal that interrupts a join can leave
        # the thread looking ended while it still runs.
        while not thread.ended.is_set():
            try:
                thread.ended.wait()
            except (Stop, KeyboardInterrupt) as exc:
                slots.interrupt(exc)  # every schedule closes its receipt, as one alone would
    for thread in threads:
        thread.join()
        thread.closed()


def _prepared(batch: _Batch) -> Preflight:
    assert batch.preflight is not None
    return batch.preflight


def _not_started(batch: _Batch, failed: _Batch | None, stop: str | None) -> Receipt:
    if failed is not None and failed.final is not None:
        status: BatchStatus = "interrupted" if failed.final.status == "interrupted" else "not-run"
        why = "; ".join(failed.final.reasons)
        reason = (
            f"the batch of {failed.config_path} (run together with this one) did not start "
            f"({failed.final.status}: {why}); none of them ran"
        )
        return batch._closed_before_running(status, [reason])
    return batch._closed_before_running("interrupted", [f"{stop} before the first run"])


class _ScheduleThread(threading.Thread):
    """One batch's schedule, on the shared slots, in a thread of its own."""

    def __init__(self, batch: _Batch, share: SlotShare) -> None:
        super().__init__(name=f"schedule-{share.member}", daemon=True)
        self.batch, self.share = batch, share
        self.failure: BaseException | None = None
        self.ended = threading.Event()

    def run(self) -> None:
        batch = self.batch
        prepared = batch.prepared
        assert prepared is not None
        try:
            batch.closing(lambda: batch.schedule(prepared, self.share))
        except BaseException as exc:  # run_schedule closes its receipt; this is beyond it
            self.failure = exc
        finally:
            self.ended.set()

    def closed(self) -> None:
        """Raise what the schedule could not close itself."""
        if self.failure is not None:
            raise self.failure


@dataclass(frozen=True)
class _Labelled:
    """One runner's progress among several: its lines named after its config's place, its
    runs counted with everyone's."""

    progress: Callable[[ProgressEvent], None]
    label: str

    @classmethod
    def of(
        cls, progress: Callable[[ProgressEvent], None], index: int, count: int
    ) -> Callable[[ProgressEvent], None]:
        return progress if count == 1 else cls(progress, f"runner {index + 1}")

    def __call__(self, event: ProgressEvent) -> None:
        # The runs of several schedules share no tally: the lines say each runner's own.
        self.progress(
            ProgressEvent(
                f"{self.label}: {event.message}",
                phase=event.phase,
                seconds=event.seconds,
            )
        )


@dataclass(frozen=True)
class _Ports:
    """The side effects a batch is given (the CLI passes real ones, tests fakes)."""

    connect: Callable[[str | None], ContainerEngine]
    environ: Mapping[str, str]
    clock: Callable[[], datetime]
    progress: Callable[[ProgressEvent], None]
    notice: Callable[[str], None]


@dataclass
class _Batch:
    """One batch's identity, places and ports, and what it has connected to so far."""

    project: Project
    config_path: Path
    batch_id: str
    started: datetime
    evidence: RunDirectory
    work_dir: Path
    ports: _Ports
    placement: Placement
    """Where the runs execute: this machine, or a cluster's nodes."""
    only: tuple[str, ...] = ()
    """The runs asked for (``--only``); empty: the whole schedule."""
    repetitions: int | None = None
    """Runs per task of a measurement batch (None: as the suite declares)."""
    resume: Path | None = None
    """The run directory of the batch this one resumes (``--resume``)."""
    engine: ContainerEngine | None = None
    lease: HeldLease | None = None
    final: Receipt | None = None
    """The receipt once the batch closed it (before its first run, or its schedule's end)."""
    written: bool = True
    """False once the final receipt could not be written."""
    prepared: Prepared | None = None
    """What the preparation made, once it made it."""
    preflight: Preflight | None = None

    phases: dict[str, float] = field(default_factory=dict)
    _mark: float = field(default_factory=time.monotonic)
    _phase: Phase | None = None
    steps: PhaseSteps = field(init=False)
    """Tells the watcher each preparing phase's start and end."""

    def __post_init__(self) -> None:
        self.steps = PhaseSteps(self.ports.progress)

    def lap(self, name: str) -> None:
        """Add the time since the last lap to *name*'s."""
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._mark
        self._mark = now

    def phase(self, name: Phase, words: str) -> None:
        """End the preparing phase in progress (its time to its lap) and start *name*."""
        if self._phase is not None:
            self.lap(_LAPS.get(self._phase, self._phase))
        self._phase = name
        self.steps.start(name, words)

    def run(self) -> tuple[BatchOutcome, bool]:
        """The outcome, and whether the batch's containers and work directory are gone."""
        self.closing(self.prepare)
        if self.final is None and self.prepared is not None:
            prepared = self.prepared
            self.closing(lambda: self.schedule(prepared))
        return self.finish()

    def closing(self, action: Callable[[], Receipt | None]) -> None:
        """Run *action*; a receipt it gives or could not write is the batch's final one."""
        try:
            final = action()
        except ReceiptNotWritten as exc:
            self.final, self.written = exc.receipt, False
            self.ports.notice(
                f"the receipt could not be written: "
                f"{describe_failure(exc.cause, self.evidence.root)}"
            )
            return
        if final is not None:
            self.final = final

    def finish(self) -> tuple[BatchOutcome, bool]:
        """Clean up after the closed batch; its outcome, and whether the cleanup was done."""
        final, written = self.final, self.written
        assert final is not None
        try:
            problems = self._cleanup()
        except (Stop, KeyboardInterrupt):
            # The receipt is final; a signal only cut the cleanup short (later ones are counted).
            problems = self._cleanup()
        if problems and written:
            final, written = self._add_cleanup_problems(final, problems)
        try:
            self.evidence.reserve.unlink(missing_ok=True)
        except OSError as exc:  # a read-only disk: the reaper takes it with the lease later
            self.ports.notice(f"the reserved space could not be given back: {exc.strerror}")
        outcome = BatchOutcome(
            final.status,
            self.evidence.receipt,
            final.firstSuccesses,
            final.finalSuccesses,
            self.phases,
            tuple(final.reasons),
            written,
        )
        return outcome, not problems

    def _cleanup(self) -> list[str]:
        # The runs a stop cut short have been given their moment to end (run_schedule).
        return self.placement.close() + _cleanup(self.engine, self.batch_id, self.work_dir)

    def prepare(self, reused: Reused | None = None) -> Receipt | None:
        """Everything before the first run (:attr:`prepared`); the receipt of a batch
        that ends before it (not-run, interrupted, the harness's failure), else None.

        With *reused*, the archives and the consumer another batch of the same command
        prepared are this one's too (see :func:`run_batches`).
        """
        ports = self.ports
        preflight = self.preflight = Preflight(
            project=self.project, config_path=self.config_path, batch_id=self.batch_id,
            started=self.started, work_dir=self.work_dir, placement=self.placement,
            connect=ports.connect, environ=ports.environ, clock=ports.clock,
            progress=ports.progress, notice=ports.notice, phase=self.phase, lease=self.lease,
            only=self.only, repetitions=self.repetitions, resume=self.resume, reused=reused,
        )  # fmt: skip
        try:
            with self.steps:
                try:
                    # Made here, link-checked, before anything writes under it.
                    make_work_dir(self.project.evidence, self.batch_id)
                    self.prepared = preflight.run()
                finally:
                    self.engine = preflight.engine
        except NotReady as exc:
            return self._closed_before_running("not-run", exc.reasons)
        except (Stop, KeyboardInterrupt) as exc:
            reason = exc.reason if isinstance(exc, Stop) else "interrupted by the operator (Ctrl-C)"
            return self._closed_before_running("interrupted", [f"{reason} before the first run"])
        except Exception as exc:  # the harness itself failed before the first run
            reason = describe_failure(exc, self.evidence.root)
            return self._closed_before_running(
                "infrastructure-failure", [f"before the first run: {reason}"]
            )
        if self._phase is not None:
            self.lap(_LAPS.get(self._phase, self._phase))
            self._phase = None
        return None

    def schedule(self, prepared: Prepared, share: SlotShare | None = None) -> Receipt:
        """Run the prepared schedule (on *share*, when slots are shared) to its final receipt."""
        self._mark = time.monotonic()
        final = run_schedule(prepared.plan, prepared.executor, clock=self.ports.clock, share=share)
        self.lap("schedule")
        return final

    def _closed_before_running(self, status: BatchStatus, reasons: list[str]) -> Receipt:
        """The receipt of a batch that ran nothing.

        Raises:
            ReceiptNotWritten: Not even this small receipt could be written.
        """
        receipt = Receipt.opened(
            batch_id=self.batch_id, created_at=self.started, status=status, reasons=reasons
        ).model_copy(update={"updatedAt": self.ports.clock()})
        reserve = self.evidence.reserve
        for attempt in (1, 2):
            try:
                write_model_atomic(self.evidence.receipt, receipt)
                break
            except OSError as exc:
                if attempt == 2 or exc.errno != errno.ENOSPC or not reserve.exists():
                    raise ReceiptNotWritten(receipt, exc) from exc
                reserve.unlink()
        reserve.unlink(missing_ok=True)
        return receipt

    def _add_cleanup_problems(self, receipt: Receipt, problems: list[str]) -> tuple[Receipt, bool]:
        """Add what cleanup could not do to the reasons: an unconfirmed removal stops the batch."""
        status: BatchStatus = receipt.status
        if status in ("completed", "running"):
            status = "infrastructure-failure"
        closed = receipt.model_copy(
            update={
                "status": status,
                "reasons": [*receipt.reasons, *problems],
                "updatedAt": self.ports.clock(),
            }
        )
        try:
            write_model_atomic(self.evidence.receipt, closed)
        except OSError as exc:
            self.ports.notice(
                f"the receipt could not be written: {describe_failure(exc, self.evidence.root)}"
            )
            return receipt, False
        return closed, True


def _cleanup(engine: ContainerEngine | None, batch_id: str, work_dir: Path) -> list[str]:
    """Remove the batch's containers and work directory; what could not be done, as reasons."""
    problems = []
    if engine is not None:
        try:
            remove_leftovers(engine, batch_id)
        except AgentEvalError as exc:
            problems.append(f"cleanup: {exc}")
    try:
        remove_work_dir(work_dir.parent.parent, work_dir.name)
    except AgentEvalError as exc:
        problems.append(f"cleanup: {exc}")
    return problems
