"""``python3 -B -m agent_eval.verification.runtime.attempt ATTEMPT.json``: analyse, then grade.

The verifier container's command. In one container, as the trusted parent
(UID 0):

1. **Static analysis**: ``python3 -m agent_eval.verification.analysis`` (the staged,
   standard-library-only analysis with the image's mypy) runs as a
   subprocess in a fresh root-only scratch directory, against the library
   installed in the consumer, the task contract and the API catalog. It never
   imports or executes the solution, and nothing submitted runs yet. mypy's
   cache starts as a copy of the batch's read-only seed when one is given
   (made once from the library alone; a stale seed only costs time: mypy
   checks every cache entry against its source and options). Its
   output is checked to be one JSON object and copied, byte for byte, to
   ``analysis.json`` in the result directory; when the analysis cannot run,
   ``analysis.json`` holds ``{"analysisError": {"kind", "message"}}``
   instead and nothing else happens.
2. **Behaviour**: the runtime's job (``job.Job``, the same
   format as ``job.json``) runs the grader's scenarios, each in a fresh child
   that drops to its own UID, and the parent writes ``result.json``. In the
   container the children are forks of the zygote that started this process
   (``zygote``); without one, each is a fresh interpreter.

Only this process writes to the result directory, and only those two files.
The attempt file is validated before anything runs; nothing in it is secret.
Exit status: 0 both files were written (whatever they say), or the analysis
error was; 1 a file could not be written; 2 the attempt file was refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import timing
from .job import MAX_JOB_BYTES, Job, JobError, _int, _object, _path, parse_job

__all__ = ["ANALYSIS_GRACE_S", "MYPY_CACHE_DIR", "Attempt", "main", "parse_attempt"]

MAX_ANALYSIS_BYTES = 8 * 1024 * 1024
"""Largest analysis output accepted (it is bounded diagnostics, far below this)."""
ANALYSIS_GRACE_S = 10.0
"""Time the analysis process gets beyond mypy's own limit before it is killed."""
_STDERR_TAIL = 1500
_EXIT_INPUT = 2
_EXIT_MYPY = 3
_ANALYSIS_TIMINGS = "timings.json"

_ANALYSIS_PATHS = {
    "taskPath": "task_path",
    "catalogPath": "catalog_path",
    "solutionDir": "solution_dir",
    "scratchDir": "scratch_dir",
    "resultPath": "result_path",
}
_ANALYSIS_OPTIONAL_PATHS = {
    "contractPath": "contract_path",
    "starterDir": "starter_dir",
    "cacheSeedDir": "cache_seed_dir",
}
MYPY_CACHE_DIR = "mypy-cache"
"""Where ``agent_eval.verification.analysis`` keeps mypy's cache inside its scratch directory."""
_ANALYSIS_KEYS = {
    *_ANALYSIS_PATHS,
    *_ANALYSIS_OPTIONAL_PATHS,
    "searchPath",
    "importPaths",
    "timeoutMs",
}


