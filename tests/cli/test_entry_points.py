"""Every entry point answers -h and --version by its own name, and a path that is not
there is a usage error (exit 2) that leaves no evidence behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agent_eval

BIN = Path(sys.executable).parent
ENTRY_POINTS = ["agent-eval", "eval-agent", "check-agent-eval", "review-agent-eval"]


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_every_entry_point_takes_h_and_version(name: str) -> None:
    short, long = run(name, "-h"), run(name, "--help")
    assert short.returncode == 0 and short.stdout == long.stdout
    assert short.stdout.startswith(f"Usage: {name} ")
    version = run(name, "--version")
    assert version.returncode == 0
    assert version.stdout.strip() == f"{name}, version {agent_eval.__version__}"


def test_a_subcommand_takes_h_too() -> None:
    done = run("agent-eval", "tasks", "verify", "-h")
    assert done.returncode == 0 and done.stdout.startswith("Usage: agent-eval tasks verify")


def test_a_runner_config_that_is_not_there_is_a_usage_error_leaving_nothing(
    tmp_path: Path,
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    done = run(
        "eval-agent", "--runner-config", str(tmp_path / "runner.jsn"), "--project", str(project)
    )
    assert done.returncode == 2 and "runner.jsn" in done.stderr and done.stdout == ""
    assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml"]
