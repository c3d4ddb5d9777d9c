"""The fixed suite: its task ids, schedule and thresholds, declared together."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field, model_validator

from agent_eval.models.base import SchemaVersion, WireModel

__all__ = ["FIXED_SUITE", "SuiteSpec"]


class SuiteSpec(WireModel):
    """Task ids, repetitions and qualification thresholds, validated as one unit.

    Changing the number of tasks or repetitions without changing the thresholds
    (or the other way round) is refused, so the schedule and the rules that
    judge it cannot drift apart.
    """

    schemaVersion: SchemaVersion
    """Format version of the suite declaration."""
    taskIds: tuple[str, ...] = Field(min_length=1)
    """The fixed task ids, in schedule order."""
    repetitions: int = Field(ge=1, le=10)
    """Fresh-context runs per task."""
    scheduledRuns: int = Field(ge=1)
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


FIXED_SUITE = SuiteSpec(
    schemaVersion=1,
    taskIds=(
        "core-validation",
        "storage-hash",
        "forms",
        "tool-validation",
        "approval-boundary",
        "error-recovery",
    ),
    repetitions=3,
    scheduledRuns=18,
    minFirstSuccesses=15,
    requiredFinalSuccesses=18,
    maxAttemptsPerRun=2,
)
"""The one suite this harness runs and qualifies."""
