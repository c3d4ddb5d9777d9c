"""One cluster node's part of a batch: checked against the driver, then running whole runs.

A node runs runs exactly as the driver would on its own machine: it builds
its station by the same steps (:class:`~agent_eval.batch.station.Site`), on
its own local engine, and runs the same attempt code.
Before its first run it proves it holds what the driver holds: the harness
code by digest (a node started from another checkout would run the runs with
its own code under the driver's digest), the runner and verifier images by
id (nodes never pull), the suite by digest, and a consumer whose lock and API
catalog have the driver's digests. Its evidence
stays under its own root (beside a lease and a copy of the receipt, so that
its reaper can close a batch whose actor died with the node) only until the
driver has the files.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from agent_eval.anchored import make_dirs, remove_tree
from agent_eval.batch.attempt import Attempts
from agent_eval.batch.lease import HeldLease, held
from agent_eval.batch.reaper import reap
from agent_eval.batch.schedule import Schedule
from agent_eval.batch.station import NotReady, Site, StationImages, start_gateway
from agent_eval.batch.workdir import WORK_ROOT, make_work_dir, remove_work_dir
from agent_eval.digests import regular_files, sha256_bytes
from agent_eval.engine import ContainerEngine, remove_leftovers
from agent_eval.errors import AgentEvalError, CleanupError, ConfigError
from agent_eval.evidence_io import model_bytes, write_bytes_atomic, write_model_atomic
from agent_eval.layout import RunDirectory
from agent_eval.models import (
    NodeAssignment,
    NodeReady,
    NodeRunResult,
    RunnerConfig,
    ShippedFile,
)
from agent_eval.project import Project, evaluator_digest
from agent_eval.suite.tasks import load_suite
from agent_eval.verification.protocol import VerifierContext, VerifierFactory

if TYPE_CHECKING:
    from agent_eval.consumer.archives import PreparedConsumer

__all__ = ["NODE_GUIDES", "NodeParts", "NodeWorker", "head_silent", "node_name", "write_shipped"]

HEAD_GRACE_S = 15.0
"""A head that has not answered for this long is gone (the cluster ends a node's processes
about a minute after its head went)."""
HEAD_POLL_S = 1.0


def head_silent(alive: Callable[[], bool], grace_s: float, closed: threading.Event) -> bool:
    """Wait until the head has not answered for *grace_s* (True) or *closed* is set (False)."""
    silent_since: float | None = None
    while not closed.wait(HEAD_POLL_S):
        if alive():
            silent_since = None
            continue
        now = time.monotonic()
        silent_since = now if silent_since is None else silent_since
        if now - silent_since >= grace_s:
            return True
    return False


NODE_GUIDES = "guides"
"""Where a node's copy of the project holds the docs directories declared as guides."""


@dataclass(frozen=True)
class NodeParts:
    """What a node's side of a batch is composed from, picked by the composition root.

    Both travel to the node (by name, as module-level functions do), where the
    node's own engine and verifier are made from them.
    """

    connect: Callable[[str | None], ContainerEngine]
    """Connects to the node's own engine (it is given None: not the driver's runtimePath)."""
    verifiers: Callable[[Project], VerifierFactory[VerifierContext]]
    """The factory of the node's verifier, for the suite as the node received it."""


def _node_share(assignment: NodeAssignment) -> RunnerConfig:
    """The config as the node runs it: its gateway and schedule spend only the node's share
    of the token budget."""
    config = assignment.config
    options = config.gateway.model_copy(update={"tokenBudget": assignment.tokenBudget})
    return config.model_copy(update={"gateway": options})


def node_name(label: str | None, node_id: str) -> str:
    """A node's name in the evidence: its operator's label, else its host and node id."""
    return label or f"{socket.gethostname()}/{node_id[:12]}"


def write_shipped(root: Path, files: list[ShippedFile]) -> None:
    """Write *files* under *root* (their paths are relative and checked by the model)."""
    for shipped in files:
        target = root / shipped.path
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, shipped.data)


