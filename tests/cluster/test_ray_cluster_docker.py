"""Whole batches on a Ray cluster of this machine: a head and two workers, one engine each.

Everything runs inside a network namespace with only a loopback interface
(tests/cluster/ray_nodes.py), the driver included: eval-agent joins the
cluster with its token, hands runs to the nodes' actors, and writes every
piece of evidence itself. The oracle batch runs on both workers and verifies
like one run on one machine; a worker killed mid-batch costs only the run it
held, its containers are reaped when it takes work again, and nothing is
left on any engine.
"""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.engine.policy import LABEL_BATCH, LABEL_ROLE
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.images.build import build_runner_image, image_for_checkout
from agent_eval.models import Receipt, RunnerConfig
from agent_eval.project import find_project
from agent_eval.trial.run import KEY_ENV, aimed_at_scripted_model, scripted_answers
from tests.batches import BIN, check, project_copy, write_config
from tests.cluster.ray_nodes import NODE_IP, RayCluster, Worker, ray_cluster, session_members
from tests.faults.engines import containers_of
from tests.faults.test_faults_docker import OUTCOME_RULES, slow_oracle
from tests.paths import REPO, SHIPPED

# On workers, the cluster modules run one after another (tests/conftest.py).
pytestmark = pytest.mark.docker


MODEL_KEY = f"trial-{secrets.token_hex(16)}"
"""The scripted model's credential: in each worker's environment, never the driver's."""
IMAGES = ("reference-runner", "verifier", "gateway")
"""Built by the set-up; the agent's runner image is built here when missing (on a fresh
engine no other test may have built it yet)."""


@pytest.fixture(scope="module")
def cluster(engine: ContainerEngine) -> Iterator[RayCluster]:
    images = [image_for_checkout(engine, REPO, name) for name in IMAGES]
    images.append(build_runner_image(engine, REPO, "claude-code"))
    with ray_cluster(images, workers=2, slots=1, node_env={KEY_ENV: MODEL_KEY}) as started:
        yield started
    # Every process the cluster started is gone with it (stopped by session, not by name).
    leaders = [started.head, *(w.process for w in started.workers)]
    assert all(session_members(p.pid) == [] for p in leaders if p is not None)


