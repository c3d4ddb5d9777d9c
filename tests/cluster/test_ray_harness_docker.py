"""A Ray node started from another checkout is refused before its first run.

Its harness code differs from the driver's (here: one comment in one module,
the node's Python importing its own copy of ``agent_eval`` first); before the
digest check it ran the runs with its own code while the receipt named the
driver's ``evaluatorDigest``. The batch ends ``not-run`` naming the node and
both digests, and nothing ran on the node's engine.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent_eval.engine import ContainerEngine
from agent_eval.engine.policy import LABEL_BATCH
from agent_eval.project import evaluator_digest
from tests.batches import project_copy, write_config
from tests.cluster.ray_nodes import ray_cluster
from tests.cluster.test_ray_cluster_docker import ClusterBatch
from tests.faults.engines import containers_of
from tests.paths import REPO

# On workers, the cluster modules run one after another (tests/conftest.py).
pytestmark = pytest.mark.docker


def test_a_node_of_another_harness_is_refused_and_the_batch_does_not_run(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    other = tmp_path / "other-checkout"
    shutil.copytree(
        REPO / "agent_eval", other / "agent_eval", ignore=shutil.ignore_patterns("__pycache__")
    )
    changed = other / "agent_eval" / "digests.py"
    changed.write_text(changed.read_text() + "\n# another checkout's harness\n")
    with ray_cluster([], workers=1, node_env={"PYTHONPATH": str(other)}) as cluster:
        config = write_config(engine, tmp_path / "runner.json", "oracle")
        # Ray puts the driver's working directory first on its workers' path: not a checkout.
        batch = ClusterBatch(cluster, project_copy(tmp_path), config, cwd=tmp_path)
        code, line = batch.finish()
        assert (code, line["status"]) == (2, "not-run"), batch.stderr
        reasons = batch.receipt().reasons
        (reason,) = [r for r in reasons if "harness code" in r] or [reasons]
        assert reason.startswith("cluster: node worker-1: "), reasons
        assert "node worker-1 runs harness code with digest sha256:" in reason, reason
        assert f"not the driver's {evaluator_digest()}" in reason, reason
        worker = cluster.workers[0]
        assert containers_of(worker.socket, f"{LABEL_BATCH}={batch.receipt().batchId}") == []
        assert batch.receipt().runs == []
