"""``agent-eval try-agent``: a whole batch of the real Claude Code CLI against the scripted model.

Invariants: from a clean checkout the batch completes 18/18 first and final,
every attempt's model traffic went through the gateway (at least one request
each, the served model the example names), and the decision rejects it for
one reason only: the upstream was private, so it is self-test. The trial's
network and scripted model are gone afterwards and the batch left no
container; the credential the trial made up appears nowhere in the run
directory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import docker
import pytest

from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.images.build import build_runner_image
from agent_eval.models import Receipt, RunnerConfig
from tests.agent_scripted_model import engine
from tests.batches import BIN, project_copy
from tests.paths import REPO

pytestmark = pytest.mark.docker

__all__ = ["engine"]


def test_a_trial_batch_completes_through_the_gateway_and_is_rejected_only_as_self_test(
    engine: ContainerEngine, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    build_runner_image(engine, REPO, "claude-code")
    project = project_copy(tmp_path)
    for name in ("examples", "images"):  # what the trial reads its config and images from
        shutil.copytree(REPO / name, project / name)
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.org",
         "commit", "-q", "-m", "examples and images"],
        check=True,
    )  # fmt: skip
    done = subprocess.run(
        [str(BIN / "agent-eval"), "try-agent", "--project", str(project)],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    line, decision = (json.loads(text) for text in done.stdout.splitlines())
    assert (line["status"], line["firstSuccesses"], line["finalSuccesses"]) == (
        "completed", 18, 18,
    ), done.stderr  # fmt: skip
    assert decision["qualified"] is False
    assert [reason.split(":")[0] for reason in decision["reasons"]] == ["not-self-test"]
    assert "private upstreams" in decision["reasons"][0]

    receipt_path = project / line["receipt"]
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    served = (
        RunnerConfig.model_validate_json(
            (REPO / "examples" / "runners" / "claude-code.json").read_bytes()
        )
        .models[0]
        .servedModels[0]
    )
    for run in receipt.runs:
        for attempt in run.attempts:
            assert attempt.gateway is not None and attempt.gateway.requests >= 1, run.runId
            assert attempt.gateway.servedModels == [served], run.runId

    (trial,) = (project / "evidence" / ".try-agent").iterdir()
    config = RunnerConfig.model_validate_json((trial / "runner.json").read_bytes())
    network = config.gateway.network
    assert docker_client.networks.list(names=[network]) == []
    assert (
        docker_client.containers.list(all=True, filters={"label": f"agent-eval.batch={trial.name}"})
        == []
    )
    assert list_leftovers(engine, receipt.batchId) == []
