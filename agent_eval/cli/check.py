"""``check-agent-eval``: qualify or reject a saved batch."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_eval.errors import AgentEvalError
from agent_eval.models import QualificationResult
from agent_eval.project import Project, find_project
from agent_eval.verdict.qualification import current_anchors, qualify_files
from agent_eval.verdict.reverify import reverify_files
from agent_eval.verification.container.verifier import evidence_verifiers

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
@click.option(
    "--reverify",
    is_flag=True,
    help="Also run the recorded verifier image on every saved solution and require the "
    "recorded verdicts (needs the local container engine).",
)
def check_command(receipt: Path, archives: Path, project: Path | None, reverify: bool) -> None:
    """Print {"qualified": bool, "reasons": [...]}; exit 0 qualified, 1 rejected."""
    located: Project | None = None
    try:
        located = find_project(project)
        anchors = current_anchors(located)
    except AgentEvalError as exc:
        anchors = current_anchors(None, str(exc))
    result = qualify_files(receipt, archives, anchors)
    if reverify:
        if located is None:
            again = ["reverify: no repository to take the suite and graders from"]
        else:
            project_of = located
            again = reverify_files(
                receipt,
                archives,
                located,
                lambda manifest, run_dir: evidence_verifiers(project_of, manifest, run_dir),
            )
        reasons = [*result.reasons, *again]
        result = QualificationResult(qualified=not reasons, reasons=reasons)
    click.echo(result.model_dump_json())
    sys.exit(0 if result.qualified else 1)
