"""archives.json: the exact candidate archives and every identity a batch is bound to."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agent_eval.models.base import Digest, NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.gateway import GatewaySettings
from agent_eval.models.identity import ModelIdentity, RunnerIdentity

__all__ = ["ArchiveEntry", "ArchivesManifest", "ImageRecord", "SourceIdentity", "Toolchain"]


class ArchiveEntry(WireModel):
    """One candidate wheel kept under archives/."""

    filename: str = Field(pattern=r"^[A-Za-z0-9_.\-+]+\.whl$")
    """File name under archives/ (a plain name, no directories)."""
    distribution: NonEmptyStr
    """Distribution name."""
    version: NonEmptyStr
    """Distribution version."""
    sha256: Digest
    """Digest of the wheel's bytes."""
    size: int = Field(ge=1)
    """Size of the wheel in bytes."""


class SourceIdentity(WireModel):
    """Where the archives were built from."""

    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")] | None
    """Git commit of the repository (its full id, nothing else: the checker hands it to
    git), or None outside a repository."""
    dirty: bool
    """Whether the working tree had uncommitted changes."""


class Toolchain(WireModel):
    """Tools that built, installed and checked the candidate."""

    python: NonEmptyStr
    """Python version on the host that packed the archives."""
    harness: NonEmptyStr
    """agent-eval version."""
    verifierPython: str | None
    """Python version inside the verifier image."""
    mypy: str | None
    """mypy version inside the verifier image."""


class ImageRecord(WireModel):
    """A pinned image and the image id it resolved to."""

    reference: NonEmptyStr
    """Pinned reference from the runner config."""
    imageId: Digest
    """Local image id it resolved to."""


class ArchivesManifest(WireModel):
    """Candidate archives plus the reviewed identities a batch runs against."""

    schemaVersion: SchemaVersion
    """Format version of archives.json."""
    archives: list[ArchiveEntry] = Field(min_length=1)
    """Every candidate wheel."""
    source: SourceIdentity
    """Repository state the wheels were built from."""
    apiCatalogDigest: Digest
    """Digest of the API catalog generated from the installed candidate."""
    toolchain: Toolchain
    """Build and check tools."""
    runnerImage: ImageRecord
    """Runner image."""
    verifierImage: ImageRecord
    """Verifier image."""
    gateway: GatewaySettings | None
    """The model gateway the runner reached its model through; None: it reached nothing, so
    its model could only live inside its own container."""
    registryDigest: Digest | None = None
    """sha256 of the reviewed-runner registry at the source commit (None: no registry)."""
    runnerCommand: list[Annotated[str, Field(max_length=4096)]] | None = Field(
        default=None, max_length=256
    )
    """What the runner container ran: the config's executable, then its args (None in a
    batch that did not record it: no reviewed entry matches it)."""
    envAllowlist: list[Annotated[str, Field(max_length=256)]] | None = Field(
        default=None, max_length=256
    )
    """The names of the variables the runner container was given (never their values)."""
    runner: RunnerIdentity
    """Reviewed runner identity."""
    model: ModelIdentity
    """Reviewed model identity."""
    suiteDigest: Digest
    """Digest of the task suite."""
    evaluatorDigest: Digest
    """Digest of the harness code."""
