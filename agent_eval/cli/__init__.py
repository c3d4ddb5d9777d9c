"""Command-line entry points. Each command lives in its own module and only
parses arguments, calls one library function and maps errors to exit codes."""

from __future__ import annotations

import click

from agent_eval.cli.check import check_command
from agent_eval.cli.cleanup import cleanup_command
from agent_eval.cli.compare import compare_command, plan_command, summary_command
from agent_eval.cli.images import images_group
from agent_eval.cli.reference import reference_config_command
from agent_eval.cli.report import report_command
from agent_eval.cli.review import review_command
from agent_eval.cli.run import eval_agent_command
from agent_eval.cli.runners import runners_group
from agent_eval.cli.tasks import tasks_group
from agent_eval.cli.trial import try_agent_command

__all__ = ["check_main", "eval_agent_main", "main", "review_main"]


@click.group(name="agent-eval")
@click.version_option(package_name="agent-eval")
def main() -> None:
    """Evaluate coding agents against this repository's library."""


main.add_command(eval_agent_command, name="run")
main.add_command(check_command, name="check")
main.add_command(review_command, name="review")
main.add_command(images_group, name="images")
main.add_command(tasks_group, name="tasks")
main.add_command(reference_config_command, name="reference-config")
main.add_command(cleanup_command, name="cleanup")
main.add_command(report_command, name="report")
main.add_command(runners_group, name="runners")
main.add_command(try_agent_command, name="try-agent")
main.add_command(compare_command, name="compare")
main.add_command(plan_command, name="plan")
main.add_command(summary_command, name="summary")


HELP_OPTIONS = ["-h", "--help"]

main.context_settings["help_option_names"] = HELP_OPTIONS
# The three entry points are commands of their own as well as ``agent-eval`` subcommands:
# each takes -h and --version when run by its own name.
for _command in (eval_agent_command, check_command, review_command):
    _command.context_settings["help_option_names"] = HELP_OPTIONS
    click.version_option(package_name="agent-eval")(_command)


def eval_agent_main() -> None:
    """``eval-agent``."""
    eval_agent_command(prog_name="eval-agent")


def check_main() -> None:
    """``check-agent-eval``."""
    check_command(prog_name="check-agent-eval")


def review_main() -> None:
    """``review-agent-eval``."""
    review_command(prog_name="review-agent-eval")
