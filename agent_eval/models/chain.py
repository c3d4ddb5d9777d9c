"""A chain of batches (``eval-agent --resume``): what binds a batch to its predecessor, and
which runs of a batch have a verdict to carry on.

Shared by the batch that resumes and by the checker that decides on the
chain's union, so that both go by one list of bindings.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agent_eval.models.archives import ArchivesManifest
from agent_eval.models.base import MAX_COUNT, BatchId, WireModel
from agent_eval.models.receipt import RUN_ID, Receipt, RunRecord

__all__ = [
    "ARCHIVES_BINDINGS",
    "RECEIPT_BINDINGS",
    "ChainBatch",
    "binding_differences",
    "has_final_verdict",
]

ARCHIVES_BINDINGS = (
    "archives",
    "source",
    "apiCatalogDigest",
    "toolchain",
    "runnerImage",
    "verifierImage",
    "gateway",
    "registryDigest",
    "runnerCommand",
    "envAllowlist",
    "runner",
    "model",
    "suiteDigest",
    "evaluatorDigest",
)
"""The fields of archives.json a resumed batch must have exactly as its predecessor had."""

RECEIPT_BINDINGS = (
    "selfTest",
    "suiteDigest",
    "evaluatorDigest",
    "archivesDigest",
    "consumerLockDigest",
    "runnerConfigDigest",
    "runner",
    "model",
    "runnerImage",
    "verifierImage",
    "suite",
    "repetitions",
    "selection",
)
"""The fields of receipt.json a resumed batch must have exactly as its predecessor had."""


def has_final_verdict(run: RunRecord) -> bool:
    """Whether *run* ended with a verdict on the agent: it ran, and no attempt of it was the
    infrastructure's (failed, stopped, interrupted, its node lost)."""
    return bool(run.attempts) and all(a.infrastructureStatus == "ok" for a in run.attempts)


def binding_differences(
    before: Receipt, archives_before: ArchivesManifest, now: Receipt, archives_now: ArchivesManifest
) -> list[str]:
    """Every binding field whose value differs between a predecessor and its successor, as
    ``file field NAME`` (empty: bound to the same identities)."""
    found = [
        f"archives.json field {name}"
        for name in ARCHIVES_BINDINGS
        if getattr(archives_before, name) != getattr(archives_now, name)
    ]
    found += [
        f"receipt.json field {name}"
        for name in RECEIPT_BINDINGS
        if getattr(before, name) != getattr(now, name)
    ]
    return found


class ChainBatch(WireModel):
    """One batch of a chain, as the checker counted it."""

    batchId: BatchId
    """The batch."""
    runs: list[Annotated[str, Field(pattern=RUN_ID.pattern)]]
    """The runs whose verdict the decision takes from this batch."""
    tokens: int = Field(ge=0, le=MAX_COUNT)
    """Tokens the gateway recorded for every attempt of this batch (counted or not)."""
    durationMs: int = Field(ge=0, le=MAX_COUNT)
    """The time of every attempt of this batch (counted or not)."""
