"""A node's side of a batch is made from the parts it is given, and checked before it makes any.

Invariants, on the in-memory engine: a node whose runner image is not the
driver's refuses, naming both ids, before its verifier is made or any
container runs; its close leaves neither a lease, a container nor a work
directory, and never closes the engine it was given.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_eval.cluster.node import NodeParts, NodeWorker
from agent_eval.cluster.ray_cluster import assignment_for
from agent_eval.digests import sha256_bytes
from agent_eval.engine import ContainerSpec
from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import read_model
from agent_eval.models import RunnerConfig
from agent_eval.project import Project, evaluator_digest
from agent_eval.verification.protocol import VerifierContext, VerifierFactory
from tests.cluster.test_ray_prepare import DIGEST, remote_context
from tests.paths import SHIPPED


def test_a_node_whose_harness_is_not_the_drivers_refuses_before_touching_its_engine(
    tmp_path: Path,
) -> None:
    config = read_model(SHIPPED / "examples/runners/codex.json", RunnerConfig, what="config")
    connected: list[str | None] = []

    def connect(path: str | None) -> FakeEngine:
        connected.append(path)
        return FakeEngine()

    def verifiers(project: Project) -> VerifierFactory[VerifierContext]:
        raise AssertionError("nothing is made on a node of another harness")

    other = sha256_bytes(b"another checkout")
    worker = NodeWorker(
        "node-h", tmp_path / "node", 1, NodeParts(connect, verifiers), harness=lambda: other
    )
    assignment = assignment_for(remote_context(config, []))
    assert assignment.evaluatorDigest == evaluator_digest()
    with pytest.raises(
        ConfigError,
        match=f"node node-h runs harness code with digest {other}, not the driver's "
        f"{evaluator_digest()}",
    ):
        worker.prepare(assignment)
    assert connected == []
    assert worker.close() == []
    assert not (tmp_path / "node").exists()


@pytest.mark.parametrize("advertised", ["10.200.1.2", None])
def test_a_node_advertised_at_another_address_than_its_own_refuses_before_its_engine(
    tmp_path: Path, advertised: str | None
) -> None:
    config = read_model(SHIPPED / "examples/runners/codex.json", RunnerConfig, what="config")

    def connect(path: str | None) -> FakeEngine:
        raise AssertionError("a node at the wrong address touches nothing")

    worker = NodeWorker(
        "node-a", tmp_path / "node", 1, NodeParts(connect, lambda _project: lambda _c: None),
        address=advertised, expected_address="127.0.0.1",
    )  # fmt: skip
    shown = advertised or "an unknown address"
    with pytest.raises(
        ConfigError,
        match=f"node node-a is advertised at {shown}, not its own 127.0.0.1: start it with "
        "--node-ip-address=127.0.0.1",
    ):
        worker.prepare(assignment_for(remote_context(config, [])))
    assert worker.close() == []


def test_a_node_whose_runner_image_is_not_the_drivers_refuses_before_making_its_verifier(
    tmp_path: Path,
) -> None:
    config = read_model(SHIPPED / "examples/runners/codex.json", RunnerConfig, what="config")
    engine = FakeEngine()
    found = engine.add_image(image_id=config.runnerImage)
    made: list[Project] = []

    def verifiers(project: Project) -> VerifierFactory[VerifierContext]:
        made.append(project)
        raise AssertionError("the verifier is made only once the node matches the driver")

    worker = NodeWorker("node-f", tmp_path / "node", 1, NodeParts(lambda _path: engine, verifiers))
    with pytest.raises(ConfigError, match=f"runnerImage .* is {found} on node node-f but {DIGEST}"):
        worker.prepare(assignment_for(remote_context(config, [])))
    assert made == [] and engine.containers == {}
    assert worker.close() == []
    assert not engine.closed
    assert [p.name for p in (tmp_path / "node").iterdir() if p.name != ".work"] == []


def test_a_node_whose_head_stops_answering_removes_the_batchs_containers_after_its_grace(
    tmp_path: Path,
) -> None:
    engine = FakeEngine()
    image = engine.add_image(tags=("runner:test",))
    spec = ContainerSpec(
        image=image, command=("sleep", "1000"), role="runner", batch_id="b-1", run_id="forms-1"
    )
    kept = ContainerSpec(
        image=image, command=("sleep", "1000"), role="runner", batch_id="b-2", run_id="forms-1"
    )
    engine.leave_container(spec)
    other = engine.leave_container(kept)
    answers = iter([True, False, True, False, False, False, False])
    worker = NodeWorker(
        "node-w", tmp_path / "node", 1, NodeParts(lambda _p: engine, lambda _p: lambda _c: None),
        head_alive=lambda: next(answers, False), head_grace_s=0.0,
    )  # fmt: skip
    worker._engine, worker._batch_id = engine, "b-1"
    worker._watch_head()
    assert worker.head_lost == "the cluster's head has not answered for 0 s"
    assert [c.removed for c in engine.containers.values()] == [True, False]
    assert not engine.containers[other].removed


def test_a_node_removes_only_the_containers_that_carry_its_batchs_lease_token(
    tmp_path: Path,
) -> None:
    """A batch label is a name another process may give its containers: a node removes
    those of its batch that also carry its lease's token, on close as after its head."""
    engine = FakeEngine()
    image = engine.add_image(tags=("runner:test",))
    spec = ContainerSpec(
        image=image, command=("sleep", "1000"), role="runner", batch_id="b-1", run_id="forms-1"
    )
    engine.lease_token = "another process's token"
    planted = engine.leave_container(spec)
    engine.lease_token = "the batch's token"
    own = engine.leave_container(spec)
    worker = NodeWorker(
        "node-t", tmp_path / "node", 1, NodeParts(lambda _p: engine, lambda _p: lambda _c: None)
    )
    worker._engine, worker._batch_id = engine, "b-1"
    worker._lease = SimpleNamespace(token="the batch's token")  # type: ignore[assignment]
    assert worker._remove_containers() == []
    assert engine.containers[own].removed and not engine.containers[planted].removed


def test_a_closed_node_stops_watching_its_head(tmp_path: Path) -> None:
    asked: list[bool] = []
    worker = NodeWorker(
        "node-c", tmp_path / "node", 1, NodeParts(FakeEngine, lambda _p: lambda _c: None),
        head_alive=lambda: asked.append(True) or False,
    )  # fmt: skip
    worker.close()
    worker._watch_head()
    assert asked == [] and worker.head_lost is None


def test_a_nodes_close_removes_nothing_behind_a_work_root_planted_as_a_link(
    tmp_path: Path,
) -> None:
    engine = FakeEngine()
    root = tmp_path / "node"
    root.mkdir()
    outside = tmp_path / "outside"
    (outside / "b-1" / "keep").mkdir(parents=True)
    (root / ".work").symlink_to(outside, target_is_directory=True)

    def verifiers(project: Project) -> VerifierFactory[VerifierContext]:
        raise AssertionError("closing makes no verifier")

    worker = NodeWorker("node-l", root, 1, NodeParts(lambda _p: engine, verifiers))
    worker._engine, worker._batch_id = engine, "b-1"
    [problem] = worker.close()
    assert f"{root / '.work'} is a symbolic link" in problem
    assert (outside / "b-1" / "keep").is_dir()
