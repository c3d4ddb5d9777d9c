"""The Ray executor: a batch's runs on the nodes of a Ray cluster, one local engine per node.

The driver (eval-agent) does the preflight, packing, its own consumer and
every write of the receipt, as on one machine. Each node advertising
:data:`RESOURCE` gets one actor, pinned to it, holding that node's engine,
consumer and verifier (:class:`~agent_eval.cluster.node.NodeWorker`); the
driver hands a run to a node only when the node has a free slot, so it
always knows which runs a node had started and which were still queued.
Nothing is ever retried by Ray (``max_restarts=0``, ``max_task_retries=0``):
a run that may have started a container is never run twice. A node lost
mid-run costs the runs it held, recorded as infrastructure failures naming
it; the queued ones go to the other nodes. Ray is imported here only, so
the base install does without it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_eval.batch.ports import Notice, RemoteContext, StartPhase
from agent_eval.batch.progress import ProgressEvent
from agent_eval.batch.schedule import ExecutorFactory, Schedule
from agent_eval.batch.station import Site, StationImages, step
from agent_eval.cluster.arrival import accept_run
from agent_eval.cluster.node import (
    HEAD_GRACE_S,
    HEAD_POLL_S,
    NODE_GUIDES,
    NodeParts,
    NodeWorker,
    head_silent,
    node_name,
)
from agent_eval.digests import regular_files
from agent_eval.errors import AgentEvalError, ConfigError
from agent_eval.layout import DEPENDENCY_LOCK
from agent_eval.models import (
    NodeAssignment,
    NodeIdentity,
    NodeReady,
    NodeRunResult,
    RunRecord,
    ShippedFile,
)
from agent_eval.project import CACHE_DIRS, evaluator_digest

if TYPE_CHECKING:
    from agent_eval.consumer.archives import PreparedConsumer

__all__ = [
    "NODE_IP_ENV",
    "NODE_LABEL_ENV",
    "NODE_ROOT_ENV",
    "RESOURCE",
    "RayCluster",
    "assignment_for",
]

RESOURCE = "agent_eval_engine"
"""The custom resource a node advertises for its local engine: its count is the runs it
takes at once (``ray start --resources='{"agent_eval_engine": 2}'``)."""
NODE_LABEL_ENV = "AGENT_EVAL_NODE"
"""The node's name in the evidence, from the environment of its ``ray start``."""
NODE_IP_ENV = "AGENT_EVAL_NODE_IP"
"""The node's own address in the cluster, from the environment of its ``ray start`` (given
there as ``--node-ip-address`` too): a node the cluster advertises at another refuses work."""
NODE_ROOT_ENV = "AGENT_EVAL_NODE_ROOT"
"""Where the node keeps its part of a batch (default: /var/tmp/agent-eval-node)."""
DEFAULT_NODE_ROOT = Path("/var/tmp/agent-eval-node")
PROBE_TIMEOUT_S = 5.0
"""An address where nothing accepts a connection within this is refused."""
JOIN_TIMEOUT_S = 60.0
"""Joining a cluster that answers takes a second or two."""
PREPARE_TIMEOUT_S = 900.0
"""A node prepares its consumer and verifier in about the time the driver does."""
CALL_TIMEOUT_S = 120.0
"""Stopping or cleaning up a node's containers."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the ray executor needs Ray, an optional extra: pip install 'agent-eval[ray]'"
        ) from None
    return ray


class NodeActor:
    """What runs on a node, inside Ray: a :class:`NodeWorker` behind JSON messages.

    Answers are ``("ok", json)`` or ``("error", message)``: an error of the
    harness travels as words, never as a pickled exception.
    """

    def __init__(self, slots: int, parts: NodeParts) -> None:
        ray = _ray()
        node_id = ray.get_runtime_context().get_node_id()
        root = Path(os.environ.get(NODE_ROOT_ENV) or DEFAULT_NODE_ROOT)
        name = node_name(os.environ.get(NODE_LABEL_ENV), node_id)
        gcs = str(ray.get_runtime_context().gcs_address)
        self._worker = NodeWorker(
            name, root, slots, parts, address=_advertised(ray, node_id),
            expected_address=os.environ.get(NODE_IP_ENV) or None,
            head_alive=lambda: _answers(gcs),
        )  # fmt: skip

    def prepare(self, assignment: bytes) -> tuple[str, str]:
        try:
            ready = self._worker.prepare(NodeAssignment.model_validate_json(assignment))
        except AgentEvalError as exc:
            return "error", f"node {self._worker.name}: {exc}"
        return "ok", ready.model_dump_json()

    def run(self, run_id: str, remaining_s: float) -> tuple[str, str]:
        try:
            return "ok", self._worker.run(run_id, remaining_s).model_dump_json()
        except AgentEvalError as exc:
            return "error", f"node {self._worker.name}: {exc}"

    def halt(self) -> None:
        self._worker.halt()

    def stop(self, reason: str) -> list[str]:
        return self._worker.stop(reason)

    def close(self) -> list[str]:
        return self._worker.close()


def _answers(address: str) -> bool:
    """Whether something accepts a connection at *address* (``host:port``) within a second."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False


