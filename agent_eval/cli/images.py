"""``agent-eval images build``: build the base, verifier and runner-base images."""

from __future__ import annotations

import json
from pathlib import Path

import click

from agent_eval.cli.common import reported_errors
from agent_eval.engine.docker_engine import connect_local_engine
from agent_eval.errors import ConfigError
from agent_eval.images.build import build_images, check_loopback_registry
from agent_eval.images.runners import build_runner_image
from agent_eval.project import find_project

__all__ = ["images_group"]


@click.group(name="images")
def images_group() -> None:
    """Build the container images the harness runs."""


@images_group.command(name="build")
@click.option(
    "--registry",
    default=None,
    metavar="HOST:PORT",
    help="Loopback registry to tag and push to (e.g. 127.0.0.1:5000); prints digest references.",
)
@click.option(
    "--runtime-path",
    default=None,
    metavar="SOCKET",
    help="The engine's Unix socket (default: DOCKER_HOST if unix://, else /var/run/docker.sock).",
)
@click.option(
    "--debian-mirror",
    default=None,
    metavar="URL",
    help="Debian mirror for debootstrap, used only when the base image has to be made.",
)
@click.option(
    "--runner",
    "runners",
    multiple=True,
    metavar="AGENT",
    help="Also build the runner image of AGENT (images/runners/AGENT); repeatable.",
)
@click.option(
    "--project",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Repository holding images/ (default: the current one).",
)
def build_command(
    registry: str | None,
    runtime_path: str | None,
    debian_mirror: str | None,
    runners: tuple[str, ...],
    project: Path | None,
) -> None:
    """Build (quick when cached); print the pinned references (and "runners" with --runner)."""
    if registry is not None:
        try:
            check_loopback_registry(registry)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--registry") from None
    with reported_errors():
        root = find_project(project).root
        engine = connect_local_engine(runtime_path)

    def log(message: str) -> None:
        click.echo(f"images: {message}", err=True)

    try:
        with reported_errors():
            built = build_images(engine, root, registry=registry, mirror=debian_mirror, log=log)
            agents = {
                agent: build_runner_image(engine, root, agent, built.runner_base, log)
                for agent in runners
            }
    finally:
        engine.close()
    printed = json.loads(built.to_json())
    if agents:
        printed["runners"] = agents
    click.echo(json.dumps(printed, sort_keys=True))