class ClusterBatch:
    """One eval-agent on the cluster, run in its namespace with its token."""

    def __init__(
        self,
        cluster: RayCluster,
        project: Path,
        config: Path,
        *extra: str,
        address: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.project = project
        self.process = subprocess.Popen(
            cluster.in_netns(
                *(str(BIN / "eval-agent"), "--runner-config", str(config)),
                *("--project", str(project), "--executor", "ray"),
                *("--ray-address", address or cluster.address, "--ray-node-ip", NODE_IP),
                *("--progress", "lines", *extra),
            ),
            env=env or cluster.env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr = ""

    def run_dirs(self) -> list[Path]:
        return sorted(p for p in (self.project / "evidence").glob("*") if p.name[0] != ".")

    def receipt(self) -> Receipt:
        (run_dir,) = self.run_dirs()
        return Receipt.model_validate_json((run_dir / "receipt.json").read_bytes())

    def runs_recorded(self) -> int:
        try:
            (run_dir,) = self.run_dirs()
            return len(json.loads((run_dir / "receipt.json").read_text())["runs"])
        except (OSError, ValueError):
            return 0

    def finish(self, timeout_s: float = 900) -> tuple[int, dict[str, Any]]:
        try:
            out, self.stderr = self.process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            out, self.stderr = self.process.communicate(timeout=180)
            raise AssertionError(f"the batch did not finish: {self.stderr[-3000:]}") from None
        assert "Traceback" not in self.stderr, self.stderr
        assert out.count("\n") == 1, (out, self.stderr)
        return self.process.returncode, json.loads(out)


def nothing_left(engine: ContainerEngine, cluster: RayCluster, batch_id: str) -> None:
    assert list_leftovers(engine, batch_id) == []
    for worker in cluster.workers:
        assert containers_of(worker.socket, f"{LABEL_BATCH}={batch_id}") == [], worker.name
        left = [p.name for p in worker.root.glob("*")] if worker.root.exists() else []
        assert batch_id not in left, (worker.name, left)


def test_the_oracle_batch_runs_on_both_nodes_and_verifies_as_on_one_machine(
    engine: ContainerEngine, cluster: RayCluster, tmp_path: Path
) -> None:
    batch = ClusterBatch(
        cluster, project_copy(tmp_path), write_config(engine, tmp_path / "runner.json", "oracle")
    )
    code, line = batch.finish()
    assert (code, line["status"], line["firstSuccesses"], line["finalSuccesses"]) == (
        0, "completed", 18, 18,
    ), batch.stderr  # fmt: skip
    receipt = batch.receipt()
    by_node: dict[str | None, int] = {}
    for run in receipt.runs:
        for attempt in run.attempts:
            by_node[attempt.node] = by_node.get(attempt.node, 0) + 1
    assert set(by_node) == {"worker-1", "worker-2"}, by_node
    # Each node is recorded as it proved itself: the driver's harness, its own engine.
    assert receipt.nodes is not None
    assert [(n.node, n.evaluatorDigest, n.address) for n in receipt.nodes] == [
        (name, receipt.evaluatorDigest, NODE_IP) for name in ("worker-1", "worker-2")
    ]
    assert len({n.engine for n in receipt.nodes}) == 2
    assert "nodes ready: worker-1 (1 at a time), worker-2 (1 at a time)" in batch.stderr
    # Every file the nodes sent is checked again, by the checker, from the run directory.
    code, decision = check(batch.run_dirs()[0] / "receipt.json")
    assert [r.split(":")[0] for r in decision["reasons"]] == ["not-self-test"], decision
    code, decision = check(batch.run_dirs()[0] / "receipt.json", "--reverify")
    assert [r.split(":")[0] for r in decision["reasons"]] == ["not-self-test"], decision
    nothing_left(engine, cluster, receipt.batchId)


def _runner_running_on(worker: Worker, batch: ClusterBatch) -> bool:
    return any(
        c["State"] == "running"
        for c in containers_of(worker.socket, f"{LABEL_ROLE}=runner")
        if batch.run_dirs() and c["Labels"].get(LABEL_BATCH) == batch.run_dirs()[0].name
    )


def test_a_node_lost_mid_batch_costs_only_its_run_and_is_reaped_when_it_returns(
    engine: ContainerEngine, cluster: RayCluster, tmp_path: Path
) -> None:
    lost, survivor = cluster.workers
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "runner.json", "oracle", args=slow_oracle(2))
    batch = ClusterBatch(cluster, project, config)
    deadline = time.monotonic() + 600
    while not (batch.runs_recorded() >= 2 and _runner_running_on(lost, batch)):
        assert batch.process.poll() is None, batch.process.communicate()
        assert time.monotonic() < deadline, "worker-1 never ran a runner"
        time.sleep(0.1)
    cluster.kill_worker(lost)
    code, line = batch.finish()
    assert (code, line["status"]) == (1, "infrastructure-failure"), batch.stderr
    receipt = batch.receipt()
    assert len(receipt.runs) == 18, "every run is recorded: the queued ones ran elsewhere"
    failed = [r for r in receipt.runs if not r.finalSuccess]
    assert len(failed) == 1, [r.runId for r in failed]
    (attempt,) = failed[0].attempts
    assert (attempt.infrastructureStatus, attempt.infrastructureKind) == ("failed", "node")
    assert attempt.node == "worker-1"  # the record names the node, as its diagnostic does
    assert any("node worker-1 was lost" in d.message for d in attempt.diagnostics)
    assert line["finalSuccesses"] == 17
    # Scheduled in order: every run after the lost one was running on worker-2 or queued.
    after = receipt.runs[receipt.runs.index(failed[0]) + 1 :]
    assert after and all(a.node == "worker-2" for r in after for a in r.attempts)
    assert any("the node running it was lost" in r for r in receipt.reasons), receipt.reasons
    assert any("node worker-1 was lost" in r for r in receipt.reasons), receipt.reasons
    code, decision = check(batch.run_dirs()[0] / "receipt.json")
    assert code == 1 and {r.split(":")[0] for r in decision["reasons"]} <= OUTCOME_RULES
    # The lost node's runner outlived it: still there, until the node takes work again.
    assert containers_of(lost.socket, f"{LABEL_BATCH}={receipt.batchId}") != []
    assert list_leftovers(engine, receipt.batchId) == []
    assert containers_of(survivor.socket, f"{LABEL_BATCH}={receipt.batchId}") == []

    cluster.start_worker(lost)
    again = ClusterBatch(cluster, project, config, "--only", f"{receipt.runs[0].taskId}-1")
    code, line = again.finish()
    assert line["finalSuccesses"] == 1, again.stderr
    assert f"node worker-1: reaped batch {receipt.batchId}: " in again.stderr, again.stderr
    nothing_left(engine, cluster, receipt.batchId)
    for run_dir in again.run_dirs():
        nothing_left(engine, cluster, run_dir.name)


@pytest.mark.parametrize("fault", ["nothing listens", "another token"])
def test_a_cluster_that_cannot_be_joined_ends_the_batch_not_run_before_packing(
    engine: ContainerEngine, cluster: RayCluster, tmp_path: Path, fault: str
) -> None:
    address, env = cluster.address, cluster.env
    if fault == "nothing listens":
        address = "127.0.0.1:6390"
    else:
        env = env | {"RAY_AUTH_TOKEN": "0" * 64}
    config = write_config(engine, tmp_path / "runner.json", "oracle")
    batch = ClusterBatch(cluster, project_copy(tmp_path), config, address=address, env=env)
    code, line = batch.finish(timeout_s=180)
    assert (code, line["status"]) == (2, "not-run"), batch.stderr
    (reason,) = batch.receipt().reasons
    assert reason.startswith("cluster: ") and address in reason, reason
    if fault == "another token":
        assert "RAY_AUTH_TOKEN" in reason
    assert "packing the candidate archives" not in batch.stderr
    assert not (batch.run_dirs()[0] / "archives").exists()


def test_an_interrupted_cluster_batch_stops_every_node_and_leaves_a_truthful_receipt(
    engine: ContainerEngine, cluster: RayCluster, tmp_path: Path
) -> None:
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "runner.json", "oracle", args=slow_oracle(2))
    batch = ClusterBatch(cluster, project, config)
    deadline = time.monotonic() + 600
    while not (
        batch.runs_recorded() >= 2 and all(_runner_running_on(w, batch) for w in cluster.workers)
    ):
        assert batch.process.poll() is None, batch.process.communicate()
        assert time.monotonic() < deadline, "the runners never ran on both workers at once"
        time.sleep(0.1)
    batch.process.send_signal(signal.SIGINT)
    code, line = batch.finish()
    assert (code, line["status"]) == (1, "interrupted"), batch.stderr
    receipt = batch.receipt()
    cut = [
        r for r in receipt.runs if r.attempts and r.attempts[-1].infrastructureStatus == "failed"
    ]
    assert {a.node for r in cut for a in r.attempts[-1:]} <= {"worker-1", "worker-2", None}
    assert len(cut) >= 2, [r.runId for r in receipt.runs]
    for run in cut:
        assert "the batch stopped" in run.attempts[-1].diagnostics[0].message
    code, decision = check(batch.run_dirs()[0] / "receipt.json")
    assert code == 1 and {r.split(":")[0] for r in decision["reasons"]} <= OUTCOME_RULES
    nothing_left(engine, cluster, receipt.batchId)


