"""Command-line entry points. Each command lives in its own module and only
parses arguments, calls one library function and maps errors to exit codes."""

from __future__ import annotations

import importlib
from typing import Any

import click

import agent_eval
from agent_eval.cli.check import check_command
from agent_eval.cli.review import review_command
from agent_eval.cli.run import eval_agent_command

__all__ = ["COMMANDS", "check_main", "eval_agent_main", "main", "review_main"]

COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": (
        "agent_eval.cli.run", "eval_agent_command",
        "Run every scheduled run of the suite (eval-agent).",
    ),
    "check": (
        "agent_eval.cli.check", "check_command",
        "Qualify a saved batch or reject it with reasons (check-agent-eval).",
    ),
    "review": (
        "agent_eval.cli.review", "review_command",
        "Record a reviewer's decision on one attempt (review-agent-eval).",
    ),
    "report": (
        "agent_eval.cli.report", "report_command",
        "Write the reviewer's HTML page of a saved batch.",
    ),
    "compare": (
        "agent_eval.cli.compare", "compare_command",
        "Compare a baseline's batches with a candidate's.",
    ),
    "matrix": (
        "agent_eval.cli.compare", "matrix_command",
        "Set several agents' batches over one library side by side.",
    ),
    "summary": (
        "agent_eval.cli.compare", "summary_command",
        "Print a summary of a batch that may be shared.",
    ),
    "plan": (
        "agent_eval.cli.compare", "plan_command",
        "Say how many runs a comparison needs.",
    ),
    "list": (
        "agent_eval.cli.listing", "list_command",
        "List the repository's batches, newest first, with their decisions.",
    ),
    "show": (
        "agent_eval.cli.listing", "show_command",
        "Show one batch on one screen: its decision, failed runs and report.",
    ),
    "export": (
        "agent_eval.cli.export", "export_command",
        "Write a batch's attempts as ATIF trajectories.",
    ),
    "images": (
        "agent_eval.cli.images", "images_group",
        "Build, lock and verify the offline images.",
    ),
    "tasks": (
        "agent_eval.cli.tasks", "tasks_group",
        "Check the suite's tasks against their fixtures.",
    ),
    "runners": (
        "agent_eval.cli.runners", "runners_group",
        "Review runner configurations into the registry.",
    ),
    "reference-config": (
        "agent_eval.cli.reference", "reference_config_command",
        "Write the runner config of a built-in reference runner.",
    ),
    "try-agent": (
        "agent_eval.cli.trial", "try_agent_command",
        "Try an agent CLI offline against a scripted model.",
    ),
    "lock-build": (
        "agent_eval.cli.packing", "lock_build_command",
        "Write the library's build lock (resolved by pip).",
    ),
    "fetch-build-wheels": (
        "agent_eval.cli.packing", "fetch_build_wheels_command",
        "Download the wheels the library's build lock pins.",
    ),
    "init": (
        "agent_eval.cli.init", "init_command",
        "Adopt agent-eval in a library's repository, with one worked task.",
    ),
    "cleanup": (
        "agent_eval.cli.cleanup", "cleanup_command",
        "Clean up after batches whose process died.",
    ),
}  # fmt: skip
"""Each subcommand: its module, its object and the one line ``agent-eval --help`` shows.
A subcommand's module is imported only when it runs (or its own help is asked for), so
``agent-eval --help`` costs the interpreter and click; a test keeps the lines true."""


class _LazyGroup(click.Group):
    """A group whose subcommands are imported when used, listed from :data:`COMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        command: Any = getattr(importlib.import_module(module), attribute)
        return command  # type: ignore[no-any-return]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(name="agent-eval", cls=_LazyGroup)
# The version from the package itself (a test pins it to pyproject.toml): asking the
# installed metadata for it scans site-packages, a third of --version's cost.
@click.version_option(version=agent_eval.__version__)
def main() -> None:
    """Evaluate coding agents against this repository's library."""


HELP_OPTIONS = ["-h", "--help"]

main.context_settings["help_option_names"] = HELP_OPTIONS
# The three entry points are commands of their own as well as ``agent-eval`` subcommands:
# each takes -h and --version when run by its own name.
for _command in (eval_agent_command, check_command, review_command):
    _command.context_settings["help_option_names"] = HELP_OPTIONS
    click.version_option(version=agent_eval.__version__)(_command)


def eval_agent_main() -> None:
    """``eval-agent``."""
    eval_agent_command(prog_name="eval-agent")


def check_main() -> None:
    """``check-agent-eval``."""
    check_command(prog_name="check-agent-eval")


def review_main() -> None:
    """``review-agent-eval``."""
    review_command(prog_name="review-agent-eval")
