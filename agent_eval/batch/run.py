"""One batch end to end: config, preflight, suite, packing, consumer, schedule, cleanup.

Every problem before the first run (configuration, engine, images, suite,
packing, consumer) ends the batch as ``not-run`` with a minimal receipt and
its reasons; nothing is ever pulled. After that the schedule writes the
receipt after every run. Containers of the batch are removed by label and the
disposable consumer is deleted whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from agent_eval.batch.consumer import (
    CONSUMER_MOUNT,
    DOCS_DIR,
    PreparedConsumer,
    TaskMaterial,
    prepare_consumer,
)
from agent_eval.batch.packing import build_archives, source_identity
from agent_eval.batch.ports import VerifierPort
from agent_eval.batch.runner_container import OUTPUT_MOUNT, ContainerRunner
from agent_eval.batch.schedule import BatchPlan, ScheduledTask, run_schedule
from agent_eval.digests import file_sha256, solution_digest, solution_files
from agent_eval.engine import ContainerEngine, ImageIdentity, connect_local_engine, remove_leftovers
from agent_eval.errors import AgentEvalError, InfrastructureError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.models import (
    ArchiveEntry,
    ArchivesManifest,
    BatchStatus,
    Receipt,
    RunnerConfig,
    Toolchain,
)
from agent_eval.models import (
    ImageIdentity as ImageRecord,
)
from agent_eval.project import Project, evaluator_digest
from agent_eval.suite import Suite, load_suite

__all__ = ["BatchOutcome", "VerifierContext", "VerifierFactory", "is_self_test", "run_batch"]

REFERENCE_RUNNER_PREFIX = "agent-eval-"
"""Identity names of the built-in reference runners; their receipts are self-test."""


def is_self_test(config: RunnerConfig) -> bool:
    """Whether a batch with *config* proves the harness rather than an agent.

    A built-in reference runner is self-test. So is any runner without a
    network: the only model it can reach lives inside its own container, which
    makes it a scripted model, whatever identity the runner reports.
    """
    return config.expectedRunner.name.startswith(REFERENCE_RUNNER_PREFIX) or (
        config.network == "none"
    )


@dataclass(frozen=True)
class VerifierContext:
    """What a verifier needs from the batch to verify its attempts."""

    engine: ContainerEngine
    image_id: str
    consumer: PreparedConsumer
    suite: Suite
    batch_id: str
    slots: int
    work_dir: Path


VerifierFactory = Callable[[VerifierContext], VerifierPort]
"""Builds the verifier port once the consumer is ready."""


@dataclass(frozen=True)
class BatchOutcome:
    """What eval-agent prints and how it exits."""

    status: BatchStatus
    receipt: Path
    first_successes: int
    final_successes: int
    phase_seconds: Mapping[str, float] = field(default_factory=dict)
    """Wall time of each phase that ran: preflight, pack, consumer, schedule."""

    @property
    def exit_code(self) -> int:
        """0 when the schedule completed (qualified or not), 2 not-run, 1 otherwise."""
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
    verifier_factory: VerifierFactory,
    connect: Callable[[str | None], ContainerEngine] = connect_local_engine,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], datetime] = _now,
    progress: Callable[[str], None] = lambda _line: None,
) -> BatchOutcome:
    """Run one whole batch and return where its receipt is."""
    started = clock()
    batch_id = f"{started.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4()}"
    batch_dir = project.evidence / batch_id
    batch_dir.mkdir(parents=True, exist_ok=False)
    work_dir = project.evidence / ".work" / batch_id
    receipt_path = batch_dir / "receipt.json"
    engine: ContainerEngine | None = None
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = now - mark
        mark = now

    try:
        config = _load_config(config_path)
        env = _allowlisted(config, environ)
        engine = _connect(connect, config)
        runner_image, verifier_image = _images(engine, config)
        suite = _suite(project)
        lap("preflight")
        progress("packing the candidate archives")
        archives = _pack(project, batch_dir)
        lap("pack")
        progress("preparing the consumer")
        consumer = _consumer(
            engine, project, suite, verifier_image, batch_dir, work_dir, archives, batch_id
        )
        lap("consumer")
        archives_digest, lock_digest = _write_bindings(
            project, config, batch_dir, archives, consumer, runner_image, verifier_image
        )
        receipt = Receipt(
            schemaVersion=1,
            batchId=batch_id,
            status="running",
            reasons=[],
            selfTest=is_self_test(config),
            createdAt=started,
            updatedAt=clock(),
            suiteDigest=project.suite_digest(),
            evaluatorDigest=evaluator_digest(),
            archivesDigest=archives_digest,
            consumerLockDigest=lock_digest,
            runner=config.expectedRunner,
            model=config.expectedModel,
            runnerImage=config.runnerImage,
            verifierImage=config.verifierImage,
            scheduledRuns=suite.spec.scheduledRuns,
            firstSuccesses=0,
            finalSuccesses=0,
            runs=[],
            reviewDecisions=[],
        )
    except _NotRun as exc:
        _not_run(receipt_path, batch_id, started, clock(), exc.reasons)
        _cleanup(engine, batch_id, work_dir)
        return BatchOutcome("not-run", receipt_path, 0, 0, phases)
    except BaseException:
        _cleanup(engine, batch_id, work_dir)
        raise
    runner = ContainerRunner(
        engine,
        config=config,
        image_id=runner_image.image_id,
        consumer_dir=consumer.root,
        batch_id=batch_id,
        environment=env,
    )
    concurrency = config.concurrency or _default_concurrency()
    verifier = verifier_factory(
        VerifierContext(
            engine=engine,
            image_id=verifier_image.image_id,
            consumer=consumer,
            suite=suite,
            batch_id=batch_id,
            slots=concurrency,
            work_dir=work_dir / "verifier",
        )
    )
    plan = BatchPlan(
        batch_dir=batch_dir,
        work_dir=work_dir / "runs",
        run_ids=suite.spec.run_ids(),
        tasks={
            t.id: ScheduledTask(t.spec, t.render_prompt(DOCS_DIR), t.starter_dir)
            for t in suite.tasks
        },
        runner=config.expectedRunner,
        model=config.expectedModel,
        submission_timeout_s=config.submissionTimeoutMs / 1000,
        batch_timeout_s=config.batchTimeoutMs / 1000,
        concurrency=concurrency,
        consumer_dir_in_runner=CONSUMER_MOUNT,
        output_dir_in_runner=OUTPUT_MOUNT,
        protected_digest=lambda: _protected_digest(consumer.root),
        receipt=receipt,
        progress=progress,
    )
    try:
        final = run_schedule(plan, runner, verifier)
        lap("schedule")
    finally:
        _cleanup(engine, batch_id, work_dir)
    return BatchOutcome(
        final.status, receipt_path, final.firstSuccesses, final.finalSuccesses, phases
    )


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


def _images(engine: ContainerEngine, config: RunnerConfig) -> tuple[ImageIdentity, ImageIdentity]:
    reasons: list[str] = []
    found: list[ImageIdentity] = []
    for name, reference in (
        ("runnerImage", config.runnerImage),
        ("verifierImage", config.verifierImage),
    ):
        try:
            found.append(engine.resolve_image(reference))
        except AgentEvalError as exc:
            reasons.append(f"{name}: {exc}")
    if reasons:
        raise _NotRun(reasons)
    return found[0], found[1]


def _suite(project: Project) -> Suite:
    try:
        return load_suite(project.tasks, graders_dir=project.graders)
    except AgentEvalError as exc:
        raise _NotRun([f"suite: {exc}"]) from exc


def _pack(project: Project, batch_dir: Path) -> list[ArchiveEntry]:
    try:
        return build_archives(project.packages, batch_dir / "archives")
    except AgentEvalError as exc:
        raise _NotRun([f"packing: {exc}"]) from exc


def _consumer(
    engine: ContainerEngine,
    project: Project,
    suite: Suite,
    verifier_image: ImageIdentity,
    batch_dir: Path,
    work_dir: Path,
    archives: list[ArchiveEntry],
    batch_id: str,
) -> PreparedConsumer:
    guides = {
        p.name: p / "GUIDE.md"
        for p in sorted(project.packages.iterdir())
        if (p / "GUIDE.md").is_file()
    }
    lock = project.packages / "requirements.lock"
    tasks = [TaskMaterial(t.id, t.render_prompt(DOCS_DIR), t.contract_text) for t in suite.tasks]
    try:
        return prepare_consumer(
            engine,
            verifier_image=verifier_image.image_id,
            root=work_dir / "consumer",
            stage=work_dir / "consumer-stage",
            archives_dir=batch_dir / "archives",
            archives=archives,
            dependency_lock=lock if lock.is_file() else None,
            guides=guides,
            tasks=tasks,
            batch_id=batch_id,
        )
    except AgentEvalError as exc:
        raise _NotRun([f"consumer: {exc}"]) from exc


def _write_bindings(
    project: Project,
    config: RunnerConfig,
    batch_dir: Path,
    archives: list[ArchiveEntry],
    consumer: PreparedConsumer,
    runner_image: ImageIdentity,
    verifier_image: ImageIdentity,
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
        runner=config.expectedRunner,
        model=config.expectedModel,
        suiteDigest=project.suite_digest(),
        evaluatorDigest=evaluator_digest(),
    )
    write_model_atomic(batch_dir / "archives.json", manifest)
    archives_digest = file_sha256(batch_dir / "archives.json")
    write_model_atomic(batch_dir / "consumer-lock.json", consumer.lock(archives_digest))
    return archives_digest, file_sha256(batch_dir / "consumer-lock.json")


def _harness_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-eval")
    except PackageNotFoundError:
        return "unknown"


def _not_run(
    path: Path, batch_id: str, started: datetime, now: datetime, reasons: list[str]
) -> None:
    receipt = Receipt(
        schemaVersion=1,
        batchId=batch_id,
        status="not-run",
        reasons=reasons,
        selfTest=False,
        createdAt=started,
        updatedAt=now,
        suiteDigest=None,
        evaluatorDigest=None,
        archivesDigest=None,
        consumerLockDigest=None,
        runner=None,
        model=None,
        runnerImage=None,
        verifierImage=None,
        scheduledRuns=0,
        firstSuccesses=0,
        finalSuccesses=0,
        runs=[],
        reviewDecisions=[],
    )
    write_model_atomic(path, receipt)


def _cleanup(engine: ContainerEngine | None, batch_id: str, work_dir: Path) -> None:
    try:
        if engine is not None:
            remove_leftovers(engine, batch_id)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            work_dir.parent.rmdir()
    if sys.exc_info()[0] is None and work_dir.exists():
        raise InfrastructureError(f"could not remove the disposable consumer at {work_dir}")
