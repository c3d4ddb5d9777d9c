"""``agent-eval try-agent``: a whole batch of the real Claude Code CLI against the scripted model.

Invariants: from a clean checkout the batch completes 18/18 first and final,
every attempt's model traffic went through the gateway (at least one request
each, the served model the example names), and the decision rejects it for
one reason only: the upstream was private, so it is self-test. The trial's
network and scripted model are gone afterwards and the batch left no
container. A runner that writes every answer itself with the gateway standing
ready shows, in the gateway's own records, that no attempt asked the model.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import docker
import pytest

from agent_eval.batch.run import run_batch
from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.evidence_io import write_model_atomic
from agent_eval.images.build import build_runner_image
from agent_eval.models import Receipt, RunnerConfig
from agent_eval.project import find_project
from agent_eval.reference.config import reference_config
from agent_eval.trial.run import scripted_upstream
from agent_eval.verdict.qualification import unanswered_attempts
from agent_eval.verification.container.verifier import batch_verifier_factory
from tests.agent_scripted_model import engine
from tests.batches import BIN, project_copy
from tests.paths import REPO, SHIPPED

pytestmark = pytest.mark.docker

__all__ = ["engine"]


@pytest.fixture(scope="module")
def trial_project(engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean checkout; the trial reads its runner config and recipes from the harness."""
    build_runner_image(engine, REPO, "claude-code")
    project = project_copy(tmp_path_factory.mktemp("trial"))
    return project


def test_a_trial_batch_completes_through_the_gateway_and_is_rejected_only_as_self_test(
    engine: ContainerEngine, docker_client: docker.DockerClient, trial_project: Path
) -> None:
    project = trial_project
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
            (SHIPPED / "examples" / "runners" / "claude-code.json").read_bytes()
        )
        .models[0]
        .servedModels[0]
    )
    for run in receipt.runs:
        for attempt in run.attempts:
            assert attempt.gateway is not None and attempt.gateway.requests >= 1, run.runId
            assert attempt.gateway.servedModels == [served], run.runId
    assert unanswered_attempts(receipt, receipt_path.parent) == []

    (trial,) = (project / "evidence" / ".try-agent").iterdir()
    config = RunnerConfig.model_validate_json((trial / "runner.json").read_bytes())
    network = config.gateway.network
    assert docker_client.networks.list(names=[network]) == []
    assert (
        docker_client.containers.list(all=True, filters={"label": f"agent-eval.batch={trial.name}"})
        == []
    )
    assert list_leftovers(engine, receipt.batchId) == []


def test_a_runner_that_answers_without_its_model_shows_no_request_behind_the_gateway(
    engine: ContainerEngine, trial_project: Path
) -> None:
    """The reproduction of a model baked into the runner: the runner writes every answer
    itself (the oracle) while the gateway stands ready; the gateway's records show that no
    attempt asked the model anything, which alone keeps such a batch from qualifying."""
    project = find_project(trial_project)
    oracle = reference_config(engine, "oracle", project_root=REPO, runtime_path=engine.address)
    with scripted_upstream(engine, project, "claude-code") as trial:
        config = RunnerConfig.model_validate_json(trial.config_path.read_bytes())
        write_model_atomic(
            trial.config_path,
            config.model_copy(
                update={
                    "executable": oracle.executable,
                    "args": oracle.args,
                    "runnerImage": oracle.runnerImage,
                    "expectedRunner": oracle.expectedRunner,
                    "expectedModel": oracle.expectedModel,
                }
            ),
        )
        outcome = run_batch(
            trial.config_path,
            project,
            verifier_factory=batch_verifier_factory(project),
            connect=lambda _path: engine,
            environ=trial.environ,
        )
    assert (outcome.status, outcome.final_successes) == ("completed", 18)
    receipt = Receipt.model_validate_json(outcome.receipt.read_bytes())
    unanswered = unanswered_attempts(receipt, outcome.receipt.parent)
    assert len(unanswered) == 18, unanswered
    assert all(u.endswith("made no request the provider answered") for u in unanswered)
