"""What every command shares: turning library errors into messages and exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_eval.errors import AgentEvalError

if TYPE_CHECKING:
    from agent_eval.project import Project

MAX_REPETITIONS = 20
"""The most runs per task ``eval-agent --repetitions`` takes; equal to the receipt's bound
(``agent_eval.models.receipt.MAX_REPETITIONS``, a test keeps them equal), spelled here so
the command's options need no model imported."""

__all__ = [
    "BATCH_HELP",
    "EXIT_FAILURE",
    "batch_dir",
    "located_project",
    "output_path",
    "reported_errors",
]

EXIT_FAILURE = 1


def located_project(project: Path | None, what: str = "batch") -> Project:
    """The repository a saved batch is held against; none found is a usage error (exit 2).

    Without the repository every rule that needs it would reject: a typo, not a verdict.
    """
    from agent_eval.project import find_project

    try:
        return find_project(project)
    except AgentEvalError as exc:
        raise click.UsageError(
            f"{exc}, or name the repository the {what} belongs to with --project"
        ) from None


@contextmanager
def reported_errors(exit_code: int = EXIT_FAILURE) -> Iterator[None]:
    """Print an AgentEvalError as one line on stderr (no traceback) and exit."""
    try:
        yield
    except AgentEvalError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(exit_code) from exc


BATCH_HELP = (
    "The batch: its run directory, a unique prefix of its id (as agent-eval list shows "
    "it), or latest."
)


def batch_dir(spec: str, project: Path | None) -> Path:
    """The run directory *spec* names (a path, an id prefix, or ``latest``); a name that
    finds no batch, or several, is a usage error (exit 2) saying which."""
    from agent_eval.report.batches import UnknownBatch, find_batch, names_a_path

    if names_a_path(spec):
        return Path(spec)
    located = located_project(project)
    try:
        return find_batch(spec, located.evidence)
    except UnknownBatch as exc:
        raise click.UsageError(str(exc)) from None


def output_path(path: Path, option: str) -> Path:
    """*path* as a file a command may write: its directory exists, and it is a regular
    file or nothing yet (a directory, a FIFO or a device is a usage error, never written
    to or waited on); the directory is never created."""
    import stat

    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror}", param_hint=option) from None
    if mode is not None and not stat.S_ISREG(mode):
        raise click.BadParameter(f"{path} is not a regular file", param_hint=option)
    if not path.parent.is_dir():
        raise click.BadParameter(
            f"{path.parent} is not a directory (it is never created)", param_hint=option
        )
    return path
