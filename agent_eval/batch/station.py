"""The station: what runs a batch's runs on one engine, built the same way wherever it is.

The driver builds one for a batch on its own machine, and each cluster node
builds one for its share of a batch: its images checked, its consumer, its
model gateway (started, each upstream asked once), its verifier, its runner
container and the plan of its runs. :class:`Site` is the one engine and the
steps that equip it; :class:`Station` is what they made.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from agent_eval.batch.admission import Machine, check_admission, read_machine, verification_slots
from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.ports import Notice, RemoteContext, StartPhase
from agent_eval.batch.progress import ProgressEvent
from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import BatchPlan, ExecutorFactory, ScheduledTask
from agent_eval.consumer.archives import PreparedConsumer
from agent_eval.consumer.cache import ConsumerCache, cached_consumer
from agent_eval.digests import solution_digest, solution_files
from agent_eval.engine import ContainerEngine, ImageIdentity
from agent_eval.errors import AgentEvalError, ConfigError
from agent_eval.gateway.host import BatchGateway
from agent_eval.layout import CONSUMER_MOUNT, DEPENDENCY_LOCK, IN_CONTAINER_CONSUMER, SOLUTION_MOUNT
from agent_eval.models import ArchiveEntry, Receipt, RunnerConfig
from agent_eval.models.runner_config import MAX_CONCURRENCY
from agent_eval.project import Project
from agent_eval.suite.tasks import Suite
from agent_eval.verification.protocol import Verifier, VerifierContext, VerifierFactory

__all__ = [
    "LocalPlacement",
    "NotReady",
    "Site",
    "Station",
    "StationImages",
    "batch_consumer",
    "batch_plan",
    "default_slots",
    "step",
]

T = TypeVar("T")

FULL_BELOW_BYTES = 1024 * 1024
"""Under this much free space after an attempt, what its containers wrote may be cut short."""


class NotReady(AgentEvalError):
    """A station could not be built, for these reasons (each in words an operator acts on)."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


def step(stage: str, action: Callable[[], T]) -> T:
    """What *action* gives; an error it raises becomes :class:`NotReady`, said after *stage*
    (a NotReady keeps its own reasons)."""
    try:
        return action()
    except NotReady:
        raise
    except AgentEvalError as exc:
        raise NotReady([f"{stage}: {exc}"]) from exc


@dataclass(frozen=True)
class StationImages:
    """The images a station runs, as the engine resolved them (never pulled)."""

    runner: ImageIdentity
    verifier: ImageIdentity
    gateway: ImageIdentity | None
    """Only when the config names one."""


def default_slots() -> int:
    """The runs in flight at once when runner.json does not say: what two cores bear."""
    return max(1, min(2, os.cpu_count() or 1))


