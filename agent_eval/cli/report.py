"""``agent-eval report``: write the reviewer's HTML view of a saved batch."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli.common import (
    EXISTING_DIR,
    OUTPUT_FILE,
    batch_dir,
    located_project,
    report_anchors,
    reported_errors,
)
from agent_eval.report.render import write_report

__all__ = ["report_command"]


@click.command()
@click.argument("batch", metavar="RUN")
@click.option(
    "--output",
    type=OUTPUT_FILE,
    default=None,
    help="Where to write the page (default: RUN_DIR/report.html).",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose current suite the decision uses (default: the current one).",
)
def report_command(batch: str, output: Path | None, project: Path | None) -> None:
    """Write one self-contained HTML page for the batch RUN and print its path.

    RUN is the batch's run directory, a unique prefix of its id, or latest.
    """
    run_dir = batch_dir(batch, project)
    if project is not None:  # named, it must be a repository (without it: reported in the page)
        located_project(project)
    with reported_errors():
        written = write_report(run_dir, output, project=project, current=report_anchors(project))
    click.echo(str(written))