def _advertised(ray: Any, node_id: str) -> str | None:
    """The address the cluster advertises for the node *node_id* (its raylet's)."""
    for found in ray.nodes():
        if str(found.get("NodeID")) == node_id:
            address = found.get("NodeManagerAddress")
            return str(address) if address else None
    return None


@dataclass
class _Node:
    actor: Any
    name: str
    slots: int
    busy: int = 0
    lost: str | None = None
    """Why the node is gone, once a call found it so."""


@dataclass
class RayCluster:
    """A Ray cluster a batch's runs execute on, each node building a station of its own
    (:class:`~agent_eval.batch.ports.Placement`)."""

    address: str
    """The cluster's GCS address (``host:port``)."""
    parts: NodeParts
    """What each node's side is composed from (its engine, its verifier)."""
    node_ip: str | None = None
    """The driver's own address in the cluster (otherwise Ray works it out itself, by
    asking the network how it would reach an outside address)."""
    head_grace_s: float = HEAD_GRACE_S
    """How long the head may not answer before the batch stops (the cluster ends this
    driver about a minute after its head went: the receipt must close before)."""
    _nodes: list[_Node] = field(default_factory=list)
    _connected: bool = False
    _head_lost: str | None = None
    _unwatched: threading.Event = field(default_factory=threading.Event)

    @property
    def gateway(self) -> None:
        """None: each node starts a gateway of its own, with its own credentials, and its
        schedule watches it."""
        return None

    def join(self, site: Site, images: StationImages, phase: StartPhase, notice: Notice) -> None:
        phase("cluster", "joining the cluster")
        step("cluster", lambda: self.connect(site.batch_id, notice))

    def equip(
        self,
        site: Site,
        images: StationImages,
        consumer: PreparedConsumer,
        environment: Mapping[str, str],
        phase: StartPhase,
    ) -> None:
        """Nothing on the driver: every node verifies what it ran."""

    def executor(self, context: RemoteContext, phase: StartPhase) -> ExecutorFactory:
        phase("nodes", "preparing the cluster's nodes")
        return step("cluster", lambda: self.prepare(context))

    def connect(self, batch_id: str, notice: Callable[[str], None]) -> None:
        ray = _ray()
        options: dict[str, Any] = {"address": self.address}
        if self.node_ip is not None:
            options["_node_ip_address"] = self.node_ip
        options |= {
            "logging_level": "warning",
            "log_to_driver": False,
            "namespace": f"agent-eval-{batch_id}",
        }
        _join(ray, self.address, options)
        self._connected = True
        threading.Thread(target=self._watch_head, name="head-watch", daemon=True).start()
        _errors_to(ray, notice)
        self._start_actors(ray)

    def _watch_head(self) -> None:
        if head_silent(lambda: _answers(self.address), self.head_grace_s, self._unwatched):
            self._head_lost = (
                f"the Ray cluster's head at {self.address} has not answered for "
                f"{self.head_grace_s:g} s"
            )

    def head_lost(self) -> str | None:
        """Why the cluster's head is gone, once it has not answered for the grace."""
        return self._head_lost

    def prepare(self, context: RemoteContext) -> ExecutorFactory:
        ray = _ray()
        if not self._connected:
            self.connect(context.receipt.batchId, context.notice)
        assignment = ray.put(assignment_for(context, len(self._nodes)).model_dump_json().encode())
        answers = [n.actor.prepare.remote(assignment) for n in self._nodes]
        harness = evaluator_digest()
        identities: list[NodeIdentity] = []
        problems = []
        for node, answer in zip(self._nodes, answers, strict=True):
            try:
                kind, payload = ray.get(answer, timeout=PREPARE_TIMEOUT_S)
            except Exception as exc:
                problems.append(f"node {node.name} could not be prepared: {_said(exc)}")
                continue
            if kind != "ok":
                problems.append(payload)
                continue
            ready = NodeReady.model_validate_json(payload)
            node.name = ready.node
            if ready.evaluatorDigest != harness:
                # A node that skipped its own check (another harness's code) is refused here.
                problems.append(
                    f"node {ready.node} runs harness code with digest {ready.evaluatorDigest}, "
                    f"not the driver's {harness}"
                )
                continue
            identity = NodeIdentity(
                node=ready.node, engine=ready.engine, address=ready.address,
                evaluatorDigest=ready.evaluatorDigest,
                runnerImageId=ready.runnerImageId, verifierImageId=ready.verifierImageId,
                gatewayImageId=ready.gatewayImageId,
            )  # fmt: skip
            identities.append(identity)
            for line in ready.notices:
                context.notice(f"node {ready.node}: {line}")
        named = [n.name for n in self._nodes]
        problems += [
            f"{named.count(name)} nodes call themselves {name}: the evidence could not tell "
            f"them apart (give each its own {NODE_LABEL_ENV})"
            for name in sorted(set(named))
            if named.count(name) > 1
        ]
        if problems:
            raise ConfigError("; ".join(problems))
        context.nodes(sorted(identities, key=lambda n: n.node))
        names = ", ".join(sorted(f"{n.name} ({n.slots} at a time)" for n in self._nodes))
        context.progress(ProgressEvent(f"nodes ready: {names}"))
        return lambda schedule: _RayExecutor(
            ray, self._nodes, schedule, context, self.head_lost, head_grace_s=self.head_grace_s
        )

    def _start_actors(self, ray: Any) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get(RESOURCE, 0) >= 1]
        if not nodes:
            raise ConfigError(
                f"no node of the Ray cluster at {self.address} advertises {RESOURCE}: start "
                f"each node that has a local engine with --resources='{{\"{RESOURCE}\": 2}}'"
            )
        remote = ray.remote(NodeActor)
        for found in sorted(nodes, key=lambda n: str(n["NodeID"])):
            slots = int(found["Resources"][RESOURCE])
            actor = remote.options(
                num_cpus=0,
                resources={RESOURCE: slots},
                scheduling_strategy=NodeAffinitySchedulingStrategy(found["NodeID"], soft=False),
                max_restarts=0,
                max_task_retries=0,
                max_concurrency=slots + 2,  # its runs, and a stop while they run
            ).remote(slots, self.parts)
            self._nodes.append(_Node(actor, str(found["NodeID"])[:12], slots))

    def close(self) -> list[str]:
        if not self._connected:
            return []
        self._unwatched.set()
        if self._head_lost is not None:
            # Nothing of the cluster answers a driver whose head is gone, and the cluster
            # ends this process soon: each node cleans up after itself instead.
            self._connected = False
            return [_NODES_CLEAN_UP.format(self._head_lost)]
        ray = _ray()
        problems: list[str] = []
        calls = [(n, n.actor.close.remote()) for n in self._nodes if n.lost is None]
        for node, call in calls:
            try:
                problems += ray.get(call, timeout=CALL_TIMEOUT_S)
            except Exception as exc:
                node.lost = node.lost or _said(exc)
        for node in self._nodes:
            if node.lost is not None:
                problems.append(
                    f"node {node.name} was lost ({node.lost}): what it ran for this batch is "
                    "removed by its reaper when it next prepares for a batch"
                )
            with contextlib.suppress(Exception):  # the actor may be gone with its node
                ray.kill(node.actor)
        ray.shutdown()
        self._connected = False
        return problems


