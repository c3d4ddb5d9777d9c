"""The claude-code adapter sends every model setting to the CLI or refuses it, never puts
the key in an argument, points the CLI at the named endpoint, and counts an attempt as
completed only when the CLI's own final result event reports success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.adapters.claude_code import (
    cli_environment,
    final_result,
    settings_arguments,
    succeeded,
)


def test_known_settings_become_flags_and_unknown_ones_are_refused() -> None:
    assert settings_arguments({"max_turns": 8, "effort": "low"}) == [
        "--max-turns", "8", "--effort", "low",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="temperature"):
        settings_arguments({"temperature": 0})


def test_the_environment_has_a_scratch_config_the_endpoint_and_no_update_checks(
    tmp_path: Path,
) -> None:
    env = cli_environment({"ANTHROPIC_API_KEY": "k", "URL": "http://x"}, tmp_path, "URL")
    assert env["ANTHROPIC_BASE_URL"] == "http://x"
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "config")
    assert env["DISABLE_AUTOUPDATER"] == env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    with pytest.raises(ValueError, match="envAllowlist"):
        cli_environment({}, tmp_path, None)
    with pytest.raises(ValueError, match="URL is not set"):
        cli_environment({"ANTHROPIC_API_KEY": "k"}, tmp_path, "URL")


def test_only_a_successful_final_result_event_completes_the_attempt() -> None:
    ok = json.dumps({"type": "result", "subtype": "success", "is_error": False})
    turns = json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True})
    assert succeeded(final_result(["noise", ok]))
    assert not succeeded(final_result([ok, turns]))
    assert not succeeded(final_result(["{}", "not json"]))
