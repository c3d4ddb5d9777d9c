"""``agent-eval runners review``: record that a reviewer approved a runner configuration."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click

from agent_eval.cli.common import EXISTING_DIR, EXISTING_FILE, located_project, reported_errors
from agent_eval.evidence_io import read_model
from agent_eval.models import RunnerConfig
from agent_eval.verdict.registry import review_runner

__all__ = ["runners_group"]


@click.group(name="runners")
def runners_group() -> None:
    """The reviewed-runner registry a qualifying batch must match."""


@runners_group.command(name="review")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=EXISTING_FILE,
    help="The runner.json that was reviewed.",
)
@click.option("--reviewer", required=True, help="Who reviewed it.")
@click.option(
    "--note",
    required=True,
    help="What was inspected: the runner image's recipe and digest (the CLI and the adapter "
    "only: no model, no answers), the verifier and gateway images, the upstreams.",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose registry gets the entry (default: the current one).",
)
def review_runner_command(
    config_path: Path, reviewer: str, note: str, project: Path | None
) -> None:
    """Append an entry for the config to the registry; commit the file afterwards.

    Prints the entry as JSON. A batch qualifies only when its runner, model, images and
    upstreams equal an entry of the registry as committed at the batch's source commit.
    """
    located = located_project(project, "runner config")
    with reported_errors():
        config = read_model(config_path, RunnerConfig, what="runner config")
        entry = review_runner(
            located.registry,
            config,
            reviewer=reviewer,
            note=note,
            now=datetime.now(UTC),
            repository=located.root,
        )
    click.echo(json.dumps(entry.model_dump(mode="json"), sort_keys=True))
    click.echo(f"agent-eval: added to {located.registry}; commit it", err=True)