SUBNET, MODEL_IP = "10.213.7.0/24", "10.213.7.10"
"""The scripted model's network on every worker's engine: the same address on each, so one
runner config serves the whole cluster."""


def _docker(worker: Worker, *args: str) -> str:
    done = subprocess.run(
        ["docker", "-H", f"unix://{worker.socket}", *args],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def test_a_real_agent_reaches_its_model_through_a_gateway_on_each_node(
    engine: ContainerEngine, cluster: RayCluster, tmp_path: Path
) -> None:
    """Claude Code in its runner image on both workers, each attempt through the gateway its
    node started (with the node's own credential), against a scripted model on each node's
    own internal network; the records come back with every run and verify."""
    project_dir = project_copy(tmp_path)
    example = read_model(
        SHIPPED / "examples" / "runners" / "claude-code.json", RunnerConfig, what="runner config"
    )
    upstream = example.models[0]
    served = upstream.servedModels[0]
    srv = tmp_path / "srv"
    srv.mkdir()
    shutil.copyfile(REPO / "agent_eval" / "trial" / "oracle_model.py", srv / "oracle_model.py")
    answers = scripted_answers(find_project(project_dir), served)
    (srv / "answers.json").write_text(json.dumps(answers))
    for path in (srv, *srv.iterdir()):  # read by the image's unprivileged user
        path.chmod(0o755 if path.is_dir() else 0o644)
    network = f"ae-model-{secrets.token_hex(4)}"
    gateway_image = image_for_checkout(engine, REPO, "gateway")
    try:
        for worker in cluster.workers:
            _docker(worker, "network", "create", "--internal", "--subnet", SUBNET, network)
            _docker(
                worker, "run", "-d", "--name", network, "--network", network, "--ip", MODEL_IP,
                "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "-v", f"{srv}:/srv:ro", gateway_image,
                "/usr/bin/python3", "-B", "/srv/oracle_model.py", "/srv/answers.json",
            )  # fmt: skip
        for worker in cluster.workers:
            deadline = time.monotonic() + 60
            while "listening" not in _docker(worker, "logs", network):
                assert time.monotonic() < deadline, _docker(worker, "logs", network)
                time.sleep(0.2)
        config = aimed_at_scripted_model(
            example,
            network=network,
            address=MODEL_IP,
            images=(
                image_for_checkout(engine, REPO, "runner-claude-code"),
                image_for_checkout(engine, REPO, "verifier"),
                gateway_image,
            ),
            runtime_path="/var/run/docker.sock",
        )
        config_path = tmp_path / "runner.json"
        write_model_atomic(config_path, RunnerConfig.model_validate(config.model_dump()))
        assert KEY_ENV not in cluster.env  # the driver never holds the credential
        batch = ClusterBatch(cluster, project_dir, config_path)
        code, line = batch.finish()
        assert (code, line["status"], line["firstSuccesses"], line["finalSuccesses"]) == (
            0, "completed", 18, 18,
        ), batch.stderr  # fmt: skip
        receipt = batch.receipt()
        attempts = [a for r in receipt.runs for a in r.attempts]
        assert {a.node for a in attempts} == {"worker-1", "worker-2"}
        for attempt in attempts:
            assert attempt.gateway is not None and attempt.gateway.answered >= 1, attempt
            assert attempt.gateway.servedModels == [served]
        code, decision = check(batch.run_dirs()[0] / "receipt.json")
        assert [r.split(":")[0] for r in decision["reasons"]] == ["not-self-test"], decision
        nothing_left(engine, cluster, receipt.batchId)
    finally:
        for worker in cluster.workers:
            subprocess.run(
                ["docker", "-H", f"unix://{worker.socket}", "rm", "-f", network],
                capture_output=True, timeout=120, check=False,
            )  # fmt: skip
            subprocess.run(
                ["docker", "-H", f"unix://{worker.socket}", "network", "rm", network],
                capture_output=True, timeout=120, check=False,
            )  # fmt: skip
