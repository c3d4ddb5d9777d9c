"""Prepared consumers kept across batches, by the digest of everything that makes one.

A consumer depends only on its inputs: the candidate archives (by sha256),
the verifier image that installs them (by id), the dependency lock, the
guides, and the harness files that write and install it. Batches of the same
commit prepare the same consumer, so the first one's is kept here and the
next ones mount it: runners and verifiers mount the consumer read-only, so
one entry serves every batch at once and none can change it.

An entry is never trusted. It records the digest of every file it holds
(``entry.json``, beside the consumer, not in it), and each use hashes the
files again; an entry that differs is discarded, said, and prepared again.
What a batch binds (consumer-lock.json, the catalog's digest) is derived from
the entry's files at each use, exactly as from a consumer just installed.

That guards against accidents only: the record sits beside the files it
certifies, so whoever can write the cache can rewrite both, and the batch
binds whatever it found. The batch's consumer-lock.json therefore names the
entry (``cacheEntry``) and the digest of its files (``installedDigest``); the
plain check notes a cached consumer, and ``check-agent-eval --reverify``
installs its own (never from here, nor with the mypy caches kept here) and
rejects a batch whose consumer held other files.

Layout (``$AGENT_EVAL_CONSUMER_CACHE``, or ``.verification/agent-eval/.consumers``):

    <key hex>/entry.json    the key's inputs and the digest of the consumer's files
    <key hex>/consumer/     the consumer project, as :func:`prepare_consumer` made it
    <key hex>/analysis/     what a verifier keeps beside it (its mypy caches, see
                            :mod:`agent_eval.verification.container.cache`), removed with it
    .building-<uuid>/       an entry being prepared; renamed into place when complete
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from agent_eval.consumer.archives import PreparedConsumer, load_consumer, prepare_consumer
from agent_eval.digests import (
    DigestError,
    file_sha256,
    regular_files,
    sha256_json,
    solution_digest,
    solution_files,
)
from agent_eval.engine import ContainerRuntime
from agent_eval.errors import EvidenceError, InfrastructureError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.layout import HARNESS_ROOT, staged_files
from agent_eval.models import ArchiveEntry
from agent_eval.models.base import WireModel

__all__ = [
    "CacheEntry",
    "ConsumerCache",
    "KeptConsumer",
    "cached_consumer",
    "consumer_key",
    "discard_entry",
    "files_digest",
    "kept_entry",
    "prune_unused",
    "publish_entry",
]

T = TypeVar("T")

CACHE_ENV = "AGENT_EVAL_CONSUMER_CACHE"
"""Where the cache lives, when not beside the batches' evidence."""
CACHE_DIR = ".consumers"
"""The cache in the evidence directory (a dot-name: no batch, never reaped as one)."""

_ENTRY_FILE = "entry.json"
_CONSUMER_DIR = "consumer"
BUILDING_PREFIX = ".building-"
_DISCARDED_PREFIX = ".discarded-"
_UNUSED_FOR_S = 24 * 3600.0
"""An entry unused this long is removed: far longer than a batch may last (two hours)."""
_PROJECT_WRITER = "consumer/archives.py"
"""The host side that writes the project (pyproject, requirements, docs): an input too."""


class CacheEntry(WireModel):
    """``entry.json``: what a cached consumer was made from and the digest of its files."""

    schemaVersion: Literal[1]
    """The format of this record."""
    key: str
    """The digest of ``inputs``: the entry's directory name."""
    inputs: dict[str, Any]
    """Everything the consumer was made from, as :func:`consumer_key` lists it."""
    filesDigest: str
    """The consumer's files: canonical JSON of their sorted (path, sha256) pairs."""


