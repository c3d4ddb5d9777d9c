"""The job file the verifier parent is started with, validated with the standard library.

The host writes it (``agent_eval.models.behaviour.VerifierJob`` is the same
format as a pydantic model); the parent refuses unknown keys, relative paths
and out-of-range limits before doing anything else. Nothing in it is secret:
the child can read the parent's command line, though not this file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Job", "JobError", "Limits", "load_job", "parse_job"]

MAX_JOB_BYTES = 256 * 1024


class JobError(ValueError):
    """The job file is missing, malformed, or out of range."""


@dataclass(frozen=True)
class Limits:
    """Deadlines and resource limits of the solution's processes."""

    call_timeout_ms: int = 5_000
    scenario_timeout_ms: int = 30_000
    total_timeout_ms: int = 240_000
    memory_bytes: int = 512 * 1024 * 1024
    cpu_seconds: int = 30
    file_size_bytes: int = 16 * 1024 * 1024
    open_files: int = 64
    max_processes: int | None = None
    max_message_bytes: int = 1024 * 1024
    output_bytes: int = 4096


@dataclass(frozen=True)
class Isolation:
    """How the solution's processes are separated from the parent."""

    drop_privileges: bool = False
    child_uid: int = 65534
    child_gid: int = 65534
    kill_all_on_cleanup: bool = False
    """kill(-1, SIGKILL) after each scenario: only as PID-namespace root in a container."""
    sweep_paths: tuple[str, ...] = ()
    """Shared writable directories the child clears of its UID's entries before importing."""
    child_import_root: str | None = None
    """Where the child imports the runtime from; the parent's own root when None."""


@dataclass(frozen=True)
class Job:
    """One verification: which grader, which solution, where the result goes."""

    task_id: str
    grader_path: Path
    task_path: Path
    solution_dir: Path
    scratch_dir: Path
    result_path: Path
    parent_import_paths: tuple[Path, ...] = ()
    solution_import_paths: tuple[Path, ...] = ()
    limits: Limits = field(default_factory=Limits)
    isolation: Isolation = field(default_factory=Isolation)


_LIMIT_KEYS: dict[str, tuple[str, int, int]] = {
    "callTimeoutMs": ("call_timeout_ms", 1, 600_000),
    "scenarioTimeoutMs": ("scenario_timeout_ms", 1, 3_600_000),
    "totalTimeoutMs": ("total_timeout_ms", 1, 7_200_000),
    "memoryBytes": ("memory_bytes", 32 * 1024 * 1024, 1 << 40),
    "cpuSeconds": ("cpu_seconds", 1, 3600),
    "fileSizeBytes": ("file_size_bytes", 0, 1 << 40),
    "openFiles": ("open_files", 16, 65536),
    "maxProcesses": ("max_processes", 1, 1 << 20),
    "maxMessageBytes": ("max_message_bytes", 1024, 64 * 1024 * 1024),
    "outputBytes": ("output_bytes", 0, 1024 * 1024),
}
_ISOLATION_KEYS = {
    "dropPrivileges": "drop_privileges",
    "childUid": "child_uid",
    "childGid": "child_gid",
    "killAllOnCleanup": "kill_all_on_cleanup",
    "sweepPaths": "sweep_paths",
    "childImportRoot": "child_import_root",
}
_PATH_KEYS = {
    "graderPath": "grader_path",
    "taskPath": "task_path",
    "solutionDir": "solution_dir",
    "scratchDir": "scratch_dir",
    "resultPath": "result_path",
}
_TOP_KEYS = {
    "schemaVersion",
    "taskId",
    *_PATH_KEYS,
    "parentImportPaths",
    "solutionImportPaths",
    "limits",
    "isolation",
}


