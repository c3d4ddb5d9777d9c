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


def test_every_listed_subcommand_is_the_command_it_names() -> None:
    """The help line of each subcommand is listed without importing it; each entry must
    still lead to a command."""
    import click

    from agent_eval.cli import COMMANDS, main

    context = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(context, name)
        assert isinstance(command, click.Command), name
    assert main.get_command(context, "no-such-command") is None
    listed = run("agent-eval", "--help").stdout
    assert all(f"  {name} " in listed for name in COMMANDS)


@pytest.mark.parametrize(
    "argv",
    [["agent-eval", "--help"], ["eval-agent", "--help"], ["check-agent-eval", "--help"],
     ["review-agent-eval", "--help"]],
)  # fmt: skip
def test_help_imports_no_model_no_engine_and_no_subcommand(argv: list[str]) -> None:
    """What --help costs: the interpreter and click, never the library behind a command."""
    entries = {"agent-eval": "main", "eval-agent": "eval_agent_main",
               "check-agent-eval": "check_main", "review-agent-eval": "review_main"}  # fmt: skip
    entry = entries[argv[0]]
    code = (
        "import sys\n"
        f"sys.argv = {argv!r}\n"
        "import agent_eval.cli as cli\n"
        "try:\n"
        f"    getattr(cli, {entry!r})()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'docker', 'pydantic'}\n"
        "               or m.startswith(('agent_eval.models', 'agent_eval.batch.run',\n"
        "                                'agent_eval.verdict', 'agent_eval.verification')))\n"
        "print(heavy, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr[-2000:]


def test_the_command_s_repetition_bound_is_the_receipt_s() -> None:
    from agent_eval.cli.common import MAX_REPETITIONS as COMMAND_BOUND
    from agent_eval.models.receipt import MAX_REPETITIONS as RECEIPT_BOUND

    assert COMMAND_BOUND == RECEIPT_BOUND
