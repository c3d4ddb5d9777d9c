"""Packing is exact and repeatable: the same source gives byte-identical wheels, stale
build output in the source tree never reaches a wheel, and a broken build is an error."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from agent_eval.digests import file_sha256
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.packing import build_archives
from agent_eval.project import source_identity


def tiny_distribution(root: Path, name: str = "tinylib") -> Path:
    source = root / name
    (source / "src" / name).mkdir(parents=True)
    (source / "src" / name / "__init__.py").write_text("VALUE = 1\n")
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    return source


def test_the_same_source_packs_to_identical_bytes(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    tiny_distribution(packages)
    first = build_archives(packages, tmp_path / "a")
    second = build_archives(packages, tmp_path / "b")
    assert [e.sha256 for e in first] == [e.sha256 for e in second]
    entry = first[0]
    assert (entry.distribution, entry.version) == ("tinylib", "1.0")
    assert file_sha256(tmp_path / "a" / entry.filename) == entry.sha256


def test_stale_build_output_in_the_source_never_reaches_the_wheel(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    source = tiny_distribution(packages)
    stale = source / "build" / "lib" / "tinylib"
    stale.mkdir(parents=True)
    (stale / "deleted_module.py").write_text("SECRET = 1\n")
    entry = build_archives(packages, tmp_path / "out")[0]
    with zipfile.ZipFile(tmp_path / "out" / entry.filename) as wheel:
        assert not any("deleted_module" in n for n in wheel.namelist())


def test_a_distribution_that_does_not_build_is_an_infrastructure_error(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    source = tiny_distribution(packages)
    (source / "pyproject.toml").write_text(
        (source / "pyproject.toml").read_text().replace("setuptools.build_meta", "nope.backend")
    )
    with pytest.raises(InfrastructureError, match="building the wheel of tinylib failed"):
        build_archives(packages, tmp_path / "out")


def test_an_empty_packages_directory_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "packages").mkdir()
    with pytest.raises(ConfigError, match="no distribution"):
        build_archives(tmp_path / "packages", tmp_path / "out")


def test_source_identity_names_the_commit_and_whether_the_tree_is_dirty(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    clean = source_identity(repo)
    assert clean.commit == head.stdout.strip() and clean.dirty is False
    (repo / "a.txt").write_text("changed\n")
    assert source_identity(repo).dirty is True


def test_outside_a_repository_there_is_no_commit_and_the_tree_counts_as_dirty(
    tmp_path: Path,
) -> None:
    outside = source_identity(tmp_path)
    assert outside.commit is None and outside.dirty is True
