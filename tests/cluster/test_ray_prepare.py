"""How the driver takes its nodes' answers, with Ray replaced by a fake (the real cluster is
in test_ray_cluster_docker.py): before the first run every node must be ready, each under a
name of its own, and what their reapers did reaches the operator; afterwards a rule stop
on one node, or the whole token budget spent across them, stops the batch and halts every
node."""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agent_eval.batch.ports import RemoteContext
from agent_eval.batch.schedule import Schedule
from agent_eval.cluster import ray_cluster
from agent_eval.cluster.node import NodeParts
from agent_eval.cluster.ray_cluster import RayCluster, _Node, _RayExecutor
from agent_eval.digests import sha256_bytes
from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import read_model
from agent_eval.models import (
    GatewayUse,
    NodeAssignment,
    NodeIdentity,
    NodeReady,
    NodeRunResult,
    Receipt,
    RunnerConfig,
    ShippedFile,
)
from agent_eval.project import evaluator_digest, find_project
from tests.batch.test_schedule import FakeVerifier, plan
from tests.cluster.test_arrival import node_result
from tests.paths import REPO, SHIPPED

DIGEST = sha256_bytes(b"x")


@dataclass
class Ref:
    value: Any

    def future(self) -> Future[Any]:
        answered: Future[Any] = Future()
        answered.set_result(self.value)
        return answered


class DeadRef(Ref):
    """The answer of an actor whose node died."""

    def future(self) -> Future[Any]:
        answered: Future[Any] = Future()
        answered.set_exception(FakeRay.exceptions.NodeDiedError("the node died"))
        return answered


class SilentRef(Ref):
    """The answer of a run on a cluster whose head is gone: none ever comes."""

    def future(self) -> Future[Any]:
        return Future()


class Call:
    def __init__(self, answer: tuple[str, str]) -> None:
        self.answer = answer

    def remote(self, *args: Any) -> Ref:
        return Ref(self.answer)


class Actor:
    def __init__(self, answer: tuple[str, str]) -> None:
        self.prepare = Call(answer)


class FakeRay:
    class exceptions:
        class RayActorError(Exception):
            pass

        class NodeDiedError(Exception):
            pass

    def put(self, value: Any) -> Ref:
        return Ref(value)

    def get(self, ref: Ref, timeout: float | None = None) -> Any:
        return ref.value


def ready(name: str, notices: tuple[str, ...] = (), harness: str | None = None) -> tuple[str, str]:
    answer = NodeReady(
        node=name, engine="unix:///e.sock", slots=1, evaluatorDigest=harness or evaluator_digest(),
        runnerImageId=DIGEST, verifierImageId=DIGEST, gatewayImageId=None, notices=list(notices),
    )  # fmt: skip
    return "ok", answer.model_dump_json()


def prepared(
    monkeypatch: pytest.MonkeyPatch,
    answers: list[tuple[str, str]],
    budget: int | None = None,
    nodes: list[NodeIdentity] | None = None,
) -> tuple[RayCluster, list[str]]:
    monkeypatch.setattr(ray_cluster, "_ray", FakeRay)
    # The nodes' answers are scripted: nothing is composed on them here.
    unused = NodeParts(lambda _path: FakeEngine(), lambda _project: lambda _context: FakeVerifier())
    cluster = RayCluster("127.0.0.1:6379", unused)
    cluster._connected = True
    cluster._nodes = [_Node(Actor(a), f"id-{i}", 1) for i, a in enumerate(answers)]
    notices: list[str] = []
    config = read_model(SHIPPED / "examples/runners/codex.json", RunnerConfig, what="config")
    if budget is not None:
        options = config.gateway.model_copy(update={"tokenBudget": budget})
        config = config.model_copy(update={"gateway": options})
    context = remote_context(config, notices)
    if nodes is not None:
        context = dataclasses.replace(context, nodes=nodes.extend)
    cluster.prepare(context)
    return cluster, notices


