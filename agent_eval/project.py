"""Where the embedding repository keeps its library, tasks and evidence.

A repository that embeds the harness declares its layout in its own
``pyproject.toml`` under ``[tool.agent-eval]``; every key is optional and
defaults to this repository's layout.
"""

from __future__ import annotations

import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import agent_eval
from agent_eval.digests import (
    DigestError,
    file_sha256,
    regular_files,
    sha256_json,
    solution_digest,
)
from agent_eval.errors import ConfigError
from agent_eval.models import SourceIdentity

__all__ = ["CACHE_DIRS", "Project", "evaluator_digest", "find_project", "source_identity"]

_KEYS = {"packages", "tasks", "graders", "fixtures", "evidence", "registry"}
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

    def guides(self) -> dict[str, Path]:
        """Each library distribution's ``GUIDE.md``, by its directory name under packages/."""
        return {
            p.name: p / "GUIDE.md"
            for p in sorted(self.packages.iterdir())
            if (p / "GUIDE.md").is_file()
        }

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
    return _files_digest(Path(agent_eval.__file__).resolve().parent)


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
        value = section.get(key, default)
        if (
            not isinstance(value, str)
            or not value
            or Path(value).is_absolute()
            or ".." in Path(value).parts
        ):
            raise ConfigError(
                f"{pyproject}: [tool.agent-eval].{key} must be a relative path in the repository"
            )
        resolved[key] = root / value
    return Project(root=root, **resolved)


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
