"""The wheel cache: built wheels kept by everything their bytes depend on, and never trusted.

A wheel's bytes are a function of the files its build sees (the distribution's
directory as packing copies it: every path, its bytes and whether it is
executable, which a backend may record), the version its backend is given (computed from
git), the build lock (which fixes the build environment), the interpreter the
environment is made from, and packing's own recipe (its source: the epoch, the
copy's filter, how the environment is made). :func:`wheel_key` is the digest of
all of them, and an entry is one wheel under that key, with the
:class:`CachedWheel` record of its digest and size written when it was built.

An entry is held to that record on every use: the wheel is copied out and the
bytes copied are the bytes hashed; an entry that cannot be read, or whose copy
differs from its record, is thrown away, said once, and the wheel is built
again. Entries are made in a private directory and renamed into place, so a
reader sees a whole entry or none, and of two packings that build one key at
the same time, one rename wins and the other's entry is dropped.

The key also says where the tree came from: ``commit`` for a tree git holds as
committed (a rebuild from ``git archive``, or a batch whose packages git
reports unchanged), ``working-tree`` otherwise. A rebuild only ever looks up
``commit`` keys, so a wheel built from uncommitted sources never stands in for
a rebuild from a commit, even where the file digests would agree.

The record sits beside the wheel it certifies, so whoever can write the cache
can replace both: the cache saves builds, it proves nothing. The checker's
rebuild, a release gate, is therefore never given this cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pyproject_hooks

from agent_eval.digests import DIGEST_PREFIX, DigestError, file_sha256, sha256_json
from agent_eval.errors import EvidenceError, InfrastructureError
from agent_eval.evidence_io import parse_model, read_bounded
from agent_eval.models import ArchiveEntry
from agent_eval.models.base import Digest, WireModel
from agent_eval.packing.sources import NOT_PACKED, SourceDistribution

__all__ = [
    "COPY_FILTER",
    "CachedWheel",
    "Origin",
    "WheelCache",
    "copied_mode",
    "copy_as_git_holds",
    "source_digest",
    "wheel_key",
]

COPY_FILTER = shutil.ignore_patterns(*NOT_PACKED, "*.pyc")
"""What packing leaves out of the copy a build sees (build output, caches, bytecode)."""


def copied_mode(mode: int) -> int:
    """A file's permission bits in the copy a build sees: git's two, 0755 when anyone may
    execute it and 0644 otherwise. A backend may record them in the wheel, so this keeps
    the checkout's umask out of its bytes and gives a working tree's wheel the bytes of a
    rebuild from git's archive of the same commit."""
    return 0o755 if mode & 0o111 else 0o644


def copy_as_git_holds(source: str, target: str) -> str:
    """Copy one file for a build (``shutil.copytree``'s ``copy_function``), its bits as
    :func:`copied_mode` says."""
    shutil.copyfile(source, target)
    os.chmod(target, copied_mode(os.stat(source).st_mode))
    return target


Origin = Literal["commit", "working-tree"]
"""Where a tree came from: as committed in git, or a working tree that may differ."""

_ENTRY = "entry.json"
_MAX_ENTRY_BYTES = 64 * 1024
_CHUNK = 1 << 20


class CachedWheel(WireModel):
    """The record an entry of the wheel cache keeps beside its wheel (never evidence: the
    cache's own, checked against the wheel each time it is used)."""

    schemaVersion: Literal[1]
    """The format of this record."""
    key: Digest
    """The key it was stored under (:func:`wheel_key`): an entry moved to another key is
    refused."""
    archive: ArchiveEntry
    """The wheel as it was built: its file name, distribution, version, digest and size."""


@functools.cache
def _recipe() -> str:
    """Digest of what packing itself puts into a wheel: its own source and the PEP 517
    hook runner's version (any change to how wheels are built gives other keys)."""
    here = Path(__file__).resolve().parent
    sources = sorted(here.glob("*.py"))
    return sha256_json(
        {
            "packing": [[path.name, file_sha256(path)] for path in sources],
            "pyproject_hooks": pyproject_hooks.__version__,
        }
    )


def source_digest(directory: Path) -> str | None:
    """Digest of the files a build of *directory* sees, as packing copies them (None: the
    tree holds something other than directories and regular files, never cached).

    Every path the copy keeps, a file's bytes and its bits in the copy (the wheel records
    them, :func:`copied_mode`); the copy's own filter (:data:`COPY_FILTER`) decides what is
    left out.
    """
    entries: list[list[object]] = []
    pending = [(directory, "")]
    while pending:
        folder, prefix = pending.pop()
        names = sorted(os.listdir(folder))
        left_out = COPY_FILTER(str(folder), names)
        for name in names:
            if name in left_out:
                continue
            path, relative = folder / name, prefix + name
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                entries.append([relative + "/"])
                pending.append((path, relative + "/"))
            elif stat.S_ISREG(mode):
                try:
                    entries.append([relative, copied_mode(mode), file_sha256(path)])
                except DigestError:
                    return None
            else:
                return None
    return sha256_json(sorted(entries, key=lambda entry: str(entry[0])))


