"""``agent-eval report``: write the reviewer's HTML view of a saved batch."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli.common import EXISTING_DIR, OUTPUT_FILE, located_project, reported_errors
from agent_eval.report.render import write_report

__all__ = ["report_command"]


@click.command()
@click.argument("run_dir", type=EXISTING_DIR)
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
def report_command(run_dir: Path, output: Path | None, project: Path | None) -> None:
    """Write one self-contained HTML page for the batch in RUN_DIR and print its path."""
    if project is not None:  # named, it must be a repository (without it: reported in the page)
        located_project(project)
    with reported_errors():
        written = write_report(run_dir, output, project=project)
    click.echo(str(written))
