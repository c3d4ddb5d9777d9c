"""The aider and mini-swe-agent runners, end to end, in their real images with their real CLIs.

Each runner has no network; its scripted model is a fake provider on a test network that
only the batch's gateway reaches. One scheduled run of the forms task goes through the
real schedule, runner container, gateway, collection and docker verifier. Invariants:

* a model that writes the reference solution passes on the first attempt, and the gateway
  records the model the provider served and the tokens it reported;
* a wrong first solution is repaired from feedback that names the failed assertions and
  carries none of the grader's values;
* a model that never finishes is killed at the harness's deadline (``timeout``), while
  mini-swe-agent stopping at its own step limit first is ``budget-exhausted``: neither
  is repaired, and no container is left behind;
* the credential reaches the provider (its hash is in the provider's log) and nothing
  else: the environment mini-swe-agent's shell prints back to the model holds no
  credential, which appears nowhere in the run directory;
* the request shape is the one each CLI is documented to use, and mini-swe-agent's shell
  imports the library under evaluation, not the agent's own packages.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import pytest

from agent_eval.consumer.archives import PreparedConsumer
from agent_eval.engine import ContainerEngine
from agent_eval.engine.policy import LABEL_BATCH, LABEL_ROLE
from agent_eval.images.build import build_runner_image
from agent_eval.models import ModelIdentity
from agent_eval.models.install_recipe import InstallRecipe
from tests.agent_scripted_model import (
    AGENTS_DATA,
    REPO,
    RunResult,
    ScriptedAgent,
    engine,
    exported_trajectory,
    files_containing,
    kept_transcript,
    network,
    prepared_consumer,
    run_one,
    solutions,
)
from tests.paths import SHIPPED

pytestmark = pytest.mark.docker

__all__ = ["engine", "network"]

MODEL = "openai/scripted-model"
SERVED = "scripted-model"
NEGATIVE = "errors-not-rendered"
# The grader's inputs and expected values for the forms task: never in feedback.
GRADER_VALUES = ("ann@example.org", "not-an-email", "twelve", "gold", "onerror", "pwned")


@dataclass(frozen=True)
class Agent:
    name: str
    module: str
    package: str
    settings: dict[str, Any] = field(default_factory=dict)


AGENTS = {
    "aider": Agent("aider", "aider", "aider-chat"),
    "mini-swe-agent": Agent(
        "mini-swe-agent", "mini_swe_agent", "mini-swe-agent", {"step_limit": 10}
    ),
}


def installed_version(agent: Agent) -> str:
    recipe_path = SHIPPED / "images" / "runners" / agent.name / "install.json"
    recipe = InstallRecipe.model_validate_json(recipe_path.read_bytes())
    (pin,) = (p for p in recipe.packages if p.startswith(f"{agent.package}=="))
    return pin.partition("==")[2]


class Scripted:
    """Each agent's scripted set-up, its runner image built once per module."""

    def __init__(self, engine: ContainerEngine) -> None:
        self.engine = engine
        self.built: dict[str, ScriptedAgent] = {}

    def get(self, agent: Agent) -> ScriptedAgent:
        if agent.name not in self.built:
            known = solutions()
            self.built[agent.name] = ScriptedAgent(
                name=agent.name,
                image=build_runner_image(self.engine, REPO, agent.name),
                adapter=f"agent_eval.adapters.{agent.module}",
                model=ModelIdentity(id=MODEL, settings=agent.settings),
                version=installed_version(agent),
                server=AGENTS_DATA / agent.name / "scripted_model.py",
                server_args=("{port}", "{log}", "{marker}"),
                credential_env="OPENAI_API_KEY",
                credential_header="Authorization",
                served=SERVED,
                files={
                    "solutions/correct.py": known["correct"].encode(),
                    "solutions/wrong.py": known[NEGATIVE].encode(),
                },
            )
        return self.built[agent.name]


@pytest.fixture(scope="module")
def scripted(engine: ContainerEngine) -> Scripted:
    return Scripted(engine)


@pytest.fixture(scope="module")
def consumer(
    engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PreparedConsumer]:
    yield prepared_consumer(engine, tmp_path_factory.mktemp("consumer"))


class Runs:
    def __init__(
        self,
        engine: ContainerEngine,
        client: docker.DockerClient,
        network: str,
        consumer: PreparedConsumer,
        scripted: Scripted,
        tmp_path: Path,
    ) -> None:
        self.args = (engine, client, network, consumer)
        self.scripted, self.tmp_path = scripted, tmp_path

    def __call__(self, name: str, script: str, timeout_s: float = 90.0) -> RunResult:
        agent = self.scripted.get(AGENTS[name])
        result = run_one(*self.args, agent, script, self.tmp_path, timeout_s)
        assert files_containing(result.batch_dir, result.canary) == []
        return result


@pytest.fixture
def runs(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    consumer: PreparedConsumer,
    scripted: Scripted,
    tmp_path: Path,
) -> Runs:
    return Runs(engine, docker_client, network, consumer, scripted, tmp_path)


def assert_request_shape(name: str, requests: list[dict[str, Any]], canary: str) -> None:
    assert requests, "the CLI never reached the scripted model"
    expected_auth = hashlib.sha256(f"Bearer {canary}".encode()).hexdigest()
    for request in requests:
        assert (request["method"], request["path"]) == ("POST", "/v1/chat/completions")
        assert request["authSha256"] == expected_auth
        assert request["body"]["model"] == SERVED
    first = requests[0]["body"]
    if name == "aider":
        assert first["stream"] is True and "tools" not in first
    else:
        assert not first.get("stream")
        assert [t["function"]["name"] for t in first["tools"]] == ["bash"]


