"""The runner port: how the schedule runs one attempt of the agent, as an interface it is given.

The schedule never constructs a container itself: the container-backed
runner is :class:`agent_eval.batch.runner_container.ContainerRunner`, and
tests pass in-memory ones. Verification comes through
:class:`agent_eval.verification.protocol.Verifier`, the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent_eval.models import RunnerRequest

__all__ = ["RunnerOutcome", "RunnerPort"]


@dataclass(frozen=True)
class RunnerOutcome:
    """What one runner container did, observed from outside."""

    stdout: bytes
    stdout_truncated: bool
    timed_out: bool
    exit_code: int | None
    infrastructure_error: str | None = None


class RunnerPort(Protocol):
    """Runs one attempt of the agent under evaluation."""

    def run_attempt(
        self, request: RunnerRequest, workspace: Path, timeout_s: float
    ) -> RunnerOutcome:
        """Run the runner with *request* on stdin and *workspace* as its only writable dir.

        Args:
            request: the protocol request, written to the runner's stdin.
            workspace: host directory the runner sees as its output directory.
            timeout_s: wall-clock limit, enforced from outside (the runner is killed).

        Returns:
            The outcome; infrastructure problems are reported in it, not raised.
        """
        ...

    def cancel_all(self) -> None:
        """Kill every runner still running (used on interruption)."""
        ...
