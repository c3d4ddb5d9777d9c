"""``agent-eval list`` and ``agent-eval show``: the batches of a repository, and one
batch on one screen."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from agent_eval.cli.common import (
    EXISTING_DIR,
    batch_dir,
    gate_anchors,
    located_project,
    reported_errors,
)

__all__ = ["list_command", "show_command"]


@click.command("list")
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose batches to list (default: the current one).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the list as one JSON document.")
@click.option(
    "--limit",
    type=click.IntRange(1),
    default=20,
    show_default=True,
    help="Show at most this many of the newest batches.",
)
@click.option(
    "--no-decide",
    is_flag=True,
    help="Do not decide each batch (reads no repository history and rebuilds nothing).",
)
def list_command(project: Path | None, as_json: bool, limit: int, no_decide: bool) -> None:
    """List the repository's batches, newest first: status, runner and model, first and
    final successes, check-agent-eval's decision, age."""
    from agent_eval.report.batches import list_batches, listing_lines

    located = located_project(project, "batches")
    with reported_errors():
        anchors = None if no_decide else gate_anchors(located)
        listing = list_batches(located.evidence, anchors, limit)
    if as_json:
        click.echo(listing.model_dump_json(indent=2))
        return
    for line in listing_lines(listing, datetime.now(UTC)):
        click.echo(line)


@click.command("show")
@click.argument("batch", metavar="RUN")
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository the batch belongs to (default: the current one).",
)
def show_command(batch: str, project: Path | None) -> None:
    """Show one batch on one screen: the decision and its reasons, each run that did not
    pass with its lead assertion or finding, and where its report is.

    RUN is the batch's run directory, a unique prefix of its id, or latest. Exits 0
    when it qualifies, 1 when it does not, 2 on a usage error.
    """
    from agent_eval.report.batches import show_lines

    run_dir = batch_dir(batch, project)
    located = located_project(project)
    with reported_errors(2):
        lines, qualified = show_lines(run_dir, gate_anchors(located))
    for line in lines:
        click.echo(line)
    raise SystemExit(0 if qualified else 1)
