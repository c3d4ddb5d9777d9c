"""Judging a runner's stdout: exactly one JSON object that matches the request.

Anything else (no output, two objects, trailing text, oversized output, wrong
ids, a different runner or model) is an invalid response; no fallback
identity is ever accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from agent_eval.evidence_io import (
    MAX_JSON_DEPTH,
    format_validation_error,
    nesting_exceeds,
    refuse_duplicates,
)
from agent_eval.models import ModelIdentity, RunnerIdentity, RunnerRequest, RunnerResponse
from agent_eval.models.runner_protocol import MAX_RESPONSE_BYTES

__all__ = ["ResponseVerdict", "judge_response"]


@dataclass(frozen=True)
class ResponseVerdict:
    """The parsed response, or why it was refused."""

    response: RunnerResponse | None
    problem: Literal["invalid-response", "identity-mismatch"] | None
    message: str


def judge_response(
    stdout: bytes,
    *,
    truncated: bool,
    request: RunnerRequest,
    runner: RunnerIdentity,
    model: ModelIdentity,
) -> ResponseVerdict:
    """Parse *stdout* strictly against *request* and the expected identities."""
    if truncated or len(stdout) > MAX_RESPONSE_BYTES:
        return _invalid(f"stdout is larger than {MAX_RESPONSE_BYTES} bytes")
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _invalid(f"stdout is not UTF-8 (byte {exc.start})")
    if "\ufffd" in text:
        # The engine's log replaces bytes that are not UTF-8 with U+FFFD; a
        # protocol object (JSON, escaped) never needs the character itself.
        return _invalid("stdout is not UTF-8 (the engine's log shows U+FFFD for invalid bytes)")
    stripped = text.strip()
    if not stripped:
        return _invalid("the runner printed nothing on stdout")
    decoder = json.JSONDecoder(object_pairs_hook=refuse_duplicates)
    if nesting_exceeds(stripped.encode()):
        return _invalid(f"the response nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value, end = decoder.raw_decode(stripped)
    except json.JSONDecodeError as exc:
        return _invalid(f"stdout is not a JSON object: {exc.msg} at {exc.pos}")
    except ValueError as exc:  # a key given twice
        return _invalid(f"the response is ambiguous: {exc}")
    except RecursionError:
        return _invalid("the response nests too deeply to parse")
    rest = stripped[end:].strip()
    if rest:
        kind = "a second JSON value" if rest[:1] in "{[" else "trailing text"
        return _invalid(f"stdout holds {kind} after the response object")
    if not isinstance(value, dict):
        return _invalid("the response is not a JSON object")
    try:
        response = RunnerResponse.model_validate(value, strict=True)
    except ValidationError as exc:
        return _invalid(f"the response does not match the protocol: {format_validation_error(exc)}")
    if response.runId != request.runId or response.taskId != request.taskId:
        return _invalid(
            f"the response is for {response.taskId}/{response.runId}, "
            f"not {request.taskId}/{request.runId}"
        )
    if response.runner != runner:
        return ResponseVerdict(
            None,
            "identity-mismatch",
            f"runner reported {response.runner.name} {response.runner.version}, "
            f"expected {runner.name} {runner.version}",
        )
    if response.model != model:
        return ResponseVerdict(
            None,
            "identity-mismatch",
            f"model reported {response.model.id} with settings "
            f"{json.dumps(response.model.settings, sort_keys=True)[:200]}, expected {model.id} "
            f"with {json.dumps(model.settings, sort_keys=True)[:200]}",
        )
    return ResponseVerdict(response, None, "")


def _invalid(message: str) -> ResponseVerdict:
    return ResponseVerdict(None, "invalid-response", message)
