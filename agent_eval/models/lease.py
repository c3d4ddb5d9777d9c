"""lease.json: which process holds a batch, so that a batch whose owner died can be reaped."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from agent_eval.models.base import BatchId, NonEmptyStr, SchemaVersion, WireModel

__all__ = ["Lease"]


class Lease(WireModel):
    """Written when a batch starts, refreshed while it runs, removed once it is cleaned up."""

    schemaVersion: SchemaVersion
    """Format version of lease.json."""
    batchId: BatchId
    """The batch held."""
    pid: int = Field(ge=1)
    """The owner's process id."""
    processStart: int = Field(ge=0)
    """The owner's start time in clock ticks since boot (a reused pid has another one)."""
    bootId: NonEmptyStr
    """The machine's boot id: after a reboot no owner of an earlier boot is alive."""
    host: NonEmptyStr
    """The machine's name, for people reading the lease."""
    startedAt: datetime
    """When the batch took the lease."""
    heartbeatAt: datetime
    """When the owner last said it was alive."""
    engine: NonEmptyStr | None = None
    """Where the engine the batch started containers on listens; None before it connected."""
