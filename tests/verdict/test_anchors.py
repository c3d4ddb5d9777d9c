"""The candidate archives are held against a rebuild from git, not against the run directory.

A batch whose wheels were built from a commit of a real repository qualifies
on that rule; flipping one byte of a wheel and rewriting every digest of the
chain (archives.json, the consumer lock, the receipt) keeps every integrity
rule inside the run directory satisfied, and is still rejected, naming the
wheel: the rebuild from the recorded commit gives other bytes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import agent_eval.packing.build as build
import agent_eval.verdict.qualification as qualification
from agent_eval.digests import sha256_bytes
from agent_eval.packing import BUILD_LOCK, BuildCache, build_archives, fetch_build_wheels
from agent_eval.project import find_project
from agent_eval.verdict.qualification import current_anchors, qualify_files
from tests.evidence_builders import Batch, rebind, write_batch
from tests.paths import REPO


@pytest.fixture(autouse=True, scope="module")
def build_wheels() -> None:
    """The example's build lock's wheels, in the packing cache (downloaded once)."""
    fetch_build_wheels(REPO / "packages" / BUILD_LOCK, BuildCache.default().wheelhouse)


def built_every_time() -> BuildCache:
    """The user's wheelhouse and build environments without the wheel cache: the batch's
    wheels and the checker's rebuild are each really built."""
    user = BuildCache.default()
    return BuildCache(user.wheelhouse, user.environments)


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin", "HOME": str(root)},
    ).stdout.strip()  # fmt: skip


