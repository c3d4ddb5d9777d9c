"""The wheel cache saves builds and is never trusted: a wheel is taken from it only under the
key of everything its bytes depend on (the files a build sees with their permission bits,
the lock, the version, the interpreter, packing's own recipe, and whether the tree is as a
commit holds it), and only when its bytes are those recorded when it was built. An entry
that is not is thrown away, said once, and the wheel built again; a wheel of a tree with
uncommitted changes never stands in for a rebuild from a commit; writers racing on one key
leave one whole entry, and a reader never sees half of one."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agent_eval.packing.build as build
from agent_eval.digests import file_sha256, sha256_bytes
from agent_eval.models import ArchiveEntry
from agent_eval.packing import (
    BUILD_LOCK,
    BuildCache,
    build_archives,
    fetch_build_wheels,
    find_distributions,
    rebuild_archives,
)
from agent_eval.packing.cache import CachedWheel, WheelCache, source_digest, wheel_key
from tests.paths import REPO

LOCK = REPO / "packages" / BUILD_LOCK


@pytest.fixture(scope="module")
def user_cache() -> BuildCache:
    """The user's wheelhouse with the build lock's wheels (downloaded once) and its build
    environments."""
    cache = BuildCache.default()
    fetch_build_wheels(LOCK, cache.wheelhouse)
    return cache


@pytest.fixture
def cache(user_cache: BuildCache, tmp_path: Path) -> BuildCache:
    """The user's wheelhouse and environments, with a wheel cache of this test's own."""
    return BuildCache(user_cache.wheelhouse, user_cache.environments, tmp_path / "built")


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The distributions really built (not taken from the cache), in order."""
    built: list[str] = []
    real = build._build_wheel

    def counted(dist: Any, *args: Any) -> ArchiveEntry:
        built.append(dist.name)
        return real(dist, *args)

    monkeypatch.setattr(build, "_build_wheel", counted)
    return built


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
         "-c", "commit.gpgsign=false", *args],
        check=True, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null"},
    )  # fmt: skip
    return done.stdout.strip()


def tiny_packages(root: Path) -> Path:
    """packages/ with the build lock and one setuptools distribution, ``tinylib``."""
    packages = root / "packages"
    (packages / "tinylib" / "src" / "tinylib").mkdir(parents=True)
    shutil.copyfile(LOCK, packages / BUILD_LOCK)
    (packages / "tinylib" / "src" / "tinylib" / "__init__.py").write_text("VALUE = 1\n")
    (packages / "tinylib" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinylib"\nversion = "1.0"\n'
    )
    return packages


def committed(root: Path) -> tuple[Path, str]:
    """A git repository at *root* holding tiny packages/, and its commit."""
    packages = tiny_packages(root)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "library")
    return packages, git(root, "rev-parse", "HEAD")


def moved_to_another_key(entry: Path) -> None:
    record = json.loads((entry / "entry.json").read_text())
    (entry / "entry.json").write_text(json.dumps(record | {"key": sha256_bytes(b"another")}))


def only_entry(cache: BuildCache) -> Path:
    assert cache.built is not None
    (entry,) = (p for p in cache.built.iterdir() if not p.name.startswith("."))
    return entry


def test_the_same_inputs_take_the_cached_wheel_without_building(
    tmp_path: Path, cache: BuildCache, builds: list[str]
) -> None:
    packages = tiny_packages(tmp_path)
    [first] = build_archives(packages, tmp_path / "a", cache=cache)
    [again] = build_archives(packages, tmp_path / "b", cache=cache)
    assert builds == ["tinylib"]
    assert again == first
    assert file_sha256(tmp_path / "b" / again.filename) == first.sha256
    record = CachedWheel.model_validate_json((only_entry(cache) / "entry.json").read_bytes())
    assert record.archive == first


