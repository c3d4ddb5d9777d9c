"""``agent-eval tasks verify``: every fixture solution passes, every negative fails as declared."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_eval.cli.common import EXIT_FAILURE, reported_errors
from agent_eval.local_verifier import LocalVerifier
from agent_eval.project import find_project
from agent_eval.tasks_verify import FixtureEngine, format_report, verify_tasks
from agent_eval.verifier_docker import docker_fixture_engine

__all__ = ["tasks_group"]

ENGINES = ("local", "docker")


@click.group(name="tasks")
def tasks_group() -> None:
    """Check the task suite and its fixtures."""


@tasks_group.command(name="verify")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="local",
    show_default=True,
    help="Where solutions are analysed and graded: 'local' (a subprocess on this machine, "
    "against packages/ sources) or 'docker' (the verifier container).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 32),
    default=4,
    show_default=True,
    help="Fixture cases verified in parallel.",
)
@click.option(
    "--project",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Repository holding tasks/, fixtures/ and packages/ (default: the current one).",
)
@click.option(
    "--verifier-image",
    default=None,
    metavar="REF",
    help="With --engine docker: the pinned verifier image (name@sha256:... or sha256:...); "
    "default: the locally built agent-eval/verifier:local, by its id.",
)
def verify_command(
    engine: str, concurrency: int, project: Path | None, verifier_image: str | None
) -> None:
    """Validate the suite, then verify every fixture case and print a table.

    Exit status: 0 every case matches its expectation, 1 a mismatch (or an
    invalid suite), 2 a usage error.
    """
    if verifier_image is not None and engine != "docker":
        raise click.UsageError("--verifier-image needs --engine docker")
    with reported_errors():
        layout = find_project(project)
        if engine == "docker":
            with docker_fixture_engine(
                layout, verifier_image=verifier_image, slots=concurrency
            ) as build_docker:
                report = verify_tasks(layout, build_docker, concurrency=concurrency)
        else:

            def build(work_dir: Path) -> FixtureEngine:
                return LocalVerifier.prepare(
                    packages_dir=layout.packages,
                    tasks_dir=layout.tasks,
                    graders_dir=layout.graders,
                    work_dir=work_dir,
                    slots=concurrency,
                )

            report = verify_tasks(layout, build, concurrency=concurrency)
    click.echo(format_report(report), nl=False)
    sys.exit(0 if report.ok else EXIT_FAILURE)
