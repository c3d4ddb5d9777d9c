"""``review-agent-eval``: record a digest-bound review decision in a receipt."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, cast

import click

from agent_eval.cli.common import (
    EXISTING_DIR,
    EXISTING_FILE,
    batch_dir,
    located_project,
    reported_errors,
)

__all__ = ["review_command"]


@click.command()
@click.argument("batch", required=False, metavar="[RUN]")
@click.option(
    "--receipt",
    type=EXISTING_FILE,
    default=None,
    help="The batch's receipt.json (instead of RUN).",
)
@click.option("--run", "run_id", required=True, help="Run id, <task-id>-<n>.")
@click.option("--attempt", required=True, type=click.IntRange(1, 2))
@click.option("--reviewer", required=True, help="Who reviewed the exact saved solution.")
@click.option("--decision", required=True, type=click.Choice(["accept", "reject"]))
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose batches RUN is found in (default: the current one).",
)
def review_command(
    batch: str | None,
    receipt: Path | None,
    run_id: str,
    attempt: int,
    reviewer: str,
    decision: str,
    project: Path | None,
) -> None:
    """Bind a reviewer's decision to the attempt's recomputed solution digest.

    RUN is the batch's run directory, a unique prefix of its id, or latest; or name
    its receipt with --receipt.
    """
    from agent_eval.verdict.review import record_review

    if project is not None:
        located_project(project)  # named, it must be a repository
    if (batch is None) == (receipt is None):
        raise click.UsageError("name the batch: RUN, or --receipt (one of them)")
    if receipt is None:
        assert batch is not None
        receipt = batch_dir(batch, project) / "receipt.json"

    with reported_errors():
        entry = record_review(
            receipt,
            run_id=run_id,
            attempt=attempt,
            reviewer=reviewer,
            decision=cast(Literal["accept", "reject"], decision),
            now=datetime.now(UTC),
        )
    click.echo(json.dumps(entry.model_dump(mode="json"), sort_keys=True))
