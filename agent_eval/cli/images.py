"""``agent-eval images build|lock|verify``: build the images, lock a runner, check an image."""

from __future__ import annotations

import json
from pathlib import Path

import click

from agent_eval.cli.common import EXISTING_DIR, SOCKET, located_project, reported_errors
from agent_eval.cli.compose import local_engine
from agent_eval.errors import ConfigError
from agent_eval.images.build import build_images, check_loopback_registry
from agent_eval.images.lock import lock_runner
from agent_eval.images.provenance import verify_image

__all__ = ["images_group"]

EXIT_USAGE = 2

_PROJECT = click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository holding images/ (default: the current one).",
)
_RUNTIME = click.option(
    "--runtime-path",
    type=SOCKET,
    default=None,
    metavar="SOCKET",
    help="The engine's Unix socket (default: DOCKER_HOST if unix://, else /var/run/docker.sock).",
)


def _log(message: str) -> None:
    click.echo(f"images: {message}", err=True)


@click.group(name="images")
def images_group() -> None:
    """Build the container images the harness runs, lock their recipes, verify an image."""


@images_group.command(name="build")
@click.option(
    "--registry",
    default=None,
    metavar="HOST:PORT",
    help="Loopback registry to tag and push to (e.g. 127.0.0.1:5000); prints digest references.",
)
@_RUNTIME
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
@_PROJECT
def build_command(
    registry: str | None,
    runtime_path: str | None,
    debian_mirror: str | None,
    runners: tuple[str, ...],
    project: Path | None,
) -> None:
    """Build what is not built yet; print the pinned references and every recipe digest."""
    if registry is not None:
        try:
            check_loopback_registry(registry)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--registry") from None
    root = located_project(project, "images").root
    with reported_errors(), local_engine(runtime_path) as engine:
        built = build_images(
            engine,
            root,
            runners=runners,
            registry=registry,
            mirror=debian_mirror,
            log=_log,
        )
    click.echo(built.to_json())


@images_group.command(name="lock")
@click.option("--runner", "agent", default=None, metavar="AGENT", help="The runner recipe.")
@click.option("--gateway", is_flag=True, help="The model gateway's recipe (images/gateway).")
@_PROJECT
def lock_command(agent: str | None, gateway: bool, project: Path | None) -> None:
    """Regenerate a recipe's lock from its install.json (a build never does).

    Give --runner AGENT (images/runners/AGENT) or --gateway (images/gateway).
    """
    if (agent is None) == (not gateway) or (agent and gateway):
        raise click.UsageError("give exactly one of --runner AGENT and --gateway")
    root = located_project(project, "images").root
    with reported_errors():
        written = lock_runner(root, agent or "gateway", log=_log)
    for path in written:
        click.echo(str(path))


@images_group.command(name="verify")
@click.argument("image")
@_RUNTIME
@_PROJECT
def verify_command(image: str, runtime_path: str | None, project: Path | None) -> None:
    """Rebuild the recipe IMAGE names (from its source commit) and compare the image ids.

    Exit 0 when the rebuild is the same image, 1 when it differs (what differs
    is printed), 2 when it cannot be verified here (no such image, no recipe
    labels, a commit or base that is not present, another builder).
    """
    root = located_project(project, "images").root
    with reported_errors(EXIT_USAGE), local_engine(runtime_path) as engine:
        result = verify_image(engine, root, image, log=_log)
    click.echo(json.dumps(result.to_json(), sort_keys=True))
    if not result.same:
        for line in result.differences:
            click.echo(f"differs: {line}", err=True)
        raise SystemExit(1)
