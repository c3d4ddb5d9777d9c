"""A node takes no run until it has proved it holds what the driver holds.

The node's side (``NodeWorker``) on the real engine, without Ray: given the
driver's assignment with one identity changed (an image id, the suite's
digest, the consumer lock's digest), it refuses before its first run, naming
what differs and both values, and its close leaves neither a container, a
work directory nor a lease behind.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_eval.batch.ports import RemoteContext
from agent_eval.cluster.node import NodeParts, NodeWorker
from agent_eval.cluster.ray_cluster import assignment_for
from agent_eval.digests import sha256_bytes
from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import read_model
from agent_eval.models import NodeAssignment, Receipt, RunnerConfig
from agent_eval.packing import build_archives
from agent_eval.project import find_project
from agent_eval.verification.container.verifier import batch_verifier_factory
from tests.batches import project_copy, write_config

# On workers, the cluster modules run one after another (tests/conftest.py).
pytestmark = pytest.mark.docker

OTHER = sha256_bytes(b"another")


@pytest.fixture(scope="module")
def assignment(engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory) -> NodeAssignment:
    where = tmp_path_factory.mktemp("driver")
    project = find_project(project_copy(where))
    config = read_model(
        write_config(engine, where / "runner.json", "oracle"), RunnerConfig, what="config"
    )
    archives_dir = where / "archives"
    context = RemoteContext(
        project=project,
        config=config,
        environment={},
        runner_image_id=engine.resolve_image(config.runnerImage).image_id,
        verifier_image_id=engine.resolve_image(config.verifierImage).image_id,
        gateway_image_id=None,
        archives_dir=archives_dir,
        archives=build_archives(project.packages, archives_dir),
        archives_digest=sha256_bytes(b"archives.json"),
        lock_digest=OTHER,  # what the node's consumer lock cannot have
        consumer_cache_entry=None,
        catalog_digest=OTHER,
        receipt=Receipt.opened(batch_id="node-check", created_at=datetime.now(UTC)),
        notice=lambda _line: None,
        progress=lambda _event: None,
    )
    return assignment_for(context)


@pytest.mark.parametrize(
    "field, said",
    [
        ("runnerImageId", "runnerImage"),
        ("verifierImageId", "verifierImage"),
        ("suiteDigest", "the suite sent to node node-t"),
        (None, "the consumer prepared on node node-t has lock"),
    ],
)
def test_a_node_that_differs_from_the_driver_refuses_before_its_first_run(
    engine: ContainerEngine,
    assignment: NodeAssignment,
    tmp_path: Path,
    field: str | None,
    said: str,
) -> None:
    changed = assignment.model_copy(update={field: OTHER}) if field else assignment
    parts = NodeParts(connect=lambda _path: engine, verifiers=batch_verifier_factory)
    worker = NodeWorker("node-t", tmp_path / "node", 1, parts)
    with pytest.raises(ConfigError, match=said) as refused:
        worker.prepare(changed)
    assert OTHER in str(refused.value)
    if field is not None:
        assert getattr(assignment, field) in str(refused.value), "both values are named"
    assert worker.close() == []
    assert list_leftovers(engine, assignment.batchId) == []
    left = sorted(p.name for p in (tmp_path / "node").rglob("*") if p.name != ".work")
    assert left == [], left