_NODES_CLEAN_UP = (
    "{}: each node stops this batch's attempts and removes its containers itself once its "
    "head is gone; agent-eval cleanup lists any node it cannot reach"
)


def _join(ray: Any, address: str, options: dict[str, Any]) -> None:
    """Join the cluster, or say why not within :data:`JOIN_TIMEOUT_S`.

    ``ray.init`` waits without end for a head that does not answer (and no
    signal is handled meanwhile): an address where nothing listens is refused
    at once, and the join itself runs on a thread of its own that the batch
    waits for, bounded, and can be interrupted while it does.
    """
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConfigError(
            f"nothing answers at the Ray cluster's address {address}: "
            f"{exc.strerror or type(exc).__name__}"
        ) from None
    done = threading.Event()
    failed: list[BaseException] = []

    def join() -> None:
        try:
            ray.init(**options)
        except BaseException as exc:  # handed to the waiting thread
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=join, name="ray-join", daemon=True).start()
    if not done.wait(JOIN_TIMEOUT_S):
        raise ConfigError(
            f"the Ray cluster at {address} did not let this driver join within "
            f"{JOIN_TIMEOUT_S:g} s: is it a Ray head, and is RAY_AUTH_TOKEN its token?"
        )
    if failed:
        raise ConfigError(
            f"cannot join the Ray cluster at {address}: {_said(failed[0])} (a RAY_AUTH_TOKEN "
            "that is not the cluster's fails so too)"
        )


