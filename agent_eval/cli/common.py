"""What every command shares: turning library errors into messages and exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from agent_eval.errors import AgentEvalError

MAX_REPETITIONS = 20
"""The most runs per task ``eval-agent --repetitions`` takes; equal to the receipt's bound
(``agent_eval.models.receipt.MAX_REPETITIONS``, a test keeps them equal), spelled here so
the command's options need no model imported."""

__all__ = ["EXIT_FAILURE", "reported_errors"]

EXIT_FAILURE = 1


@contextmanager
def reported_errors(exit_code: int = EXIT_FAILURE) -> Iterator[None]:
    """Print an AgentEvalError as one line on stderr (no traceback) and exit."""
    try:
        yield
    except AgentEvalError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(exit_code) from exc