@dataclass(frozen=True)
class ConsumerCache:
    """The directory prepared consumers are kept in."""

    root: Path

    @classmethod
    def default(cls, evidence_dir: Path) -> ConsumerCache:
        """``$AGENT_EVAL_CONSUMER_CACHE``, or ``.consumers`` in the evidence directory.

        Not in the user's XDG cache: the engine policy mounts nothing from a
        dot-directory of the home, and an entry is mounted as it is.
        """
        configured = os.environ.get(CACHE_ENV)
        return cls(Path(configured) if configured else evidence_dir / CACHE_DIR)


@dataclass(frozen=True)
class KeptConsumer:
    """The cache entry a consumer was taken from (see :func:`kept_entry`)."""

    entry: Path
    """The entry's directory: what else is kept for this consumer goes in it."""
    key: str
    """The entry's key: the digest of everything the consumer was made from."""


def kept_entry(consumer_dir: Path) -> KeptConsumer | None:
    """The entry *consumer_dir* is the consumer of, or None for a consumer made outside the cache.

    It reads the entry's record, not its files: the files were hashed when
    :func:`cached_consumer` handed the consumer out, and whoever keeps
    something beside it keys that by :attr:`KeptConsumer.key`.
    """
    entry = consumer_dir.parent
    if consumer_dir.name != _CONSUMER_DIR or not (entry / _ENTRY_FILE).is_file():
        return None
    try:
        record = read_model(entry / _ENTRY_FILE, CacheEntry, what="consumer cache entry")
    except (EvidenceError, OSError):
        return None
    if record.key.removeprefix("sha256:") != entry.name:
        return None
    return KeptConsumer(entry=entry, key=record.key)


def consumer_key(
    *,
    verifier_image: str,
    archives: list[ArchiveEntry],
    dependency_lock: Path | None,
    guides: dict[str, Path],
) -> tuple[str, dict[str, Any]] | None:
    """The digest of everything the consumer is made from, and those inputs.

    None when an input cannot be hashed as a tree of regular files (a guide
    with a link in it): such a consumer is prepared afresh, never cached.
    """
    harness = HARNESS_ROOT
    try:
        harness_files = {
            rel: file_sha256(harness / rel)
            for rel in [*staged_files(harness, "consumer"), _PROJECT_WRITER]
        }
        guide_digests = {
            name: (
                {"dir": solution_digest(_tree_files(path, skip_dirs=("__pycache__",)))}
                if path.is_dir()
                else {"file": file_sha256(path)}
            )
            for name, path in sorted(guides.items())
        }
    except (DigestError, OSError):
        return None
    inputs: dict[str, Any] = {
        "schema": 1,
        "verifierImage": verifier_image,
        "archives": sorted([a.filename, a.distribution, a.version, a.sha256] for a in archives),
        "dependencyLock": None if dependency_lock is None else file_sha256(dependency_lock),
        "guides": guide_digests,
        "harness": solution_digest(harness_files),
    }
    return sha256_json(inputs), inputs


