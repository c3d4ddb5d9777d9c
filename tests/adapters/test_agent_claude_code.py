"""The claude-code adapter sends every model setting to the CLI or refuses it, points the
CLI at the gateway's relay with the attempt's token as its only key, counts an attempt as
completed only when the CLI's own final result event reports success, and says how one
failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.adapters.claude_code import (
    cli_environment,
    failure_of,
    final_result,
    settings_arguments,
    succeeded,
)
from agent_eval.adapters.common import ModelEndpoint


def test_known_settings_become_flags_and_unknown_ones_are_refused() -> None:
    assert settings_arguments({"max_turns": 8, "effort": "low"}) == [
        "--max-turns", "8", "--effort", "low",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="temperature"):
        settings_arguments({"temperature": 0})


def test_the_environment_has_a_scratch_config_the_endpoint_and_no_update_checks(
    tmp_path: Path,
) -> None:
    endpoint = ModelEndpoint("http://127.0.0.1:4000", "ae-token")
    env = cli_environment({"ANTHROPIC_AUTH_TOKEN": "stale", "X": "y"}, tmp_path, endpoint)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4000"
    assert env["ANTHROPIC_API_KEY"] == "ae-token" and "ANTHROPIC_AUTH_TOKEN" not in env
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "config") and env["X"] == "y"
    assert env["DISABLE_AUTOUPDATER"] == env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


@pytest.mark.parametrize(
    ("result", "output", "kind"),
    [
        ({"type": "result", "subtype": "error_max_turns", "is_error": True}, "", "budget"),
        ({"type": "result", "subtype": "success", "is_error": True,
          "result": "API Error: 401 Unauthorized invalid x-api-key"}, "", "provider"),
        (None, "API Error: 529 Overloaded", "provider"),
        (None, "", "error"),
        ({"type": "result", "subtype": "error_during_execution", "is_error": True}, "", "error"),
        ({"type": "result", "subtype": "success", "is_error": False, "result": "no"}, "",
         "refused"),
    ],
)  # fmt: skip
def test_a_failed_run_says_which_kind_of_failure_it_was(
    result: dict[str, object] | None, output: str, kind: str
) -> None:
    assert failure_of(result, output).kind == kind


def test_only_a_successful_final_result_event_completes_the_attempt() -> None:
    ok = json.dumps({"type": "result", "subtype": "success", "is_error": False})
    turns = json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True})
    assert succeeded(final_result(["noise", ok]))
    assert not succeeded(final_result([ok, turns]))
    assert not succeeded(final_result(["{}", "not json"]))
