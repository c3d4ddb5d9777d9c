"""``agent-eval tasks verify``: every fixture solution passes, every negative fails as declared."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from agent_eval.cli.common import EXIT_FAILURE, reported_errors
from agent_eval.cli.compose import local_engine
from agent_eval.errors import InfrastructureError
from agent_eval.project import find_project
from agent_eval.verification.container.verifier import source_verifiers
from agent_eval.verification.fixture_check import format_report, verify_tasks
from agent_eval.verification.local import LocalVerifier
from agent_eval.verification.protocol import Verifier

__all__ = ["tasks_group"]

VERIFIERS = ("local", "docker")


@click.group(name="tasks")
def tasks_group() -> None:
    """Check the task suite and its fixtures."""


def _deprecated_engine(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        click.echo("warning: --engine is deprecated; use --verifier", err=True)
        ctx.meta["tasks.verifier"] = value


@tasks_group.command(name="verify")
@click.option(
    "--verifier",
    type=click.Choice(VERIFIERS),
    default=None,
    help="Where solutions are analysed and graded: 'local' (a subprocess on this machine, "
    "against packages/ sources; the default) or 'docker' (the verifier container).",
)
@click.option(
    "--engine",
    type=click.Choice(VERIFIERS),
    default=None,
    expose_value=False,
    callback=_deprecated_engine,
    help="Deprecated alias of --verifier (one release).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 32),
    default=4,
    show_default=True,
    help="Fixture cases verified in parallel.",
)
@click.option(
    "--repeat",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Verify each case this many times; a case whose verdict differs between them fails.",
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
    help="With --verifier docker: the pinned verifier image (name@sha256:... or sha256:...); "
    "default: this checkout's verifier image, found by its recipe digest.",
)
@click.pass_context
def verify_command(
    ctx: click.Context,
    verifier: str | None,
    concurrency: int,
    repeat: int,
    project: Path | None,
    verifier_image: str | None,
) -> None:
    """Validate the suite, then verify every fixture case and print a table.

    Exit status: 0 every case matches its expectation, 1 a mismatch (or an
    invalid suite), 2 a usage error, 4 undecided: the infrastructure (the
    engine, the analysis warm-up, a verifier) failed and no case mismatched.
    """
    alias = ctx.meta.get("tasks.verifier")
    if verifier is not None and alias is not None and alias != verifier:
        raise click.UsageError("--engine and --verifier disagree; use --verifier alone")
    chosen = verifier or alias or "local"
    if verifier_image is not None and chosen != "docker":
        raise click.UsageError("--verifier-image needs --verifier docker")
    with reported_errors():
        layout = find_project(project)
    with reported_errors(), _undecided_on_infrastructure():
        if chosen == "docker":
            with (
                local_engine() as engine,
                source_verifiers(
                    engine, layout, verifier_image=verifier_image, slots=concurrency
                ) as build_docker,
            ):
                report = verify_tasks(layout, build_docker, concurrency=concurrency, repeat=repeat)
        else:

            def build(work_dir: Path) -> Verifier:
                return LocalVerifier.prepare(
                    packages_dir=layout.packages,
                    tasks_dir=layout.tasks,
                    graders_dir=layout.graders,
                    work_dir=work_dir,
                    slots=concurrency,
                )

            report = verify_tasks(layout, build, concurrency=concurrency, repeat=repeat)
    click.echo(format_report(report), nl=False)
    undecided = all(row.ok or row.observed == "infrastructure failure" for row in report.rows)
    sys.exit(0 if report.ok else EXIT_UNDECIDED if undecided else EXIT_FAILURE)


EXIT_UNDECIDED = 4
"""``tasks verify`` could not decide: only the infrastructure failed (run it again)."""


@contextlib.contextmanager
def _undecided_on_infrastructure() -> Iterator[None]:
    """An infrastructure error (an engine, a warm-up) exits 4, never 1 (a mismatch)."""
    try:
        yield
    except InfrastructureError as exc:
        click.echo(f"error: could not decide: {exc}", err=True)
        raise SystemExit(EXIT_UNDECIDED) from exc