def repository(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "repo"
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("packages", "tasks", "graders"):
        shutil.copytree(REPO / name, root / name, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "library")
    return root, git(root, "rev-parse", "HEAD")


def packed_batch(tmp_path: Path, root: Path, commit: str) -> Batch:
    batch = write_batch(tmp_path / "batch")
    shutil.rmtree(batch.root / "archives")
    entries = build_archives(root / "packages", batch.root / "archives", cache=built_every_time())
    manifest = json.loads(batch.archives.read_text())
    manifest["archives"] = [e.model_dump() for e in entries]
    manifest["source"] = {"commit": commit, "dirty": False}
    batch.archives.write_text(json.dumps(manifest, indent=2))
    rebind(batch)
    return batch


def archive_reasons(batch: Batch, root: Path) -> list[str]:
    anchors = current_anchors(find_project(root), cache=built_every_time())
    result = qualify_files(batch.receipt, batch.archives, anchors)
    return [r for r in result.reasons if r.startswith(("archives-", "archive-", "consumer-lock"))]


def test_wheels_built_from_the_recorded_commit_pass_the_rebuild(tmp_path: Path) -> None:
    root, commit = repository(tmp_path)
    assert archive_reasons(packed_batch(tmp_path, root, commit), root) == []


def test_a_changed_wheel_rehashed_through_the_whole_chain_is_rejected_naming_it(
    tmp_path: Path,
) -> None:
    root, commit = repository(tmp_path)
    batch = packed_batch(tmp_path, root, commit)
    wheel = sorted((batch.root / "archives").glob("*.whl"))[0]
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0x01
    wheel.write_bytes(bytes(data))
    rebind(batch)
    reasons = archive_reasons(batch, root)
    assert len(reasons) == 1 and reasons[0].startswith("archives-rebuild:")
    assert wheel.name in reasons[0] and commit in reasons[0]


def test_the_rebuild_uses_the_commit_s_build_lock_not_the_working_copy_s(tmp_path: Path) -> None:
    root, commit = repository(tmp_path)
    batch = packed_batch(tmp_path, root, commit)
    (root / "packages" / BUILD_LOCK).write_text("not a lock\n")
    assert archive_reasons(batch, root) == []


def test_a_commit_without_a_build_lock_cannot_be_rebuilt_and_says_so(tmp_path: Path) -> None:
    root, commit = repository(tmp_path)
    batch = packed_batch(tmp_path, root, commit)
    git(root, "rm", "-q", f"packages/{BUILD_LOCK}")
    git(root, "commit", "-q", "-m", "no lock")
    unlocked = git(root, "rev-parse", "HEAD")
    manifest = json.loads(batch.archives.read_text())
    manifest["source"]["commit"] = unlocked
    batch.archives.write_text(json.dumps(manifest, indent=2))
    rebind(batch)
    [reason] = archive_reasons(batch, root)
    assert reason.startswith(f"archives-rebuild: cannot rebuild the archives from {unlocked}")
    assert f"{BUILD_LOCK}: cannot read the build lock" in reason


def test_a_commit_the_repository_does_not_have_is_rejected(tmp_path: Path) -> None:
    root, commit = repository(tmp_path)
    batch = packed_batch(tmp_path, root, commit)
    manifest = json.loads(batch.archives.read_text())
    manifest["source"]["commit"] = "1" * 40
    batch.archives.write_text(json.dumps(manifest, indent=2))
    rebind(batch)
    [reason] = archive_reasons(batch, root)
    assert reason.startswith("archives-rebuild:") and "is not in the repository" in reason


def test_a_commit_s_wheels_are_rebuilt_once_per_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Batches of one commit (pooled in a comparison, summarised and compared) share it."""
    calls: list[str] = []

    def counted(root: Path, packages: str, commit: str, work: Path, **_: Any) -> list[Any]:
        calls.append(commit)
        return []

    monkeypatch.setattr(qualification, "rebuild_archives", counted)
    rebuild = qualification.current_anchors(find_project(REPO)).rebuild
    assert rebuild is not None
    first, again = rebuild("a" * 40), rebuild("a" * 40)
    assert first == again == [] and first is not again
    rebuild("b" * 40)
    assert calls == ["a" * 40, "b" * 40]


def test_the_checker_builds_its_own_wheels_though_the_batch_filled_the_wheel_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's packing filled the wheel cache from the clean commit; the checker, a
    release gate, takes nothing from it (the batch's side writes it): it builds the
    commit's wheels itself and names the changed wheel."""
    user = BuildCache.default()
    cache = BuildCache(user.wheelhouse, user.environments, tmp_path / "built")
    root, commit = repository(tmp_path)
    batch = write_batch(tmp_path / "batch")
    shutil.rmtree(batch.root / "archives")
    entries = build_archives(root / "packages", batch.root / "archives", cache=cache)
    manifest = json.loads(batch.archives.read_text())
    manifest["archives"] = [e.model_dump() for e in entries]
    manifest["source"] = {"commit": commit, "dirty": False}
    batch.archives.write_text(json.dumps(manifest, indent=2))
    wheel = sorted((batch.root / "archives").glob("*.whl"))[0]
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0x01
    wheel.write_bytes(bytes(data))
    rebind(batch)
    built: list[str] = []
    real = build._build_wheel

    def counted(dist: Any, *args: Any) -> Any:
        built.append(dist.name)
        return real(dist, *args)

    monkeypatch.setattr(build, "_build_wheel", counted)
    anchors = current_anchors(find_project(root), cache=cache)
    result = qualify_files(batch.receipt, batch.archives, anchors)
    reasons = [r for r in result.reasons if r.startswith(("archives-", "archive-"))]
    assert len(built) == len(entries)
    assert len(reasons) == 1 and reasons[0].startswith(f"archives-rebuild: {wheel.name} rebuilt")
    original = next(e for e in entries if e.filename == wheel.name)
    assert original.sha256 in reasons[0] and commit in reasons[0]


def test_a_wheel_cache_rewritten_with_its_records_moves_no_verdict(tmp_path: Path) -> None:
    """Whoever can write the user's cache can replace a cached wheel and rewrite its record
    to match (the record sits beside it). The checker takes nothing from that cache, so an
    honest batch still qualifies on the rebuild rule, whatever the cache says."""
    user = BuildCache.default()
    cache = BuildCache(user.wheelhouse, user.environments, tmp_path / "built")
    root, commit = repository(tmp_path)
    batch = write_batch(tmp_path / "batch")
    shutil.rmtree(batch.root / "archives")
    entries = build_archives(root / "packages", batch.root / "archives", cache=cache)
    manifest = json.loads(batch.archives.read_text())
    manifest["archives"] = [e.model_dump() for e in entries]
    manifest["source"] = {"commit": commit, "dirty": False}
    batch.archives.write_text(json.dumps(manifest, indent=2))
    rebind(batch)
    assert cache.built is not None
    poisoned = 0
    for entry in (p for p in cache.built.iterdir() if not p.name.startswith(".")):
        record = json.loads((entry / "entry.json").read_text())
        wheel = entry / record["archive"]["filename"]
        data = wheel.read_bytes() + b"poison"
        wheel.write_bytes(data)
        record["archive"] |= {"sha256": sha256_bytes(data), "size": len(data)}
        (entry / "entry.json").write_text(json.dumps(record))
        poisoned += 1
    assert poisoned == len(entries)
    result = qualify_files(
        batch.receipt, batch.archives, current_anchors(find_project(root), cache=cache)
    )
    assert [r for r in result.reasons if r.startswith(("archives-", "archive-"))] == []
