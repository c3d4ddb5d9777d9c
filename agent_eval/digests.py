"""Canonical JSON and every digest the evidence relies on.

All hashing in the project goes through this module, so that a receipt written
on one machine verifies on another: objects are hashed as canonical JSON
(sorted keys, UTF-8, no insignificant whitespace), files as raw bytes, and a
solution as the sorted list of its (relative path, sha256) pairs.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import stat
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "DIGEST_PREFIX",
    "DigestError",
    "canonical_json",
    "file_sha256",
    "is_sha256_digest",
    "regular_files",
    "sha256_bytes",
    "sha256_json",
    "solution_digest",
    "solution_files",
]

DIGEST_PREFIX = "sha256:"
_CHUNK = 1 << 20


class DigestError(ValueError):
    """A file or tree cannot be hashed faithfully (link, special file, unreadable)."""


def canonical_json(value: Any) -> bytes:
    """Serialise *value* as canonical JSON bytes.

    Sorted keys, no insignificant whitespace, UTF-8 without ASCII escaping, and
    no NaN/Infinity (they have no JSON spelling and would not round-trip).
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    """Return ``sha256:<hex>`` of *data*."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def sha256_json(value: Any) -> str:
    """Return the digest of *value*'s canonical JSON."""
    return sha256_bytes(canonical_json(value))


def is_sha256_digest(value: str) -> bool:
    """Whether *value* is spelled ``sha256:`` followed by 64 lowercase hex digits."""
    if not value.startswith(DIGEST_PREFIX):
        return False
    hexpart = value[len(DIGEST_PREFIX) :]
    return len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart)


def file_sha256(path: Path) -> str:
    """Digest of a regular file's bytes; links and special files are refused.

    The file is opened without following a final symlink, so a link swapped in
    after a check cannot redirect the read.
    """
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise DigestError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DigestError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        digest = hashlib.sha256()
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
    finally:
        os.close(fd)
    return DIGEST_PREFIX + digest.hexdigest()


def regular_files(
    root: Path, *, skip_dirs: Collection[str] = (), skip_suffixes: tuple[str, ...] = ()
) -> list[str]:
    """Every file under *root* as a sorted POSIX relative path, all of them regular files.

    A symbolic link (to a file or a directory), a hard link, a FIFO, a socket
    or a device anywhere in the tree is refused, never followed and never
    skipped: what is hashed is exactly what is read. Directories whose name
    matches a pattern of *skip_dirs* (caches) and files ending in
    *skip_suffixes* are left out.

    Raises:
        DigestError: *root* is not a plain directory, or the tree holds one of the above.
    """
    if root.is_symlink() or not root.is_dir():
        raise DigestError(f"{root} is not a directory (or is a symbolic link)")
    found: list[str] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise DigestError(f"cannot list {folder}: {exc.strerror}") from exc
        for entry in entries:
            path = Path(entry.path)
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                raise DigestError(f"{path} is a symbolic link; only regular files are read")
            if stat.S_ISDIR(info.st_mode):
                if not any(fnmatch.fnmatchcase(entry.name, p) for p in skip_dirs):
                    pending.append(path)
            elif not stat.S_ISREG(info.st_mode):
                raise DigestError(
                    f"{path} is a FIFO, socket or device; only regular files are read"
                )
            elif info.st_nlink > 1:
                raise DigestError(f"{path} is a hard link; only files of their own are read")
            elif not (skip_suffixes and entry.name.endswith(skip_suffixes)):
                found.append(path.relative_to(root).as_posix())
    return sorted(found)


def solution_files(root: Path) -> dict[str, str]:
    """Map every file under *root* (POSIX relative path) to its sha256.

    Refuses symbolic links, hard links and special files anywhere in the
    tree (:func:`regular_files`): evidence is made of regular files only.
    """
    return {rel: file_sha256(root / rel) for rel in regular_files(root)}


def solution_digest(files: Mapping[str, str] | Iterable[tuple[str, str]]) -> str:
    """Digest of a solution: canonical JSON of its sorted (path, sha256) pairs."""
    pairs = files.items() if isinstance(files, Mapping) else files
    return sha256_json(sorted([path, digest] for path, digest in pairs))