def _object(value: Any, where: str, allowed: set[str] | dict[str, Any]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise JobError(f"{where} must be a JSON object")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise JobError(f"{where} has unknown keys {unknown}; allowed: {sorted(allowed)}")
    return value


def _path(value: Any, where: str) -> Path:
    if not isinstance(value, str) or not value or "\x00" in value:
        raise JobError(f"{where} must be a non-empty path string")
    path = Path(value)
    if not path.is_absolute():
        raise JobError(f"{where} {value!r} must be an absolute path")
    return path


def _int(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise JobError(f"{where} must be an integer in [{low}, {high}], got {value!r}")
    return value


def parse_job(raw: Any) -> Job:
    """Validate a decoded job object; JobError names the offending key."""
    data = _object(raw, "job", _TOP_KEYS)
    if data.get("schemaVersion") != 1:
        raise JobError(f"job.schemaVersion must be 1, got {data.get('schemaVersion')!r}")
    missing = sorted({"taskId", *_PATH_KEYS} - set(data))
    if missing:
        raise JobError(f"job is missing {missing}")
    task_id = data["taskId"]
    if not isinstance(task_id, str) or not task_id or len(task_id) > 64:
        raise JobError("job.taskId must be a non-empty string of at most 64 characters")
    paths = {attr: _path(data[key], f"job.{key}") for key, attr in _PATH_KEYS.items()}
    imports: dict[str, tuple[Path, ...]] = {}
    for key in ("parentImportPaths", "solutionImportPaths"):
        value = data.get(key, [])
        if not isinstance(value, list):
            raise JobError(f"job.{key} must be a list of absolute paths")
        imports[key] = tuple(_path(v, f"job.{key}[{i}]") for i, v in enumerate(value))
    limit_values: dict[str, Any] = {}
    for key, value in _object(data.get("limits", {}), "job.limits", _LIMIT_KEYS).items():
        attr, low, high = _LIMIT_KEYS[key]
        if key == "maxProcesses" and value is None:
            continue
        limit_values[attr] = _int(value, f"job.limits.{key}", low, high)
    isolation_values: dict[str, Any] = {}
    isolation_raw = _object(data.get("isolation", {}), "job.isolation", _ISOLATION_KEYS)
    for key, value in isolation_raw.items():
        attr = _ISOLATION_KEYS[key]
        if key in {"dropPrivileges", "killAllOnCleanup"}:
            if not isinstance(value, bool):
                raise JobError(f"job.isolation.{key} must be a boolean")
            isolation_values[attr] = value
        elif key == "sweepPaths":
            if not isinstance(value, list) or len(value) > 8:
                raise JobError("job.isolation.sweepPaths must be a list of at most 8 paths")
            isolation_values[attr] = tuple(
                str(_path(v, f"job.isolation.sweepPaths[{i}]")) for i, v in enumerate(value)
            )
        elif key == "childImportRoot":
            if value is not None:
                isolation_values[attr] = str(_path(value, "job.isolation.childImportRoot"))
        else:
            isolation_values[attr] = _int(value, f"job.isolation.{key}", 1, 2**31 - 2)
    isolation = Isolation(**isolation_values)
    if isolation.kill_all_on_cleanup and not isolation.drop_privileges:
        raise JobError("job.isolation.killAllOnCleanup requires dropPrivileges (container only)")
    if isolation.sweep_paths and not isolation.drop_privileges:
        raise JobError("job.isolation.sweepPaths requires dropPrivileges (container only)")
    return Job(
        task_id=task_id,
        parent_import_paths=imports["parentImportPaths"],
        solution_import_paths=imports["solutionImportPaths"],
        limits=Limits(**limit_values),
        isolation=isolation,
        **paths,
    )


def load_job(path: Path) -> Job:
    """Read and validate the job file at *path*."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_JOB_BYTES + 1)
    except OSError as exc:
        raise JobError(f"cannot read job file {path}: {exc.strerror}") from exc
    if len(data) > MAX_JOB_BYTES:
        raise JobError(f"job file {path} is larger than {MAX_JOB_BYTES} bytes")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise JobError(f"job file {path} is not JSON: {exc}") from exc
    return parse_job(raw)
