"""The runner protocol: one request on stdin, exactly one response on stdout."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agent_eval.models.analysis import Diagnostic
from agent_eval.models.base import MAX_COUNT, NonEmptyStr, RelativePath, SchemaVersion, WireModel
from agent_eval.models.identity import ModelIdentity, RunnerIdentity

__all__ = [
    "MAX_FEEDBACK_DIAGNOSTICS",
    "MAX_RESPONSE_BYTES",
    "RepairFeedback",
    "ReportedUsage",
    "RunnerRequest",
    "RunnerResponse",
]

MAX_RESPONSE_BYTES = 64 * 1024
"""A runner's stdout larger than this is an invalid response, whatever it holds."""
MAX_FEEDBACK_DIAGNOSTICS = 20


class RepairFeedback(WireModel):
    """What a repair attempt is told: diagnostics and failed assertion ids, no expected values."""

    schemaVersion: SchemaVersion
    """Format version of the feedback."""
    failedAssertionIds: list[str] = Field(max_length=64)
    """Behavioural assertions that failed on the previous attempt."""
    diagnostics: list[Diagnostic] = Field(max_length=MAX_FEEDBACK_DIAGNOSTICS)
    """Compiler, analysis and behaviour diagnostics of the previous attempt (bounded)."""


class RunnerRequest(WireModel):
    """Written to the runner's stdin."""

    schemaVersion: SchemaVersion
    """Protocol version."""
    runId: NonEmptyStr
    """Scheduled run id, ``<task-id>-<n>``."""
    taskId: NonEmptyStr
    """Task id."""
    taskText: str = Field(min_length=1, max_length=200_000)
    """The rendered task prompt."""
    consumerDir: NonEmptyStr
    """Read-only consumer project inside the runner container."""
    outputDir: NonEmptyStr
    """The only writable solution directory inside the runner container."""
    allowedOutputPaths: list[RelativePath] = Field(min_length=1)
    """Files the runner may write under outputDir."""
    attempt: int = Field(ge=1, le=2)
    """1 for the first submission, 2 for the repair."""
    timeBudgetMs: int = Field(ge=1)
    """Time the runner has before it is killed from outside."""
    repairFeedback: RepairFeedback | None = None
    """Feedback on the previous attempt; present on a repair attempt only."""

    @model_validator(mode="after")
    def _feedback_only_on_repair(self) -> RunnerRequest:
        if (self.attempt == 1) != (self.repairFeedback is None):
            raise ValueError("repairFeedback is required on attempt 2 and forbidden on attempt 1")
        return self


class ReportedUsage(WireModel):
    """What the CLI itself says it used, when it says so (the gateway's count is the evidence)."""

    inputTokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """Tokens sent to the model, cache reads included, as the CLI counts them."""
    outputTokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """Tokens the model produced, as the CLI counts them."""
    costUsd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """What the CLI priced the attempt at, in US dollars (its own price list)."""


class RunnerResponse(WireModel):
    """The single JSON object a runner prints on stdout.

    Any score a runner reports is not part of the protocol: it is refused as an
    unknown key, and grades come only from the verifier.
    """

    schemaVersion: SchemaVersion
    """Protocol version."""
    runId: NonEmptyStr
    """Must equal the request's runId."""
    taskId: NonEmptyStr
    """Must equal the request's taskId."""
    status: Literal["completed", "failed"]
    """completed: files were written; failed: the runner gave up or refused."""
    runner: RunnerIdentity
    """Identity of the runner that answered; must equal the expected one."""
    model: ModelIdentity
    """Identity of the model that answered; must equal the expected one."""
    message: str | None = Field(default=None, max_length=2000)
    """Optional short human note from the runner (never stored as a grade)."""
    usage: ReportedUsage | None = None
    """Tokens and cost as the CLI reported them, when it did (information only)."""
    failureKind: Literal["refused", "budget", "provider", "error"] | None = None
    """On a failed response, what the CLI's own outcome says: refused (the agent gave up or
    declined), budget (a step, turn or cost limit of the CLI was reached), provider (the model
    API failed), error (the CLI itself failed). It never turns a failure into a success."""

    @model_validator(mode="after")
    def _kind_only_on_failure(self) -> RunnerResponse:
        if self.failureKind is not None and self.status != "failed":
            raise ValueError("failureKind is given on a failed response only")
        return self
