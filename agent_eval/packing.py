"""Packing the library under evaluation into exact wheel archives, offline.

Each distribution is built from a clean copy of its source (stale ``build/``
or ``*.egg-info`` directories would otherwise leak deleted modules into the
wheel), without build isolation and without an index, with
SOURCE_DATE_EPOCH fixed so that the same source gives the same bytes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from agent_eval.digests import file_sha256
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.models import ArchiveEntry
from agent_eval.project import source_identity

__all__ = [
    "SourceDistribution",
    "build_archives",
    "find_distributions",
    "normalise_name",
    "source_identity",
]

_IGNORED = shutil.ignore_patterns(
    "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache"
)
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


def build_archives(packages_dir: Path, output_dir: Path) -> list[ArchiveEntry]:
    """Build one wheel per distribution into *output_dir* and describe each."""
    output_dir.mkdir(parents=True, exist_ok=True)
    entries: list[ArchiveEntry] = []
    for dist in find_distributions(packages_dir):
        name, version, source = dist.name, dist.version, dist.directory
        with tempfile.TemporaryDirectory(prefix="agent-eval-pack-") as tmp:
            clean = Path(tmp) / source.name
            shutil.copytree(source, clean, ignore=_IGNORED)
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
                raise InfrastructureError(f"building {name} took over {_BUILD_TIMEOUT_S}s") from exc
            wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
            if done.returncode != 0 or len(wheels) != 1:
                raise InfrastructureError(
                    f"building the wheel of {name} failed (exit {done.returncode}): "
                    f"{done.stderr.strip()[-2000:]}"
                )
            target = output_dir / wheels[0].name
            shutil.copyfile(wheels[0], target)
        entries.append(
            ArchiveEntry(
                filename=target.name,
                distribution=name,
                version=version,
                sha256=file_sha256(target),
                size=target.stat().st_size,
            )
        )
    return entries
