"""The side effects a batch needs, as narrow interfaces it is given.

The schedule logic never constructs a container, a clock or an id itself:
docker-backed implementations live in ``agent_eval.batch.containers``, and
tests pass in-memory ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent_eval.models import Analysis, RunnerRequest, TaskSpec
from agent_eval.models.behaviour import BehaviourResult

__all__ = ["RunnerOutcome", "RunnerPort", "Verification", "VerifierPort"]


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


@dataclass(frozen=True)
class Verification:
    """Static analysis and behavioural grading of one saved solution."""

    analysis: Analysis
    analysis_json: bytes
    behaviour: BehaviourResult


class VerifierPort(Protocol):
    """Verifies one saved solution."""

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        """Analyse and grade *solution_dir* for *task*.

        Raises:
            InfrastructureError: the verifier could not produce a trusted result.
        """
        ...

    def cancel_all(self) -> None:
        """Kill every verification still running (used on interruption)."""
        ...
