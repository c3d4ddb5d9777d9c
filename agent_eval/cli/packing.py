"""``agent-eval lock-build`` writes the build lock; ``agent-eval fetch-build-wheels`` downloads
the wheels it pins, by hash."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli.common import EXISTING_DIR, EXISTING_FILE, located_project, reported_errors

__all__ = ["fetch_build_wheels_command", "lock_build_command"]


@click.command()
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose packages/build-requirements.lock is fetched (default: the current one).",
)
@click.option(
    "--lock",
    "lock_path",
    type=EXISTING_FILE,
    default=None,
    help="Another build lock (for example an earlier commit's, to check its batches).",
)
def fetch_build_wheels_command(project: Path | None, lock_path: Path | None) -> None:
    """Download the wheels a build lock pins, by name and hash, into the packing cache.

    Packing and the checker's rebuild install them offline into an isolated build
    environment; they never reach a package index themselves. Prints each wheel's path.
    """
    from agent_eval.packing import BUILD_LOCK, BuildCache, fetch_build_wheels

    lock = lock_path or located_project(project, "build lock").packages / BUILD_LOCK
    with reported_errors():
        wheels = fetch_build_wheels(lock, BuildCache.default().wheelhouse)
    for wheel in wheels:
        click.echo(str(wheel))


@click.command(name="lock-build")
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose packages/ are locked (default: the current one).",
)
@click.option(
    "--force", is_flag=True, help="Replace an existing build lock that pins something else."
)
def lock_build_command(project: Path | None, force: bool) -> None:
    """Write packages/build-requirements.lock: every [build-system] requires, and what
    each backend's get_requires_for_build_wheel asks for, with their dependencies, pinned
    by version and sha256 as pip resolves them for this interpreter.

    Besides fetch-build-wheels this is the one step that reaches a package index (pip,
    with your pip settings); the wheels are downloaded into the packing cache too. A lock
    that exists and pins something else is named and kept, unless --force.
    """
    from agent_eval.packing import lock_build_requirements

    packages = located_project(project, "packages").packages
    with reported_errors():
        done = lock_build_requirements(packages, force=force)
    for wheel in done.wheels:
        click.echo(f"{wheel.name}=={wheel.version}")
    state = "wrote" if done.changed else "unchanged:"
    click.echo(f"{state} {done.path} ({len(done.wheels)} pins)")
