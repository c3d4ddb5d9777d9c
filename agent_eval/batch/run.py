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

from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import BatchPlan, ScheduledTask, run_schedule
from agent_eval.consumer.archives import PreparedConsumer, TaskMaterial, prepare_consumer
from agent_eval.digests import file_sha256, solution_digest, solution_files
from agent_eval.engine import ContainerEngine, ImageIdentity, remove_leftovers
from agent_eval.engine.docker_engine import connect_local_engine
from agent_eval.errors import AgentEvalError, InfrastructureError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.layout import CONSUMER_MOUNT, IN_CONTAINER_CONSUMER, SOLUTION_MOUNT, RunDirectory
from agent_eval.models import (
    ArchiveEntry,
    ArchivesManifest,
    BatchStatus,
    ImageRecord,
    Receipt,
    RunnerConfig,
    Toolchain,
)
from agent_eval.packing import build_archives, source_identity
from agent_eval.project import Project, evaluator_digest
from agent_eval.reference import self_test_reasons
from agent_eval.suite.tasks import Suite, load_suite
from agent_eval.verification.protocol import Verifier, VerifierContext, VerifierFactory

__all__ = ["BatchOutcome", "is_self_test", "run_batch"]


def is_self_test(config: RunnerConfig) -> bool:
    """Whether a batch with *config* proves the harness rather than an agent (see
    :func:`agent_eval.reference.self_test_reasons`, the checker's rule too)."""
    return bool(self_test_reasons([config.expectedRunner.name], config.network))


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
    verifier_factory: VerifierFactory[VerifierContext],
    connect: Callable[[str | None], ContainerEngine] = connect_local_engine,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], datetime] = _now,
    progress: Callable[[str], None] = lambda _line: None,
) -> BatchOutcome:
    """Run one whole batch and return where its receipt is.

    Everything from connecting to the engine on runs inside one cleanup: the
    batch's containers (by label) and its work directory are removed whatever
    happens. A problem before the first run, the verifier's preparation
    included, ends the batch as ``not-run`` with a receipt naming it; Ctrl-C
    before the first run leaves an ``interrupted`` receipt.
    """
    started = clock()
    batch_id = f"{started.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4()}"
    evidence = RunDirectory(project.evidence / batch_id)
    evidence.root.mkdir(parents=True, exist_ok=False)
    work_dir = project.evidence / ".work" / batch_id
    engine: ContainerEngine | None = None
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = now - mark
        mark = now

    try:
        try:
            config = _load_config(config_path)
            env = _allowlisted(config, environ)
            engine = _connect(connect, config)
            runner_image, verifier_image = _images(engine, config)
            suite = _suite(project)
            lap("preflight")
            progress("packing the candidate archives")
            archives = _pack(project, evidence)
            lap("pack")
            progress("preparing the consumer")
            consumer = _consumer(
                engine, project, suite, verifier_image, evidence, work_dir, archives, batch_id
            )
            concurrency = config.concurrency or _default_concurrency()
            progress("preparing the verifier")
            verifier = _verifier(
                verifier_factory,
                VerifierContext(
                    engine=engine,
                    image_id=verifier_image.image_id,
                    consumer_dir=consumer.root,
                    batch_id=batch_id,
                    slots=concurrency,
                    work_dir=work_dir / "verifier",
                ),
            )
            lap("consumer")
            archives_digest, lock_digest = _write_bindings(
                project, config, evidence, archives, consumer, runner_image, verifier_image
            )
        except _NotRun as exc:
            _closed_before_running(evidence, batch_id, started, clock(), "not-run", exc.reasons)
            return BatchOutcome("not-run", evidence.receipt, 0, 0, phases)
        except KeyboardInterrupt:
            _closed_before_running(
                evidence,
                batch_id,
                started,
                clock(),
                "interrupted",
                ["interrupted by the operator (Ctrl-C) before the first run"],
            )
            raise
        receipt = Receipt.opened(
            batch_id=batch_id,
            created_at=started,
            self_test=is_self_test(config),
            suite_digest=project.suite_digest(),
            evaluator_digest=evaluator_digest(),
            archives_digest=archives_digest,
            consumer_lock_digest=lock_digest,
            runner=config.expectedRunner,
            model=config.expectedModel,
            runner_image=config.runnerImage,
            verifier_image=config.verifierImage,
            scheduled_runs=suite.spec.scheduledRuns,
        ).model_copy(update={"updatedAt": clock()})
        runner = ContainerRunner(
            engine,
            config=config,
            image_id=runner_image.image_id,
            consumer_dir=consumer.root,
            batch_id=batch_id,
            environment=env,
        )
        docs = str(IN_CONTAINER_CONSUMER.docs)
        plan = BatchPlan(
            batch_dir=evidence.root,
            work_dir=work_dir / "runs",
            run_ids=suite.spec.run_ids(),
            tasks={
                t.id: ScheduledTask(t.spec, t.render_prompt(docs), t.starter_dir)
                for t in suite.tasks
            },
            runner=config.expectedRunner,
            model=config.expectedModel,
            submission_timeout_s=config.submissionTimeoutMs / 1000,
            batch_timeout_s=config.batchTimeoutMs / 1000,
            concurrency=concurrency,
            consumer_dir_in_runner=CONSUMER_MOUNT,
            output_dir_in_runner=SOLUTION_MOUNT,
            protected_digest=lambda: _protected_digest(consumer.root),
            receipt=receipt,
            progress=progress,
        )
        final = run_schedule(plan, runner, verifier)
        lap("schedule")
    finally:
        _cleanup(engine, batch_id, work_dir)
    return BatchOutcome(
        final.status, evidence.receipt, final.firstSuccesses, final.finalSuccesses, phases
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


def _pack(project: Project, evidence: RunDirectory) -> list[ArchiveEntry]:
    try:
        return build_archives(project.packages, evidence.archives)
    except AgentEvalError as exc:
        raise _NotRun([f"packing: {exc}"]) from exc


def _consumer(
    engine: ContainerEngine,
    project: Project,
    suite: Suite,
    verifier_image: ImageIdentity,
    evidence: RunDirectory,
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
    docs = str(IN_CONTAINER_CONSUMER.docs)
    tasks = [TaskMaterial(t.id, t.render_prompt(docs), t.contract_text) for t in suite.tasks]
    try:
        return prepare_consumer(
            engine,
            verifier_image=verifier_image.image_id,
            root=work_dir / "consumer",
            stage=work_dir / "consumer-stage",
            archives_dir=evidence.archives,
            archives=archives,
            dependency_lock=lock if lock.is_file() else None,
            guides=guides,
            tasks=tasks,
            batch_id=batch_id,
        )
    except AgentEvalError as exc:
        raise _NotRun([f"consumer: {exc}"]) from exc


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
        network=config.network,
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


def _closed_before_running(
    evidence: RunDirectory,
    batch_id: str,
    started: datetime,
    now: datetime,
    status: BatchStatus,
    reasons: list[str],
) -> None:
    receipt = Receipt.opened(batch_id=batch_id, created_at=started, status=status, reasons=reasons)
    write_model_atomic(evidence.receipt, receipt.model_copy(update={"updatedAt": now}))


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
