"""What the CLIs report they used reaches the response, read from their own records.

Invariants: Claude Code's result event gives input tokens (cache reads and
writes included), output tokens and its cost; Codex's completed turns are
summed; mini's trajectory gives its cost; a value that is negative, not a
number, a boolean or not finite is dropped rather than sent (the harness
would refuse the whole response); the response carries the usage only when
some was reported.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from agent_eval.adapters import common
from agent_eval.adapters.claude_code import usage_of as claude_usage
from agent_eval.adapters.codex import usage_of as codex_usage
from agent_eval.adapters.mini_swe_agent import instance_cost
from agent_eval.models import RunnerResponse


@pytest.fixture(autouse=True)
def fresh_usage() -> None:
    common._USAGE.clear()


def test_claude_codes_result_event_gives_tokens_with_the_cache_and_its_cost() -> None:
    result = {
        "type": "result",
        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 5,
                  "cache_read_input_tokens": 100, "output_tokens": 7},
        "total_cost_usd": 0.0123,
    }  # fmt: skip
    assert claude_usage(result) == (115, 7, 0.0123)
    assert claude_usage({"type": "result"}) == (None, None, None)


def test_codexs_completed_turns_are_summed() -> None:
    lines = [
        json.dumps({"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 4}}),
        "not json",
        json.dumps({"type": "item.completed", "usage": {"input_tokens": 99}}),
        json.dumps({"type": "turn.completed", "usage": {"input_tokens": 2, "output_tokens": 1}}),
    ]
    assert codex_usage(lines) == (5, 5)
    assert codex_usage([]) == (None, None)


def test_minis_trajectory_gives_its_cost(tmp_path: Path) -> None:
    trajectory = tmp_path / "trajectory.json"
    trajectory.write_text(json.dumps({"info": {"model_stats": {"instance_cost": 0.5}}}))
    assert instance_cost(trajectory) == 0.5
    trajectory.write_text(json.dumps({"info": {"model_stats": {"instance_cost": True}}}))
    assert instance_cost(trajectory) is None
    assert instance_cost(tmp_path / "missing.json") is None


@pytest.mark.parametrize("bad", [-1, math.inf, math.nan, True, "12"])
def test_a_value_the_harness_would_refuse_is_dropped(bad: Any) -> None:
    common.report_usage(input_tokens=bad, output_tokens=3, cost_usd=bad)
    assert common._USAGE == {"outputTokens": 3}


def run_main(monkeypatch: pytest.MonkeyPatch, usage: dict[str, Any] | None) -> RunnerResponse:
    request = {
        "schemaVersion": 1, "runId": "forms-1", "taskId": "forms", "taskText": "t",
        "consumerDir": "/consumer", "outputDir": "/solution",
        "allowedOutputPaths": ["solution.py"], "attempt": 1, "timeBudgetMs": 60000,
    }  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(request)))
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)

    def run(*_args: Any) -> bool:
        if usage is not None:
            common.report_usage(**usage)
        return True

    assert common.main("claude-code", run, ["--model", "m"]) == 0
    return RunnerResponse.model_validate_json(out.getvalue())


def test_the_response_carries_the_usage_only_when_some_was_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    response = run_main(monkeypatch, {"input_tokens": 5, "output_tokens": 2, "cost_usd": 0.01})
    assert response.usage is not None
    assert (response.usage.inputTokens, response.usage.outputTokens) == (5, 2)
    assert response.usage.costUsd == 0.01
    common._USAGE.clear()
    assert run_main(monkeypatch, None).usage is None
