"""eval-agent's executor options: refused with a usage error naming the option before anything
runs, and Ray's absence said in words, never as a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli.run import eval_agent_command
from agent_eval.cluster import ray_cluster
from agent_eval.errors import ConfigError
from tests.paths import REPO


@pytest.mark.parametrize(
    "options, said",
    [
        (["--executor", "ray"], "--executor ray needs --ray-address HOST:PORT"),
        (["--ray-address", "127.0.0.1:6379"], "go with --executor ray"),
        (["--ray-node-ip", "127.0.0.1"], "go with --executor ray"),
        (["--executor", "ray", "--ray-address", "127.0.0.1"], "is not HOST:PORT"),
        (["--executor", "ray", "--ray-address", "127.0.0.1:0"], "is not HOST:PORT"),
        (["--executor", "ray", "--ray-address", "127.0.0.1:70000"], "is not HOST:PORT"),
        (["--executor", "ray", "--ray-address", "a b:6379"], "is not HOST:PORT"),
        (["--executor", "ray", "--ray-address", ":6379"], "is not HOST:PORT"),
        (
            ["--executor", "ray", "--ray-address", "127.0.0.1:6379", "--ray-node-ip", "node"],
            "is not an IP address",
        ),
        (["--executor", "k8s"], "'k8s' is not one of 'local', 'ray'"),
    ],
)
def test_executor_options_that_cannot_work_are_refused_before_the_batch(
    tmp_path: Path, options: list[str], said: str
) -> None:
    config = tmp_path / "runner.json"
    config.write_text("{}")
    result = CliRunner().invoke(
        eval_agent_command,
        ["--runner-config", str(config), "--project", str(REPO), *options],
    )
    assert result.exit_code == 2, result.output
    assert said in result.output
    assert "Traceback" not in result.output
    assert not list(tmp_path.glob("*/receipt.json"))


def test_without_the_ray_extra_the_executor_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an install without the extra gives
    with pytest.raises(ConfigError, match=r"pip install 'agent-eval\[ray\]'"):
        ray_cluster._ray()
