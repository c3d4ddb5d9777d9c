"""Codex CLI, in its real runner image, against a scripted Responses endpoint inside the
container (network none): the batch's own schedule, runner container and docker verifier.

A correct write passes on the first attempt; a wrong first write gets one repair whose
prompt carries the failed assertion ids but no expected values, and the repair passes; a
model that never answers makes the attempt a timeout, with no repair and no container
left. The CLI speaks streaming ``POST /v1/responses`` (an ``exec_command`` function call
writes the file) with the key as a bearer token; its value appears nowhere in the run directory.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from agent_scripted_model import (
    PORT,
    ScriptedAgent,
    engine,
    files_containing,
    prepared_consumer,
    run_one,
    scripted_image,
)

from agent_eval.batch.consumer import PreparedConsumer
from agent_eval.engine import ContainerEngine
from agent_eval.models import ModelIdentity

pytestmark = pytest.mark.docker

__all__ = ["engine"]

CANARY = "sk-canary-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def agent(
    docker_client: docker.DockerClient,
    engine: ContainerEngine,
    tmp_path_factory: pytest.TempPathFactory,
) -> ScriptedAgent:
    image = scripted_image(engine, "codex", tmp_path_factory.mktemp("codex-image"))
    return ScriptedAgent(
        name="codex",
        image=image,
        adapter="agent_eval.adapters.codex",
        model=ModelIdentity(id="gpt-scripted-1", settings={"model_reasoning_effort": "low"}),
        version="0.171.0",
        environment={
            "OPENAI_API_KEY": CANARY,
            "OPENAI_BASE_URL": f"http://127.0.0.1:{PORT}/v1",
        },
        adapter_args=("--endpoint-env", "OPENAI_BASE_URL"),
    )


@pytest.fixture(scope="module")
def consumer(
    engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PreparedConsumer]:
    yield prepared_consumer(engine, tmp_path_factory.mktemp("codex-consumer"))


def test_a_correct_write_passes_on_the_first_attempt_through_the_responses_endpoint(
    engine: ContainerEngine, consumer: PreparedConsumer, agent: ScriptedAgent, tmp_path: Path
) -> None:
    result = run_one(engine, consumer, agent, "correct", tmp_path)
    (run,) = result.receipt.runs
    assert run.firstSuccess and len(run.attempts) == 1, run.attempts[0].diagnostics
    requests = result.requests[1]
    assert {(r["method"], r["path"]) for r in requests} == {("POST", "/v1/responses")}
    assert all(r["stream"] is True and r["model"] == "gpt-scripted-1" for r in requests)
    assert all(r["apiKeySha256"] == hashlib.sha256(CANARY.encode()).hexdigest() for r in requests)
    assert "exec_command" in requests[0]["tools"] and "web_search" not in requests[0]["tools"]
    assert requests[-1]["inputTypes"][-2:] == ["function_call", "function_call_output"]
    assert files_containing(result.batch_dir, CANARY) == []


def test_a_wrong_write_is_repaired_from_failed_ids_without_expected_values(
    engine: ContainerEngine, consumer: PreparedConsumer, agent: ScriptedAgent, tmp_path: Path
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
    assert files_containing(result.batch_dir, CANARY) == []


def test_a_model_that_never_answers_times_out_without_a_repair(
    engine: ContainerEngine, consumer: PreparedConsumer, agent: ScriptedAgent, tmp_path: Path
) -> None:
    result = run_one(engine, consumer, agent, "hang", tmp_path, timeout_s=10.0)
    (run,) = result.receipt.runs
    (attempt,) = run.attempts
    assert attempt.failureCategory == "timeout" and attempt.durationMs < 40_000
    assert any(r["method"] == "POST" for r in result.requests[1])
    assert files_containing(result.batch_dir, CANARY) == []
