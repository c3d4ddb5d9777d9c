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
    default=None,
    help="The library function the worked task is about: module:name (or module:Class.name "
    "for a classmethod or staticmethod).",
)
@click.option(
    "--example",
    "examples",
    multiple=True,
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
@click.option(
    "--ci",
    "ci",
    type=click.Choice(["github", "gitlab"]),
    default=None,
    help="Also (or, without --function, only) write a CI job that runs a batch, checks it "
    "with JUnit XML, keeps the report, summary and JUnit as artifacts, and fails on a "
    "rejection.",
)
def init_command(
    function: str | None,
    examples: list[Any],
    task_id: str | None,
    project: Path,
    ci: str | None,
) -> None:
    """Write [tool.agent-eval], tasks/suite.json, a task for FUNCTION and its fixtures.

    A file that exists with other content is named and nothing is written (exit 2); a
    second run with the same answers writes nothing; a second task (--task) is added to
    tasks/suite.json.
    """
    root = project.resolve()
    if function is None and ci is None:
        raise click.UsageError("give --function (with --example) for a task, or --ci")
    if function is not None:
        if not examples:
            raise click.UsageError("--function needs at least one --example")
        _init_task(root, function, examples, task_id)
    if ci is not None:
        from agent_eval.adoption.ci import write_ci

        with reported_errors(EXIT_USAGE):
            wrote = write_ci(root, "github" if ci == "github" else "gitlab")
        for path in wrote.written:
            click.echo(f"wrote {path.relative_to(root)}")
        for path in wrote.unchanged:
            click.echo(f"unchanged {path.relative_to(root)}")
        if wrote.note:
            click.echo(f"then: {wrote.note}")


def _init_task(root: Path, function: str, examples: list[Any], task_id: str | None) -> None:
    from agent_eval.adoption.init import init_repository

    with reported_errors(EXIT_USAGE):
        done = init_repository(root, function, examples, task_id=task_id)
    for path in done.written:
        click.echo(f"wrote {path.relative_to(root)}")
    if not done.written:
        click.echo("nothing to change: every file already holds what init writes")
    click.echo("next:")
    for command in done.next_commands:
        click.echo(f"  {command}")
