"""``agent-eval reference-config``: write a runner config for a built-in reference runner."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli.common import OUTPUT_FILE, located_project, reported_errors
from agent_eval.cli.compose import local_engine
from agent_eval.reference.config import write_reference_config
from agent_eval.reference.runner import MISBEHAVIOURS, NAMES

__all__ = ["reference_config_command"]


_MODES = [
    *(name for name in NAMES if name != "misbehave"),
    *(f"misbehave:{how}" for how in MISBEHAVIOURS),
]


@click.command()
@click.argument("mode", type=click.Choice(_MODES), metavar="MODE")
@click.option("--output", required=True, type=OUTPUT_FILE)
def reference_config_command(mode: str, output: Path) -> None:
    """Write runner.json for reference runner MODE (oracle, mutant, null, misbehave:<how>).

    The config pins this checkout's reference-runner and verifier images by
    image id (found by their recipe digests). Receipts from reference runners
    are self-test and never qualify.
    """
    root = located_project(None, "reference runner").root
    with reported_errors(), local_engine() as engine:
        write_reference_config(engine, mode, output, project_root=root)
    click.echo(str(output))
