"""A repository's suite: its task ids, schedule and thresholds, declared together.

The embedding repository declares it in ``tasks/suite.json`` (inside the tasks
directory, so the suite digest covers it); nothing in the harness fixes the ids,
their number or the thresholds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field, model_validator

from agent_eval.models.base import SchemaVersion, WireModel

__all__ = ["TASK_ID_PATTERN", "SuiteSpec"]

TASK_ID_PATTERN = r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$"
"""A task id: lowercase words joined by single hyphens (it names a directory, and a run is
``<task id>-<n>``)."""


class SuiteSpec(WireModel):
    """Task ids, repetitions and qualification thresholds, validated as one unit.

    Changing the number of tasks or repetitions without changing the thresholds
    (or the other way round) is refused, so the schedule and the rules that
    judge it cannot drift apart.
    """

    schemaVersion: SchemaVersion
    """Format version of the suite declaration."""
    taskIds: tuple[Annotated[str, Field(pattern=TASK_ID_PATTERN, max_length=64)], ...] = Field(
        min_length=1, max_length=64
    )
    """The task ids, in schedule order: each one a directory of the tasks directory."""
    repetitions: int = Field(ge=1, le=10)
    """Fresh-context runs per task."""
    scheduledRuns: int = Field(ge=1, le=640)
    """Denominator of every total: len(taskIds) * repetitions."""
    minFirstSuccesses: int = Field(ge=1)
    """First-submission successes needed to qualify."""
    requiredFinalSuccesses: int = Field(ge=1)
    """Final successes needed to qualify (every scheduled run)."""
    maxAttemptsPerRun: int = Field(ge=1, le=2)
    """First submission plus at most one repair."""

    @model_validator(mode="after")
    def _consistent(self) -> SuiteSpec:
        if len(set(self.taskIds)) != len(self.taskIds):
            raise ValueError("taskIds has duplicates")
        if self.scheduledRuns != len(self.taskIds) * self.repetitions:
            raise ValueError(
                f"scheduledRuns {self.scheduledRuns} != {len(self.taskIds)} tasks x "
                f"{self.repetitions} repetitions"
            )
        if self.requiredFinalSuccesses != self.scheduledRuns:
            raise ValueError("requiredFinalSuccesses must equal scheduledRuns")
        if not 0 < self.minFirstSuccesses <= self.scheduledRuns:
            raise ValueError("minFirstSuccesses must be between 1 and scheduledRuns")
        return self

    def run_ids(self) -> list[str]:
        """Every scheduled run id, ``<task-id>-<n>``, in schedule order."""
        return [f"{t}-{n}" for n in range(1, self.repetitions + 1) for t in self.taskIds]

    def select(self, only: Sequence[str]) -> list[str]:
        """The runs *only* names (a task id: its runs; a run id: that run), in schedule order.

        Raises:
            ValueError: A name is neither a task nor a run of the suite.
        """
        runs = self.run_ids()
        unknown = [name for name in only if name not in self.taskIds and name not in runs]
        if unknown:
            raise ValueError(
                f"{', '.join(repr(n) for n in unknown)} is no task or run of the suite; "
                f"tasks: {', '.join(self.taskIds)}; runs are <task>-1..{self.repetitions}"
            )
        return [r for r in runs if r in only or r.rsplit("-", 1)[0] in only]
