"""lease.json: which process holds a batch, so that a batch whose owner died can be reaped."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, Field

from agent_eval.models.base import MAX_COUNT, BatchId, NonEmptyStr, SchemaVersion, WireModel

__all__ = ["Lease", "LeaseKind", "LeaseToken"]

LeaseToken = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
"""128 random bits, in hex."""

LeaseKind = Literal["batch", "tasks-verify", "reverify"]
"""What holds the lease: an eval-agent batch (its directory is a run directory), an
``agent-eval tasks verify`` run or a ``check-agent-eval --reverify`` (their directory
holds the lease alone)."""


class Lease(WireModel):
    """Written when a batch starts, refreshed while it runs, removed once it is cleaned up."""

    schemaVersion: SchemaVersion
    """Format version of lease.json."""
    batchId: BatchId
    """The batch held."""
    pid: int = Field(ge=1)
    """The owner's process id."""
    processStart: int = Field(ge=0, le=MAX_COUNT)
    """The owner's start time in clock ticks since boot (a reused pid has another one)."""
    bootId: NonEmptyStr
    """The machine's boot id: after a reboot no owner of an earlier boot is alive."""
    host: NonEmptyStr
    """The machine's name, for people reading the lease."""
    startedAt: AwareDatetime
    """When the batch took the lease."""
    heartbeatAt: AwareDatetime
    """When the owner last said it was alive."""
    engine: NonEmptyStr | None = None
    """Where the engine the batch started containers on listens; None before it connected."""
    kind: LeaseKind = "batch"
    """A tasks-verify or reverify lease's directory is no run directory: the reaper writes
    no receipt there, and removes the lease and the directory only once it is empty."""
    token: LeaseToken | None = None
    """A random token every container of the batch carries as its lease label: the reaper
    removes only containers carrying both the batch's label and this token. None in a lease
    written before tokens were: the reaper then removes none of its containers (a batch
    label alone is a name, and a directory can be given any name)."""