def remote_context(config: RunnerConfig, notices: list[str]) -> RemoteContext:
    """A driver's context for this checkout's suite, every identity of it ``DIGEST``."""
    return RemoteContext(
        project=find_project(REPO), config=config, environment={},
        runner_image_id=DIGEST, verifier_image_id=DIGEST, gateway_image_id=None,
        archives_dir=REPO, archives=[],
        archives_digest=DIGEST, lock_digest=DIGEST, consumer_cache_entry=None,
        catalog_digest=DIGEST,
        receipt=Receipt.opened(batch_id="b", created_at=datetime.now(UTC)),
        notice=notices.append, progress=lambda _event: None,
    )  # fmt: skip


def test_ready_nodes_are_named_and_their_reapers_are_heard(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, notices = prepared(
        monkeypatch, [ready("n-1", ("reaped batch old: removed 1 container(s)",)), ready("n-2")]
    )
    assert [n.name for n in cluster._nodes] == ["n-1", "n-2"]
    assert notices == ["node n-1: reaped batch old: removed 1 container(s)"]


def test_each_node_is_sent_its_share_of_the_token_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[NodeAssignment] = []
    monkeypatch.setattr(FakeRay, "put", lambda self, value: sent.append(
        NodeAssignment.model_validate_json(value)) or Ref(value))  # fmt: skip
    prepared(monkeypatch, [ready("n-1"), ready("n-2"), ready("n-3")], budget=100)
    assert [a.tokenBudget for a in sent] == [33]
    with pytest.raises(ConfigError, match="tokenBudget 2 cannot be shared among 3 nodes"):
        prepared(monkeypatch, [ready("n-1"), ready("n-2"), ready("n-3")], budget=2)


def test_each_node_is_sent_the_drivers_harness_digest_and_recorded_as_it_proved_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[NodeAssignment] = []
    monkeypatch.setattr(FakeRay, "put", lambda self, value: sent.append(
        NodeAssignment.model_validate_json(value)) or Ref(value))  # fmt: skip
    heard: list[NodeIdentity] = []
    prepared(monkeypatch, [ready("n-2"), ready("n-1")], nodes=heard)
    assert [a.evaluatorDigest for a in sent] == [evaluator_digest()]
    assert [(n.node, n.engine, n.evaluatorDigest, n.runnerImageId) for n in heard] == [
        (name, "unix:///e.sock", evaluator_digest(), DIGEST) for name in ("n-1", "n-2")
    ]


def test_a_node_that_answers_ready_with_another_harness_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A node of another harness may not run the node's own check at all.
    heard: list[NodeIdentity] = []
    with pytest.raises(ConfigError, match=f"node n-2 runs harness code with digest {DIGEST}"):
        prepared(monkeypatch, [ready("n-1"), ready("n-2", harness=DIGEST)], nodes=heard)
    assert heard == []


def test_two_nodes_under_one_name_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="2 nodes call themselves n-1"):
        prepared(monkeypatch, [ready("n-1"), ready("n-1")])


def test_one_node_that_refuses_refuses_the_batch_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusal = ("error", "node n-2: runnerImage r is sha256:aa on node n-2 but sha256:bb")
    with pytest.raises(ConfigError, match="on node n-2 but"):
        prepared(monkeypatch, [ready("n-1"), refusal])


class RunActor:
    """A node's actor that answers every run with *result* and counts its halts."""

    def __init__(self, result: NodeRunResult) -> None:
        self.halts = 0
        outer = self

        class Run:
            def remote(self, run_id: str, remaining: float) -> Ref:
                return Ref(("ok", result.model_dump_json()))

        class Halt:
            def remote(self) -> Ref:
                outer.halts += 1
                return Ref(None)

        self.run, self.halt = Run(), Halt()


def driver_side(tmp_path: Path, **plan_changes: Any) -> tuple[Schedule, RemoteContext]:
    """The driver's schedule of a batch in *tmp_path*/driver, and a context that only listens."""
    (tmp_path / "driver").mkdir()
    driver_plan = plan(tmp_path / "driver", **plan_changes)
    schedule = Schedule(
        driver_plan, clock=lambda: driver_plan.receipt.createdAt, monotonic=lambda: 0.0,
        deadline=3600.0,
    )  # fmt: skip
    return schedule, cast(RemoteContext, SimpleNamespace(progress=lambda _event: None))