def cached_consumer(
    engine: ContainerRuntime,
    *,
    cache: ConsumerCache,
    verifier_image: str,
    stage: Path,
    archives_dir: Path,
    archives: list[ArchiveEntry],
    dependency_lock: Path | None,
    guides: dict[str, Path],
    batch_id: str,
    fallback_root: Path,
    notice: Callable[[str], None] = lambda _: None,
) -> PreparedConsumer:
    """The consumer of these inputs: a verified cache entry, or one prepared now and kept.

    A consumer whose inputs cannot be hashed, or a cache that cannot be
    written, is prepared under *fallback_root* as without a cache.

    Raises:
        InfrastructureError: Preparing the consumer failed.
    """
    keyed = consumer_key(
        verifier_image=verifier_image,
        archives=archives,
        dependency_lock=dependency_lock,
        guides=guides,
    )

    def prepare(root: Path) -> PreparedConsumer:
        return prepare_consumer(
            engine,
            verifier_image=verifier_image,
            root=root,
            stage=stage,
            archives_dir=archives_dir,
            archives=archives,
            dependency_lock=dependency_lock,
            guides=guides,
            batch_id=batch_id,
        )

    if keyed is None:
        return prepare(fallback_root)
    key, inputs = keyed
    entry = cache.root / key.removeprefix("sha256:")
    found = _verified(entry, key, archives, notice)
    if found is not None:
        return dataclasses.replace(found, cache_entry=key)
    try:
        cache.root.mkdir(parents=True, exist_ok=True)
        building = cache.root / f"{BUILDING_PREFIX}{uuid.uuid4().hex}"
        building.mkdir()
    except OSError as exc:
        notice(f"consumer cache: {cache.root} cannot be written ({exc}); not cached")
        return prepare(fallback_root)
    try:
        prepared = prepare(building / _CONSUMER_DIR)
        record = CacheEntry(
            schemaVersion=1,
            key=key,
            inputs=inputs,
            filesDigest=files_digest(prepared.root),
        )
        write_model_atomic(building / _ENTRY_FILE, record)
        found = publish_entry(building, entry, lambda: _verified(entry, key, archives, notice))
        if found is not None:
            return dataclasses.replace(found, cache_entry=key)
    except (OSError, DigestError) as exc:
        shutil.rmtree(building, ignore_errors=True)
        raise InfrastructureError(f"the consumer could not be kept in {cache.root}: {exc}") from exc
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    prune_unused(cache.root, keep=entry)
    return dataclasses.replace(prepared, root=entry / _CONSUMER_DIR, cache_entry=key)


def _verified(
    entry: Path, key: str, archives: list[ArchiveEntry], notice: Callable[[str], None]
) -> PreparedConsumer | None:
    """The entry's consumer if it holds exactly the files it recorded; else it is discarded."""
    if not entry.exists():
        return None
    try:
        record = read_model(entry / _ENTRY_FILE, CacheEntry, what="consumer cache entry")
        if record.key != key:
            raise EvidenceError(f"it records the key {record.key}")
        if files_digest(entry / _CONSUMER_DIR) != record.filesDigest:
            raise EvidenceError("its files are not the ones it recorded")
        consumer = load_consumer(entry / _CONSUMER_DIR, archives)
    except (EvidenceError, DigestError, InfrastructureError, OSError) as exc:
        notice(f"consumer cache: the entry {entry.name[:12]} is discarded ({exc}); prepared again")
        discard_entry(entry)
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # its last use, for pruning
    return consumer


def publish_entry(building: Path, entry: Path, winner: Callable[[], T | None]) -> T | None:
    """Rename a complete *building* into place as *entry*: None once it is there.

    When another batch put the same entry there first, its entry as *winner*
    verifies it (and *building* is removed); one that does not hold is an error.

    Raises:
        OSError: Neither this entry nor a holding winner's is in place.
    """
    try:
        building.rename(entry)
    except OSError:
        found = winner()
        if found is None:
            raise
        shutil.rmtree(building, ignore_errors=True)
        return found
    return None


def files_digest(root: Path) -> str:
    """The digest an entry records of the files under *root* (and is held to at each use)."""
    return solution_digest(solution_files(root))


def _tree_files(root: Path, *, skip_dirs: tuple[str, ...]) -> dict[str, str]:
    return {rel: file_sha256(root / rel) for rel in regular_files(root, skip_dirs=skip_dirs)}


def discard_entry(entry: Path) -> None:
    """Remove *entry* of a keyed cache (this one's, or a cache kept beside it)."""
    # Renamed first, so no batch finds a half-removed entry under its key.
    aside = entry.with_name(f"{_DISCARDED_PREFIX}{uuid.uuid4().hex}")
    try:
        entry.rename(aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def prune_unused(root: Path, *, keep: Path) -> None:
    """Remove the entries below *root* (and abandoned builds) unused for a day, but *keep*."""
    limit = time.time() - _UNUSED_FOR_S
    try:
        children = list(root.iterdir())
    except OSError:
        return
    for child in children:
        try:
            stale = child != keep and child.stat().st_mtime < limit
        except OSError:
            continue
        if stale:
            discard_entry(child)
