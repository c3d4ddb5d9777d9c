"""The library's distributions as source trees: their names, versions, packages and build systems.

A distribution is ``packages/<dir>/pyproject.toml``. Its packages are found
under ``src/`` when it has one, else beside the pyproject (a flat layout,
where the directories setuptools' own discovery leaves out are not packages).
Its version is ``[project] version``, or computed when it is built when
``[project] dynamic`` names it.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_eval.digests import DigestError, regular_files
from agent_eval.errors import ConfigError

__all__ = [
    "NOT_PACKED",
    "BuildSystem",
    "SourceDistribution",
    "find_distributions",
    "normalise_name",
]

NOT_PACKED = ("build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".mypy_cache")
"""Build output and caches: never copied into a build, never checked for links."""

# setuptools' flat-layout discovery leaves these out; so do we, so that a flat
# distribution's packages are what its wheel holds.
_NOT_FLAT_PACKAGES = (
    "tests", "test", "docs", "doc", "examples", "example", "scripts", "tools", "benchmarks",
    "benchmark", "build", "dist", "venv", "env", "ci", "bin", "[._]*",
)  # fmt: skip
# PEP 517's fallback for a pyproject without [build-system].
_LEGACY_BACKEND: tuple[str, tuple[str, ...]] = (
    "setuptools.build_meta:__legacy__",
    ("setuptools>=40.8.0",),
)
_VCS_VERSION_PLUGINS = frozenset({"setuptools-scm", "hatch-vcs"})
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalise_name(name: str) -> str:
    """A distribution name as PEP 503 compares them (``Foo_Bar`` is ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class BuildSystem:
    """A distribution's ``[build-system]`` table."""

    backend: str
    """``build-backend``: the PEP 517 backend object (``module:object``)."""
    backend_path: tuple[str, ...]
    """``backend-path``: directories of the source tree the backend is imported from."""
    requires: tuple[str, ...]
    """``requires``: the PEP 508 requirements the backend needs."""

    @property
    def requirement_names(self) -> frozenset[str]:
        """The normalised names of :attr:`requires`."""
        return frozenset(normalise_name(m.group(1)) for r in self.requires if (m := _NAME.match(r)))


@dataclass(frozen=True)
class SourceDistribution:
    """One distribution of the library under evaluation, as a source tree."""

    name: str
    """Its ``[project] name``."""
    version: str | None
    """Its ``[project] version``; None when it is computed at build time (``dynamic``)."""
    directory: Path
    """``packages/<dir>/``, holding its pyproject.toml."""
    packages: tuple[str, ...]
    """Its importable top-level packages (under ``src/``, or beside the pyproject)."""
    build_system: BuildSystem
    """How it is built."""
    src: Path
    """The import root of its packages: ``src/``, or the directory itself (flat layout)."""

    @property
    def pyproject(self) -> Path:
        """Its ``pyproject.toml``."""
        return self.directory / "pyproject.toml"

    @property
    def version_from_git(self) -> bool:
        """Whether its version is computed from git metadata (setuptools-scm, hatch-vcs)."""
        return self.version is None and bool(
            self.build_system.requirement_names & _VCS_VERSION_PLUGINS
        )

    @property
    def source_version(self) -> str:
        """Its version for a consumer made from sources (a computed one is not known there)."""
        return self.version or "0+source"

    @property
    def dist_info_name(self) -> str:
        """Its ``.dist-info`` directory name in a consumer made from sources."""
        return f"{re.sub(r'[-_.]+', '_', self.name)}-{self.source_version}.dist-info"


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(value)


def _build_system(table: object, pyproject: Path) -> BuildSystem:
    if table is None:
        backend, requires = _LEGACY_BACKEND
        return BuildSystem(backend, (), requires)
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [build-system] must be a table")
    requires = _strings(table.get("requires"), f"{pyproject}: [build-system] requires")
    backend = table.get("build-backend", _LEGACY_BACKEND[0])
    if not isinstance(backend, str) or not re.fullmatch(r"[\w.]+(:[\w.]+)?", backend):
        raise ConfigError(
            f"{pyproject}: [build-system] build-backend {backend!r} is not module:object"
        )
    paths = _strings(table.get("backend-path", []), f"{pyproject}: [build-system] backend-path")
    for path in paths:
        if Path(path).is_absolute() or ".." in Path(path).parts:
            raise ConfigError(
                f"{pyproject}: [build-system] backend-path {path!r} is outside the distribution"
            )
    return BuildSystem(backend, paths, requires)


def _version(project: dict[str, Any], pyproject: Path) -> str | None:
    dynamic = project.get("dynamic", [])
    if isinstance(dynamic, list) and "version" in dynamic:
        return None
    if "version" not in project:
        raise ConfigError(f"{pyproject}: [project] has no version and does not list it in dynamic")
    return str(project["version"])


def _packages(directory: Path) -> tuple[Path, tuple[str, ...]]:
    src = directory / "src"
    if src.is_dir():
        return src, tuple(sorted(p.parent.name for p in src.glob("*/__init__.py")))
    found = (
        p.parent.name
        for p in directory.glob("*/__init__.py")
        if not any(fnmatch.fnmatch(p.parent.name, left) for left in _NOT_FLAT_PACKAGES)
    )
    return directory, tuple(sorted(found))


def find_distributions(packages_dir: Path) -> list[SourceDistribution]:
    """Every ``packages/<dir>/pyproject.toml`` with its packages and its build system.

    Raises:
        ConfigError: The directory is missing, a pyproject is unreadable or lacks a
            name or a version (given or dynamic), its ``[build-system]`` is malformed,
            a distribution has no package, or none is found.
    """
    if not packages_dir.is_dir():
        raise ConfigError(f"{packages_dir}: the packages directory does not exist")
    try:
        regular_files(packages_dir, skip_dirs=NOT_PACKED)
    except DigestError as exc:
        raise ConfigError(f"the packages directory: {exc}") from exc
    found = []
    for pyproject in sorted(packages_dir.glob("*/pyproject.toml")):
        try:
            document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            project = document["project"]
            name = str(project["name"])
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError) as exc:
            raise ConfigError(f"{pyproject}: cannot read [project] name: {exc}") from exc
        version = _version(project, pyproject)
        build_system = _build_system(document.get("build-system"), pyproject)
        root, packages = _packages(pyproject.parent)
        if not packages:
            raise ConfigError(f"{pyproject}: no package found under {root}")
        found.append(
            SourceDistribution(name, version, pyproject.parent, packages, build_system, root)
        )
    if not found:
        raise ConfigError(f"{packages_dir}: no distribution (no */pyproject.toml) found")
    return found
