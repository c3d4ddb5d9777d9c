"""A runner's stdout is accepted only as exactly one protocol object for this request,
from exactly the expected runner and model; anything else is refused with a reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_eval.batch.response import judge_response
from agent_eval.models import ModelIdentity, RunnerIdentity, RunnerRequest
from agent_eval.models.runner_protocol import MAX_RESPONSE_BYTES

RUNNER = RunnerIdentity(name="oracle", version="1")
MODEL = ModelIdentity(id="none", settings={"t": 0})
REQUEST = RunnerRequest(
    schemaVersion=1,
    runId="forms-1",
    taskId="forms",
    taskText="Build a form.",
    consumerDir="/consumer",
    outputDir="/solution",
    allowedOutputPaths=["solution.py"],
    attempt=1,
    timeBudgetMs=1000,
)


def response(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schemaVersion": 1,
        "runId": "forms-1",
        "taskId": "forms",
        "status": "completed",
        "runner": {"name": "oracle", "version": "1"},
        "model": {"id": "none", "settings": {"t": 0}},
    }
    data.update(changes)
    return data


def judge(stdout: bytes, truncated: bool = False):  # type: ignore[no-untyped-def]
    return judge_response(stdout, truncated=truncated, request=REQUEST, runner=RUNNER, model=MODEL)


def test_one_matching_object_is_accepted_with_surrounding_whitespace() -> None:
    verdict = judge(b"\n " + json.dumps(response()).encode() + b"\n")
    assert verdict.problem is None and verdict.response is not None
    assert verdict.response.status == "completed"


@pytest.mark.parametrize(
    ("stdout", "reason"),
    [
        (b"", "printed nothing"),
        (b"   \n", "printed nothing"),
        (json.dumps(response()).encode() * 2, "a second JSON value"),
        (json.dumps(response()).encode() + b"\ndone", "trailing text"),
        (b"[1, 2]", "not a JSON object"),
        (b"\xff\xfe", "not UTF-8"),
        (b"{not json", "not a JSON object"),
        (json.dumps(response(runId="forms-2")).encode(), "not forms/forms-1"),
        (json.dumps(response(taskId="core-validation")).encode(), "not forms/forms-1"),
        (json.dumps(response(schemaVersion=2)).encode(), "schemaVersion"),
        (json.dumps(response(status="done")).encode(), "status"),
        (json.dumps(response(score=1.0)).encode(), "score"),
    ],
)
def test_malformed_output_is_an_invalid_response(stdout: bytes, reason: str) -> None:
    verdict = judge(stdout)
    assert verdict.problem == "invalid-response" and verdict.response is None
    assert reason in verdict.message


def test_oversized_output_is_invalid_whatever_it_holds() -> None:
    padded = json.dumps(response(message="x" * 10)).encode() + b" " * MAX_RESPONSE_BYTES
    assert judge(padded).problem == "invalid-response"
    assert judge(json.dumps(response()).encode(), truncated=True).problem == "invalid-response"


@pytest.mark.parametrize(
    "change",
    [
        {"runner": {"name": "oracle", "version": "2"}},
        {"runner": {"name": "other", "version": "1"}},
        {"model": {"id": "fallback-model", "settings": {"t": 0}}},
        {"model": {"id": "none", "settings": {"t": 1}}},
    ],
)
def test_a_different_runner_or_model_is_an_identity_mismatch(change: dict[str, Any]) -> None:
    verdict = judge(json.dumps(response(**change)).encode())
    assert verdict.problem == "identity-mismatch" and verdict.response is None


def test_random_bytes_on_stdout_are_reported_as_not_utf8() -> None:
    verdict = judge(bytes(range(128, 256)) * 4)
    assert verdict.problem == "invalid-response" and "not UTF-8" in verdict.message


def test_bytes_the_engine_replaced_with_u_fffd_are_reported_as_not_utf8() -> None:
    text = json.dumps(response(message="\ufffd"), ensure_ascii=False).encode()
    verdict = judge(text)
    assert verdict.problem == "invalid-response" and "U+FFFD" in verdict.message


def test_a_key_given_twice_and_a_deep_response_are_invalid_not_a_crash() -> None:
    twice = b'{"status": "completed", "status": "failed"}'
    assert "twice" in judge(twice).message
    deep = b"[" * 60_000 + b"]" * 60_000
    assert judge(deep[:MAX_RESPONSE_BYTES]).problem == "invalid-response"
    assert "deeper" in judge(b"[" * 100 + b"]" * 100).message
