"""ATIF, the Agent Trajectory Interchange Format, at version 1.4: the trajectory of one
attempt as other tools (trajectory viewers, SFT and RL pipelines) read it.

The fields and their rules follow the format's published specification (RFC 0001,
v1.4): a root with its version, session and agent, then the steps in order, each from
the system, the user or the agent; an agent step may carry tool calls, the observation
of their results and its metrics. Unknown keys are refused, as everywhere here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue, model_validator

from agent_eval.models.base import MAX_COUNT, WireModel

__all__ = [
    "ATIF_VERSION",
    "AtifAgent",
    "AtifFinalMetrics",
    "AtifMetrics",
    "AtifObservation",
    "AtifObservationResult",
    "AtifStep",
    "AtifToolCall",
    "Trajectory",
]

ATIF_VERSION = "ATIF-v1.4"


class AtifAgent(WireModel):
    """The agent system that made the trajectory."""

    name: str = Field(min_length=1)
    """The agent system's name (the runner's, as the receipt records it)."""
    version: str = Field(min_length=1)
    """Its exact version."""
    model_name: str | None = None
    """The model it was driven with (steps may name the one that served them)."""
    extra: dict[str, JsonValue] | None = None
    """What else identifies the run (the batch, run, attempt and task)."""


class AtifToolCall(WireModel):
    """One tool or function the agent invoked in a step."""

    tool_call_id: str = Field(min_length=1)
    """Its id, which the observation's result names as its source."""
    function_name: str = Field(min_length=1)
    """The tool's name."""
    arguments: dict[str, JsonValue]
    """Its arguments as a JSON object (empty when it took none)."""


class AtifObservationResult(WireModel):
    """What one tool call (or an action without one) gave back."""

    source_call_id: str | None = None
    """The tool call this answers (None: an action without a tool call)."""
    content: str | None = None
    """Its output as text."""


class AtifObservation(WireModel):
    """The environment's feedback after a step's actions."""

    results: list[AtifObservationResult]
    """One result per call or action."""


class AtifMetrics(WireModel):
    """A step's model usage, as the model API reported it."""

    prompt_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """Every input token of the turn, cached ones included."""
    completion_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """Tokens the model generated."""
    cached_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """The part of ``prompt_tokens`` served from a cache."""
    cost_usd: float | None = Field(default=None, ge=0)
    """The turn's cost, when the agent reported one."""
    extra: dict[str, JsonValue] | None = None
    """Provider-specific usage (for example cache-creation tokens)."""


class AtifStep(WireModel):
    """One turn: a system prompt, a user message, or an agent's inference and actions."""

    step_id: int = Field(ge=1)
    """Its ordinal, from 1, with no gap."""
    timestamp: str | None = None
    """When it happened (ISO 8601), when known."""
    source: Literal["system", "user", "agent"]
    """Who it came from."""
    model_name: str | None = None
    """The model that served an agent step."""
    reasoning_effort: str | float | None = None
    """The effort asked of an agent step."""
    message: str
    """The text of the step (may be empty)."""
    reasoning_content: str | None = None
    """An agent step's explicit reasoning."""
    tool_calls: list[AtifToolCall] | None = None
    """An agent step's tool calls."""
    observation: AtifObservation | None = None
    """What the step's actions gave back."""
    metrics: AtifMetrics | None = None
    """An agent step's model usage."""
    extra: dict[str, JsonValue] | None = None
    """Step data the format has no field for."""

    @model_validator(mode="after")
    def _agent_only(self) -> AtifStep:
        agent_fields = (self.model_name, self.reasoning_content, self.tool_calls, self.metrics)
        if self.source != "agent" and any(f is not None for f in agent_fields):
            raise ValueError(f"a {self.source} step carries fields only an agent step may")
        return self


class AtifFinalMetrics(WireModel):
    """The trajectory's totals."""

    total_prompt_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """Every prompt token of every step."""
    total_completion_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """Every completion token of every step."""
    total_cached_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """Every cached prompt token of every step."""
    total_cost_usd: float | None = Field(default=None, ge=0)
    """The whole cost, when known."""
    total_steps: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """The number of steps."""
    extra: dict[str, JsonValue] | None = None
    """Totals the format has no field for (what the model gateway measured)."""


class Trajectory(WireModel):
    """One attempt's trajectory in ATIF v1.4."""

    schema_version: Literal["ATIF-v1.4"]
    """The format's version."""
    session_id: str = Field(min_length=1)
    """The attempt: ``<batch id>/<run id>/attempt-<k>``."""
    agent: AtifAgent
    """The agent system."""
    steps: list[AtifStep]
    """Every step in order."""
    notes: str | None = None
    """What a reader should know about how the trajectory was made."""
    final_metrics: AtifFinalMetrics | None = None
    """The totals."""
    extra: dict[str, JsonValue] | None = None
    """The attempt's outcome as the harness judged it."""

    @model_validator(mode="after")
    def _ordered(self) -> Trajectory:
        if [s.step_id for s in self.steps] != list(range(1, len(self.steps) + 1)):
            raise ValueError("step_id must count from 1 with no gap")
        called = {c.tool_call_id for s in self.steps for c in s.tool_calls or ()}
        for step in self.steps:
            for result in step.observation.results if step.observation else ():
                if result.source_call_id is not None and result.source_call_id not in called:
                    raise ValueError(
                        f"step {step.step_id}: a result answers {result.source_call_id!r}, "
                        "which no tool call has"
                    )
        return self