def executor_with(tmp_path: Path, result: NodeRunResult, **plan_changes: Any) -> tuple[Any, Any]:
    schedule, context = driver_side(tmp_path, **plan_changes)
    actors = [RunActor(result), RunActor(result)]
    nodes = [_Node(a, f"n-{i}", 1) for i, a in enumerate(actors, 1)]
    return _RayExecutor(FakeRay(), nodes, schedule, context, lambda: None), actors


def test_a_rule_stop_on_one_node_stops_the_batch_and_halts_every_node(tmp_path: Path) -> None:
    result = node_result(tmp_path).model_copy(update={"ruleStop": "identity mismatch: m"})
    executor, actors = executor_with(tmp_path, result)
    record = executor.submit("forms-1").result()
    assert [a.node for a in record.attempts] == ["node-1"]
    assert executor.rule_stop() == "on node node-1: identity mismatch: m"
    assert [a.halts for a in actors] == [1, 1]
    executor.submit("forms-1").result()  # a run in flight comes back: nodes are halted once
    assert [a.halts for a in actors] == [1, 1]
    executor.shutdown(wait=True)


class LostActor:
    """A node's actor whose node dies during the run."""

    def __init__(self) -> None:
        class Run:
            def remote(self, run_id: str, remaining: float) -> Ref:
                return DeadRef(None)

        self.run = Run()


@pytest.mark.parametrize("answer", ["lost", "refused"])
def test_a_run_that_came_back_as_nothing_names_the_node_it_was_handed_to(
    tmp_path: Path, answer: str
) -> None:
    schedule, context = driver_side(tmp_path)
    if answer == "lost":
        actor: Any = LostActor()
    else:
        actor = RunActor(node_result(tmp_path))
        actor.run.remote = lambda run_id, remaining: Ref(("error", "node n-1: broken"))
    executor = _RayExecutor(FakeRay(), [_Node(actor, "n-1", 1)], schedule, context, lambda: None)
    record = executor.submit("forms-1").result()
    executor.shutdown(wait=True)
    assert [(a.infrastructureStatus, a.node) for a in record.attempts] == [("failed", "n-1")]


def test_a_run_in_flight_when_the_head_goes_comes_back_as_the_nodes_loss(tmp_path: Path) -> None:
    """No answer comes through a cluster whose head is gone: the run is the infrastructure's,
    on the node it was handed to, as soon as the head is known gone."""
    schedule, context = driver_side(tmp_path)
    actor = RunActor(node_result(tmp_path))
    actor.run.remote = lambda run_id, remaining: SilentRef(None)
    gone: list[str] = []
    executor = _RayExecutor(
        FakeRay(), [_Node(actor, "n-1", 1)], schedule, context, lambda: gone[0] if gone else None
    )
    running = executor.submit("forms-1")
    time.sleep(1.5)
    assert not running.done() and executor.lost() is None
    gone.append("the Ray cluster's head at 127.0.0.1:1 has not answered for 15 s")
    record = running.result(timeout=10)
    executor.shutdown(wait=True)
    (attempt,) = record.attempts
    assert (attempt.infrastructureKind, attempt.node) == ("node", "n-1")
    assert attempt.diagnostics[0].message.startswith(gone[0] + " during this run; node n-1 stops")
    assert executor.lost() == gone[0] and executor.slots() == 0


HEAD_GONE = "the Ray cluster's head at 127.0.0.1:1 has not answered for 15 s"