def _errors_to(ray: Any, notice: Callable[[str], None]) -> None:
    """Send what the cluster reports to the driver (a node that died, …) to *notice*.

    Ray prints those messages on the driver's stdout, where eval-agent owes
    its caller exactly one JSON line; the hook is its module-level printer.
    """
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    if worker is None or not hasattr(worker, "print_to_stdstream"):
        raise ConfigError(
            f"this Ray ({ray.__version__}) prints the cluster's messages where eval-agent "
            "writes its result; install the version agent-eval[ray] names"
        )

    def forward(data: dict[str, Any], ignore_prefix: bool) -> None:
        for line in data.get("lines", []):
            notice(f"ray ({data.get('pid', '?')}): {str(line).strip()[:2000]}")

    worker.print_to_stdstream = forward


def _said(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def _on_node(record: RunRecord, node: str) -> RunRecord:
    """*record* with *node* named on each attempt: the node it was handed to, which a run
    that came back as nothing (the node lost, its answer refused) still ran on."""
    attempts = [a.model_copy(update={"node": node}) for a in record.attempts]
    return record.model_copy(update={"attempts": attempts})


def assignment_for(context: RemoteContext, nodes: int = 1) -> NodeAssignment:
    """What each of *nodes* nodes is sent: the config, the archives, the suite, the
    identities, and its share of the token budget.

    Raises:
        ConfigError: The token budget cannot be shared out (fewer tokens than nodes).
    """
    budget = context.config.gateway.tokenBudget
    if budget is not None and budget < nodes:
        raise ConfigError(f"gateway.tokenBudget {budget} cannot be shared among {nodes} nodes")
    project = context.project
    files: list[ShippedFile] = []
    for prefix, root in (("tasks", project.tasks), ("graders", project.graders)):
        for rel in regular_files(root, skip_dirs=CACHE_DIRS, skip_suffixes=(".pyc", ".pyo")):
            files.append(ShippedFile(path=f"{prefix}/{rel}", data=(root / rel).read_bytes()))
    lock = project.packages / DEPENDENCY_LOCK
    if lock.is_file():
        files.append(ShippedFile(path=f"packages/{DEPENDENCY_LOCK}", data=lock.read_bytes()))
    for name, guide in project.guides().items():
        if guide.is_dir():
            for rel in regular_files(guide, skip_dirs=CACHE_DIRS):
                data = (guide / rel).read_bytes()
                files.append(ShippedFile(path=f"{NODE_GUIDES}/{name}/{rel}", data=data))
        else:
            files.append(ShippedFile(path=f"packages/{name}/GUIDE.md", data=guide.read_bytes()))
    archives = [
        ShippedFile(path=a.filename, data=(context.archives_dir / a.filename).read_bytes())
        for a in context.archives
    ]
    return NodeAssignment(
        batchId=context.receipt.batchId,
        leaseToken=context.lease_token,
        config=context.config,
        environment=context.environment,
        runnerImageId=context.runner_image_id,
        verifierImageId=context.verifier_image_id,
        gatewayImageId=context.gateway_image_id,
        tokenBudget=None if budget is None else budget // nodes,
        archives=context.archives,
        archiveFiles=archives,
        archivesDigest=context.archives_digest,
        consumerLockDigest=context.lock_digest,
        consumerCacheEntry=context.consumer_cache_entry,
        apiCatalogDigest=context.catalog_digest,
        suiteDigest=project.suite_digest(),
        evaluatorDigest=evaluator_digest(),
        projectFiles=files,
        receipt=context.receipt,
        remainingS=context.config.batchTimeoutMs / 1000,
    )


class _RayExecutor:
    """Hands each run to a node with a free slot and waits for it on a driver thread."""

    def __init__(
        self,
        ray: Any,
        nodes: list[_Node],
        schedule: Schedule,
        context: RemoteContext,
        head_lost: Callable[[], str | None],
        *,
        head_grace_s: float = HEAD_GRACE_S,
    ) -> None:
        self._ray = ray
        self._head_lost = head_lost
        self._head_grace_s = head_grace_s
        self._nodes = nodes
        self._schedule = schedule
        self._progress: Callable[[ProgressEvent], None] = context.progress
        self._lock = threading.Lock()
        self._tokens = 0
        self._rule_stop: str | None = None
        self._halted = False
        self._pool = ThreadPoolExecutor(
            max_workers=sum(n.slots for n in nodes), thread_name_prefix="node-run"
        )

    def slots(self) -> int:
        with self._lock:
            return sum(n.slots for n in self._nodes if n.lost is None)

    def submit(self, run_id: str) -> Future[RunRecord]:
        with self._lock:
            free = [n for n in self._nodes if n.lost is None and n.busy < n.slots]
            if not free:
                raise RuntimeError("a run was submitted with no free slot on any node")
            node = min(free, key=lambda n: n.busy / n.slots)
            node.busy += 1
        remaining = max(0.0, self._schedule.deadline - self._schedule.monotonic())
        call = node.actor.run.remote(run_id, remaining)
        self._progress(ProgressEvent(f"{run_id}: started on node {node.name}", run_id, "running"))
        return self._pool.submit(self._arrival, node, run_id, call)

    def _arrival(self, node: _Node, run_id: str, call: Any) -> RunRecord:
        exceptions = self._ray.exceptions
        answer = call.future()  # waited for here, never through the cluster's services
        try:
            while True:
                try:
                    kind, payload = answer.result(timeout=HEAD_POLL_S)
                    break
                except FutureTimeout:
                    if (gone := self._head_lost()) is not None:
                        return self._lost_on(
                            node, run_id, gone,
                            f"{gone} during this run; node {node.name} stops its attempts "
                            "and removes their containers itself",
                        )  # fmt: skip
        except (exceptions.RayActorError, exceptions.NodeDiedError) as exc:
            return self._lost_on(
                node, run_id, _said(exc),
                f"node {node.name} was lost during this run ({_said(exc)}); the attempts it "
                "ran there are lost with it",
            )  # fmt: skip
        except Exception as exc:  # the node's harness failed: stop, as on one machine
            if self._schedule.stop.is_set():
                # The stop removed what the run was using: the batch's doing, as on one
                # machine, never a node's failure.
                reason = self._schedule.stop_reason or "the batch stopped"
                return _on_node(self._schedule.unfinished(run_id, reason), node.name)
            failed = self._schedule.failed(run_id, f"node {node.name} failed: {_said(exc)}")
            return _on_node(failed, node.name)
        finally:
            with self._lock:
                node.busy -= 1
        if kind != "ok":
            return _on_node(self._schedule.failed(run_id, payload), node.name)
        try:
            result = NodeRunResult.model_validate_json(payload)
        except ValueError as exc:
            return _on_node(self._schedule.failed(run_id, f"node {node.name}: {exc}"), node.name)
        if result.headLost is not None and (gone := self._agreed_head_lost()) is None:
            # The node lost its way to the head while this driver still reaches it: the
            # node is lost, and so is what it ran of this run (its files are not taken).
            return self._lost_on(
                node, run_id, result.headLost,
                f"node {node.name} stopped this run itself: {result.headLost}, while the "
                "driver still reached the head; the attempts it ran there are lost with it",
            )  # fmt: skip
        if result.headLost is not None:
            # Both found the head gone: the node's record stands (its attempts cut short by
            # its own stop), booked after the head's loss has stopped the batch.
            with self._lock:
                node.lost = node.lost or gone
        try:
            record = accept_run(result, run_id, self._schedule.plan.batch_dir)
        except (AgentEvalError, ValueError) as exc:
            return _on_node(self._schedule.failed(run_id, f"node {node.name}: {exc}"), node.name)
        with self._lock:
            self._tokens += sum(
                a.gateway.inputTokens + a.gateway.outputTokens
                for a in record.attempts
                if a.gateway is not None
            )
            if result.ruleStop is not None and self._rule_stop is None:
                self._rule_stop = f"on node {result.node}: {result.ruleStop}"
        if self.rule_stop() is not None:
            self._halt()
        return record

    def _lost_on(self, node: _Node, run_id: str, why: str, diagnostic: str) -> RunRecord:
        """*node* is lost (*why*, the first reason kept), and with it the run it held: the
        infrastructure's, named on the node, never the agent's."""
        with self._lock:
            node.lost = node.lost or why
        lost = self._schedule.failed(run_id, diagnostic, node_lost=True)
        return _on_node(lost, node.name)

    def _agreed_head_lost(self) -> str | None:
        """The driver's own verdict on the head, once a node found it gone: waited for as
        long as the driver's own watch can take to agree (both watch the same head with
        the same grace; only the moment each started differs). Until it is given, the
        node's run is not handed back, so the batch stops for the head before it books
        a run the head's loss cut short."""
        ends = time.monotonic() + self._head_grace_s + 3 * HEAD_POLL_S
        while (gone := self._head_lost()) is None and time.monotonic() < ends:
            time.sleep(HEAD_POLL_S / 5)
        return gone

    def lost(self) -> str | None:
        return self._head_lost()

    def _halt(self) -> None:
        """As on one machine: after a rule stop no node starts another attempt (once)."""
        with self._lock:
            if self._halted:
                return
            self._halted = True
        for node in self._nodes:
            if node.lost is None:
                node.actor.halt.remote()

    def rule_stop(self) -> str | None:
        """A node's rule stop, or the batch's whole token budget spent across the nodes."""
        budget = self._schedule.plan.token_budget
        with self._lock:
            if self._rule_stop is None and budget is not None and self._tokens >= budget:
                self._rule_stop = (
                    f"the batch's token budget of {budget} is spent ({self._tokens} used "
                    "across the nodes)"
                )
            return self._rule_stop

    def stop_everything(self, reason: str) -> list[str]:
        self._schedule.stop_now(reason)
        if self._head_lost() is not None:
            return []  # nothing answers; closing the cluster says what each node does
        calls = [(n, n.actor.stop.remote(reason)) for n in self._nodes if n.lost is None]
        problems: list[str] = []
        for node, call in calls:
            try:
                problems += self._ray.get(call, timeout=CALL_TIMEOUT_S)
            except Exception as exc:
                problems.append(f"stopping the runs on node {node.name}: {_said(exc)}")
        return problems

    def unfinished(self, run_id: str, reason: str) -> RunRecord:
        return self._schedule.unfinished(run_id, reason)

    def shutdown(self, *, wait: bool) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def settle(self, runs: Collection[Future[RunRecord]], timeout_s: float) -> bool:
        """At once: the runs' work directories and containers are the nodes', and each node
        removes its own when the placement closes."""
        return True
