"""Canonical JSON and every digest the evidence relies on.

All hashing in the project goes through this module, so that a receipt written
on one machine verifies on another: objects are hashed as canonical JSON
(sorted keys, UTF-8, no insignificant whitespace), files as raw bytes, and a
solution as the sorted list of its (relative path, sha256) pairs.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = [
    "DIGEST_PREFIX",
    "DigestError",
    "canonical_json",
    "file_sha256",
    "is_sha256_digest",
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


def solution_files(root: Path) -> dict[str, str]:
    """Map every file under *root* (POSIX relative path) to its sha256.

    Refuses symbolic links and special files anywhere in the tree: evidence is
    made of regular files only.
    """
    if not root.is_dir() or root.is_symlink():
        raise DigestError(f"{root} is not a directory")
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in dirnames:
            if (base / name).is_symlink():
                raise DigestError(f"{base / name} is a symbolic link")
        for name in filenames:
            path = base / name
            rel = PurePosixPath(path.relative_to(root).as_posix())
            found[str(rel)] = file_sha256(path)
    return found


def solution_digest(files: Mapping[str, str] | Iterable[tuple[str, str]]) -> str:
    """Digest of a solution: canonical JSON of its sorted (path, sha256) pairs."""
    pairs = files.items() if isinstance(files, Mapping) else files
    return sha256_json(sorted([path, digest] for path, digest in pairs))
