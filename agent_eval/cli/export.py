"""``agent-eval export``: a batch in a format other tools read."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli.common import EXISTING_DIR, batch_dir, reported_errors

__all__ = ["export_command"]


@click.command("export")
@click.argument("batch", metavar="RUN")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["atif"]),
    required=True,
    help="atif: one ATIF v1.4 trajectory.json per attempt (the Agent Trajectory "
    "Interchange Format trajectory viewers and training pipelines read).",
)
@click.option(
    "--output",
    type=EXISTING_DIR,
    default=None,
    help="An existing directory to write into (default: RUN/atif, made when missing).",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository the batch belongs to (default: the current one); the task prompts "
    "come from its suite when it is the batch's.",
)
def export_command(
    batch: str, output_format: str, output: Path | None, project: Path | None
) -> None:
    """Write the batch RUN's attempts as trajectories, one file each, and print their paths.

    RUN is the batch's run directory, a unique prefix of its id, or latest. Each
    trajectory holds the task's prompt, the agent CLI's own events as steps, its token
    counts per step where it reported them and the model gateway's totals; gateway
    tokens and strings shaped like provider keys are redacted.
    """
    from agent_eval.export.atif import export_atif

    run_dir = batch_dir(batch, project)
    if not run_dir.is_dir():
        raise click.UsageError(f"{run_dir}: no such run directory")
    target = output if output is not None else run_dir / "atif"
    with reported_errors():
        written = export_atif(run_dir, target, _prompts(run_dir, project))
    for path in written:
        click.echo(str(path))


def _prompts(run_dir: Path, project: Path | None) -> dict[str, str]:
    """Each task's prompt as the batch sent it, when the checkout's suite is the batch's
    (by digest); otherwise none (the trajectories then say the prompt is left out)."""
    from agent_eval.errors import AgentEvalError
    from agent_eval.evidence_io import read_model
    from agent_eval.layout import IN_CONTAINER_CONSUMER
    from agent_eval.models import Receipt
    from agent_eval.project import find_project
    from agent_eval.suite.tasks import load_suite

    try:
        located = find_project(project)
        receipt = read_model(run_dir / "receipt.json", Receipt, what="receipt")
        if receipt.suiteDigest != located.suite_digest():
            return {}
        suite = load_suite(located.tasks, graders_dir=located.graders)
        docs = str(IN_CONTAINER_CONSUMER.docs)
        return {task.id: task.render_prompt(docs) for task in suite.tasks}
    except AgentEvalError:
        return {}