class AnalysisFailed(Exception):
    """The analysis could not run: ``kind`` ``input`` (the task's files) or ``infrastructure``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class AnalysisJob:
    """Where the static analysis finds its inputs and puts its output."""

    task_path: Path
    catalog_path: Path
    solution_dir: Path
    scratch_dir: Path
    """Made fresh (0700) for the analysis, removed after it."""
    result_path: Path
    contract_path: Path | None = None
    starter_dir: Path | None = None
    cache_seed_dir: Path | None = None
    """A mypy cache to start from (read-only; copied into the scratch directory)."""
    search_path: tuple[Path, ...] = ()
    """Import roots of the installed library, for mypy."""
    import_paths: tuple[Path, ...] = ()
    """PYTHONPATH of the analysis process (where the staged ``agent_eval`` is)."""
    timeout_ms: int = 300_000
    timings: bool = False
    """Have the analysis process note its spans too (see ``timing``)."""


@dataclass(frozen=True)
class Attempt:
    """One attempt: its analysis, then its behavioural job."""

    analysis: AnalysisJob
    behaviour: Job
    timings_path: Path | None = None
    """Where the parent writes its timing record, when one is asked for."""


def _paths(data: dict[str, Any], key: str) -> tuple[Path, ...]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise JobError(f"attempt.analysis.{key} must be a list of absolute paths")
    return tuple(_path(v, f"attempt.analysis.{key}[{i}]") for i, v in enumerate(value))


def parse_attempt(raw: Any) -> Attempt:
    """Validate a decoded attempt object; JobError names the offending key."""
    data = _object(raw, "attempt", {"schemaVersion", "analysis", "behaviour", "timingsPath"})
    if data.get("schemaVersion") != 1:
        raise JobError(f"attempt.schemaVersion must be 1, got {data.get('schemaVersion')!r}")
    if "analysis" not in data or "behaviour" not in data:
        raise JobError("attempt needs both 'analysis' and 'behaviour'")
    analysis = _object(data["analysis"], "attempt.analysis", _ANALYSIS_KEYS)
    missing = sorted(set(_ANALYSIS_PATHS) - set(analysis))
    if missing:
        raise JobError(f"attempt.analysis is missing {missing}")
    values: dict[str, Any] = {
        attr: _path(analysis[key], f"attempt.analysis.{key}")
        for key, attr in _ANALYSIS_PATHS.items()
    }
    for key, attr in _ANALYSIS_OPTIONAL_PATHS.items():
        if analysis.get(key) is not None:
            values[attr] = _path(analysis[key], f"attempt.analysis.{key}")
    values["search_path"] = _paths(analysis, "searchPath")
    values["import_paths"] = _paths(analysis, "importPaths")
    if "timeoutMs" in analysis:
        values["timeout_ms"] = _int(
            analysis["timeoutMs"], "attempt.analysis.timeoutMs", 1, 3_600_000
        )
    timings_path = None
    if data.get("timingsPath") is not None:
        timings_path = _path(data["timingsPath"], "attempt.timingsPath")
        values["timings"] = True
    return Attempt(
        analysis=AnalysisJob(**values),
        behaviour=parse_job(data["behaviour"]),
        timings_path=timings_path,
    )


def load_attempt(path: Path) -> Attempt:
    """Read and validate the attempt file at *path*."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_JOB_BYTES + 1)
    except OSError as exc:
        raise JobError(f"cannot read attempt file {path}: {exc.strerror}") from exc
    if len(data) > MAX_JOB_BYTES:
        raise JobError(f"attempt file {path} is larger than {MAX_JOB_BYTES} bytes")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise JobError(f"attempt file {path} is not JSON: {exc}") from exc
    return parse_attempt(raw)


def _command(job: AnalysisJob, output: Path) -> list[str]:
    command = [
        sys.executable,
        "-B",
        "-m",
        "agent_eval.verification.analysis",
        "--task",
        str(job.task_path),
        "--solution",
        str(job.solution_dir),
        "--catalog",
        str(job.catalog_path),
        "--scratch",
        str(job.scratch_dir),
        "--timeout",
        f"{job.timeout_ms / 1000:g}",
        "--output",
        str(output),
    ]
    if job.contract_path is not None:
        command += ["--contract", str(job.contract_path)]
    if job.starter_dir is not None:
        command += ["--starter", str(job.starter_dir)]
    for root in job.search_path:
        command += ["--search-path", str(root)]
    if job.timings:
        command += ["--timings", str(job.scratch_dir / _ANALYSIS_TIMINGS)]
    return command


