"""A batch's preparation before its first run, as one table of steps.

Each step is a stage and an action: an :class:`~agent_eval.errors.AgentEvalError`
an action raises ends the batch ``not-run`` with its words after the stage's
name (``config: …``, ``packing: …``); a step without a stage is the harness's
own and what it raises is an infrastructure failure. The placement's steps
(:class:`~agent_eval.batch.ports.Placement`) come where the driver needs
them: joined before anything is packed, equipped once the consumer is ready,
asked for its executor once the receipt is opened.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agent_eval.batch.lease import HeldLease
from agent_eval.batch.ports import Placement, RemoteContext
from agent_eval.batch.progress import Phase, ProgressEvent
from agent_eval.batch.reaper import reap
from agent_eval.batch.receipt_book import describe_failure
from agent_eval.batch.resume import Resumption, open_resumption, runner_config_digest
from agent_eval.batch.schedule import BatchPlan, ExecutorFactory
from agent_eval.batch.station import NotReady, Site, StationImages, batch_plan, default_slots, step
from agent_eval.consumer.archives import PreparedConsumer
from agent_eval.digests import file_sha256
from agent_eval.engine import ContainerEngine
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.gateway.host import gateway_settings
from agent_eval.layout import RunDirectory
from agent_eval.models import (
    ArchiveEntry,
    ArchivesManifest,
    GatewaySettings,
    ImageRecord,
    NodeIdentity,
    Receipt,
    RunnerConfig,
    Toolchain,
)
from agent_eval.models.chain import binding_differences
from agent_eval.models.suite import SuiteSpec
from agent_eval.packing import build_archives
from agent_eval.project import Project, evaluator_digest, source_identity
from agent_eval.reference import self_test_reasons
from agent_eval.suite.tasks import Suite, load_suite

__all__ = ["MIN_FREE_BYTES", "RESERVE_BYTES", "Preflight", "Prepared", "Reused", "is_self_test"]

MIN_FREE_BYTES = 256 * 1024 * 1024
"""A batch does not start with less free space where its evidence goes (the consumer,
mypy's cache and the evidence itself need far less, but not nothing)."""
RESERVE_BYTES = 4 * 1024 * 1024
"""Space set aside at the start and given back when the disk fills, for the final receipt."""


def is_self_test(config: RunnerConfig, gateway: GatewaySettings | None) -> bool:
    """Whether a batch with *config* behind *gateway* proves the harness rather than an agent
    (see :func:`agent_eval.reference.self_test_reasons`, the checker's rule too)."""
    return bool(self_test_reasons([config.expectedRunner.name], gateway))


@dataclass(frozen=True)
class Prepared:
    """What the preparation made: the plan of the runs, and where they execute."""

    plan: BatchPlan
    executor: ExecutorFactory


@dataclass(frozen=True)
class Reused:
    """What one batch of a command prepared that the command's other batches take as
    theirs: the library packed once, the consumer prepared once."""

    archives_dir: Path
    """The archives as packed, in the first batch's evidence (copied into each batch's)."""
    archives: list[ArchiveEntry]
    consumer: PreparedConsumer

    @classmethod
    def of(cls, preflight: Preflight) -> Reused:
        """What *preflight* (a finished preparation) packed and prepared."""
        return cls(preflight.evidence.archives, preflight.archives, preflight.consumer)


class Preflight:
    """One batch's preparation: each step of :data:`STEPS` adds what it made."""

    engine: ContainerEngine | None = None
    """Once connected (the batch's cleanup needs it whatever happens after)."""
    config: RunnerConfig
    environment: dict[str, str]
    site: Site
    images: StationImages
    suite: Suite
    declared: SuiteSpec
    selected: list[str] | None
    archives: list[ArchiveEntry]
    consumer: PreparedConsumer
    settings: GatewaySettings | None
    digests: tuple[str, str]
    """sha256 of archives.json and of consumer-lock.json."""
    receipt: Receipt
    executor: ExecutorFactory

    def __init__(
        self,
        *,
        project: Project,
        config_path: Path,
        batch_id: str,
        started: datetime,
        work_dir: Path,
        placement: Placement,
        connect: Callable[[str | None], ContainerEngine],
        environ: Mapping[str, str],
        clock: Callable[[], datetime],
        progress: Callable[[ProgressEvent], None],
        notice: Callable[[str], None],
        phase: Callable[[Phase, str], None],
        lease: HeldLease | None,
        only: Sequence[str] = (),
        repetitions: int | None = None,
        resume: Path | None = None,
        reused: Reused | None = None,
    ) -> None:
        self.reused = reused
        self.project, self.config_path, self.placement = project, config_path, placement
        self.batch_id, self.started, self.work_dir = batch_id, started, work_dir
        self.evidence = RunDirectory(project.evidence / batch_id)
        self.connect, self.environ, self.clock = connect, environ, clock
        self.progress, self.notice, self.phase = progress, notice, phase
        self.lease, self.only, self.repetitions = lease, tuple(only), repetitions
        self.resume = resume
        self.resumption: Resumption | None = None

    def run(self) -> Prepared:
        """Every step in order.

        Raises:
            NotReady: A step refused the batch (its reasons).
        """
        for stage, action in STEPS:
            if stage is None:
                action(self)
            else:
                step(stage, functools.partial(action, self))
        plan = batch_plan(
            self.config, self.suite, batch_dir=self.evidence.root, work_dir=self.work_dir,
            run_ids=list(self.receipt_run_ids), slots=self.site.slots,
            consumer_root=self.consumer.root, receipt=self.receipt,
            environment=self.environment, progress=self.progress,
            gateway=self.placement.gateway, engine_problem=self.site.engine.unreachable,
        )  # fmt: skip
        return Prepared(plan, self.executor)

    @property
    def receipt_run_ids(self) -> list[str]:
        scheduled = self.suite.spec.run_ids() if self.selected is None else self.selected
        if self.resumption is not None:
            return self.resumption.remaining(scheduled)
        return scheduled

    def _free_space(self) -> None:
        self.phase("preflight", "checking the config, engine, images and suite")
        evidence_dir = self.project.evidence
        evidence_dir.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(evidence_dir).free
        if free < MIN_FREE_BYTES:
            raise NotReady(
                [
                    f"disk: only {free // (1024 * 1024)} MiB free where the evidence is written "
                    f"({evidence_dir}); a batch needs at least {MIN_FREE_BYTES // (1024 * 1024)} "
                    "MiB"
                ]
            )

    def _reserve(self) -> None:
        evidence = self.evidence
        try:
            with open(evidence.reserve, "wb") as handle:
                handle.write(bytes(RESERVE_BYTES))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            evidence.reserve.unlink(missing_ok=True)
            raise NotReady([f"disk: {describe_failure(exc, evidence.root)}"]) from exc

    def _config(self) -> None:
        self.config = read_model(self.config_path, RunnerConfig, what="runner config")

    def _environment(self) -> None:
        names = self.config.envAllowlist
        if missing := [name for name in names if name not in self.environ]:
            raise ConfigError(f"envAllowlist names unset variables: {', '.join(missing)}")
        self.environment = {name: self.environ[name] for name in names}

    def _engine(self) -> None:
        self.engine = self.connect(self.config.runtimePath)

    def _reap(self) -> None:
        assert self.engine is not None
        if self.lease is not None:
            # Before the first container: the reaper must look for them there.
            self.lease.bind_engine(self.engine)
        for reaped in reap(self.project.evidence, self.engine, clock=self.clock):
            self.notice(reaped.describe())

    def _guides(self) -> None:
        # A declared guide that is missing is the repository's setting: not run, not the
        # harness's failure.
        for warning in self.project.guide_warnings():
            self.notice(warning)

    def _site(self) -> None:
        assert self.engine is not None
        self.site = Site(
            self.engine, self.config, self.batch_id, self.work_dir,
            slots=self.config.concurrency or default_slots(), environ=self.environ,
            work_anchor=self.project.evidence,
        )  # fmt: skip

    def _images(self) -> None:
        self.images = images = self.site.images()
        if self.config.models and images.gateway is not None:
            self.settings = gateway_settings(self.config, images.gateway.image_id)
        else:
            self.settings = None

    def _resume(self) -> None:
        """The batch resumed (after the reaper closed whatever its owner left): its schedule
        (repetitions, selection) is the predecessor's."""
        if self.resume is None:
            return
        self.resumption = open_resumption(self.resume, self.project.evidence)
        before = self.resumption.receipt
        self.repetitions = before.repetitions
        self.only = tuple(before.selection or ())

    def _remaining(self) -> None:
        if self.resumption is not None and not self.receipt_run_ids:
            raise ConfigError(
                f"every run of batch {self.resumption.receipt.batchId} has a valid final "
                "verdict: there is nothing to resume"
            )

    def _suite(self) -> None:
        self.suite = load_suite(self.project.tasks, graders_dir=self.project.graders)
        self.declared = self.suite.spec
        if self.repetitions is not None:
            self.suite = _measured(self.suite, self.repetitions)

    def _selection(self) -> None:
        """The runs a partial batch runs; None for the whole schedule."""
        self.selected = None
        if self.only:
            try:
                self.selected = self.suite.spec.select(self.only)
            except ValueError as exc:
                raise NotReady([f"--only: {exc}"]) from exc

    def _join(self) -> None:
        self.placement.join(self.site, self.images, self.phase, self.notice)

    def _pack(self) -> None:
        self.phase("packing", "packing the candidate archives")
        if self.reused is not None:
            self.archives = _copied(self.reused, self.evidence)
            return
        self.archives = _pack(self.project, self.evidence)

    def _consumer(self) -> None:
        self.phase("consumer", "preparing the consumer")
        if self.reused is not None:
            self.consumer = self.reused.consumer
            return
        self.consumer = self.site.consumer(
            self.project, self.images, self.evidence.archives, self.archives, self.notice
        )

    def _equip(self) -> None:
        self.placement.equip(self.site, self.images, self.consumer, self.environment, self.phase)

    def _bindings(self) -> None:
        self.digests = _write_bindings(
            self.project, self.config, self.evidence, self.archives, self.consumer,
            self.images, self.settings,
        )  # fmt: skip

    def _receipt(self) -> None:
        run_ids = self.receipt_run_ids
        self.receipt = Receipt.opened(
            batch_id=self.batch_id,
            created_at=self.started,
            self_test=is_self_test(self.config, self.settings),
            suite_digest=self.project.suite_digest(),
            evaluator_digest=evaluator_digest(),
            archives_digest=self.digests[0],
            consumer_lock_digest=self.digests[1],
            runner=self.config.expectedRunner,
            model=self.config.expectedModel,
            runner_image=self.config.runnerImage,
            verifier_image=self.config.verifierImage,
            scheduled_runs=len(run_ids),
            selection=self.selected,
            suite=self.declared,
            repetitions=self.repetitions,
        ).model_copy(
            update={
                "updatedAt": self.clock(),
                "runnerConfigDigest": runner_config_digest(self.config),
                "predecessor": self.resumption.predecessor if self.resumption else None,
            }
        )

    def _bound_to_predecessor(self) -> None:
        """A resumed batch has exactly its predecessor's identities, or runs nothing."""
        if (resumption := self.resumption) is None:
            return
        archives = read_model(self.evidence.archives_manifest, ArchivesManifest, what="archives")
        differ = binding_differences(
            resumption.receipt, resumption.archives, self.receipt, archives
        )
        if differ:
            raise ConfigError(
                f"the batch is not bound to what its predecessor {resumption.receipt.batchId} "
                f"was: {', '.join(differ)} differ(s); resume with the same checkout, images "
                "and runner config, or start a new batch"
            )

    def _executor(self) -> None:
        images = self.images
        nodes: list[NodeIdentity] = []
        context = RemoteContext(
            project=self.project,
            config=self.config,
            environment=self.environment,
            runner_image_id=images.runner.image_id,
            verifier_image_id=images.verifier.image_id,
            gateway_image_id=images.gateway.image_id if self.settings and images.gateway else None,
            archives_dir=self.evidence.archives,
            archives=self.archives,
            archives_digest=self.digests[0],
            lock_digest=self.digests[1],
            consumer_cache_entry=self.consumer.cache_entry,
            catalog_digest=self.consumer.catalog.digest(),
            receipt=self.receipt,
            notice=self.notice,
            progress=self.progress,
            nodes=nodes.extend,
            lease_token=None if self.lease is None else self.lease.token,
        )
        self.executor = self.placement.executor(context, self.phase)
        if nodes:
            self.receipt = self.receipt.model_copy(update={"nodes": nodes})


Step = tuple[str | None, Callable[[Preflight], None]]
STEPS: tuple[Step, ...] = (
    ("disk", Preflight._free_space),
    ("disk", Preflight._reserve),
    ("config", Preflight._config),
    ("config", Preflight._environment),
    ("engine", Preflight._engine),
    (None, Preflight._reap),
    ("config", Preflight._guides),
    ("config", Preflight._site),
    ("images", Preflight._images),
    ("--resume", Preflight._resume),
    ("suite", Preflight._suite),
    ("--only", Preflight._selection),
    ("--resume", Preflight._remaining),
    ("placement", Preflight._join),
    ("packing", Preflight._pack),
    ("consumer", Preflight._consumer),
    ("placement", Preflight._equip),
    (None, Preflight._bindings),
    (None, Preflight._receipt),
    ("--resume", Preflight._bound_to_predecessor),
    ("placement", Preflight._executor),
)
"""The preparation, in order: (the stage its refusals are said under, the action)."""


def _measured(suite: Suite, repetitions: int) -> Suite:
    """The suite with *repetitions* runs per task (its thresholds do not apply: a
    measurement batch never qualifies)."""
    runs = len(suite.spec.taskIds) * repetitions
    spec = suite.spec.model_copy(
        update={"repetitions": repetitions, "scheduledRuns": runs,
                "minFirstSuccesses": runs, "requiredFinalSuccesses": runs},
    )  # fmt: skip
    return dataclasses.replace(suite, spec=spec)


def _pack(project: Project, evidence: RunDirectory) -> list[ArchiveEntry]:
    return build_archives(project.packages, evidence.archives)


def _copied(reused: Reused, evidence: RunDirectory) -> list[ArchiveEntry]:
    """The archives another batch packed, copied into this one's evidence: each batch is
    checked on its own files, and these are the same bytes (their digests say so)."""
    evidence.archives.mkdir(parents=True, exist_ok=True)
    for entry in reused.archives:
        target = evidence.archives / entry.filename
        shutil.copyfile(reused.archives_dir / entry.filename, target)
        if file_sha256(target) != entry.sha256:
            raise ConfigError(f"archives: {entry.filename} changed after it was packed")
    return list(reused.archives)


def _write_bindings(
    project: Project,
    config: RunnerConfig,
    evidence: RunDirectory,
    archives: list[ArchiveEntry],
    consumer: PreparedConsumer,
    images: StationImages,
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
        runnerImage=ImageRecord(reference=config.runnerImage, imageId=images.runner.image_id),
        verifierImage=ImageRecord(reference=config.verifierImage, imageId=images.verifier.image_id),
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