@dataclass(frozen=True)
class Site:
    """One engine a batch's runs execute on, and the steps that equip it as a station.

    Raises:
        ConfigError: *slots* is not in [1, MAX_CONCURRENCY], or is more runs in flight than
            the machine's memory holds (:mod:`agent_eval.batch.admission`; the one check).
    """

    engine: ContainerEngine
    config: RunnerConfig
    batch_id: str
    work_dir: Path
    slots: int
    """Runs in flight at once here: runner.json's concurrency, or a cluster node's share."""
    environ: Mapping[str, str] = field(default_factory=dict)
    """Where the gateway's credentials are read (models[].credentialEnv): the site's own."""
    machine: Callable[[], Machine] = field(default=lambda: read_machine())
    """The cores and available memory of the machine the runs execute on (this one)."""
    work_anchor: Path | None = None
    """The directory the project names that *work_dir* lies below (the evidence directory,
    a node's root): what is made and removed under *work_dir* mid-batch is reached from
    it without following a link (:mod:`agent_eval.batch.workdir`)."""

    def __post_init__(self) -> None:
        if not 1 <= self.slots <= MAX_CONCURRENCY:
            raise ConfigError(
                f"{self.slots} runs at once is not in [1, {MAX_CONCURRENCY}] (concurrency, "
                "or a node's count of agent_eval_engine)"
            )
        check_admission(self.slots, self.machine())

    def images(self) -> StationImages:
        """The config's images on this engine.

        Raises:
            NotReady: One reason for each image that is not there.
        """
        reasons: list[str] = []
        found: dict[str, ImageIdentity] = {}
        for name, reference in (
            ("runnerImage", self.config.runnerImage),
            ("verifierImage", self.config.verifierImage),
            ("gatewayImage", self.config.gatewayImage),
        ):
            if reference is None:
                continue
            try:
                found[name] = self.engine.resolve_image(reference)
            except AgentEvalError as exc:
                reasons.append(f"{name}: {exc}")
        if reasons:
            raise NotReady(reasons)
        return StationImages(
            found["runnerImage"], found["verifierImage"], found.get("gatewayImage")
        )

    def gateway(self, images: StationImages) -> BatchGateway | None:
        """The model gateway, made but not started (None: the runner reaches no model).

        Raises:
            ConfigError: A credential it needs is not set here.
        """
        if not self.config.models or images.gateway is None:
            return None
        return BatchGateway(
            self.engine, self.config, images.gateway, work_dir=self.work_dir / "gateway",
            batch_id=self.batch_id, environ=self.environ,
        )  # fmt: skip

    def consumer(
        self,
        project: Project,
        images: StationImages,
        archives_dir: Path,
        archives: list[ArchiveEntry],
        notice: Callable[[str], None] = lambda _: None,
    ) -> PreparedConsumer:
        """The consumer, installed here from *archives* or kept from an earlier batch of the
        same inputs (what the cache says goes to *notice*).

        Raises:
            AgentEvalError: It could not be prepared.
        """
        return batch_consumer(
            self.engine, project, images.verifier.image_id, archives_dir, archives,
            self.work_dir, self.batch_id, notice,
        )  # fmt: skip

    def verifier(
        self,
        factory: VerifierFactory[VerifierContext],
        images: StationImages,
        consumer: PreparedConsumer,
    ) -> Verifier:
        """The verifier: one verification at once per core, at most *slots* (verifying is CPU
        work, while most runs in flight wait on their model)."""
        return factory(
            VerifierContext(
                engine=self.engine,
                image_id=images.verifier.image_id,
                consumer_dir=consumer.root,
                batch_id=self.batch_id,
                slots=verification_slots(self.slots, self.machine().cores),
                work_dir=self.work_dir / "verifier",
                work_anchor=self.work_anchor,
            )
        )

    def station(
        self,
        images: StationImages,
        consumer: PreparedConsumer,
        verifier: Verifier,
        gateway: BatchGateway | None,
        environment: Mapping[str, str],
    ) -> Station:
        """The station, its runner container given *environment* (the allowlisted variables)
        and the gateway's."""
        runner = ContainerRunner(
            self.engine,
            config=self.config,
            image_id=images.runner.image_id,
            consumer_dir=consumer.root,
            batch_id=self.batch_id,
            environment={
                **environment,
                **(gateway.runner_environment() if gateway else {}),
            },
            gateway_mounts=gateway.runner_mounts() if gateway else (),
            work_anchor=self.work_anchor,
        )
        return Station(self, consumer, verifier, gateway, runner, dict(environment))


def start_gateway(gateway: BatchGateway) -> None:
    """Start the gateway and ask every upstream once: a batch that cannot reach its model
    does not run a whole suite to find out.

    Raises:
        NotReady: An upstream did not answer as it should.
        AgentEvalError: The gateway could not start.
    """
    gateway.start()
    if reasons := gateway.preflight():
        raise NotReady(reasons)


@dataclass(frozen=True)
class Station:
    """What a site was equipped with: its consumer, verifier, gateway and runner container."""

    site: Site
    consumer: PreparedConsumer
    verifier: Verifier
    gateway: BatchGateway | None
    runner: ContainerRunner
    environment: dict[str, str]
    """The allowlisted variables every runner container gets (redacted from its logs)."""

    def plan(
        self,
        suite: Suite,
        *,
        batch_dir: Path,
        run_ids: list[str],
        receipt: Receipt,
        progress: Callable[[ProgressEvent], None] = lambda _event: None,
    ) -> BatchPlan:
        """The plan of this station's runs, their evidence in *batch_dir*."""
        site = self.site
        return batch_plan(
            site.config, suite, batch_dir=batch_dir, work_dir=site.work_dir, run_ids=run_ids,
            slots=site.slots, consumer_root=self.consumer.root, receipt=receipt,
            environment=self.environment, progress=progress, gateway=self.gateway,
            engine_problem=site.engine.unreachable, work_anchor=site.work_anchor,
        )  # fmt: skip

    def executor(self) -> ExecutorFactory:
        """This station's runs on this machine's threads."""
        return on_this_engine(self.runner, self.verifier)


