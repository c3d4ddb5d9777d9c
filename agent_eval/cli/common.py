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

__all__ = ["EXIT_FAILURE", "located_project", "reported_errors"]

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
