"""``agent-eval report``: write the reviewer's HTML view of a saved batch."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli.common import (
    EXISTING_DIR,
    OUTPUT_FILE,
    batch_dir,
    gate_anchors,
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
    help="Where to write the page (default: RUN_DIR/report.html, or the matrix record's "
    "name with .html).",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose current suite the decision uses (default: the current one).",
)
def report_command(batch: str, output: Path | None, project: Path | None) -> None:
    """Write one self-contained HTML page for the batch RUN and print its path.

    RUN is the batch's run directory, a unique prefix of its id, or latest. Given a
    matrix record instead (a file eval-agent writes for several runners, or `agent-eval
    matrix --json`), the page is the matrix's, each agent's batch linked to its report:
    every batch the record names must be in the repository's evidence directory, pass
    the checker's evidence rules, and make the matrix the record holds.
    """
    if Path(batch).is_file():
        _matrix_page(Path(batch), output, project)
        return
    run_dir = batch_dir(batch, project)
    if project is not None:  # named, it must be a repository (without it: reported in the page)
        located_project(project)
    with reported_errors():
        written = write_report(run_dir, output, project=project, current=report_anchors(project))
    click.echo(str(written))


def _matrix_page(record: Path, output: Path | None, project: Path | None) -> None:
    # Imported here: a batch's page, the usual case, never loads the comparison.
    from agent_eval.compare.matrix_compare import read_matrix_record
    from agent_eval.compare.matrix_page import write_matrix_page

    located = located_project(project, "matrix record's batches")
    page = output if output is not None else record.with_suffix(".html")
    if page.resolve() == record.resolve():
        raise click.UsageError(f"--output: {page} is the matrix record itself")
    with reported_errors():
        held = read_matrix_record(record, located.evidence, gate_anchors(located))
        reports = {d.name: d / "report.html" for row in held.dirs for d in row}
        write_matrix_page(page, held.matrix, reports)
    click.echo(str(page))
