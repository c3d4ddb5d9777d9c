"""Where the embedding repository keeps its library, tasks and evidence.

A repository that embeds the harness declares its layout in its own
``pyproject.toml`` under ``[tool.agent-eval]``; every key is optional and
defaults to this repository's layout. ``[tool.agent-eval.guides]`` names what
the agent reads for each distribution (by its directory under packages/): a
file, or a docs directory copied whole; a distribution it leaves out reads its
``packages/<dir>/GUIDE.md`` when there is one.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
import unicodedata
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

__all__ = [
    "CACHE_DIRS",
    "Project",
    "ProjectNotFoundError",
    "evaluator_digest",
    "find_project",
    "source_identity",
]

_KEYS = {"packages", "tasks", "graders", "fixtures", "evidence", "registry", "guides"}
_DIRECTORY_KEYS = frozenset({"packages", "tasks", "graders", "fixtures", "evidence"})
MAX_PYPROJECT_BYTES = 1024 * 1024
"""A pyproject.toml larger than this is refused before it is parsed."""
MAX_SETTING_CHARS = 1024
"""The longest path a ``[tool.agent-eval]`` setting may hold (a path, not a payload)."""
_MAX_PART_BYTES = 255
"""The longest name of one path component the file systems in use take."""
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
    raise ProjectNotFoundError(
        f"no pyproject.toml found in {here} or any parent; run from the repository"
    )


class ProjectNotFoundError(ConfigError):
    """No pyproject.toml in the directory asked for or any parent."""


def _load(root: Path, pyproject: Path) -> Project:
    """Parse *pyproject*'s ``[tool.agent-eval]``.

    Raises:
        ConfigError: The file cannot be read, or a setting breaks its rule (one line
            naming the file, the key and the rule).
    """
    try:
        with open(pyproject, "rb") as handle:
            raw = handle.read(MAX_PYPROJECT_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc.strerror or exc}") from exc
    if len(raw) > MAX_PYPROJECT_BYTES:
        raise ConfigError(f"{pyproject}: larger than {MAX_PYPROJECT_BYTES} bytes")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{pyproject}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject}: not TOML: {_one_line(str(exc))}") from exc
    except RecursionError:
        # tomllib recurses per level of nested arrays and inline tables.
        raise ConfigError(f"{pyproject}: not TOML: values nested too deep") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{pyproject}: [tool] must be a table")
    section = tool.get("agent-eval", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{pyproject}: [tool.agent-eval] must be a table")
    unknown = set(section) - _KEYS
    if unknown:
        listed = ", ".join(_shown(key) for key in sorted(unknown)[:5])
        raise ConfigError(
            f"{pyproject}: [tool.agent-eval] has unknown keys ({listed}"
            f"{', ...' if len(unknown) > 5 else ''}); allowed: {', '.join(sorted(_KEYS))}"
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
        where = f"[tool.agent-eval].{key}"
        path = root / _relative(pyproject, where, section.get(key, default))
        _kind(pyproject, where, root, path, directory=key in _DIRECTORY_KEYS)
        resolved[key] = path
    guides = section.get("guides", {})
    if not isinstance(guides, dict):
        raise ConfigError(f"{pyproject}: [tool.agent-eval].guides must be a table")
    declared: dict[str, Path] = {}
    for name, value in guides.items():
        shown = name if _printable(name) and len(name) <= 60 else _shown(name)
        where = f"[tool.agent-eval].guides.{shown}"
        if not _printable(name) or "/" in name or name in (".", ".."):
            raise ConfigError(f"{pyproject}: {where}: a distribution's directory name")
        declared[name] = root / _relative(pyproject, where, value)
    return Project(root=root, **resolved, declared_guides=declared)


def _relative(pyproject: Path, where: str, value: object) -> str:
    """*value* if it is a relative path inside the repository that a file system can hold."""
    rule = "must be a relative path in the repository"
    if not isinstance(value, str):
        raise ConfigError(f"{pyproject}: {where} {rule}, not a {_toml_type(value)}")
    if not value:
        raise ConfigError(f"{pyproject}: {where} {rule}, not empty")
    if len(value) > MAX_SETTING_CHARS:
        raise ConfigError(f"{pyproject}: {where} {rule} of at most {MAX_SETTING_CHARS} characters")
    if not _printable(value):
        raise ConfigError(
            f"{pyproject}: {where} {rule} without control or invisible characters: {_shown(value)}"
        )
    parts = Path(value).parts
    if Path(value).is_absolute() or ".." in parts:
        raise ConfigError(f"{pyproject}: {where} {rule}: {_shown(value)}")
    if any(len(part.encode("utf-8", "surrogatepass")) > _MAX_PART_BYTES for part in parts):
        raise ConfigError(
            f"{pyproject}: {where} {rule} whose names are at most {_MAX_PART_BYTES} bytes"
        )
    return value


def _kind(pyproject: Path, where: str, root: Path, path: Path, *, directory: bool) -> None:
    """Refuse *path* when what is already there cannot be the directory (or file) it names.

    Every existing component above it must be a directory, and itself, if it exists,
    of the kind the key names; what is missing is created later, by whoever writes it.
    """
    current = root
    for part in path.relative_to(root).parts[:-1]:
        current = current / part
        if os.path.lexists(current) and not current.is_dir():
            raise ConfigError(f"{pyproject}: {where}: {current} is not a directory")
    if not os.path.lexists(path):
        return
    if directory and not path.is_dir():
        raise ConfigError(f"{pyproject}: {where}: {path} is not a directory")
    if not directory and not path.is_file():
        raise ConfigError(f"{pyproject}: {where}: {path} is not a regular file")


def _printable(text: str) -> bool:
    """No control, format (bidi overrides, zero-width), surrogate or unassigned character."""
    return not any(unicodedata.category(c).startswith("C") for c in text)


def _shown(text: str, limit: int = 60) -> str:
    """*text* quoted on one line with what cannot be shown escaped, cut at *limit*."""
    cut = text if len(text) <= limit else text[:limit] + "..."
    return ascii(cut)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _toml_type(value: object) -> str:
    return {
        bool: "boolean",
        int: "integer",
        float: "float",
        dict: "table",
        list: "array",
    }.get(type(value), "date or time")


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