@pytest.mark.parametrize(
    "change",
    [
        lambda source: (source / "src" / "tinylib" / "__init__.py").write_text("VALUE = 2\n"),
        lambda source: (source / "src" / "tinylib" / "more.py").write_text("MORE = 1\n"),
        lambda source: (source / "src" / "tinylib" / "__init__.py").chmod(0o755),
        lambda source: (source / "README.txt").write_text("read me\n"),
    ],
    ids=["edited", "added", "made-executable", "a-file-beside-the-package"],
)
def test_any_change_to_what_the_build_sees_builds_again(
    tmp_path: Path, cache: BuildCache, builds: list[str], change: Callable[[Path], object]
) -> None:
    packages = tiny_packages(tmp_path)
    build_archives(packages, tmp_path / "a", cache=cache)
    change(packages / "tinylib")
    build_archives(packages, tmp_path / "b", cache=cache)
    assert builds == ["tinylib", "tinylib"]


def test_what_the_build_never_sees_does_not_change_the_key(tmp_path: Path) -> None:
    source = tiny_packages(tmp_path) / "tinylib"
    before = source_digest(source)
    (source / "build" / "lib").mkdir(parents=True)
    (source / "build" / "lib" / "stale.py").write_text("OLD = 1\n")
    (source / "src" / "tinylib" / "__pycache__").mkdir()
    (source / "src" / "tinylib" / "cached.pyc").write_bytes(b"\0")
    assert source_digest(source) == before


def test_bits_a_wheel_does_not_record_do_not_change_the_key(tmp_path: Path) -> None:
    source = tiny_packages(tmp_path) / "tinylib"
    module = source / "src" / "tinylib" / "__init__.py"
    module.chmod(0o644)
    before = source_digest(source)
    module.chmod(0o664)
    (source / "src").chmod(0o775)
    assert source_digest(source) == before
    module.chmod(0o744)
    assert source_digest(source) != before


def test_a_link_in_the_tree_is_never_cached(tmp_path: Path) -> None:
    source = tiny_packages(tmp_path) / "tinylib"
    (source / "src" / "tinylib" / "alias.py").symlink_to(source / "src" / "tinylib" / "__init__.py")
    assert source_digest(source) is None


def test_every_input_of_a_wheel_is_part_of_its_key(tmp_path: Path) -> None:
    (dist,) = find_distributions(tiny_packages(tmp_path))
    given: dict[str, Any] = {
        "origin": "commit", "lock_sha256": "a" * 64, "version": None, "files": "sha256:1",
    }  # fmt: skip
    keys = {wheel_key(dist, **given)}
    for name, other in (
        ("origin", "working-tree"), ("lock_sha256", "b" * 64), ("version", "1.0.dev1"),
        ("files", "sha256:2"),
    ):  # fmt: skip
        keys.add(wheel_key(dist, **{**given, name: other}))
    assert len(keys) == 5


@pytest.mark.parametrize(
    "tamper",
    [
        lambda entry, wheel: wheel.write_bytes(wheel.read_bytes()[:-1] + b"!"),
        lambda entry, wheel: wheel.unlink(),
        lambda entry, wheel: (entry / "entry.json").write_text("{"),
        lambda entry, wheel: moved_to_another_key(entry),
        lambda entry, wheel: (wheel.unlink(), wheel.symlink_to(REPO / "pyproject.toml")),
    ],
    ids=["a-changed-byte", "no-wheel", "an-unreadable-record", "another-key", "a-link"],
)
def test_a_tampered_entry_is_thrown_away_said_once_and_the_wheel_built_again(
    tmp_path: Path, user_cache: BuildCache, builds: list[str], tamper: Callable[[Path, Path], Any]
) -> None:
    said: list[str] = []
    cache = BuildCache(user_cache.wheelhouse, user_cache.environments, tmp_path / "built")
    packages = tiny_packages(tmp_path)
    [first] = build_archives(packages, tmp_path / "a", cache=cache, notice=said.append)
    entry = only_entry(cache)
    tamper(entry, entry / first.filename)
    [again] = build_archives(packages, tmp_path / "b", cache=cache, notice=said.append)
    assert builds == ["tinylib", "tinylib"]
    assert again == first and file_sha256(tmp_path / "b" / first.filename) == first.sha256
    assert len(said) == 1 and str(entry) in said[0] and "built again" in said[0]
    # The entry made again is whole, and taken as it is.
    [third] = build_archives(packages, tmp_path / "c", cache=cache, notice=said.append)
    assert third == first and builds == ["tinylib", "tinylib"] and len(said) == 1


