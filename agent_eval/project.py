"""Where the embedding repository keeps its library, tasks and evidence.

A repository that embeds the harness declares its layout in its own
``pyproject.toml`` under ``[tool.agent-eval]``; every key is optional and
defaults to this repository's layout. ``[tool.agent-eval.guides]`` names what
the agent reads for each distribution (by its directory under packages/): a
file, or a docs directory copied whole; a distribution it leaves out reads its
``packages/<dir>/GUIDE.md`` when there is one.
"""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval.digests import (
    DigestError,
    file_sha256,
    regular_files,
    sha256_json,
    solution_digest,
)
from agent_eval.errors import ConfigError
from agent_eval.layout import HARNESS_ROOT
from agent_eval.models import SourceIdentity

__all__ = ["CACHE_DIRS", "Project", "evaluator_digest", "find_project", "source_identity"]

_KEYS = {"packages", "tasks", "graders", "fixtures", "evidence", "registry", "guides"}
DEFAULT_GUIDE = "GUIDE.md"
"""A distribution's guide when ``[tool.agent-eval.guides]`` names none (``packages/<dir>/``)."""
CACHE_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
"""Caches written by tools, never read by the harness: left out of every tree it hashes."""


@dataclass(frozen=True)
class Project:
    """Resolved, absolute locations of one embedding repository."""

    root: Path
    packages: Path
    tasks: Path
    graders: Path
    fixtures: Path
    evidence: Path
    registry: Path = Path("reviewed-runners.toml")
    """The reviewed-runner registry (a TOML file; it need not exist)."""
    declared_guides: Mapping[str, Path] = field(default_factory=dict)
    """``[tool.agent-eval.guides]``: a guide file or docs directory, by distribution directory."""

    def distributions(self) -> list[str]:
        """The directory names under packages/ that hold a distribution (a pyproject.toml)."""
        if not self.packages.is_dir():
            return []
        return sorted(p.name for p in self.packages.iterdir() if (p / "pyproject.toml").is_file())

    def guides(self) -> dict[str, Path]:
        """What the agent reads of each distribution (a file or a directory), by its directory.

        Raises:
            ConfigError: A declared guide is missing, or names no distribution.
        """
        found: dict[str, Path] = {}
        names = self.distributions()
        for name, path in sorted(self.declared_guides.items()):
            if name not in names:
                raise ConfigError(
                    f"[tool.agent-eval.guides].{name}: no distribution {self.packages / name}"
                )
            if not (path.is_file() or path.is_dir()):
                raise ConfigError(f"[tool.agent-eval.guides].{name}: {path} does not exist")
            found[name] = path
        for name in names:
            default = self.packages / name / DEFAULT_GUIDE
            if name not in found and default.is_file():
                found[name] = default
        return dict(sorted(found.items()))

    def guide_warnings(self) -> list[str]:
        """One line for each distribution the agent gets no guide for."""
        guides = self.guides()
        return [
            f"distribution {name} has no guide: the agent reads only its API catalog; write "
            f"{self.packages / name / DEFAULT_GUIDE} or name one in [tool.agent-eval.guides]"
            for name in self.distributions()
            if name not in guides
        ]

    def suite_digest(self) -> str:
        """Digest of every task file and the shared graders.

        Stable across machines and checkouts (relative POSIX paths, file
        bytes), and changed by any edit, addition or removal of a file.
        """
        return sha256_json(
            {
                "tasks": _files_digest(self.tasks),
                "graders": _files_digest(self.graders),
            }
        )


def _files_digest(root: Path) -> str:
    try:
        files = regular_files(root, skip_dirs=CACHE_DIRS, skip_suffixes=(".pyc", ".pyo"))
        return solution_digest((rel, file_sha256(root / rel)) for rel in files)
    except DigestError as exc:
        raise ConfigError(f"{exc}; the digest covers exactly what is read") from exc


def evaluator_digest() -> str:
    """Digest of the harness's own source files (the installed ``agent_eval`` package)."""
    return _files_digest(HARNESS_ROOT)


def find_project(start: Path | None = None) -> Project:
    """Find the repository root (a pyproject.toml) from *start* upwards and resolve its layout."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            return _load(candidate, pyproject)
    raise ConfigError(f"no pyproject.toml found in {here} or any parent; run from the repository")


def _load(root: Path, pyproject: Path) -> Project:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc}") from exc
    section = data.get("tool", {}).get("agent-eval", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{pyproject}: [tool.agent-eval] must be a table")
    unknown = set(section) - _KEYS
    if unknown:
        raise ConfigError(
            f"{pyproject}: [tool.agent-eval] has unknown keys {sorted(unknown)}; "
            f"allowed: {sorted(_KEYS)}"
        )
    defaults = {
        "packages": "packages",
        "tasks": "tasks",
        "graders": "graders",
        "fixtures": "fixtures",
        "evidence": ".verification/agent-eval",
        "registry": "reviewed-runners.toml",
    }
    resolved: dict[str, Path] = {}
    for key, default in defaults.items():
        resolved[key] = root / _relative(pyproject, key, section.get(key, default))
    guides = section.get("guides", {})
    if not isinstance(guides, dict):
        raise ConfigError(f"{pyproject}: [tool.agent-eval].guides must be a table")
    declared = {
        str(name): root / _relative(pyproject, f"guides.{name}", value)
        for name, value in guides.items()
    }
    return Project(root=root, **resolved, declared_guides=declared)


def _relative(pyproject: Path, key: str, value: object) -> str:
    if (
        not isinstance(value, str)
        or not value
        or Path(value).is_absolute()
        or (".." in Path(value).parts)
    ):
        raise ConfigError(
            f"{pyproject}: [tool.agent-eval].{key} must be a relative path in the repository"
        )
    return value


def source_identity(root: Path) -> SourceIdentity:
    """The git commit of *root* and whether its working tree is dirty (None outside git)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=normal"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return SourceIdentity(commit=None, dirty=True)
    return SourceIdentity(commit=head, dirty=bool(status.strip()))