def _run(command: Sequence[str], job: AnalysisJob) -> tuple[int, str]:
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "HOME": str(job.scratch_dir),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join(map(str, job.import_paths)),
    }
    try:
        proc = subprocess.Popen(
            command,
            cwd=job.scratch_dir,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise AnalysisFailed("infrastructure", f"cannot start the analysis: {exc}") from exc
    try:
        _, stderr = proc.communicate(timeout=job.timeout_ms / 1000 + ANALYSIS_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AnalysisFailed(
            "infrastructure", f"the analysis did not finish within {job.timeout_ms / 1000:g} s"
        ) from None
    return proc.returncode, stderr.decode("utf-8", errors="replace").strip()[-_STDERR_TAIL:]


def _seed_cache(seed: Path, cache: Path) -> None:
    """Start mypy's cache from *seed*; without it the analysis is slower, not different."""
    try:
        shutil.copytree(seed, cache, symlinks=True)
    except (OSError, shutil.Error):
        shutil.rmtree(cache, ignore_errors=True)


def run_analysis(job: AnalysisJob) -> bytes:
    """Run the static analysis and return its ``analysis.json`` bytes.

    Raises:
        AnalysisFailed: It could not run (``input``: the task's files are
            unusable; ``infrastructure``: mypy or the analysis broke).
    """
    try:
        os.mkdir(job.scratch_dir, 0o700)
    except OSError as exc:
        raise AnalysisFailed(
            "infrastructure", f"cannot make the analysis scratch {job.scratch_dir}: {exc.strerror}"
        ) from exc
    output = job.scratch_dir / "analysis.json"
    try:
        if job.cache_seed_dir is not None:
            with timing.span("copying the mypy cache seed"):
                _seed_cache(job.cache_seed_dir, job.scratch_dir / MYPY_CACHE_DIR)
        with timing.span("analysis process"):
            status, stderr = _run(_command(job, output), job)
        timing.record.extend(job.scratch_dir / _ANALYSIS_TIMINGS, "analysis: ")
        if status == _EXIT_INPUT:
            raise AnalysisFailed("input", stderr or "the analysis refused its inputs")
        if status != 0:
            what = "mypy could not run" if status == _EXIT_MYPY else f"exit status {status}"
            raise AnalysisFailed("infrastructure", f"the analysis failed ({what}): {stderr}")
        try:
            with output.open("rb") as handle:
                data = handle.read(MAX_ANALYSIS_BYTES + 1)
        except OSError as exc:
            raise AnalysisFailed("infrastructure", f"no analysis output: {exc.strerror}") from exc
        if len(data) > MAX_ANALYSIS_BYTES:
            raise AnalysisFailed("infrastructure", "the analysis output is too large")
        try:
            parsed = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise AnalysisFailed(
                "infrastructure", f"the analysis output is not JSON: {exc}"
            ) from exc
        if not isinstance(parsed, dict) or parsed.get("schemaVersion") != 1:
            raise AnalysisFailed("infrastructure", "the analysis output is not an analysis object")
        return data
    finally:
        # Free the tmpfs before the solution's processes share it.
        shutil.rmtree(job.scratch_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Validate the attempt, analyse, then grade; write the two result files."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print(
            "usage: python3 -m agent_eval.verification.runtime.attempt ATTEMPT.json",
            file=sys.stderr,
        )
        return 2
    try:
        attempt = load_attempt(Path(args[0]))
    except JobError as exc:
        print(f"verifier: {exc}", file=sys.stderr)
        return 2
    if attempt.timings_path is not None:
        timing.enable()
    from .zygote import Zygote, ZygoteBroken  # the child kit: only in the container

    try:
        # Before anything starts a process: none of them may hold the zygote's socket.
        zygote = Zygote.inherited()
    except ZygoteBroken as exc:
        print(f"verifier: {exc}", file=sys.stderr)
        return 1
    for path in reversed(attempt.behaviour.parent_import_paths):
        sys.path.insert(0, str(path))
    # Needs the job's import paths (the library) first.
    with timing.span("importing the parent and the grading kit"):
        from .parent import run_and_write, write_bytes

    failure: AnalysisFailed | None = None
    try:
        analysis = run_analysis(attempt.analysis)
    except AnalysisFailed as failed:
        failure = failed
        error = {"analysisError": {"kind": failed.kind, "message": failed.message}}
        analysis = (json.dumps(error, ensure_ascii=False, indent=2) + "\n").encode()
    try:
        with timing.span("writing analysis.json"):
            write_bytes(attempt.analysis.result_path, analysis)
    except OSError as exc:
        print(f"verifier: cannot write {attempt.analysis.result_path}: {exc}", file=sys.stderr)
        return 1
    status = 0  # nothing is graded after an analysis error: the host reports it
    if failure is None:
        with timing.span("behaviour"):
            status = run_and_write(attempt.behaviour, zygote)
    if attempt.timings_path is not None:
        timing.add("whole verification (every process)", timing.process_started() or 0.0,
                   timing.now(), timing.cpu())  # fmt: skip
        # A profile for the benchmark, never a grade: a failure to write it is ignored.
        with contextlib.suppress(OSError):
            timing.record.write(attempt.timings_path)
    return status


if __name__ == "__main__":
    sys.exit(main())
