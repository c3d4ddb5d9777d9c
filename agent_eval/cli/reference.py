"""``agent-eval reference-config``: write a runner config for a built-in reference runner."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli.common import reported_errors
from agent_eval.cli.compose import local_engine
from agent_eval.project import find_project
from agent_eval.reference.config import write_reference_config

__all__ = ["reference_config_command"]


@click.command()
@click.argument("mode")
@click.option("--output", required=True, type=click.Path(path_type=Path, dir_okay=False))
def reference_config_command(mode: str, output: Path) -> None:
    """Write runner.json for reference runner MODE (oracle, mutant, null, misbehave:<how>).

    The config pins this checkout's reference-runner and verifier images by
    image id (found by their recipe digests). Receipts from reference runners
    are self-test and never qualify.
    """
    with reported_errors():
        root = find_project(None).root
        with local_engine() as engine:
            write_reference_config(engine, mode, output, project_root=root)
    click.echo(str(output))
