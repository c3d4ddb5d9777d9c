"""The reviewed-runner registry: the runner configurations a reviewer approved, committed.

A TOML file in the repository (``[tool.agent-eval].registry``, by default
``reviewed-runners.toml``), one ``[[runner]]`` table per approved configuration.
A batch qualifies only if its runner, model, images and upstreams equal one entry of
the registry as it was committed at the batch's source commit.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, Field

from agent_eval.models.base import NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.gateway import RecordedUpstream
from agent_eval.models.identity import ModelIdentity, RunnerIdentity
from agent_eval.models.receipt import ReviewerName

__all__ = ["RegistryEntry", "RunnerRegistry"]


class RegistryEntry(WireModel):
    """One approved runner configuration and who approved it, when, after inspecting what."""

    runner: RunnerIdentity
    """The runner identity every response must report."""
    model: ModelIdentity
    """The model identity and its settings."""
    adapter: NonEmptyStr
    """What the runner runs, for people (the adapter module, or the executable and its
    arguments); ``command`` is what is compared."""
    command: list[Annotated[str, Field(max_length=4096)]] = Field(min_length=1, max_length=256)
    """The executable, then its arguments, exactly as the reviewed config gives them."""
    envAllowlist: list[Annotated[str, Field(max_length=256)]] = Field(max_length=256)
    """The names of the variables the runner container may be given."""
    runnerImage: NonEmptyStr
    """The runner image, pinned as the config pins it."""
    verifierImage: NonEmptyStr
    """The verifier image, pinned."""
    gatewayImage: NonEmptyStr
    """The gateway image, pinned."""
    upstreams: list[RecordedUpstream] = Field(min_length=1, max_length=8)
    """The model APIs the runner may reach, and the model names each may serve."""
    reviewer: ReviewerName
    """Who approved it."""
    reviewedAt: AwareDatetime
    """When."""
    note: str = Field(min_length=1, max_length=2000)
    """What was inspected (the image's recipe and digest: the CLI and the adapter only)."""
    sourceCommit: Annotated[str, Field(pattern=r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")] | None = None
    """The repository's commit the review was made at (its full id). The entry counts for a
    batch only when this commit is in the history of the batch's source commit; an entry
    without it (written before the field existed) counts for none, and is reviewed again."""


class RunnerRegistry(WireModel):
    """The whole file."""

    schemaVersion: SchemaVersion
    """Format version of the registry."""
    runner: list[RegistryEntry] = Field(default_factory=list)
    """Every approved configuration."""
