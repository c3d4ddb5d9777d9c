"""``agent-eval list --json``: the batches of a repository's evidence directory."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from agent_eval.models.base import MAX_COUNT, SchemaVersion, WireModel
from agent_eval.models.identity import ModelIdentity, RunnerIdentity

__all__ = ["BatchList", "ListedBatch"]


class ListedBatch(WireModel):
    """One run directory as ``agent-eval list`` shows it."""

    batchId: str
    """The directory's name, which is the batch's id (``<timestamp>-<uuid>``)."""
    runDir: str
    """The run directory's path."""
    status: str | None
    """The receipt's status (None: the receipt could not be read; see ``problem``)."""
    partial: bool = False
    """A partial batch (``eval-agent --only``): for debugging, never qualifies."""
    selfTest: bool | None = None
    """The receipt says a built-in reference runner made it (None: unreadable)."""
    runner: RunnerIdentity | None = None
    model: ModelIdentity | None = None
    firstSuccesses: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    finalSuccesses: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    scheduledRuns: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    createdAt: AwareDatetime | None = None
    updatedAt: AwareDatetime | None = None
    decision: Literal["qualified", "rejected", "expected-self-test", "unknown"]
    """check-agent-eval's decision now; ``expected-self-test``: rejected only because a
    built-in reference runner made it, as it always is; ``unknown``: not decided (the
    receipt is unreadable, or ``--no-decide``)."""
    reasons: list[str] = Field(default_factory=list)
    """The checker's reasons (empty when qualified or not decided)."""
    problem: str | None = None
    """Why the batch could not be read, in one line (None: it could)."""


class BatchList(WireModel):
    """Every batch of the evidence directory, newest first."""

    schemaVersion: SchemaVersion
    evidence: str
    """The evidence directory the batches were found in."""
    batches: list[ListedBatch]
