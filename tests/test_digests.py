"""Digests are canonical: the same content hashes the same everywhere, any change changes it,
and links or special files are never hashed as if they were content."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_eval.digests import (
    DigestError,
    canonical_json,
    file_sha256,
    sha256_bytes,
    sha256_json,
    solution_digest,
    solution_files,
)


def test_canonical_json_sorts_keys_and_drops_whitespace() -> None:
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()


def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_key_order_does_not_change_a_digest() -> None:
    assert sha256_json({"a": 1, "b": 2}) == sha256_json({"b": 2, "a": 1})


def test_a_known_digest_is_stable() -> None:
    assert sha256_bytes(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_solution_digest_is_independent_of_listing_order() -> None:
    a = [("b.py", sha256_bytes(b"b")), ("a.py", sha256_bytes(b"a"))]
    assert solution_digest(a) == solution_digest(list(reversed(a))) == solution_digest(dict(a))


def test_solution_digest_binds_paths_as_well_as_bytes() -> None:
    same = sha256_bytes(b"x")
    assert solution_digest([("a.py", same)]) != solution_digest([("b.py", same)])


def test_solution_files_walks_nested_files(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_bytes(b"1")
    (tmp_path / "s.py").write_bytes(b"2")
    assert solution_files(tmp_path) == {"pkg/m.py": sha256_bytes(b"1"), "s.py": sha256_bytes(b"2")}


def test_a_symlinked_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_bytes(b"1")
    (tmp_path / "link.py").symlink_to(tmp_path / "real.py")
    with pytest.raises(DigestError):
        solution_files(tmp_path)


def test_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "ln").symlink_to(tmp_path / "d")
    with pytest.raises(DigestError, match="symbolic link"):
        solution_files(tmp_path)


def test_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(DigestError, match="not a regular file"):
        file_sha256(tmp_path / "pipe")
