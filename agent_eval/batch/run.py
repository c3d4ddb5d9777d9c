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

import errno
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from agent_eval.batch.lease import HeldLease, held
from agent_eval.batch.ports import Placement
from agent_eval.batch.preflight import Preflight, is_self_test
from agent_eval.batch.progress import Phase, PhaseSteps, ProgressEvent
from agent_eval.batch.receipt_book import ReceiptNotWritten, describe_failure
from agent_eval.batch.schedule import run_schedule
from agent_eval.batch.signals import Stop
from agent_eval.batch.station import LocalPlacement, NotReady
from agent_eval.batch.workdir import WORK_ROOT, make_work_dir, remove_work_dir
from agent_eval.engine import ContainerEngine, remove_leftovers
from agent_eval.errors import AgentEvalError
from agent_eval.evidence_io import write_model_atomic
from agent_eval.layout import RunDirectory
from agent_eval.models import BatchStatus, Receipt
from agent_eval.project import Project
from agent_eval.verification.protocol import VerifierContext, VerifierFactory

__all__ = ["BatchOutcome", "is_self_test", "run_batch"]

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
    started = clock()
    batch_id = f"{started.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4()}"
    batch = _Batch(
        project=project,
        config_path=config_path,
        batch_id=batch_id,
        started=started,
        evidence=RunDirectory(project.evidence / batch_id),
        work_dir=project.evidence / WORK_ROOT / batch_id,
        ports=_Ports(connect, environ, clock, progress, notice),
        placement=remote or LocalPlacement(verifier_factory),
        only=tuple(only),
        repetitions=repetitions,
        resume=resume,
    )
    batch.evidence.root.mkdir(parents=True, exist_ok=False)
    with held(batch.evidence.root, batch_id, clock) as lease:
        batch.lease = lease
        outcome, cleaned_up = batch.run()
        if outcome.receipt_written and cleaned_up:
            try:
                lease.release()
            except OSError as exc:
                # The batch is over and said so; the lease stays for the reaper.
                notice(f"the lease could not be given up: {exc.strerror}")
    return outcome


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
        final: Receipt | None = None
        written = True
        try:
            final = self._run()
        except ReceiptNotWritten as exc:
            final, written = exc.receipt, False
            self.ports.notice(
                f"the receipt could not be written: "
                f"{describe_failure(exc.cause, self.evidence.root)}"
            )
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
        return self.placement.close() + _cleanup(self.engine, self.batch_id, self.work_dir)

    def _run(self) -> Receipt:
        ports = self.ports
        preflight = Preflight(
            project=self.project, config_path=self.config_path, batch_id=self.batch_id,
            started=self.started, work_dir=self.work_dir, placement=self.placement,
            connect=ports.connect, environ=ports.environ, clock=ports.clock,
            progress=ports.progress, notice=ports.notice, phase=self.phase, lease=self.lease,
            only=self.only, repetitions=self.repetitions, resume=self.resume,
        )  # fmt: skip
        try:
            with self.steps:
                try:
                    # Made here, link-checked, before anything writes under it.
                    make_work_dir(self.project.evidence, self.batch_id)
                    prepared = preflight.run()
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
        final = run_schedule(prepared.plan, prepared.executor, clock=ports.clock)
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
