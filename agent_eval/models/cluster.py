"""What the driver of a batch and its cluster nodes send each other.

A node is given everything it needs to run the batch's runs as the driver
would (the config, the archives, the suite's files, the identities every
copy is checked against) and sends back, per run, its record and the files
of its attempt directories; the driver checks those against the record's
digests before any of them becomes evidence.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from agent_eval.models.analysis import MAX_DIAGNOSTIC_CHARS
from agent_eval.models.archives import ArchiveEntry
from agent_eval.models.base import Digest, NonEmptyStr, RelativePath, WireModel
from agent_eval.models.lease import LeaseToken
from agent_eval.models.receipt import Receipt, RunRecord
from agent_eval.models.runner_config import RunnerConfig

__all__ = ["NodeAssignment", "NodeReady", "NodeRunResult", "ShippedFile"]

MAX_SHIPPED_FILES = 4096


class ShippedFile(WireModel):
    """One file sent between the driver and a node."""

    # Wheels and solutions are bytes: JSON carries them as base64, never as text.
    model_config = ConfigDict(
        **WireModel.model_config, ser_json_bytes="base64", val_json_bytes="base64"
    )

    path: RelativePath
    """Where it goes, relative to the directory the message names."""
    data: bytes = Field(max_length=64 * 1024 * 1024)
    """Its bytes."""


class NodeAssignment(WireModel):
    """What a node needs before its first run of a batch."""

    batchId: NonEmptyStr
    """The batch's id: the label of every container the node starts for it."""
    leaseToken: LeaseToken | None = None
    """The driver's lease token: the node's lease holds it too, so every container the node
    starts for the batch carries it and either reaper may remove them."""
    config: RunnerConfig
    """The batch's runner config, as the driver validated it."""
    environment: dict[str, str]
    """The allowlisted variables every runner container gets."""
    runnerImageId: Digest
    """The runner image's id on the driver's engine: the node's must be the same."""
    verifierImageId: Digest
    """The verifier image's id on the driver's engine: the node's must be the same."""
    gatewayImageId: Digest | None
    """The gateway image's id on the driver's engine when the runner has models: the node
    starts a gateway of its own from an image with the same id."""
    tokenBudget: int | None = Field(ge=1)
    """The node's share of the batch's token budget (the shares add up to at most the
    budget: no node can spend what another may need)."""
    archives: list[ArchiveEntry]
    """The candidate wheels, as archives.json lists them."""
    archiveFiles: list[ShippedFile] = Field(max_length=MAX_SHIPPED_FILES)
    """The wheels' bytes, by file name."""
    archivesDigest: Digest
    """sha256 of the batch's archives.json (what the consumer lock is bound to)."""
    consumerLockDigest: Digest
    """sha256 of the driver's consumer-lock.json: the node's must be the same, where its
    consumer came from aside (``consumerCacheEntry``)."""
    consumerCacheEntry: Digest | None = None
    """The consumer-cache entry the driver's consumer came from (its lock's
    ``cacheEntry``): a node's own consumer may come from another entry or be installed
    afresh, and must hold the same files (the lock's ``installedDigest``)."""
    apiCatalogDigest: Digest
    """The driver's API catalog digest: the node's analysis must use the same catalog."""
    suiteDigest: Digest
    """The suite's digest on the driver: the node's copy must have the same."""
    evaluatorDigest: Digest
    """The digest of the driver's harness code (the receipt's evaluatorDigest): a node whose
    own harness differs refuses before anything else, since it would run the runs with its
    own code under the driver's digest."""
    projectFiles: list[ShippedFile] = Field(max_length=MAX_SHIPPED_FILES)
    """The suite's files (tasks/, graders/), the dependency lock and the guides (packages/)."""
    receipt: Receipt
    """The batch's opened receipt: the node keeps a copy beside its lease, so that its
    reaper can close the node's part of a batch whose actor died."""
    remainingS: float = Field(ge=0)
    """Seconds left of the batch's time budget when the assignment was sent."""


class NodeReady(WireModel):
    """A node that checked everything and takes runs."""

    node: NonEmptyStr
    """The node's name (its label, or its host and Ray node id)."""
    engine: NonEmptyStr
    """The address of the node's local engine."""
    address: str | None = Field(default=None, max_length=200)
    """The address the cluster advertises for the node (None: not known)."""
    slots: int = Field(ge=1)
    """Runs the node takes at once."""
    evaluatorDigest: Digest
    """The digest of the harness code the node runs (the driver checks it is its own)."""
    runnerImageId: Digest
    """The runner image's id on the node's engine."""
    verifierImageId: Digest
    """The verifier image's id on the node's engine."""
    gatewayImageId: Digest | None
    """The gateway image's id on the node's engine (None: the runner has no models)."""
    notices: list[str]
    """What its reaper did before (batches of the node whose actor had died)."""


class NodeRunResult(WireModel):
    """One run as a node ran it."""

    node: NonEmptyStr
    """The node that ran it."""
    record: RunRecord
    """The run's record, as the node's schedule wrote it."""
    files: list[ShippedFile] = Field(max_length=MAX_SHIPPED_FILES)
    """Every file of the run's attempt directories, relative to the run's directory."""
    ruleStop: str | None = None
    """Why a rule stops the batch, as the node's schedule found it so far (a served model
    outside the accepted set, the node's share of the token budget spent)."""
    headLost: str | None = Field(default=None, max_length=MAX_DIAGNOSTIC_CHARS)
    """Why the node stopped its attempts itself (its cluster's head had not answered for
    its grace), when it did: the run is the cluster's loss, never the agent's."""
