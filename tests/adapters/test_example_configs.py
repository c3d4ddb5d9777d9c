"""Every example runner config the README points at is a valid runner.json, reaches its
provider only through the gateway, and expects the identity its adapter will report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.models import RunnerConfig
from tests.paths import SHIPPED

EXAMPLES = sorted((SHIPPED / "examples" / "runners").glob("*.json"))


def test_there_is_an_example_for_each_real_agent() -> None:
    assert {p.stem for p in EXAMPLES} >= {"claude-code", "codex", "aider", "mini-swe-agent"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_example_is_a_valid_runner_config_for_its_adapter(path: Path) -> None:
    config = RunnerConfig.model_validate(json.loads(path.read_text()))
    assert config.expectedRunner.name == path.stem
    module = "agent_eval.adapters." + path.stem.replace("-", "_")
    assert module in config.args
    model = config.args[config.args.index("--model") + 1]
    assert model == config.expectedModel.id
    assert config.envAllowlist == [], "the runner never receives a credential"
    (upstream,) = config.models
    assert upstream.upstream.startswith("https://") and upstream.credentialEnv.endswith("_API_KEY")
    assert not config.gateway.privateUpstreams and config.gateway.tokenBudget
