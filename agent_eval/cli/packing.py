"""``agent-eval fetch-build-wheels``: download the wheels the build lock pins, by hash."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli.common import reported_errors

__all__ = ["fetch_build_wheels_command"]


@click.command()
@click.option(
    "--project",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Repository whose packages/build-requirements.lock is fetched (default: the current one).",
)
@click.option(
    "--lock",
    "lock_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="Another build lock (for example an earlier commit's, to check its batches).",
)
def fetch_build_wheels_command(project: Path | None, lock_path: Path | None) -> None:
    """Download the wheels a build lock pins, by name and hash, into the packing cache.

    Packing and the checker's rebuild install them offline into an isolated build
    environment; they never reach a package index themselves. Prints each wheel's path.
    """
    from agent_eval.packing import BUILD_LOCK, BuildCache, fetch_build_wheels
    from agent_eval.project import find_project

    with reported_errors():
        lock = lock_path or find_project(project).packages / BUILD_LOCK
        wheels = fetch_build_wheels(lock, BuildCache.default().wheelhouse)
    for wheel in wheels:
        click.echo(str(wheel))
