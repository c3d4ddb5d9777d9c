"""``agent-eval init``: adopt the harness in a library's repository, with one worked task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from agent_eval.cli.common import reported_errors

__all__ = ["init_command"]

EXIT_USAGE = 2


def _example(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[Any]:
    examples: list[Any] = []
    for value in values:
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise click.BadParameter(f"{value!r} is not JSON: {exc}") from None
        if not isinstance(parsed, list):
            raise click.BadParameter(f"{value!r} must be a JSON list of positional arguments")
        examples.append(parsed)
    return examples


@click.command(name="init")
@click.option(
    "--function",
    "function",
    required=True,
    help="The library function the worked task is about: module:name (or module:Class.name "
    "for a classmethod or staticmethod).",
)
@click.option(
    "--example",
    "examples",
    multiple=True,
    required=True,
    callback=_example,
    help="A JSON list of positional arguments the grader calls the function with; repeatable.",
)
@click.option("--task", "task_id", default=None, help="The task's id (default: the name's).")
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The library's repository.",
)
def init_command(function: str, examples: list[Any], task_id: str | None, project: Path) -> None:
    """Write [tool.agent-eval], tasks/suite.json, a task for FUNCTION and its fixtures.

    A file that exists with other content is named and nothing is written (exit 2); a
    second run with the same answers writes nothing; a second task (--task) is added to
    tasks/suite.json.
    """
    from agent_eval.adoption.init import init_repository

    root = project.resolve()
    with reported_errors(EXIT_USAGE):
        done = init_repository(root, function, examples, task_id=task_id)
    for path in done.written:
        click.echo(f"wrote {path.relative_to(root)}")
    if not done.written:
        click.echo("nothing to change: every file already holds what init writes")
    click.echo("next:")
    for command in done.next_commands:
        click.echo(f"  {command}")