def wheel_key(
    dist: SourceDistribution,
    *,
    origin: Origin,
    lock_sha256: str,
    version: str | None,
    files: str,
) -> str:
    """The key of *dist*'s wheel: everything its bytes depend on.

    Args:
        dist: The distribution (its name and directory name).
        origin: Where its tree came from.
        lock_sha256: The build lock's digest.
        version: The version given to its backend (None: its own).
        files: :func:`source_digest` of its directory.
    """
    return sha256_json(
        {
            "schemaVersion": 1,
            "origin": origin,
            "recipe": _recipe(),
            "interpreter": [sys.version, sys.base_prefix],
            "lock": lock_sha256,
            "distribution": [dist.name, dist.directory.name],
            "version": version,
            "files": files,
        }
    )


def _say_on_stderr(line: str) -> None:
    print(f"agent-eval: {line}", file=sys.stderr)


class WheelCache:
    """Built wheels by key, under *root* (``$XDG_CACHE_HOME/agent-eval/packing/built``).

    Args:
        root: Where the entries are.
        notice: Hears, once per entry, why an entry was thrown away (default: stderr).
    """

    def __init__(self, root: Path, notice: Callable[[str], None] | None = None) -> None:
        self.root = root
        self._notice = notice or _say_on_stderr

    def _folder(self, key: str) -> Path:
        return self.root / key.removeprefix(DIGEST_PREFIX)

    def take(self, key: str, output_dir: Path) -> ArchiveEntry | None:
        """The wheel of *key* copied into *output_dir*, held to its record; None: not there.

        An entry that cannot be read, or whose copied bytes differ from its record, is
        thrown away (said once) and None returned: the caller builds the wheel again.
        """
        folder = self._folder(key)
        if not folder.is_dir():
            return None
        copied: Path | None = None
        try:
            data = read_bounded(
                folder / _ENTRY, what="cached wheel record", max_bytes=_MAX_ENTRY_BYTES,
                follow_symlinks=False,
            )  # fmt: skip
            record = parse_model(data, CachedWheel, where=str(folder / _ENTRY))
            if record.key != key:
                raise EvidenceError(f"its record is of the key {record.key}")
            wanted = record.archive
            copied = output_dir / wanted.filename
            digest, size = _copy_hashing(folder / wanted.filename, copied)
            if (digest, size) != (wanted.sha256, wanted.size):
                raise EvidenceError(
                    f"{wanted.filename} is {digest} ({size} bytes), recorded as "
                    f"{wanted.sha256} ({wanted.size} bytes)"
                )
        except _NotWritten:
            raise
        except (EvidenceError, OSError) as exc:
            if copied is not None:
                with contextlib.suppress(OSError):
                    copied.unlink()
            self._discard(folder)
            self._notice(
                f"packing: the cached wheel {folder} is not what was stored ({exc}); "
                "it is thrown away and the wheel built again"
            )
            return None
        return wanted

    def put(self, key: str, wheel: Path, archive: ArchiveEntry) -> None:
        """Keep *wheel*, described by *archive*, under *key* (best effort: a cache that
        cannot be written, or that another packing filled first, only costs a build).

        The copy is hashed as it is written; a wheel that changed since it was
        described is not kept.
        """
        with contextlib.suppress(OSError, _NotWritten):
            self.root.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".new-", dir=self.root))
            try:
                digest, size = _copy_hashing(wheel, staging / archive.filename)
                if (digest, size) != (archive.sha256, archive.size):
                    return
                record = CachedWheel(schemaVersion=1, key=key, archive=archive)
                (staging / _ENTRY).write_text(record.model_dump_json(), encoding="utf-8")
                # A directory rename is atomic, and refused when the entry is already
                # there (another packing's, checked like any when it is used).
                staging.rename(self._folder(key))
            finally:
                shutil.rmtree(staging, ignore_errors=True)

    def _discard(self, folder: Path) -> None:
        # Renamed away first, so no reader meets it half removed.
        trash = self.root / f".old-{uuid.uuid4().hex}"
        try:
            folder.rename(trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)


class _NotWritten(InfrastructureError):
    """The copy could not be written: the target's fault, not the entry's."""


def _copy_hashing(source: Path, target: Path) -> tuple[str, int]:
    """Copy a regular file (never through a link) and return the digest and size of the bytes
    written, which are the bytes read.

    Raises:
        OSError: *source* cannot be read or is not a regular file.
        _NotWritten: *target* cannot be written.
    """
    digest, size = hashlib.sha256(), 0
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{source} is not a regular file")
        os.set_blocking(fd, True)
        try:
            out = open(target, "wb")  # noqa: SIM115 (its errors are told apart from the read's)
        except OSError as exc:
            raise _NotWritten(f"cannot write {target}: {exc.strerror}") from exc
        with out:
            while chunk := os.read(fd, _CHUNK):
                digest.update(chunk)
                size += len(chunk)
                try:
                    out.write(chunk)
                except OSError as exc:
                    raise _NotWritten(f"cannot write {target}: {exc.strerror}") from exc
            try:
                out.flush()
            except OSError as exc:
                raise _NotWritten(f"cannot write {target}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    return DIGEST_PREFIX + digest.hexdigest(), size