class NodeWorker:
    """A node's side of one batch; its methods are called from several threads at once."""

    def __init__(
        self,
        name: str,
        root: Path,
        slots: int,
        parts: NodeParts,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        environ: Mapping[str, str] = os.environ,
        harness: Callable[[], str] = evaluator_digest,
        address: str | None = None,
        expected_address: str | None = None,
        head_alive: Callable[[], bool] | None = None,
        head_grace_s: float = HEAD_GRACE_S,
    ) -> None:
        """*environ* holds the credentials the node's gateway needs (models[].credentialEnv):
        they are the node's own, never sent by the driver. *harness* gives the digest of the
        harness code this node runs. *address* is the one the cluster advertises for the
        node; *expected_address* the one its operator gave it (the node refuses work when
        the cluster advertises another). *head_alive* says whether the cluster's head still
        answers: once it has not for *head_grace_s*, the node stops its attempts and removes
        the batch's containers itself (the cluster ends the node's processes a while after
        its head is gone, and nothing else would)."""
        self.name = name
        self.root = root
        self.slots = slots
        self._parts = parts
        self._clock = clock
        self._environ = environ
        self._harness = harness
        self.address = address
        self._expected_address = expected_address
        self._head_alive = head_alive
        self._head_grace_s = head_grace_s
        self._closed = threading.Event()
        self.head_lost: str | None = None
        """Why the node stopped its batch on its own (its head gone), once it did."""
        self._stack = contextlib.ExitStack()
        self._lease: HeldLease | None = None
        self._engine: ContainerEngine | None = None
        self._attempts: Attempts | None = None
        self._batch_id: str | None = None

    @property
    def _evidence(self) -> RunDirectory:
        assert self._batch_id is not None
        return RunDirectory(self.root / self._batch_id)

    @property
    def _work(self) -> Path:
        assert self._batch_id is not None
        return self.root / WORK_ROOT / self._batch_id

    def prepare(self, assignment: NodeAssignment) -> NodeReady:
        """Check the node against the driver's identities and make it ready to run runs.

        Raises:
            AgentEvalError: Something differs from the driver, or cannot be prepared.
        """
        # First, before its engine is touched: every later step runs this node's own code.
        harness = self._harness()
        if harness != assignment.evaluatorDigest:
            raise ConfigError(
                f"node {self.name} runs harness code with digest {harness}, not the driver's "
                f"{assignment.evaluatorDigest}: start the node from the driver's checkout "
                "(the same agent-eval)"
            )
        if self._expected_address is not None and self.address != self._expected_address:
            raise ConfigError(
                f"node {self.name} is advertised at {self.address or 'an unknown address'}, not "
                f"its own {self._expected_address}: start it with "
                f"--node-ip-address={self._expected_address}"
            )
        # The node's own engine (its DOCKER_HOST): the driver's runtimePath names the driver's.
        self._engine = engine = self._parts.connect(None)
        notices = self._open(assignment, engine)
        site = Site(
            engine, _node_share(assignment), assignment.batchId, self._work,
            slots=self.slots, environ=self._environ, work_anchor=self.root,
        )  # fmt: skip
        images = self._images(site, assignment)
        project = self._project(assignment)
        if (digest := project.suite_digest()) != assignment.suiteDigest:
            raise ConfigError(
                f"the suite sent to node {self.name} has digest {digest}, not the driver's "
                f"{assignment.suiteDigest}"
            )
        suite = load_suite(project.tasks, graders_dir=project.graders)
        archives_dir = self._work / "archives"
        write_shipped(archives_dir, assignment.archiveFiles)
        consumer = site.consumer(project, images, archives_dir, assignment.archives)
        self._check_consumer(consumer, assignment)
        verifier = site.verifier(self._parts.verifiers(project), images, consumer)
        gateway = site.gateway(images)
        if gateway is not None:
            try:
                start_gateway(gateway)
            except NotReady as exc:
                raise ConfigError(f"on node {self.name}: {exc}") from exc
        station = site.station(images, consumer, verifier, gateway, assignment.environment)
        plan = station.plan(
            suite, batch_dir=self._evidence.root, run_ids=[], receipt=assignment.receipt
        )
        schedule = Schedule(
            plan,
            clock=self._clock,
            monotonic=time.monotonic,
            deadline=time.monotonic() + assignment.remainingS,
        )
        self._attempts = Attempts(schedule, station.runner, station.verifier)
        if self._head_alive is not None:
            threading.Thread(target=self._watch_head, name="head-watch", daemon=True).start()
        return NodeReady(
            node=self.name, engine=engine.address, address=self.address, slots=self.slots,
            evaluatorDigest=harness,
            runnerImageId=images.runner.image_id, verifierImageId=images.verifier.image_id,
            gatewayImageId=images.gateway.image_id if gateway is not None and images.gateway
            else None,
            notices=notices,
        )  # fmt: skip

    def _watch_head(self) -> None:
        """Stop everything and remove the batch's containers once the head is gone."""
        assert self._head_alive is not None
        if not head_silent(self._head_alive, self._head_grace_s, self._closed):
            return
        reason = f"the cluster's head has not answered for {self._head_grace_s:g} s"
        self.head_lost = reason
        problems = self.stop(reason) + self._remove_containers()
        for problem in problems:
            print(f"node {self.name}: {reason}; {problem}", flush=True)

    def _remove_containers(self) -> list[str]:
        """Remove the batch's containers here, those with its label and its lease's token
        (a label alone is a name another process may give); what could not be done."""
        if self._engine is None or self._batch_id is None:
            return []
        token = self._lease.token if self._lease is not None else None
        try:
            remove_leftovers(self._engine, self._batch_id, lease_token=token)
        except AgentEvalError as exc:
            return [str(exc)]
        return []

    def _open(self, assignment: NodeAssignment, engine: ContainerEngine) -> list[str]:
        """Reap what dead batches left here, then hold the batch's lease; what was reaped."""
        self.root.mkdir(parents=True, exist_ok=True)
        notices = []
        for reaped in reap(self.root, engine, clock=self._clock):
            notices.append(reaped.describe())
            if not reaped.problems:
                # The driver's run directory is the evidence; the node's copy was a staging area.
                try:
                    remove_tree(self.root, reaped.run_dir)
                except CleanupError as exc:
                    notices.append(f"node {self.name}: {exc}")
        self._batch_id = assignment.batchId
        # Both from the node's root down, through no link planted there.
        make_dirs(self.root, self._evidence.root, 0o777, exist_ok=False)
        make_work_dir(self.root, assignment.batchId)
        self._lease = self._stack.enter_context(
            held(self._evidence.root, assignment.batchId, self._clock, token=assignment.leaseToken)
        )
        self._lease.bind_engine(engine)
        write_model_atomic(self._evidence.receipt, assignment.receipt)
        return notices

    def _images(self, site: Site, assignment: NodeAssignment) -> StationImages:
        """The station's images, each the very one the driver has (nodes never pull)."""
        images = site.images()
        for what, found, wanted in (
            ("runnerImage", images.runner, assignment.runnerImageId),
            ("verifierImage", images.verifier, assignment.verifierImageId),
            ("gatewayImage", images.gateway, assignment.gatewayImageId),
        ):
            if found is not None and wanted is not None and found.image_id != wanted:
                raise ConfigError(
                    f"{what} {found.reference} is {found.image_id} on node {self.name} but "
                    f"{wanted} on the driver; load the driver's image on the node "
                    "(docker save | docker load)"
                )
        if site.config.models and images.gateway is None:
            raise ConfigError(f"node {self.name} was sent models without a gateway image")
        return images

    def _check_consumer(self, consumer: PreparedConsumer, assignment: NodeAssignment) -> None:
        """The node's consumer must be the driver's: its lock and API catalog, by digest."""
        mine = consumer.lock(assignment.archivesDigest)
        write_model_atomic(self._evidence.consumer_lock, mine)
        # Where each side's consumer came from may differ (a cache entry, a fresh
        # install); what it holds may not: compared as the driver's lock would read.
        as_driver = mine.model_copy(update={"cacheEntry": assignment.consumerCacheEntry})
        if (lock := sha256_bytes(model_bytes(as_driver))) != assignment.consumerLockDigest:
            raise ConfigError(
                f"the consumer prepared on node {self.name} has lock {lock}, not the driver's "
                f"{assignment.consumerLockDigest}: its verifier image or archives differ"
            )
        if (catalog := consumer.catalog.digest()) != assignment.apiCatalogDigest:
            raise ConfigError(
                f"the API catalog on node {self.name} is {catalog}, not the driver's "
                f"{assignment.apiCatalogDigest}"
            )

    def _project(self, assignment: NodeAssignment) -> Project:
        root = self._work / "project"
        write_shipped(root, assignment.projectFiles)
        for part in ("packages", "tasks", "graders", "fixtures", NODE_GUIDES):
            (root / part).mkdir(parents=True, exist_ok=True)
        return Project(
            root=root,
            packages=root / "packages",
            tasks=root / "tasks",
            graders=root / "graders",
            fixtures=root / "fixtures",
            evidence=self.root,
            declared_guides={p.name: p for p in (root / NODE_GUIDES).iterdir() if p.is_dir()},
        )

    def run(self, run_id: str, remaining_s: float) -> NodeRunResult:
        """Run one scheduled run and send back its record and its attempt directories."""
        attempts = self._attempts
        if attempts is None:
            raise ConfigError(f"node {self.name} was given a run before it was prepared")
        schedule = attempts.schedule
        # The batch's deadline, as the driver sees it now (the clocks of two machines differ).
        schedule.deadline = min(schedule.deadline, time.monotonic() + remaining_s)
        record = attempts.run(run_id)
        run_dir = self._evidence.root / "runs" / run_id
        files = []
        if run_dir.is_dir():
            for rel in regular_files(run_dir):
                files.append(ShippedFile(path=rel, data=(run_dir / rel).read_bytes()))
        # The driver has them now; a link planted on the way leaves them (and all outside) be.
        with contextlib.suppress(CleanupError):
            remove_tree(self.root, run_dir)
        return NodeRunResult(
            node=self.name, record=record, files=files, ruleStop=schedule.rule_stop,
            headLost=self.head_lost,
        )  # fmt: skip

    def halt(self) -> None:
        """Start no further attempt (a rule stopped the batch); those running finish."""
        if self._attempts is not None:
            self._attempts.schedule.stop.set()

    def stop(self, reason: str) -> list[str]:
        """Stop every attempt in flight on the node."""
        return self._attempts.stop_everything(reason) if self._attempts is not None else []

    def close(self) -> list[str]:
        """Remove the batch's containers and files from the node; give its lease up if done."""
        self._closed.set()
        problems = [f"node {self.name}: {problem}" for problem in self._remove_containers()]
        if self._batch_id is not None:
            try:
                remove_work_dir(self.root, self._batch_id)
            except CleanupError as exc:
                problems.append(f"node {self.name}: {exc}")
        if self._lease is not None and not problems:
            self._lease.release()
            try:
                remove_tree(self.root, self._evidence.root)
            except CleanupError as exc:
                problems.append(f"node {self.name}: {exc}")
        self._stack.close()
        return problems
