"""The one interface every verifier implements, and what it returns.

The batch schedule, ``tasks verify`` and the checker's re-verification all
use a verifier through :class:`Verifier` only. Which implementation runs is
the composition root's decision (the CLI): the container verifier for
evidence, the local verifier for trusted fixtures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agent_eval.engine import ContainerRuntime
from agent_eval.models.analysis import Analysis
from agent_eval.models.behaviour import BehaviourResult
from agent_eval.models.task import TaskSpec

__all__ = [
    "Verification",
    "Verifier",
    "VerifierContext",
    "VerifierFactory",
]


@dataclass(frozen=True)
class Verification:
    """Static analysis and behavioural grading of one saved solution."""

    analysis: Analysis
    """The validated analysis."""
    analysis_json: bytes
    """analysis.json exactly as the verifier wrote it (the evidence bytes)."""
    behaviour: BehaviourResult
    """The trusted grader's result."""
    retried: tuple[str, ...] = ()
    """Why earlier verifications of the same solution failed on the harness's side and
    were repeated (empty: the first try gave this result)."""


class Verifier(Protocol):
    """Analyses and grades solutions of the suite's tasks."""

    name: str
    """Shown in reports (``local``, ``docker``)."""

    def api_catalog(self) -> Mapping[str, Any]:
        """The API catalog of the library the verifier checks against."""
        ...

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        """Analyse and grade *solution_dir* for *task*.

        Raises:
            SuiteError: The task's own files are unusable.
            InfrastructureError: No trusted result could be produced (never the agent's fault).
        """
        ...

    def cancel_all(self) -> None:
        """Stop every verification still running (used on interruption)."""
        ...


@dataclass(frozen=True)
class VerifierContext:
    """What a batch hands the factory of its verifier once its consumer is ready."""

    engine: ContainerRuntime
    """The batch's engine."""
    image_id: str
    """The pinned verifier image, resolved to its id."""
    consumer_dir: Path
    """The batch's consumer (read-only in every container)."""
    batch_id: str
    """The batch's label value."""
    slots: int
    """Verifications the batch runs at once."""
    work_dir: Path
    """A private directory under the batch's work directory, removed with it."""
    work_anchor: Path | None = None
    """The directory the project names that *work_dir* lies below (the evidence directory,
    a node's root): *work_dir* is made from it without following a link. None: from
    *work_dir*'s parent."""


C = TypeVar("C", contravariant=True)


class VerifierFactory(Protocol[C]):
    """Builds a verifier from what its caller knows (a batch's context, a work directory)."""

    def __call__(self, context: C, /) -> Verifier:
        """The verifier.

        Raises:
            AgentEvalError: It cannot be prepared (the caller reports why).
        """
        ...
