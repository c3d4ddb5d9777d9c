"""Tests for appkit.storage."""

from __future__ import annotations

import hashlib
from types import MappingProxyType

import pytest
from appkit import (
    ContentStore,
    IntegrityError,
    MemoryBackend,
    NotFoundError,
    StorageBackend,
    canonical_json,
    content_digest,
)


def test_canonical_json_is_sorted_compact_utf8() -> None:
    value = {"b": [1, 2.5, None, True], "a": {"z": "é", "y": "😀"}}
    assert canonical_json(value) == '{"a":{"y":"😀","z":"é"},"b":[1,2.5,null,true]}'.encode()


def test_canonical_json_ignores_insertion_order_and_accepts_mappings() -> None:
    assert canonical_json({"a": 1, "b": 2}) == canonical_json({"b": 2, "a": 1})
    assert canonical_json(MappingProxyType({"a": (1,)})) == b'{"a":[1]}'


def test_content_digest_is_sha256_of_canonical_json() -> None:
    value = {"hello": "world", "n": 1}
    expected = hashlib.sha256(b'{"hello":"world","n":1}').hexdigest()
    assert content_digest(value) == expected
    assert len(expected) == 64


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({1: "a"}, TypeError),
        ({"a": {1, 2}}, TypeError),
        (b"bytes", TypeError),
        (float("nan"), ValueError),
        ({"x": float("inf")}, ValueError),
        ("\ud800", ValueError),
    ],
)
def test_canonical_json_refuses_non_json(value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        canonical_json(value)


def test_put_get_round_trip() -> None:
    store = ContentStore()
    value = {"name": "Ann", "tags": ["x"], "n": 1.5}
    digest = store.put(value)
    assert digest == content_digest(value)
    assert store.has(digest)
    assert store.get(digest) == value


def test_put_is_deterministic_and_idempotent() -> None:
    backend = MemoryBackend()
    store = ContentStore(backend)
    first = store.put({"a": 1, "b": 2})
    second = store.put({"b": 2, "a": 1})
    assert first == second
    assert list(backend.keys()) == [first]
    assert backend.read(first) == b'{"a":1,"b":2}'


def test_get_returns_a_fresh_copy() -> None:
    store = ContentStore()
    digest = store.put({"items": [1]})
    store.get(digest)["items"].append(2)
    assert store.get(digest) == {"items": [1]}


def test_tampered_bytes_raise_integrity_error() -> None:
    backend = MemoryBackend()
    store = ContentStore(backend)
    digest = store.put({"amount": 10})
    backend.write(digest, b'{"amount":1000}')
    with pytest.raises(IntegrityError) as caught:
        store.get(digest)
    assert caught.value.code == "integrity"


@pytest.mark.parametrize("tampered", [b"", b"not json", b'{"amount":10} ', b'{"amount": 10}'])
def test_any_byte_change_is_detected(tampered: bytes) -> None:
    backend = MemoryBackend()
    store = ContentStore(backend)
    digest = store.put({"amount": 10})
    backend.write(digest, tampered)
    with pytest.raises(IntegrityError):
        store.get(digest)


def test_bytes_moved_under_another_digest_are_detected() -> None:
    backend = MemoryBackend()
    store = ContentStore(backend)
    small = store.put({"amount": 1})
    large = store.put({"amount": 1000})
    backend.write(small, backend.read(large) or b"")
    with pytest.raises(IntegrityError):
        store.get(small)


def test_missing_digest_raises_not_found() -> None:
    store = ContentStore()
    digest = content_digest({"never": "stored"})
    assert not store.has(digest)
    with pytest.raises(NotFoundError):
        store.get(digest)


@pytest.mark.parametrize("digest", ["", "abc", "A" * 64, "g" * 64, "../" + "a" * 61])
def test_malformed_digest_is_refused(digest: str) -> None:
    with pytest.raises(ValueError):
        ContentStore().get(digest)


class DictBackend:
    """A custom backend, to show any object with read/write works."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.reads = 0

    def read(self, key: str) -> bytes | None:
        self.reads += 1
        return self.data.get(key)

    def write(self, key: str, data: bytes) -> None:
        self.data[key] = data


def test_custom_backend_is_used() -> None:
    backend = DictBackend()
    assert isinstance(backend, StorageBackend)
    store = ContentStore(backend)
    digest = store.put([1, 2, 3])
    assert backend.data == {digest: b"[1,2,3]"}
    assert store.get(digest) == [1, 2, 3]
    assert backend.reads == 1
    backend.data[digest] = b"[1,2,4]"
    with pytest.raises(IntegrityError):
        store.get(digest)


def test_memory_backend_delete() -> None:
    backend = MemoryBackend()
    backend.write("k", b"v")
    backend.delete("k")
    backend.delete("k")
    assert backend.read("k") is None