def prompt_of(requests: list[dict[str, Any]]) -> str:
    """What the model was told, as one text: every message of the first request."""
    return json.dumps(requests[0]["body"]["messages"])


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_model_writing_the_reference_solution_passes_on_the_first_attempt(
    runs: Runs, name: str
) -> None:
    result = runs(name, "correct")
    (run,) = result.receipt.runs
    assert run.firstSuccess and len(run.attempts) == 1, run.attempts[0].diagnostics
    assert [f.path for f in run.attempts[0].solutionFiles] == ["solution.py"]
    requests = result.requests[1]
    assert_request_shape(name, requests, result.canary)
    assert "Write only these files in /solution: solution.py" in prompt_of(requests)
    if name == "mini-swe-agent":
        probe = json.dumps(requests[-1]["body"]["messages"][-1])
        assert "/consumer/site/appkit/__init__.py" in probe and "litellm None" in probe
    use = run.attempts[0].gateway
    assert use is not None and use.servedModels == [SERVED] and use.answered == len(requests)
    assert use.inputTokens > 0 and use.outputTokens > 0
    assert len(kept_transcript(result)) > 1  # aider's chat history, mini's trajectory
    exported_trajectory(result, name)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_wrong_first_solution_is_repaired_from_feedback_without_expected_values(
    runs: Runs, name: str
) -> None:
    result = runs(name, "repair")
    (run,) = result.receipt.runs
    first, repair = run.attempts
    assert not first.success and repair.success and run.finalSuccess
    failed = [a.id for a in first.assertions if not a.passed]
    assert "field-errors-shown" in failed
    told = prompt_of(result.requests[2])
    feedback = told[told.index("failed verification") :]
    assert all(assertion in feedback for assertion in failed)
    assert not [value for value in GRADER_VALUES if value in feedback]
    assert_request_shape(name, result.requests[2], result.canary)


@pytest.mark.parametrize(("name", "script"), [("aider", "never"), ("mini-swe-agent", "slow")])
def test_a_model_that_never_finishes_is_killed_at_the_deadline_without_a_repair(
    runs: Runs, name: str, script: str
) -> None:
    result = runs(name, script, timeout_s=15.0)
    (run,) = result.receipt.runs
    (attempt,) = run.attempts
    assert attempt.failureCategory == "timeout" and not run.finalSuccess, attempt.diagnostics
    assert attempt.durationMs < 60_000


def test_a_gateway_killed_while_the_agent_waits_for_its_model_stops_the_batch_at_once(
    runs: Runs, docker_client: docker.DockerClient
) -> None:
    """The real gateway, killed (as an out-of-memory kill would) while aider waits on a model
    that never answers: the batch stops within seconds, not at the 120 s deadline, and the
    attempt is the infrastructure's, never a timeout of the agent's."""
    killed: list[str] = []

    def kill_the_gateway_once_a_runner_waits() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            try:
                runners = docker_client.containers.list(filters={"label": [f"{LABEL_ROLE}=runner"]})
                batches = {c.labels.get(LABEL_BATCH, "") for c in runners}
                for gateway in docker_client.containers.list(
                    filters={"label": [f"{LABEL_ROLE}=gateway"]}
                ):
                    batch = gateway.labels.get(LABEL_BATCH, "")
                    if batch.startswith("aider-never-") and batch in batches:
                        time.sleep(3)  # the agent is waiting on its model by now
                        gateway.kill()
                        killed.append(batch)
            except docker.errors.NotFound:
                pass  # a container listed and gone before it was read (another test's)
            time.sleep(0.5)

    thread = threading.Thread(target=kill_the_gateway_once_a_runner_waits, daemon=True)
    thread.start()
    began = time.monotonic()
    result = runs("aider", "never", timeout_s=120.0)
    took = time.monotonic() - began
    thread.join(timeout=5)
    assert killed, "the gateway was never found to kill"
    receipt = result.receipt
    assert receipt.status == "infrastructure-failure", receipt.reasons
    assert any("gateway stopped serving" in r for r in receipt.reasons), receipt.reasons
    (attempt,) = receipt.runs[0].attempts
    assert attempt.infrastructureStatus == "failed" and attempt.failureCategory != "timeout"
    assert took < 100, f"the batch took {took:.0f} s: the dead gateway was not noticed"


def test_mini_stopping_at_its_own_step_limit_is_budget_exhaustion_not_a_refusal(
    runs: Runs,
) -> None:
    result = runs("mini-swe-agent", "loop", timeout_s=120.0)
    (attempt,) = result.receipt.runs[0].attempts
    assert (attempt.failureCategory, attempt.failureKind) == ("budget-exhausted", "budget")
    assert len(result.requests[1]) == 10  # its step_limit setting
    assert attempt.durationMs < 100_000


def test_the_shell_the_model_has_run_sees_no_credential(runs: Runs) -> None:
    """mini-swe-agent's bash tool prints the environment back to the model: the key's name
    is blanked there and the credential was never in the container. (aider, in its
    whole-file edit format, runs no command a model suggests: it has no shell tool.)"""
    result = runs("mini-swe-agent", "printenv")
    assert result.receipt.runs[0].finalSuccess
    seen = json.dumps([r["body"] for r in result.requests[1]])
    assert "AGENT_EVAL_GATEWAY_TOKEN=" in seen and "PYTHONPATH=/consumer/site" in seen
    assert result.canary not in seen
    kept_transcript(result)
