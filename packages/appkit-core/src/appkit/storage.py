"""Content-addressed storage of JSON values, verified on every read.

Values are serialised as canonical JSON (:func:`canonical_json`: sorted keys,
UTF-8, no whitespace) and stored under the lowercase hex SHA-256 of those bytes
(:func:`content_digest`). :class:`ContentStore` keeps them in a
:class:`StorageBackend` (by default an in-memory :class:`MemoryBackend`) and
raises :class:`IntegrityError` when stored bytes no longer match their digest.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from appkit.errors import IntegrityError, NotFoundError

__all__ = [
    "ContentStore",
    "IntegrityError",
    "MemoryBackend",
    "NotFoundError",
    "StorageBackend",
    "canonical_json",
    "content_digest",
]

_DIGEST = re.compile(r"[0-9a-f]{64}")


def canonical_json(value: object) -> bytes:
    """Serialise ``value`` as canonical JSON bytes: sorted keys, UTF-8, no whitespace.

    Accepts ``dict`` (string keys only), ``list``/``tuple``, ``str``, ``int``,
    ``float``, ``bool`` and ``None``. Raises ``TypeError`` for anything else and
    ``ValueError`` for NaN, infinities or strings that are not valid Unicode.
    """
    text = json.dumps(_plain(value, "$"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def content_digest(value: object) -> str:
    """Return the lowercase hex SHA-256 of ``canonical_json(value)``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def _plain(value: object, path: str) -> object:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: NaN and infinities are not valid JSON")
        return value
    if isinstance(value, list | tuple):
        return [_plain(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, Mapping):
        result: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path}: object keys must be str, not {type(key).__name__}")
            result[key] = _plain(item, f"{path}.{key}")
        return result
    raise TypeError(f"{path}: {type(value).__name__} is not JSON-serialisable")


@runtime_checkable
class StorageBackend(Protocol):
    """Where a :class:`ContentStore` keeps bytes: any object with ``read`` and ``write``."""

    def read(self, key: str) -> bytes | None:
        """Return the bytes stored under ``key``, or ``None`` when there are none."""
        ...

    def write(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing anything stored there."""
        ...


class MemoryBackend:
    """A :class:`StorageBackend` that keeps bytes in a ``dict``; the default backend."""

    def __init__(self) -> None:
        """Create an empty backend."""
        self._data: dict[str, bytes] = {}

    def read(self, key: str) -> bytes | None:
        """Return the bytes stored under ``key``, or ``None`` when there are none."""
        return self._data.get(key)

    def write(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing anything stored there."""
        self._data[key] = bytes(data)

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        self._data.pop(key, None)

    def keys(self) -> Iterator[str]:
        """Iterate over the stored keys."""
        return iter(list(self._data))


class ContentStore:
    """Stores JSON values under their content digest and verifies them on read."""

    def __init__(self, backend: StorageBackend | None = None) -> None:
        """Create a store over ``backend`` (a new :class:`MemoryBackend` by default)."""
        self.backend: StorageBackend = backend if backend is not None else MemoryBackend()

    def put(self, value: object) -> str:
        """Store ``value`` as canonical JSON and return its digest (lowercase hex SHA-256)."""
        data = canonical_json(value)
        digest = hashlib.sha256(data).hexdigest()
        self.backend.write(digest, data)
        return digest

    def get(self, digest: str) -> Any:
        """Return the value stored under ``digest``, after checking the stored bytes.

        Raises :class:`NotFoundError` when nothing is stored there,
        :class:`IntegrityError` when the bytes do not hash to ``digest``, and
        ``ValueError`` when ``digest`` is not 64 lowercase hex characters.
        """
        data = self._read(digest)
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(f"stored bytes for {digest} do not match their digest")
        return json.loads(data.decode("utf-8"))

    def has(self, digest: str) -> bool:
        """Return True when something is stored under ``digest`` (without verifying it)."""
        _require_digest(digest)
        return self.backend.read(digest) is not None

    def _read(self, digest: str) -> bytes:
        _require_digest(digest)
        data = self.backend.read(digest)
        if data is None:
            raise NotFoundError(f"nothing is stored under {digest}")
        return data


def _require_digest(digest: str) -> None:
    if not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
        raise ValueError("a digest is 64 lowercase hexadecimal characters")
