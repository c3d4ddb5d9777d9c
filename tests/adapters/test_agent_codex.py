"""The codex adapter writes one provider (the gateway's relay, the key by variable name
only) with update checks, analytics, plugins and web search off, refuses settings it
cannot send, and counts an attempt as completed only on a completed turn without errors."""

from __future__ import annotations

import json
import tomllib

import pytest

from agent_eval.adapters.codex import config_toml, turn_completed
from agent_eval.adapters.common import AdapterOptions


def test_the_config_names_one_provider_and_turns_off_everything_else() -> None:
    text = config_toml(AdapterOptions("m", {"model_reasoning_effort": "low"}), "http://x/v1")
    config = tomllib.loads(text)
    assert config["model"] == "m" and config["model_reasoning_effort"] == "low"
    provider = config["model_providers"][config["model_provider"]]
    assert provider == {"name": "agent-eval", "base_url": "http://x/v1",
                        "env_key": "OPENAI_API_KEY", "wire_api": "responses"}  # fmt: skip
    assert config["check_for_update_on_startup"] is False
    assert config["analytics"] == {"enabled": False} and config["web_search"] == "disabled"
    assert not any(config["features"].values())


def test_unknown_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="temperature"):
        config_toml(AdapterOptions("m", {"temperature": 0}), "http://x/v1")


def test_only_a_completed_turn_without_errors_completes_the_attempt() -> None:
    def events(*types: str) -> list[str]:
        return [json.dumps({"type": t}) for t in types]

    assert turn_completed(events("thread.started", "turn.started", "turn.completed"))
    assert not turn_completed(events("turn.started", "turn.failed"))
    assert not turn_completed(events("error", "turn.completed"))
    assert not turn_completed(["garbage"])
