"""``check-agent-eval``: qualify or reject a saved batch."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_eval.errors import AgentEvalError
from agent_eval.project import find_project
from agent_eval.verdict.qualification import current_anchors, qualify_files

__all__ = ["check_command"]


@click.command()
@click.option("--receipt", required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--archives", required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--project",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Repository whose current suite the batch must match (default: the current one).",
)
def check_command(receipt: Path, archives: Path, project: Path | None) -> None:
    """Print {"qualified": bool, "reasons": [...]}; exit 0 qualified, 1 rejected."""
    try:
        anchors = current_anchors(find_project(project))
    except AgentEvalError as exc:
        anchors = current_anchors(None, str(exc))
    result = qualify_files(receipt, archives, anchors)
    click.echo(result.model_dump_json())
    sys.exit(0 if result.qualified else 1)
