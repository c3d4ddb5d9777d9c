"""``review-agent-eval``: record a digest-bound review decision in a receipt."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, cast

import click

from agent_eval.cli.common import EXISTING_FILE, reported_errors

__all__ = ["review_command"]


@click.command()
@click.option("--receipt", required=True, type=EXISTING_FILE)
@click.option("--run", "run_id", required=True, help="Run id, <task-id>-<n>.")
@click.option("--attempt", required=True, type=click.IntRange(1, 2))
@click.option("--reviewer", required=True, help="Who reviewed the exact saved solution.")
@click.option("--decision", required=True, type=click.Choice(["accept", "reject"]))
def review_command(receipt: Path, run_id: str, attempt: int, reviewer: str, decision: str) -> None:
    """Bind a reviewer's decision to the attempt's recomputed solution digest."""
    from agent_eval.verdict.review import record_review

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