def test_a_run_a_node_stopped_for_its_head_waits_for_the_drivers_own_verdict(
    tmp_path: Path,
) -> None:
    """The node may find the head gone a moment before the driver does: its run is not
    handed back until the driver agrees, so the batch stops for the head first and the
    node's own record (its attempts, named on the node) is kept as it is."""
    schedule, context = driver_side(tmp_path)
    result = node_result(tmp_path).model_copy(
        update={"headLost": "the cluster's head has not answered for 15 s"}
    )
    gone: list[str] = []
    executor = _RayExecutor(
        FakeRay(), [_Node(RunActor(result), "n-1", 1)], schedule, context,
        lambda: gone[0] if gone else None, head_grace_s=5.0,
    )  # fmt: skip
    running = executor.submit("forms-1")
    time.sleep(1.0)
    assert not running.done(), "handed back before the driver found the head gone"
    gone.append(HEAD_GONE)
    record = running.result(timeout=10)
    executor.shutdown(wait=True)
    assert [a.node for a in record.attempts] == ["node-1"] and record.attempts[0].success
    assert executor.lost() == HEAD_GONE and executor.slots() == 0
    assert (schedule.plan.batch_dir / "runs" / "forms-1" / "attempt-1" / "solution").is_dir()


def test_a_node_that_lost_a_head_the_driver_still_reaches_is_lost_with_its_run(
    tmp_path: Path,
) -> None:
    schedule, context = driver_side(tmp_path)
    result = node_result(tmp_path).model_copy(
        update={"headLost": "the cluster's head has not answered for 15 s"}
    )
    executor = _RayExecutor(
        FakeRay(), [_Node(RunActor(result), "n-1", 1)], schedule, context, lambda: None,
        head_grace_s=0.1,
    )  # fmt: skip
    record = executor.submit("forms-1").result(timeout=10)
    executor.shutdown(wait=True)
    (attempt,) = record.attempts
    assert (attempt.infrastructureKind, attempt.node) == ("node", "n-1")
    message = attempt.diagnostics[0].message
    assert message.startswith("node n-1 stopped this run itself: the cluster's head has not")
    assert "while the driver still reached the head" in message
    assert executor.lost() is None and executor.slots() == 0
    # Its files were not taken: the run directory holds only what the driver recorded.
    assert not (schedule.plan.batch_dir / "runs" / "forms-1" / "attempt-1" / "solution").exists()


def test_a_driver_whose_head_is_gone_asks_nothing_of_the_cluster_when_it_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_ray() -> Any:
        raise AssertionError("the cluster was asked")

    monkeypatch.setattr(ray_cluster, "_ray", no_ray)
    unused = NodeParts(lambda _path: FakeEngine(), lambda _project: lambda _context: FakeVerifier())
    cluster = RayCluster("127.0.0.1:6379", unused)
    cluster._connected = True
    cluster._head_lost = "the Ray cluster's head at 127.0.0.1:6379 has not answered for 15 s"
    (said,) = cluster.close()
    assert said.startswith(cluster._head_lost + ": each node stops this batch's attempts")


def test_the_tokens_recorded_across_nodes_are_held_to_the_whole_budget(tmp_path: Path) -> None:
    result = node_result(tmp_path)
    (attempt,) = result.record.attempts
    use = GatewayUse(
        requests=2, answered=2, servedModels=["m"], inputTokens=60, outputTokens=10,
        failures=[], recordDigest=DIGEST,
    )  # fmt: skip
    spent = attempt.model_copy(update={"gateway": use})
    records = {"attempt-1/gateway.jsonl": b"x"}
    files = [*result.files, *(ShippedFile(path=p, data=d) for p, d in records.items())]
    use = use.model_copy(update={"recordDigest": sha256_bytes(b"x")})
    spent = spent.model_copy(update={"gateway": use})
    result = result.model_copy(
        update={"record": result.record.model_copy(update={"attempts": [spent]}), "files": files}
    )
    executor, actors = executor_with(tmp_path, result, token_budget=100)
    executor.submit("forms-1").result()
    assert executor.rule_stop() is None and [a.halts for a in actors] == [0, 0]
    executor.submit("forms-1").result()
    assert executor.rule_stop() == (
        "the batch's token budget of 100 is spent (140 used across the nodes)"
    )
    assert [a.halts for a in actors] == [1, 1]
    executor.shutdown(wait=True)