def test_a_clean_checkout_s_wheel_is_taken_by_the_rebuild_from_its_commit(
    tmp_path: Path, cache: BuildCache, builds: list[str]
) -> None:
    packages, commit = committed(tmp_path / "repo")
    [packed] = build_archives(packages, tmp_path / "a", cache=cache)
    [rebuilt] = rebuild_archives(tmp_path / "repo", "packages", commit, tmp_path / "r", cache=cache)
    assert rebuilt == packed and builds == ["tinylib"]


def test_a_wheel_of_a_tree_with_uncommitted_changes_never_stands_in_for_a_rebuild(
    tmp_path: Path, cache: BuildCache, builds: list[str]
) -> None:
    """Even when the distribution's own files are the commit's: an untracked file beside it
    makes the tree one git does not hold."""
    packages, commit = committed(tmp_path / "repo")
    (packages / "NOTES.txt").write_text("not committed\n")
    [packed] = build_archives(packages, tmp_path / "a", cache=cache)
    [rebuilt] = rebuild_archives(tmp_path / "repo", "packages", commit, tmp_path / "r", cache=cache)
    assert builds == ["tinylib", "tinylib"]
    assert rebuilt.sha256 == packed.sha256
    [again] = rebuild_archives(tmp_path / "repo", "packages", commit, tmp_path / "s", cache=cache)
    assert again == rebuilt and builds == ["tinylib", "tinylib"]


def test_the_rebuild_from_a_commit_is_keyed_by_that_commit_s_tree_not_the_working_copy(
    tmp_path: Path, cache: BuildCache, builds: list[str]
) -> None:
    packages, commit = committed(tmp_path / "repo")
    build_archives(packages, tmp_path / "a", cache=cache)
    (packages / "tinylib" / "src" / "tinylib" / "__init__.py").write_text("VALUE = 2\n")
    git(tmp_path / "repo", "commit", "-qam", "changed")
    [later] = build_archives(packages, tmp_path / "b", cache=cache)
    [rebuilt] = rebuild_archives(tmp_path / "repo", "packages", commit, tmp_path / "r", cache=cache)
    assert builds == ["tinylib", "tinylib"]
    assert rebuilt.sha256 != later.sha256


def test_writers_racing_on_one_key_leave_one_whole_entry_and_readers_never_see_half(
    tmp_path: Path,
) -> None:
    wheel = tmp_path / "tinylib-1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK" + bytes(range(256)) * 400)
    archive = ArchiveEntry(
        filename=wheel.name, distribution="tinylib", version="1.0",
        sha256=file_sha256(wheel), size=wheel.stat().st_size,
    )  # fmt: skip
    said: list[str] = []
    cache = WheelCache(tmp_path / "built", said.append)
    key = sha256_bytes(b"one key")
    start = threading.Barrier(12)
    taken: list[ArchiveEntry | None] = []

    def write() -> None:
        start.wait()
        cache.put(key, wheel, archive)

    def read(index: int) -> None:
        start.wait()
        for attempt in range(20):
            taken.append(cache.take(key, _fresh(tmp_path / f"out-{index}-{attempt}")))

    threads = [threading.Thread(target=write) for _ in range(8)]
    threads += [threading.Thread(target=read, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert said == []
    assert all(entry in (None, archive) for entry in taken)
    assert sorted(p.name for p in (tmp_path / "built").iterdir()) == [key.removeprefix("sha256:")]
    assert cache.take(key, _fresh(tmp_path / "last")) == archive


def test_a_cache_that_cannot_be_written_only_costs_a_build(
    tmp_path: Path, cache: BuildCache, builds: list[str]
) -> None:
    assert cache.built is not None
    cache.built.parent.mkdir(parents=True, exist_ok=True)
    cache.built.write_text("a file where the cache would be\n")
    packages = tiny_packages(tmp_path)
    first = build_archives(packages, tmp_path / "a", cache=cache)
    assert build_archives(packages, tmp_path / "b", cache=cache) == first
    assert builds == ["tinylib", "tinylib"]


def test_the_cache_record_s_fields_are_pinned() -> None:
    assert set(CachedWheel.model_fields) == {"schemaVersion", "key", "archive"}


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
