"""``agent-eval tasks verify``: every fixture solution passes, every negative fails as declared."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from agent_eval.batch.lease import verification_lease
from agent_eval.cli.common import EXISTING_DIR, EXIT_FAILURE, located_project, reported_errors
from agent_eval.cli.compose import local_engine
from agent_eval.errors import InfrastructureError
from agent_eval.verification.container.verifier import source_verifiers
from agent_eval.verification.fixture_check import CaseResult, format_report, verify_tasks
from agent_eval.verification.local import LocalVerifier
from agent_eval.verification.protocol import Verifier

__all__ = ["tasks_group"]

VERIFIERS = ("local", "docker")
EXIT_UNDECIDED = 3
"""The harness could not verify: no case was found wrong, but not every case was decided."""


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
    type=EXISTING_DIR,
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
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report as one JSON document (FixtureReport) instead of a table.",
)
@click.pass_context
def verify_command(
    ctx: click.Context,
    verifier: str | None,
    concurrency: int,
    repeat: int,
    project: Path | None,
    verifier_image: str | None,
    as_json: bool,
) -> None:
    """Validate the suite, then verify every fixture case and print a table.

    Each mismatch is followed by its findings (file:line: category: message)
    and its failed assertions' messages. On a terminal, a line per case on
    stderr as it is decided.

    Exit status: 0 every case matches its expectation; 1 a mismatch (or an
    invalid suite or fixture); 2 a usage error; 3 nothing was decided wrong
    but the harness could not verify (a case's verification or the verifier's
    preparation failed on the harness's side: run it again, or see the message).
    """
    alias = ctx.meta.get("tasks.verifier")
    if verifier is not None and alias is not None and alias != verifier:
        raise click.UsageError("--engine and --verifier disagree; use --verifier alone")
    chosen = verifier or alias or "local"
    if verifier_image is not None and chosen != "docker":
        raise click.UsageError("--verifier-image needs --verifier docker")
    layout = located_project(project, "tasks")
    progress = None if as_json or not sys.stderr.isatty() else _progress
    with reported_errors(), _infrastructure_exit():
        if chosen == "docker":
            with (
                local_engine() as engine,
                # Its containers carry a lease's token: only its reaper removes them.
                verification_lease(layout.evidence, engine) as lease,
                source_verifiers(
                    engine, layout, verifier_image=verifier_image, slots=concurrency,
                    batch_id=lease.batch_id,
                ) as build_docker,
            ):  # fmt: skip
                report = verify_tasks(
                    layout, build_docker, concurrency=concurrency, repeat=repeat,
                    on_result=progress,
                )  # fmt: skip
        else:

            def build(work_dir: Path) -> Verifier:
                return LocalVerifier.prepare(
                    packages_dir=layout.packages,
                    tasks_dir=layout.tasks,
                    graders_dir=layout.graders,
                    work_dir=work_dir,
                    slots=concurrency,
                )

            report = verify_tasks(
                layout, build, concurrency=concurrency, repeat=repeat, on_result=progress
            )
    if as_json:
        click.echo(report.to_model().model_dump_json(indent=2))
    else:
        click.echo(format_report(report), nl=False)
    if report.ok:
        sys.exit(0)
    sys.exit(EXIT_UNDECIDED if report.undecided else EXIT_FAILURE)


def _progress(row: CaseResult) -> None:
    verdict = "ok" if row.ok else "infrastructure failure" if row.infrastructure else "MISMATCH"
    click.echo(f"{row.task_id}/{row.case}: {verdict}", err=True)


@contextmanager
def _infrastructure_exit() -> Iterator[None]:
    """The harness's own failure (a verifier that could not be prepared) exits 3, not 1."""
    try:
        yield
    except InfrastructureError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(EXIT_UNDECIDED) from exc