def batch_consumer(
    engine: ContainerEngine,
    project: Project,
    verifier_image_id: str,
    archives_dir: Path,
    archives: list[ArchiveEntry],
    work_dir: Path,
    batch_id: str,
    notice: Callable[[str], None] = lambda _: None,
) -> PreparedConsumer:
    """The batch's consumer, installed from *archives* in the verifier image, or kept from
    an earlier batch of the same inputs (:mod:`agent_eval.consumer.cache`).

    Raises:
        AgentEvalError: It could not be prepared.
    """
    lock = project.packages / DEPENDENCY_LOCK
    return cached_consumer(
        engine,
        cache=ConsumerCache.default(project.evidence),
        verifier_image=verifier_image_id,
        fallback_root=work_dir / "consumer",
        stage=work_dir / "consumer-stage",
        archives_dir=archives_dir,
        archives=archives,
        dependency_lock=lock if lock.is_file() else None,
        guides=project.guides(),
        batch_id=batch_id,
        notice=notice,
    )


def batch_plan(
    config: RunnerConfig,
    suite: Suite,
    *,
    batch_dir: Path,
    work_dir: Path,
    run_ids: list[str],
    slots: int,
    consumer_root: Path,
    receipt: Receipt,
    environment: Mapping[str, str],
    progress: Callable[[ProgressEvent], None] = lambda _event: None,
    gateway: BatchGateway | None = None,
    engine_problem: Callable[[], str | None] = lambda: None,
    work_anchor: Path | None = None,
) -> BatchPlan:
    """The schedule's plan of a batch whose evidence goes to *batch_dir* (the same on a node);
    *engine_problem* says why the engine its runs use does not answer, when it does not."""
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
        submission_timeout_ms=config.submissionTimeoutMs,
        batch_timeout_ms=config.batchTimeoutMs,
        slots=slots,
        consumer_dir_in_runner=CONSUMER_MOUNT,
        output_dir_in_runner=SOLUTION_MOUNT,
        protected_digest=lambda: _protected_digest(consumer_root),
        receipt=receipt,
        progress=progress,
        disk_problem=lambda: _disk_problem(work_dir),
        engine_problem=engine_problem,
        work_anchor=work_anchor,
        gateway=gateway,
        token_budget=config.gateway.tokenBudget,
        redactions={
            **{value: name for name, value in environment.items()},
            **(gateway.credential_redactions() if gateway is not None else {}),
        },
    )


def _protected_digest(consumer: Path) -> str:
    return solution_digest(solution_files(consumer))


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


class LocalPlacement:
    """The runs on this machine: the driver equips its own engine as the station."""

    def __init__(self, verifiers: VerifierFactory[VerifierContext]) -> None:
        self._verifiers = verifiers
        self._gateway: BatchGateway | None = None
        self._station: Station | None = None

    @property
    def gateway(self) -> BatchGateway | None:
        return self._gateway

    def join(self, site: Site, images: StationImages, phase: StartPhase, notice: Notice) -> None:
        # Made (not started) now: a credential that is not set is refused before packing.
        self._gateway = step("config", lambda: site.gateway(images))

    def equip(
        self,
        site: Site,
        images: StationImages,
        consumer: PreparedConsumer,
        environment: Mapping[str, str],
        phase: StartPhase,
    ) -> None:
        phase("verifier", "preparing the verifier")
        verifier = step("verifier", lambda: site.verifier(self._verifiers, images, consumer))
        if (gateway := self._gateway) is not None:
            phase("gateway", "starting the model gateway and asking each upstream once")
            step("gateway", lambda: start_gateway(gateway))
        self._station = site.station(images, consumer, verifier, gateway, environment)

    def executor(self, context: RemoteContext, phase: StartPhase) -> ExecutorFactory:
        if self._station is None:
            raise NotReady(["the station was asked for its runs before it was equipped"])
        return self._station.executor()

    def close(self) -> list[str]:
        return []  # everything here goes with the batch's containers and work directory
