"""How the driver takes its nodes' answers before the first run, with Ray replaced by a fake
(the real cluster is in test_ray_cluster_docker.py): every node must be ready, each under a
name of its own, and what their reapers did reaches the operator."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_eval.batch.ports import RemoteContext
from agent_eval.cluster import ray_cluster
from agent_eval.cluster.ray_cluster import RayCluster, _Node
from agent_eval.digests import sha256_bytes
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import read_model
from agent_eval.models import NodeReady, Receipt, RunnerConfig
from agent_eval.project import find_project
from tests.paths import REPO

DIGEST = sha256_bytes(b"x")


@dataclass
class Ref:
    value: Any


class Call:
    def __init__(self, answer: tuple[str, str]) -> None:
        self.answer = answer

    def remote(self, *args: Any) -> Ref:
        return Ref(self.answer)


class Actor:
    def __init__(self, answer: tuple[str, str]) -> None:
        self.prepare = Call(answer)


class FakeRay:
    def put(self, value: Any) -> Ref:
        return Ref(value)

    def get(self, ref: Ref, timeout: float | None = None) -> Any:
        return ref.value


def ready(name: str, notices: tuple[str, ...] = ()) -> tuple[str, str]:
    answer = NodeReady(node=name, engine="unix:///e.sock", slots=1, notices=list(notices))
    return "ok", answer.model_dump_json()


def prepared(
    monkeypatch: pytest.MonkeyPatch, answers: list[tuple[str, str]]
) -> tuple[RayCluster, list[str]]:
    monkeypatch.setattr(ray_cluster, "_ray", FakeRay)
    cluster = RayCluster("127.0.0.1:6379")
    cluster._connected = True
    cluster._nodes = [_Node(Actor(a), f"id-{i}", 1) for i, a in enumerate(answers)]
    notices: list[str] = []
    config = read_model(REPO / "examples/runners/codex.json", RunnerConfig, what="config")
    context = RemoteContext(
        project=find_project(REPO), config=config, environment={},
        runner_image_id=DIGEST, verifier_image_id=DIGEST, archives_dir=REPO, archives=[],
        archives_digest=DIGEST, lock_digest=DIGEST, catalog_digest=DIGEST,
        receipt=Receipt.opened(batch_id="b", created_at=datetime.now(UTC)),
        notice=notices.append, progress=lambda _event: None,
    )  # fmt: skip
    cluster.prepare(context)
    return cluster, notices


def test_ready_nodes_are_named_and_their_reapers_are_heard(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, notices = prepared(
        monkeypatch, [ready("n-1", ("reaped batch old: removed 1 container(s)",)), ready("n-2")]
    )
    assert [n.name for n in cluster._nodes] == ["n-1", "n-2"]
    assert notices == ["node n-1: reaped batch old: removed 1 container(s)"]


def test_two_nodes_under_one_name_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="2 nodes call themselves n-1"):
        prepared(monkeypatch, [ready("n-1"), ready("n-1")])


def test_one_node_that_refuses_refuses_the_batch_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusal = ("error", "node n-2: runnerImage r is sha256:aa on node n-2 but sha256:bb")
    with pytest.raises(ConfigError, match="on node n-2 but"):
        prepared(monkeypatch, [ready("n-1"), refusal])
