"""One batch end to end: config, preflight, suite, packing, consumer, schedule, cleanup.

Every problem before the first run (configuration, engine, images, suite,
packing, consumer) ends the batch as ``not-run`` with a minimal receipt and
its reasons; nothing is ever pulled. After that the schedule writes the
receipt after every run. Containers of the batch are removed by label and the
disposable consumer is deleted whatever happens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import platform
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval.batch.lease import HeldLease, held
from agent_eval.batch.ports import RemoteContext, RemoteRuns
from agent_eval.batch.progress import PhaseSteps, ProgressEvent
from agent_eval.batch.reaper import reap
from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import (
    BatchPlan,
    ExecutorFactory,
    ReceiptNotWritten,
    ScheduledTask,
    describe_failure,
    run_schedule,
)
from agent_eval.batch.signals import Stop
from agent_eval.consumer.archives import PreparedConsumer, prepare_consumer
from agent_eval.digests import file_sha256, solution_digest, solution_files
from agent_eval.engine import ContainerEngine, ImageIdentity, remove_leftovers
from agent_eval.errors import AgentEvalError, InfrastructureError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.gateway.host import BatchGateway, gateway_settings
from agent_eval.layout import (
    CONSUMER_MOUNT,
    DEPENDENCY_LOCK,
    IN_CONTAINER_CONSUMER,
    SOLUTION_MOUNT,
    RunDirectory,
)
from agent_eval.models import (
    ArchiveEntry,
    ArchivesManifest,
    BatchStatus,
    GatewaySettings,
    ImageRecord,
    Receipt,
    RunnerConfig,
    TaskSpec,
    Toolchain,
)
from agent_eval.packing import build_archives
from agent_eval.project import Project, evaluator_digest, source_identity
from agent_eval.reference import self_test_reasons
from agent_eval.suite.tasks import Suite, load_suite
from agent_eval.verification.protocol import (
    Verification,
    Verifier,
    VerifierContext,
    VerifierFactory,
)

__all__ = ["BatchOutcome", "batch_consumer", "batch_plan", "is_self_test", "run_batch"]


def is_self_test(config: RunnerConfig, gateway: GatewaySettings | None) -> bool:
    """Whether a batch with *config* behind *gateway* proves the harness rather than an agent
    (see :func:`agent_eval.reference.self_test_reasons`, the checker's rule too)."""
    return bool(self_test_reasons([config.expectedRunner.name], gateway))


MIN_FREE_BYTES = 256 * 1024 * 1024
"""A batch does not start with less free space where its evidence goes (the consumer,
mypy's cache and the evidence itself need far less, but not nothing)."""
RESERVE_BYTES = 4 * 1024 * 1024
"""Space set aside at the start and given back when the disk fills, for the final receipt."""
FULL_BELOW_BYTES = 1024 * 1024
"""Under this much free space after an attempt, what its containers wrote may be cut short."""
EXIT_RECEIPT_NOT_WRITTEN = 3


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


class _NotRun(Exception):
    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


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
    remote: RemoteRuns | None = None,
    repetitions: int | None = None,
) -> BatchOutcome:
    """Run one whole batch and return where its receipt is; it never ends ``running``.

    With *only* (task ids or run ids), just those runs run: the receipt
    records the selection and the batch can never qualify. With *repetitions*, each
    task runs that many times instead of as the suite declares: a measurement batch,
    which can be compared but never qualifies. With *remote*, the
    runs execute on a cluster's nodes, prepared after the driver's own
    preflight; a node that cannot be prepared ends the batch ``not-run``.
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
        work_dir=project.evidence / ".work" / batch_id,
        ports=_Ports(verifier_factory, connect, environ, clock, progress, notice),
        only=tuple(only),
        remote=remote,
        repetitions=repetitions,
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

    verifier_factory: VerifierFactory[VerifierContext]
    connect: Callable[[str | None], ContainerEngine]
    environ: Mapping[str, str]
    clock: Callable[[], datetime]
    progress: Callable[[ProgressEvent], None]
    notice: Callable[[str], None]


@dataclass(frozen=True)
class _Prepared:
    """Everything the preflight made, before the first run."""

    config: RunnerConfig
    environment: dict[str, str]
    engine: ContainerEngine
    runner_image: ImageIdentity
    suite: Suite
    consumer: PreparedConsumer
    verifier: Verifier
    concurrency: int
    gateway: BatchGateway | None
    run_ids: list[str]
    receipt: Receipt
    """The receipt as opened, before the first run."""
    executor: ExecutorFactory | None
    """Where the runs execute (None: this machine's threads)."""


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
    only: tuple[str, ...] = ()
    """The runs asked for (``--only``); empty: the whole schedule."""
    remote: RemoteRuns | None = None
    """The cluster the runs execute on (None: this machine)."""
    repetitions: int | None = None
    """Runs per task of a measurement batch (None: as the suite declares)."""
    engine: ContainerEngine | None = None
    lease: HeldLease | None = None
    phases: dict[str, float] = field(default_factory=dict)
    _mark: float = field(default_factory=time.monotonic)
    steps: PhaseSteps = field(init=False)
    """Tells the watcher each preparing phase's start and end."""

    def __post_init__(self) -> None:
        self.steps = PhaseSteps(self.ports.progress)

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = now - self._mark
        self._mark = now

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
        problems = self.remote.close() if self.remote is not None else []
        return problems + _cleanup(self.engine, self.batch_id, self.work_dir)

    def _run(self) -> Receipt:
        try:
            with self.steps:
                prepared = self._prepare()
        except _NotRun as exc:
            return self._closed_before_running("not-run", exc.reasons)
        except (Stop, KeyboardInterrupt) as exc:
            reason = exc.reason if isinstance(exc, Stop) else "interrupted by the operator (Ctrl-C)"
            return self._closed_before_running("interrupted", [f"{reason} before the first run"])
        except Exception as exc:  # the harness itself failed before the first run
            reason = describe_failure(exc, self.evidence.root)
            return self._closed_before_running(
                "infrastructure-failure", [f"before the first run: {reason}"]
            )
        final = self._schedule(prepared)
        self.lap("schedule")
        return final

    def _prepare(self) -> _Prepared:
        project, ports, evidence = self.project, self.ports, self.evidence
        self.steps.start("preflight", "checking the config, engine, images and suite")
        _check_free_space(project.evidence)
        _reserve(evidence)
        config = _load_config(self.config_path)
        environment = _allowlisted(config, ports.environ)
        self.engine = engine = _connect(ports.connect, config)
        if self.lease is not None:
            # Before the first container: the reaper must look for them there.
            self.lease.bind_engine(engine.address)
        for reaped in reap(project.evidence, engine, clock=ports.clock):
            ports.notice(reaped.describe())
        for warning in project.guide_warnings():
            ports.notice(warning)
        runner_image, verifier_image, gateway_image = _images(engine, config)
        gateway: BatchGateway | None = None
        settings: GatewaySettings | None = None
        if self.remote is None:
            gateway = _gateway(
                engine, config, gateway_image, self.work_dir, self.batch_id, ports.environ
            )
            settings = gateway.settings() if gateway else None
        elif config.models and gateway_image is not None:
            # Each node starts a gateway of its own, with the credentials of its own
            # environment: none of them is needed here, or sent anywhere.
            settings = gateway_settings(config, gateway_image.image_id)
        suite = _suite(project)
        declared = suite.spec
        if self.repetitions is not None:
            suite = _measured(suite, self.repetitions)
        selected = _selection(suite, self.only)
        if self.remote is not None:
            self.steps.start("cluster", "joining the cluster")
            try:
                self.remote.connect(self.batch_id, ports.notice)
            except AgentEvalError as exc:
                raise _NotRun([f"cluster: {exc}"]) from exc
        self.lap("preflight")
        self.steps.start("packing", "packing the candidate archives")
        archives = _pack(project, evidence)
        self.lap("pack")
        self.steps.start("consumer", "preparing the consumer")
        consumer = _consumer(
            engine, project, verifier_image, evidence, self.work_dir, archives, self.batch_id
        )
        concurrency = config.concurrency or _default_concurrency()
        verifier: Verifier = _OnTheNodes()
        if self.remote is None:  # on a cluster every node verifies what it ran
            self.steps.start("verifier", "preparing the verifier")
            verifier = _verifier(
                ports.verifier_factory,
                VerifierContext(
                    engine=engine,
                    image_id=verifier_image.image_id,
                    consumer_dir=consumer.root,
                    batch_id=self.batch_id,
                    slots=concurrency,
                    work_dir=self.work_dir / "verifier",
                ),
            )
        self.lap("consumer")
        if gateway is not None:
            self.steps.start("gateway", "starting the model gateway and asking each upstream once")
            _start_gateway(gateway)
            self.lap("gateway")
        archives_digest, lock_digest = _write_bindings(
            project, config, evidence, archives, consumer, runner_image, verifier_image,
            settings,
        )  # fmt: skip
        run_ids = suite.spec.run_ids() if selected is None else selected
        receipt = Receipt.opened(
            batch_id=self.batch_id,
            created_at=self.started,
            self_test=is_self_test(config, settings),
            suite_digest=project.suite_digest(),
            evaluator_digest=evaluator_digest(),
            archives_digest=archives_digest,
            consumer_lock_digest=lock_digest,
            runner=config.expectedRunner,
            model=config.expectedModel,
            runner_image=config.runnerImage,
            verifier_image=config.verifierImage,
            scheduled_runs=len(run_ids),
            selection=None if selected is None else run_ids,
            suite=declared,
            repetitions=self.repetitions,
        ).model_copy(update={"updatedAt": ports.clock()})
        executor = None
        if self.remote is not None:
            self.steps.start("nodes", "preparing the cluster's nodes")
            context = RemoteContext(
                project=project,
                config=config,
                environment=environment,
                runner_image_id=runner_image.image_id,
                verifier_image_id=verifier_image.image_id,
                gateway_image_id=gateway_image.image_id if settings and gateway_image else None,
                archives_dir=evidence.archives,
                archives=archives,
                archives_digest=archives_digest,
                lock_digest=lock_digest,
                catalog_digest=consumer.catalog.digest(),
                receipt=receipt,
                notice=ports.notice,
                progress=ports.progress,
            )
            try:
                executor = self.remote.prepare(context)
            except AgentEvalError as exc:
                raise _NotRun([f"cluster: {exc}"]) from exc
            self.lap("nodes")
        return _Prepared(
            config, environment, engine, runner_image, suite, consumer, verifier, concurrency,
            gateway, run_ids, receipt, executor,
        )  # fmt: skip

    def _schedule(self, prepared: _Prepared) -> Receipt:
        config, clock = prepared.config, self.ports.clock
        run_ids, receipt = prepared.run_ids, prepared.receipt
        runner = ContainerRunner(
            prepared.engine,
            config=config,
            image_id=prepared.runner_image.image_id,
            consumer_dir=prepared.consumer.root,
            batch_id=self.batch_id,
            environment={
                **prepared.environment,
                **(prepared.gateway.runner_environment() if prepared.gateway else {}),
            },
            gateway_mounts=prepared.gateway.runner_mounts() if prepared.gateway else (),
        )
        plan = batch_plan(
            config,
            prepared.suite,
            batch_dir=self.evidence.root,
            work_dir=self.work_dir,
            run_ids=run_ids,
            concurrency=prepared.concurrency,
            consumer_root=prepared.consumer.root,
            receipt=receipt,
            environment=prepared.environment,
            progress=self.ports.progress,
            gateway=prepared.gateway,
        )
        return run_schedule(
            plan, runner, prepared.verifier, clock=clock, executor=prepared.executor
        )

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


class _OnTheNodes:
    """The driver's verifier when the runs execute on a cluster: it verifies nothing."""

    name = "on-the-nodes"

    def api_catalog(self) -> Mapping[str, Any]:
        return {}

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        raise InfrastructureError(f"{run_id}: the driver verifies nothing; its nodes do")

    def cancel_all(self) -> None:
        pass


def _check_free_space(evidence_dir: Path) -> None:
    evidence_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(evidence_dir).free
    if free < MIN_FREE_BYTES:
        raise _NotRun(
            [
                f"disk: only {free // (1024 * 1024)} MiB free where the evidence is written "
                f"({evidence_dir}); a batch needs at least {MIN_FREE_BYTES // (1024 * 1024)} MiB"
            ]
        )


def _disk_problem(work_dir: Path) -> str | None:
    try:
        free = shutil.disk_usage(work_dir).free
    except OSError as exc:
        return f"the work directory {work_dir} cannot be examined: {exc.strerror or exc}"
    if free >= FULL_BELOW_BYTES:
        return None
    return (
        f"the disk holding the work directory ({work_dir}) was full ({free} bytes free) after "
        "this attempt: what the runner or the verifier wrote may be cut short"
    )


def _reserve(evidence: RunDirectory) -> None:
    try:
        with open(evidence.reserve, "wb") as handle:
            handle.write(bytes(RESERVE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        evidence.reserve.unlink(missing_ok=True)
        raise _NotRun([f"disk: {describe_failure(exc, evidence.root)}"]) from exc


def _default_concurrency() -> int:
    return max(1, min(2, (os.cpu_count() or 1)))


def _protected_digest(consumer: Path) -> str:
    return solution_digest(solution_files(consumer))


def _load_config(path: Path) -> RunnerConfig:
    try:
        return read_model(path, RunnerConfig, what="runner config")
    except AgentEvalError as exc:
        raise _NotRun([f"config: {exc}"]) from exc


def _allowlisted(config: RunnerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    missing = [name for name in config.envAllowlist if name not in environ]
    if missing:
        raise _NotRun([f"config: envAllowlist names unset variables: {', '.join(missing)}"])
    return {name: environ[name] for name in config.envAllowlist}


def _connect(
    connect: Callable[[str | None], ContainerEngine], config: RunnerConfig
) -> ContainerEngine:
    try:
        return connect(config.runtimePath)
    except AgentEvalError as exc:
        raise _NotRun([f"engine: {exc}"]) from exc


def _images(
    engine: ContainerEngine, config: RunnerConfig
) -> tuple[ImageIdentity, ImageIdentity, ImageIdentity | None]:
    reasons: list[str] = []
    found: dict[str, ImageIdentity] = {}
    for name, reference in (
        ("runnerImage", config.runnerImage),
        ("verifierImage", config.verifierImage),
        ("gatewayImage", config.gatewayImage),
    ):
        if reference is None:
            continue
        try:
            found[name] = engine.resolve_image(reference)
        except AgentEvalError as exc:
            reasons.append(f"{name}: {exc}")
    if reasons:
        raise _NotRun(reasons)
    return found["runnerImage"], found["verifierImage"], found.get("gatewayImage")


def _gateway(
    engine: ContainerEngine,
    config: RunnerConfig,
    image: ImageIdentity | None,
    work_dir: Path,
    batch_id: str,
    environ: Mapping[str, str],
) -> BatchGateway | None:
    if not config.models or image is None:
        return None
    try:
        return BatchGateway(
            engine, config, image, work_dir=work_dir / "gateway", batch_id=batch_id,
            environ=environ,
        )  # fmt: skip
    except AgentEvalError as exc:
        raise _NotRun([f"config: {exc}"]) from exc


def _start_gateway(gateway: BatchGateway) -> None:
    """Start the gateway and ask every upstream once: a batch that cannot reach its model
    does not run a whole suite to find out."""
    try:
        gateway.start()
        reasons = gateway.preflight()
    except AgentEvalError as exc:
        raise _NotRun([f"gateway: {exc}"]) from exc
    if reasons:
        raise _NotRun(reasons)


def _measured(suite: Suite, repetitions: int) -> Suite:
    """The suite with *repetitions* runs per task (its thresholds do not apply: a
    measurement batch never qualifies)."""
    runs = len(suite.spec.taskIds) * repetitions
    spec = suite.spec.model_copy(
        update={"repetitions": repetitions, "scheduledRuns": runs,
                "minFirstSuccesses": runs, "requiredFinalSuccesses": runs},
    )  # fmt: skip
    return dataclasses.replace(suite, spec=spec)


def _selection(suite: Suite, only: Sequence[str]) -> list[str] | None:
    """The runs a partial batch runs; None for the whole schedule."""
    if not only:
        return None
    try:
        return suite.spec.select(only)
    except ValueError as exc:
        raise _NotRun([f"--only: {exc}"]) from exc


def _suite(project: Project) -> Suite:
    try:
        return load_suite(project.tasks, graders_dir=project.graders)
    except AgentEvalError as exc:
        raise _NotRun([f"suite: {exc}"]) from exc


def _pack(project: Project, evidence: RunDirectory) -> list[ArchiveEntry]:
    try:
        return build_archives(project.packages, evidence.archives)
    except AgentEvalError as exc:
        raise _NotRun([f"packing: {exc}"]) from exc


def _consumer(
    engine: ContainerEngine,
    project: Project,
    verifier_image: ImageIdentity,
    evidence: RunDirectory,
    work_dir: Path,
    archives: list[ArchiveEntry],
    batch_id: str,
) -> PreparedConsumer:
    try:
        return batch_consumer(
            engine, project, verifier_image.image_id, evidence.archives, archives, work_dir,
            batch_id,
        )  # fmt: skip
    except AgentEvalError as exc:
        raise _NotRun([f"consumer: {exc}"]) from exc


def batch_consumer(
    engine: ContainerEngine,
    project: Project,
    verifier_image_id: str,
    archives_dir: Path,
    archives: list[ArchiveEntry],
    work_dir: Path,
    batch_id: str,
) -> PreparedConsumer:
    """The batch's consumer under *work_dir*, installed from *archives* in the verifier image.

    Raises:
        AgentEvalError: It could not be prepared.
    """
    lock = project.packages / DEPENDENCY_LOCK
    return prepare_consumer(
        engine,
        verifier_image=verifier_image_id,
        root=work_dir / "consumer",
        stage=work_dir / "consumer-stage",
        archives_dir=archives_dir,
        archives=archives,
        dependency_lock=lock if lock.is_file() else None,
        guides=project.guides(),
        batch_id=batch_id,
    )


def batch_plan(
    config: RunnerConfig,
    suite: Suite,
    *,
    batch_dir: Path,
    work_dir: Path,
    run_ids: list[str],
    concurrency: int,
    consumer_root: Path,
    receipt: Receipt,
    environment: Mapping[str, str],
    progress: Callable[[ProgressEvent], None] = lambda _event: None,
    gateway: BatchGateway | None = None,
) -> BatchPlan:
    """The schedule's plan of a batch whose evidence goes to *batch_dir* (the same on a node)."""
    docs = str(IN_CONTAINER_CONSUMER.docs)
    return BatchPlan(
        batch_dir=batch_dir,
        work_dir=work_dir / "runs",
        run_ids=run_ids,
        tasks={
            t.id: ScheduledTask(t.spec, t.render_prompt(docs), t.starter_dir) for t in suite.tasks
        },
        runner=config.expectedRunner,
        model=config.expectedModel,
        submission_timeout_s=config.submissionTimeoutMs / 1000,
        batch_timeout_s=config.batchTimeoutMs / 1000,
        concurrency=concurrency,
        consumer_dir_in_runner=CONSUMER_MOUNT,
        output_dir_in_runner=SOLUTION_MOUNT,
        protected_digest=lambda: _protected_digest(consumer_root),
        receipt=receipt,
        progress=progress,
        disk_problem=lambda: _disk_problem(work_dir),
        gateway=gateway,
        token_budget=config.gateway.tokenBudget,
        redactions={
            **{value: name for name, value in environment.items()},
            **(gateway.credential_redactions() if gateway is not None else {}),
        },
    )


def _verifier(factory: VerifierFactory[VerifierContext], context: VerifierContext) -> Verifier:
    try:
        return factory(context)
    except AgentEvalError as exc:
        raise _NotRun([f"verifier: {exc}"]) from exc


def _write_bindings(
    project: Project,
    config: RunnerConfig,
    evidence: RunDirectory,
    archives: list[ArchiveEntry],
    consumer: PreparedConsumer,
    runner_image: ImageIdentity,
    verifier_image: ImageIdentity,
    gateway: GatewaySettings | None,
) -> tuple[str, str]:
    manifest = ArchivesManifest(
        schemaVersion=1,
        archives=archives,
        source=source_identity(project.root),
        apiCatalogDigest=consumer.catalog.digest(),
        toolchain=Toolchain(
            python=platform.python_version(),
            harness=_harness_version(),
            verifierPython=consumer.python,
            mypy=consumer.mypy_version,
        ),
        runnerImage=ImageRecord(reference=config.runnerImage, imageId=runner_image.image_id),
        verifierImage=ImageRecord(reference=config.verifierImage, imageId=verifier_image.image_id),
        gateway=gateway,
        # The checker compares it with the registry committed at the source commit.
        registryDigest=file_sha256(project.registry) if project.registry.is_file() else None,
        runnerCommand=[config.executable, *config.args],
        envAllowlist=sorted(config.envAllowlist),
        runner=config.expectedRunner,
        model=config.expectedModel,
        suiteDigest=project.suite_digest(),
        evaluatorDigest=evaluator_digest(),
    )
    write_model_atomic(evidence.archives_manifest, manifest)
    archives_digest = file_sha256(evidence.archives_manifest)
    write_model_atomic(evidence.consumer_lock, consumer.lock(archives_digest))
    return archives_digest, file_sha256(evidence.consumer_lock)


def _harness_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-eval")
    except PackageNotFoundError:
        return "unknown"


def _cleanup(engine: ContainerEngine | None, batch_id: str, work_dir: Path) -> list[str]:
    """Remove the batch's containers and work directory; what could not be done, as reasons."""
    problems = []
    if engine is not None:
        try:
            remove_leftovers(engine, batch_id)
        except AgentEvalError as exc:
            problems.append(f"cleanup: {exc}")
    shutil.rmtree(work_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        work_dir.parent.rmdir()
    if work_dir.exists():
        problems.append(f"cleanup: could not remove the work directory {work_dir}")
    return problems
