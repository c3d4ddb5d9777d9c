"""Runner and model identity, shared by the config, the protocol and the evidence."""

from __future__ import annotations

from pydantic import JsonValue

from agent_eval.models.base import NonEmptyStr, WireModel

__all__ = ["ModelIdentity", "RunnerIdentity"]


class RunnerIdentity(WireModel):
    """The runner (agent CLI and its adapter) that produced a submission."""

    name: NonEmptyStr
    """Runner name, e.g. the adapter name."""
    version: NonEmptyStr
    """Exact runner version as installed in the runner image."""


class ModelIdentity(WireModel):
    """The model and the settings it was driven with."""

    id: NonEmptyStr
    """Exact model identifier as sent to the provider."""
    settings: dict[str, JsonValue]
    """Model settings (temperature, reasoning effort, ...) as sent to the runner."""
