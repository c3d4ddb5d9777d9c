"""A node whose cluster head is gone stops its attempts and removes the batch's containers
itself, before the cluster ends its processes.

Before, killing the head left a node's runner and verifier running
unsupervised until the node's next batch. Here the head of a one-node
cluster is killed while the node runs a runner container; within the node's
grace (15 s) and well before Ray ends the node's processes, no container of
the batch is left on the node's engine.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from agent_eval.engine import ContainerEngine
from agent_eval.engine.policy import LABEL_BATCH
from agent_eval.images.build import image_for_checkout
from tests.batches import project_copy, write_config
from tests.cluster.ray_nodes import ray_cluster, stop_session
from tests.cluster.test_ray_cluster_docker import ClusterBatch, _runner_running_on
from tests.faults.engines import containers_of
from tests.faults.test_faults_docker import slow_oracle
from tests.paths import REPO

# On workers, the cluster modules run one after another (tests/conftest.py).
pytestmark = pytest.mark.docker


def test_a_node_whose_head_is_gone_removes_the_batchs_containers_itself(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    images = [image_for_checkout(engine, REPO, name) for name in ("reference-runner", "verifier")]
    with ray_cluster(images, workers=1) as cluster:
        (worker,) = cluster.workers
        config = write_config(engine, tmp_path / "runner.json", "oracle", args=slow_oracle(120))
        batch = ClusterBatch(cluster, project_copy(tmp_path), config)
        deadline = time.monotonic() + 600
        while not _runner_running_on(worker, batch):
            assert batch.process.poll() is None, batch.process.communicate()
            assert time.monotonic() < deadline, "the node never ran a runner"
            time.sleep(0.2)
        batch_id = batch.run_dirs()[0].name
        assert cluster.head is not None
        stop_session(cluster.head.pid, timeout_s=0, sig=signal.SIGKILL)
        killed = time.monotonic()
        while containers_of(worker.socket, f"{LABEL_BATCH}={batch_id}"):
            assert time.monotonic() - killed < 50, "the node left the batch's containers"
            time.sleep(0.5)
        # The driver closes its receipt itself, before the cluster ends it (about a minute).
        code, line = batch.finish(timeout_s=120)
        closed_after = time.monotonic() - killed
    assert (code, line["status"]) == (1, "infrastructure-failure"), (line, batch.stderr)
    assert closed_after < 55, closed_after
    receipt = batch.receipt()
    assert receipt.status == "infrastructure-failure"
    assert receipt.reasons[0].startswith("the Ray cluster's head at "), receipt.reasons
    assert receipt.reasons[0].endswith("has not answered for 15 s; the batch stopped")
    # The run in flight is the infrastructure's, on the node it ran on; never the agent's.
    held = [
        r for r in receipt.runs if r.attempts and r.attempts[-1].infrastructureStatus == "failed"
    ]
    assert held, receipt.runs
    assert all(r.attempts[-1].node == worker.name for r in held), held
    assert any("each node stops this batch's attempts" in r for r in receipt.reasons)
