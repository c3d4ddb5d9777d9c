"""consumer-lock.json: what the disposable consumer environment really contained."""

from __future__ import annotations

from pydantic import Field

from agent_eval.models.base import Digest, NonEmptyStr, SchemaVersion, WireModel

__all__ = ["ConsumerLock", "LockedDistribution"]


class LockedDistribution(WireModel):
    """One installed distribution."""

    name: NonEmptyStr
    """Normalised distribution name."""
    version: NonEmptyStr
    """Installed version."""
    recordDigest: Digest
    """Digest of the distribution's installed RECORD file."""
    candidate: bool
    """True for the candidate archives under evaluation."""
    archiveSha256: Digest | None
    """Digest of the wheel it was installed from, for candidates."""


class ConsumerLock(WireModel):
    """The prepared consumer, bound to the archives it was installed from."""

    schemaVersion: SchemaVersion
    """Format version of consumer-lock.json."""
    archivesDigest: Digest
    """Digest of archives.json's bytes."""
    python: NonEmptyStr
    """Python version of the consumer environment."""
    distributions: list[LockedDistribution] = Field(min_length=1)
    """Every installed distribution."""
    installedDigest: Digest | None = None
    """The consumer's files outside ``docs/`` (the guides, which re-verification leaves
    out): what a consumer installed again from the archives must hold byte for byte.
    None in batches recorded before it was kept."""
    cacheEntry: Digest | None = None
    """The key of the consumer-cache entry the batch's consumer (and its kept mypy
    caches) came from; None when it was installed for the batch. Whoever can write
    the cache can change such a consumer with its record: only ``--reverify``, which
    installs its own, tells."""
