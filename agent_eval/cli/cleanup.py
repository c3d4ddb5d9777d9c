"""``agent-eval cleanup``: close every batch whose process is gone, and remove what it left."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from agent_eval.batch.reaper import reap
from agent_eval.cli.common import EXISTING_DIR, SOCKET, located_project, reported_errors
from agent_eval.cli.compose import local_engine

__all__ = ["cleanup_command"]


@click.command()
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose evidence directory is swept (default: the current one).",
)
@click.option(
    "--runtime-path",
    type=SOCKET,
    default=None,
    metavar="SOCKET",
    help="The engine's Unix socket (default: DOCKER_HOST if unix://, else /var/run/docker.sock).",
)
def cleanup_command(project: Path | None, runtime_path: str | None) -> None:
    """Mark abandoned every batch whose owner died; remove its containers and work directory.

    A batch whose process is alive is never touched; a cluster batch's containers
    are removed from each node's engine that can be reached from here, and the
    others listed. Prints one JSON object per batch reaped; exit 0 when everything
    was cleaned, 1 when something could not be.
    """
    located = located_project(project, "evidence")
    with reported_errors(), local_engine(runtime_path) as engine:
        reaped = reap(located.evidence, engine, clock=lambda: datetime.now(UTC), nodes=local_engine)
    if not reaped:
        click.echo(
            f"agent-eval: nothing to clean up in {located.evidence}: no batch there was left "
            "by a process that died",
            err=True,
        )
    for item in reaped:
        click.echo(item.describe(), err=True)
        click.echo(
            json.dumps(
                {
                    "batch": item.batch_id,
                    "abandoned": item.abandoned,
                    "containersRemoved": item.containers,
                    "workDirectoryRemoved": item.work_dir_removed,
                    "problems": item.problems,
                    "nodesNotReached": item.unreached,
                }
            )
        )
    sys.exit(1 if any(item.problems or item.unreached for item in reaped) else 0)
