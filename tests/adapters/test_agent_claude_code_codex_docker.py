"""Claude Code and Codex CLI, each in its real runner image, against a scripted endpoint
inside the container (network none): the batch's own schedule, runner container and
docker verifier.

A correct write passes on the first attempt; a wrong first write gets one repair whose
prompt carries the failed assertion ids but no expected values, and the repair passes; a
model that never answers makes the attempt a timeout, with no repair and no container
left. The key's value appears nowhere in the run directory. Claude Code speaks ``HEAD /``
then streaming ``POST /v1/messages?beta=true`` with the key in ``x-api-key``; Codex speaks
streaming ``POST /v1/responses`` (an ``exec_command`` function call writes the file) with
the key as a bearer token.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from agent_eval.consumer.archives import PreparedConsumer
from agent_eval.engine import ContainerEngine
from agent_eval.models import ModelIdentity
from tests.agent_scripted_model import (
    PORT,
    ScriptedAgent,
    engine,
    files_containing,
    prepared_consumer,
    run_one,
    scripted_image,
)

pytestmark = pytest.mark.docker

__all__ = ["engine"]

Requests = list[dict[str, Any]]


def claude_code_endpoint(requests: Requests, canary: str) -> None:
    assert requests[0]["method"] == "HEAD" and requests[0]["path"] == "/"
    posts = [r for r in requests if r["method"] == "POST"]
    assert {r["path"] for r in posts} == {"/v1/messages?beta=true"}
    assert all(r["stream"] is True and r["model"] == "claude-scripted-1" for r in posts)
    assert all(r["anthropicVersion"] == "2023-06-01" for r in posts)
    assert all(r["apiKeySha256"] == hashlib.sha256(canary.encode()).hexdigest() for r in posts)
    assert "Write" in posts[0]["tools"] and "WebFetch" not in posts[0]["tools"]


def codex_endpoint(requests: Requests, canary: str) -> None:
    assert {(r["method"], r["path"]) for r in requests} == {("POST", "/v1/responses")}
    assert all(r["stream"] is True and r["model"] == "gpt-scripted-1" for r in requests)
    key = hashlib.sha256(canary.encode()).hexdigest()
    assert all(r["apiKeySha256"] == key for r in requests)
    assert "exec_command" in requests[0]["tools"] and "web_search" not in requests[0]["tools"]
    assert requests[-1]["inputTypes"][-2:] == ["function_call", "function_call_output"]


@dataclass(frozen=True)
class Case:
    name: str
    adapter: str
    model: ModelIdentity
    version: str
    key_env: str
    endpoint_env: str
    endpoint: str
    canary: str
    check_endpoint: Callable[[Requests, str], None]


CASES = [
    Case(
        name="claude-code",
        adapter="agent_eval.adapters.claude_code",
        model=ModelIdentity(id="claude-scripted-1", settings={"max_turns": 8}),
        version="2.1.197",
        key_env="ANTHROPIC_API_KEY",
        endpoint_env="AGENT_EVAL_MODEL_URL",
        endpoint=f"http://127.0.0.1:{PORT}",
        canary="sk-ant-canary-" + uuid.uuid4().hex,
        check_endpoint=claude_code_endpoint,
    ),
    Case(
        name="codex",
        adapter="agent_eval.adapters.codex",
        model=ModelIdentity(id="gpt-scripted-1", settings={"model_reasoning_effort": "low"}),
        version="0.171.0",
        key_env="OPENAI_API_KEY",
        endpoint_env="OPENAI_BASE_URL",
        endpoint=f"http://127.0.0.1:{PORT}/v1",
        canary="sk-canary-" + uuid.uuid4().hex,
        check_endpoint=codex_endpoint,
    ),
]


@pytest.fixture(scope="module", params=CASES, ids=lambda case: case.name)
def case(request: pytest.FixtureRequest) -> Case:
    chosen: Case = request.param
    return chosen


@pytest.fixture(scope="module")
def agent(
    docker_client: docker.DockerClient,
    engine: ContainerEngine,
    case: Case,
    tmp_path_factory: pytest.TempPathFactory,
) -> ScriptedAgent:
    image = scripted_image(engine, case.name, tmp_path_factory.mktemp(f"{case.name}-image"))
    return ScriptedAgent(
        name=case.name,
        image=image,
        adapter=case.adapter,
        model=case.model,
        version=case.version,
        environment={case.key_env: case.canary, case.endpoint_env: case.endpoint},
        adapter_args=("--endpoint-env", case.endpoint_env),
    )


@pytest.fixture(scope="module")
def consumer(
    engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PreparedConsumer]:
    yield prepared_consumer(engine, tmp_path_factory.mktemp("consumer"))


def test_a_correct_write_passes_on_the_first_attempt_through_the_cli_endpoint(
    engine: ContainerEngine,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    case: Case,
    tmp_path: Path,
) -> None:
    result = run_one(engine, consumer, agent, "correct", tmp_path)
    (run,) = result.receipt.runs
    assert run.firstSuccess and len(run.attempts) == 1, run.attempts[0].diagnostics
    case.check_endpoint(result.requests[1], case.canary)
    assert files_containing(result.batch_dir, case.canary) == []


def test_a_wrong_write_is_repaired_from_failed_ids_without_expected_values(
    engine: ContainerEngine,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    case: Case,
    tmp_path: Path,
) -> None:
    result = run_one(engine, consumer, agent, "repair", tmp_path)
    (run,) = result.receipt.runs
    first, repair = run.attempts
    assert not first.success and first.failureCategory == "behaviour", first
    assert repair.success and run.finalSuccess and not run.firstSuccess
    prompts = [r["prompt"] for r in result.requests[2] if r["method"] == "POST"]
    assert "valid-submission-accepted" in prompts[0] and "failed verification" in prompts[0]
    assert "Ann Lee" not in prompts[0] and "acct-1" not in prompts[0]
    assert all("failed verification" not in r.get("prompt", "") for r in result.requests[1])
    assert files_containing(result.batch_dir, case.canary) == []


def test_a_model_that_never_answers_times_out_without_a_repair(
    engine: ContainerEngine,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    case: Case,
    tmp_path: Path,
) -> None:
    result = run_one(engine, consumer, agent, "hang", tmp_path, timeout_s=10.0)
    (run,) = result.receipt.runs
    (attempt,) = run.attempts
    assert attempt.failureCategory == "timeout" and attempt.durationMs < 40_000
    assert any(r["method"] == "POST" for r in result.requests[1])
    assert files_containing(result.batch_dir, case.canary) == []
