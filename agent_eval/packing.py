"""Packing the library under evaluation into exact wheel archives, offline.

Each distribution is built from a clean copy of its source (stale ``build/``
or ``*.egg-info`` directories would otherwise leak deleted modules into the
wheel), without build isolation and without an index, with
SOURCE_DATE_EPOCH fixed so that the same source gives the same bytes.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agent_eval.digests import DigestError, file_sha256, regular_files
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.models import ArchiveEntry

__all__ = [
    "SourceDistribution",
    "build_archives",
    "find_distributions",
    "normalise_name",
    "rebuild_archives",
]

_NOT_PACKED = ("build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".mypy_cache")
"""Build output and caches: never copied into a build, never checked for links."""
_IGNORED = shutil.ignore_patterns(*_NOT_PACKED, "*.pyc")
# 1980-01-01: the earliest time a zip archive can record.
_EPOCH = "315532800"
_BUILD_TIMEOUT_S = 300


@dataclass(frozen=True)
class SourceDistribution:
    """One distribution of the library under evaluation, as a source tree."""

    name: str
    """Its ``[project] name``."""
    version: str
    """Its ``[project] version``."""
    directory: Path
    """``packages/<dir>/``, holding its pyproject.toml."""
    packages: tuple[str, ...]
    """Its importable top-level packages, under ``src/``."""

    @property
    def src(self) -> Path:
        """The import root of its packages."""
        return self.directory / "src"

    @property
    def dist_info_name(self) -> str:
        """Its ``.dist-info`` directory name."""
        return f"{re.sub(r'[-_.]+', '_', self.name)}-{self.version}.dist-info"


def normalise_name(name: str) -> str:
    """A distribution name as PEP 503 compares them (``Foo_Bar`` is ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def find_distributions(packages_dir: Path) -> list[SourceDistribution]:
    """Every ``packages/<dir>/pyproject.toml`` with its importable packages under ``src/``.

    Raises:
        ConfigError: The directory is missing, a pyproject is unreadable or lacks a
            name and version, a distribution has no package, or none is found.
    """
    if not packages_dir.is_dir():
        raise ConfigError(f"{packages_dir}: the packages directory does not exist")
    try:
        regular_files(packages_dir, skip_dirs=_NOT_PACKED)
    except DigestError as exc:
        raise ConfigError(f"the packages directory: {exc}") from exc
    found = []
    for pyproject in sorted(packages_dir.glob("*/pyproject.toml")):
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
            name, version = str(project["name"]), str(project["version"])
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError) as exc:
            raise ConfigError(
                f"{pyproject}: cannot read [project] name and version: {exc}"
            ) from exc
        src = pyproject.parent / "src"
        packages = tuple(sorted(p.parent.name for p in src.glob("*/__init__.py")))
        if not packages:
            raise ConfigError(f"{pyproject}: no package found under {src}")
        found.append(SourceDistribution(name, version, pyproject.parent, packages))
    if not found:
        raise ConfigError(f"{packages_dir}: no distribution (no */pyproject.toml) found")
    return found


def _build_wheel(dist: SourceDistribution, output_dir: Path) -> ArchiveEntry:
    with tempfile.TemporaryDirectory(prefix="agent-eval-pack-") as tmp:
        clean = Path(tmp) / dist.directory.name
        shutil.copytree(dist.directory, clean, ignore=_IGNORED)
        out = Path(tmp) / "out"
        env = {**os.environ, "SOURCE_DATE_EPOCH": _EPOCH, "PIP_NO_INDEX": "1"}
        command = [
            sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
            "--no-index", "--disable-pip-version-check", "--quiet", "-w", str(out), str(clean),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as exc:
            raise InfrastructureError(
                f"building {dist.name} took over {_BUILD_TIMEOUT_S}s"
            ) from exc
        wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
        if done.returncode != 0 or len(wheels) != 1:
            raise InfrastructureError(
                f"building the wheel of {dist.name} failed (exit {done.returncode}): "
                f"{done.stderr.strip()[-2000:]}"
            )
        target = output_dir / wheels[0].name
        shutil.copyfile(wheels[0], target)
    return ArchiveEntry(
        filename=target.name,
        distribution=dist.name,
        version=dist.version,
        sha256=file_sha256(target),
        size=target.stat().st_size,
    )


def build_archives(packages_dir: Path, output_dir: Path) -> list[ArchiveEntry]:
    """Build one wheel per distribution into *output_dir* and describe each.

    The builds are independent subprocesses and run side by side.
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    distributions = find_distributions(packages_dir)
    with ThreadPoolExecutor(max_workers=min(4, len(distributions))) as pool:
        return list(pool.map(lambda dist: _build_wheel(dist, output_dir), distributions))


def rebuild_archives(
    repository: Path, packages: str, commit: str, work_dir: Path
) -> list[ArchiveEntry]:
    """Build the candidate wheels again from *commit*'s ``packages`` tree, as packing does.

    The tree comes from git itself (``git archive``), never from the working
    copy, so what is rebuilt is what the commit holds.

    Args:
        repository: The git repository (the project's root).
        packages: The packages directory, relative to the repository root.
        commit: The 40-hex commit recorded in archives.json.
        work_dir: An empty private directory for the tree and the wheels.

    Raises:
        ConfigError: The commit is unknown here or holds no packages.
        InfrastructureError: git or a build failed.
    """
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ConfigError(f"{commit!r} is not a full git commit id")
    known = subprocess.run(
        ["git", "-C", str(repository), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True, timeout=30, check=False,
    )  # fmt: skip
    if known.returncode != 0:
        raise ConfigError(f"commit {commit} is not in the repository at {repository}")
    archive = subprocess.run(
        ["git", "-C", str(repository), "archive", "--format=tar", commit, "--", packages],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    if archive.returncode != 0:
        stderr = archive.stderr.decode("utf-8", "replace").strip()[-500:]
        raise ConfigError(f"commit {commit} holds no {packages}/: {stderr}")
    tree = work_dir / "tree"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return build_archives(tree / packages, work_dir / "wheels")
