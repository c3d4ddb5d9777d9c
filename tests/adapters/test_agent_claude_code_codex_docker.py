"""Claude Code and Codex CLI, each in its real runner image with no network, against a
scripted provider reached only through the batch's gateway: the batch's own schedule,
runner container, gateway and docker verifier.

A correct write passes on the first attempt; a wrong first write gets one repair whose
prompt carries the failed assertion ids but no expected values, and the repair passes; a
model that never answers makes the attempt a timeout, with no repair and no container
left. The gateway records every request with the model the provider served and its token
usage. The credential reaches the provider (its hash is in the provider's log) and nothing
else: a model that asks the CLI's shell to print its environment sees the attempt's
placeholder token, never the credential, and the credential appears nowhere in the run
directory. Claude Code speaks ``HEAD /`` (sometimes) then streaming ``POST /v1/messages?beta=true``
with the key in ``x-api-key``; Codex speaks streaming ``POST /v1/responses`` (an
``exec_command`` function call writes the file) with the key as a bearer token.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from agent_eval.consumer.archives import PreparedConsumer
from agent_eval.engine import ContainerEngine
from agent_eval.images.build import build_runner_image
from agent_eval.layout import SOLUTION_MOUNT
from agent_eval.models import ModelIdentity
from tests.agent_scripted_model import (
    AGENTS_DATA,
    PORT,
    ROOT,
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

pytestmark = pytest.mark.docker

__all__ = ["engine", "network"]

Requests = list[dict[str, Any]]


def claude_code_endpoint(requests: Requests, canary: str) -> None:
    # Its connectivity check (HEAD /), when it makes one, goes through the gateway too.
    assert all(r["path"] == "/" for r in requests if r["method"] == "HEAD")
    posts = [r for r in requests if r["method"] == "POST"]
    assert {r["path"] for r in posts} == {"/v1/messages?beta=true"}
    assert all(r["stream"] is True and r["model"] == "claude-scripted-1" for r in posts)
    assert all(r["anthropicVersion"] == "2023-06-01" for r in posts)
    key = hashlib.sha256(canary.encode()).hexdigest()
    assert all(r["apiKeySha256"] == key for r in requests)
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
    header: str
    check_endpoint: Callable[[Requests, str], None]


CASES = [
    Case(
        name="claude-code",
        adapter="agent_eval.adapters.claude_code",
        model=ModelIdentity(id="claude-scripted-1", settings={"max_turns": 8}),
        version="2.1.197",
        key_env="ANTHROPIC_API_KEY",
        header="x-api-key",
        check_endpoint=claude_code_endpoint,
    ),
    Case(
        name="codex",
        adapter="agent_eval.adapters.codex",
        model=ModelIdentity(id="gpt-scripted-1", settings={"model_reasoning_effort": "low"}),
        version="0.171.0",
        key_env="OPENAI_API_KEY",
        header="Authorization",
        check_endpoint=codex_endpoint,
    ),
]


@pytest.fixture(scope="module", params=CASES, ids=lambda case: case.name)
def case(request: pytest.FixtureRequest) -> Case:
    chosen: Case = request.param
    return chosen


@pytest.fixture(scope="module")
def agent(engine: ContainerEngine, case: Case) -> ScriptedAgent:
    return scripted_agent(engine, case)


def scripted_agent(engine: ContainerEngine, case: Case) -> ScriptedAgent:
    """*case*'s scripted set-up, its runner image built when missing: a wrong first
    write (``first``), the reference solution on repair or in the ``correct`` mode."""
    known = solutions()
    script = {
        "port": PORT,
        "log": "/log/requests.jsonl",
        "marker": "/log/attempt",
        "file": f"{SOLUTION_MOUNT}/solution.py",
        "first": known["greets-username"],
        "repair": known["correct"],
    }
    return ScriptedAgent(
        name=case.name,
        image=build_runner_image(engine, ROOT, case.name),
        adapter=case.adapter,
        model=case.model,
        version=case.version,
        server=AGENTS_DATA / case.name / "model_server.py",
        server_args=("/srv/script.json",),
        credential_env=case.key_env,
        credential_header=case.header,
        served=case.model.id,
        files={"script.json": json.dumps(script).encode()},
    )


@pytest.fixture(scope="module")
def consumer(
    engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PreparedConsumer]:
    yield prepared_consumer(engine, tmp_path_factory.mktemp("consumer"))


def run(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    mode: str,
    tmp_path: Path,
    timeout_s: float = 90.0,
) -> RunResult:
    result = run_one(engine, docker_client, network, consumer, agent, mode, tmp_path, timeout_s)
    assert files_containing(result.batch_dir, result.canary) == []
    return result


def test_a_correct_write_passes_on_the_first_attempt_through_the_gateway(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    case: Case,
    tmp_path: Path,
) -> None:
    result = run(engine, docker_client, network, consumer, agent, "correct", tmp_path)
    (attempt,) = result.receipt.runs[0].attempts
    assert attempt.success, attempt.diagnostics
    case.check_endpoint(result.requests[1], result.canary)
    assert attempt.gateway is not None and attempt.gateway.servedModels == [case.model.id]
    assert attempt.gateway.requests == len(result.requests[1]) and attempt.gateway.answered
    assert attempt.gateway.inputTokens > 0 and attempt.gateway.outputTokens > 0
    assert len(kept_transcript(result)) > 1  # the CLI's own events, as its adapter kept them
    exported_trajectory(result, case.name)
    if case.name == "claude-code":  # its result event reports tokens (and a cost)
        reported = attempt.reportedUsage
        assert reported is not None and reported.inputTokens and reported.outputTokens


def test_a_wrong_write_is_repaired_from_failed_ids_without_expected_values(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    tmp_path: Path,
) -> None:
    result = run(engine, docker_client, network, consumer, agent, "repair", tmp_path)
    (run_record,) = result.receipt.runs
    first, repair = run_record.attempts
    assert not first.success and first.failureCategory == "behaviour", first
    assert repair.success and run_record.finalSuccess and not run_record.firstSuccess
    prompts = [r["prompt"] for r in result.requests[2] if r["method"] == "POST"]
    assert "valid-submission-accepted" in prompts[0] and "failed verification" in prompts[0]
    assert "Ann Lee" not in prompts[0] and "acct-1" not in prompts[0]
    assert all("failed verification" not in r.get("prompt", "") for r in result.requests[1])


def test_the_clis_shell_sees_the_attempts_token_never_the_credential(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    tmp_path: Path,
) -> None:
    result = run(engine, docker_client, network, consumer, agent, "printenv", tmp_path)
    assert result.receipt.runs[0].finalSuccess
    seen = "".join(r.get("toolResults", "") for r in result.requests[1])
    assert "AGENT_EVAL_GATEWAY_TOKEN=ae-" in seen, "the shell did not print its environment"
    assert result.canary not in seen
    assert not any(result.canary in json.dumps(r) for r in result.requests[1])
    kept_transcript(result)


def test_a_model_that_never_answers_times_out_without_a_repair(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    tmp_path: Path,
) -> None:
    # The budget leaves a loaded machine time to start the CLI and send its first request
    # (at a load of 16 on two cores, 10 s did not): the hang must be the model's.
    result = run(engine, docker_client, network, consumer, agent, "hang", tmp_path, 30.0)
    (attempt,) = result.receipt.runs[0].attempts
    assert attempt.failureCategory == "timeout" and attempt.durationMs < 120_000
    assert any(r["method"] == "POST" for r in result.requests[1])
