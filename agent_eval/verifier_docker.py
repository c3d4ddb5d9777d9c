"""Verify one attempt in a verifier container: static analysis, then the behavioural scenarios.

One container per attempt, from the pinned verifier image, with the verifier
hardening of :class:`agent_eval.engine.Hardening` (read-only root, no
network, ``no-new-privileges``, UID 0 keeping only SETUID, SETGID,
DAC_OVERRIDE and KILL, pids/memory/CPU limits). Its trusted parent
(``verifier_runtime.attempt``) runs the analysis and then the grader's
scenarios, each in a fresh child that drops to this slot's own UID.

Invariants:

* **Only staged copies are mounted.** Per attempt a fresh host directory
  holds a copy of exactly what the container needs: the verifier runtime,
  the graders kit and the standard-library-only analysis, catalog and digest
  modules (``/verifier``, read-only, world-readable, with the attempt file
  0600); the task's ``grader.py`` (0700), ``task.json``, ``contract.pyi`` and
  starter files (0600) in a 0700 directory at ``/grader/task``; a copy of the
  solution (``/solution``, read-only, readable by the child). The batch's
  consumer is mounted read-only at ``/consumer``. ``/result`` (a fresh 0700
  directory) is the only writable mount. Never the repository, the host
  home, the engine socket or credentials (``check_mounts`` refuses them).
* **Only the parent's files are read.** The host reads ``/result/analysis.json``
  and ``/result/result.json`` through the engine, bounded, and validates
  them; the container's stdout, stderr and exit status are never a grade
  (they appear only in the message of an infrastructure failure).
* **Bound to the solution.** The analysis must name the task and the digest
  of exactly the files staged; the behavioural result must name the task.
* **Deadlines from outside too.** The container is killed when it outlives
  the analysis limit plus the grading limit plus a grace period; a missing or
  malformed result is an :class:`~agent_eval.errors.InfrastructureError`,
  never the agent's failure.
* **Confirmed cleanup.** The container is removed whatever happens; an
  unconfirmed removal raises :class:`~agent_eval.errors.CleanupError` (it
  stops a batch) and wins over any other error. The staging directory is
  removed too.
* **One UID per slot.** Concurrent verifications use distinct child UIDs
  (:data:`CHILD_UID_BASE` + slot): per-UID process limits never couple them.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import stat
import sys
import tempfile
import threading
import tomllib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import Field, ValidationError

import agent_eval
from agent_eval.batch.ports import Verification
from agent_eval.batch.run import VerifierContext
from agent_eval.catalog import CATALOG_FILE
from agent_eval.digests import DigestError, solution_digest, solution_files
from agent_eval.engine import (
    ContainerEngine,
    ContainerSpec,
    Mount,
    ResourceLimits,
    connect_local_engine,
    remove_leftovers,
    run_container,
)
from agent_eval.errors import (
    CleanupError,
    ConfigError,
    InfrastructureError,
    SuiteError,
)
from agent_eval.images import VERIFIER_MOUNTS, VERIFIER_TAG
from agent_eval.local_verifier import find_source_distributions, generate_catalog
from agent_eval.models.analysis import MAX_DIAGNOSTIC_CHARS, Analysis
from agent_eval.models.base import WireModel
from agent_eval.models.behaviour import (
    BehaviourResult,
    VerifierIsolation,
    VerifierJob,
    VerifierLimits,
)
from agent_eval.models.task import TaskSpec
from agent_eval.project import Project, find_project
from agent_eval.suite import CONTRACT_FILE, GRADER_FILE, STARTER_DIR, TASK_FILE
from agent_eval.verifier_runtime.attempt import ANALYSIS_GRACE_S, MYPY_CACHE_DIR

__all__ = [
    "ANALYSIS_FILE",
    "CHILD_UID_BASE",
    "MAX_SLOTS",
    "RESULT_FILE",
    "AnalysisFailure",
    "AttemptAnalysis",
    "ContainerVerification",
    "DockerVerifier",
    "RunningContainers",
    "StagedAttempt",
    "VerificationLimits",
    "VerifierAttempt",
    "docker_fixture_engine",
    "local_verifier_image",
    "prepare_source_consumer",
    "stage_attempt",
    "verify_in_container",
    "warm_analysis_cache",
]

CHILD_UID_BASE = 61000
"""The child of slot *n* runs as UID and GID ``CHILD_UID_BASE + n``."""
MAX_SLOTS = 1000
ANALYSIS_FILE = "analysis.json"
RESULT_FILE = "result.json"
ATTEMPT_FILE = "attempt.json"

_RUNTIME = VERIFIER_MOUNTS["runtime"]
_GRADER = VERIFIER_MOUNTS["grader"]
_SOLUTION = VERIFIER_MOUNTS["solution"]
_CONSUMER = VERIFIER_MOUNTS["consumer"]
_RESULT = VERIFIER_MOUNTS["result"]
_SCRATCH = "/tmp"
_CACHE_SEED = f"{_RUNTIME}/mypy-cache-seed"
_CONSUMER_SITE = "site"
_CONSUMER_CATALOG = ("docs", CATALOG_FILE)
_COMMAND = (
    "/usr/bin/python3",
    "-B",
    "-m",
    "verifier_runtime.attempt",
    f"{_RUNTIME}/{ATTEMPT_FILE}",
)
# The staged harness modules: standard library only, runnable without pydantic or docker.
_HARNESS_MODULES = ("__init__.py", "errors.py", "digests.py", "catalog.py")
_HARNESS_PACKAGES = ("analysis",)
_HOST_ONLY_GRADER_MODULES = ("in_process.py",)
_LOG_TAIL_BYTES = 4096
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CATALOG_TIMEOUT_S = 120.0


# --- Limits and the attempt file ------------------------------------------------------


def _default_container_limits() -> ResourceLimits:
    return ResourceLimits(
        pids=256, memory_bytes=1024 * 1024 * 1024, nano_cpus=1_000_000_000, tmp_bytes=256 << 20
    )


@dataclass(frozen=True)
class VerificationLimits:
    """Limits of one verification: the solution's, the container's, and the deadlines."""

    behaviour: VerifierLimits = field(default_factory=VerifierLimits)
    """Call, scenario and total deadlines and the solution process's resource limits."""
    container: ResourceLimits = field(default_factory=_default_container_limits)
    """The verifier container's pids, memory (= memory+swap), CPU and /tmp size."""
    analysis_timeout_s: float = 300.0
    """mypy's time limit inside the container."""
    grace_s: float = 30.0
    """Start-up and clean-up time allowed beyond the analysis and grading limits."""
    max_result_bytes: int = 8 * 1024 * 1024
    """Largest analysis.json or result.json accepted."""

    def __post_init__(self) -> None:
        if not 1 <= self.analysis_timeout_s <= 3600:
            raise ConfigError(f"analysis timeout {self.analysis_timeout_s} s is not in [1, 3600]")
        if not 0 < self.grace_s <= 600:
            raise ConfigError(f"grace period {self.grace_s} s is not in (0, 600]")

    @property
    def deadline_s(self) -> float:
        """When the container is killed from outside, counted from its start."""
        return (
            self.analysis_timeout_s
            + ANALYSIS_GRACE_S
            + self.behaviour.totalTimeoutMs / 1000
            + self.grace_s
        )


class AttemptAnalysis(WireModel):
    """Where the analysis inside the container finds its inputs and puts its output."""

    taskPath: str = Field(pattern=r"^/")
    """The task's task.json."""
    catalogPath: str = Field(pattern=r"^/")
    """The consumer's api-catalog.json."""
    solutionDir: str = Field(pattern=r"^/")
    """The submitted files."""
    scratchDir: str = Field(pattern=r"^/")
    """A directory the parent makes fresh (0700) for mypy and removes afterwards."""
    resultPath: str = Field(pattern=r"^/")
    """Where the parent writes analysis.json."""
    contractPath: str | None = Field(default=None, pattern=r"^/")
    """The task's contract.pyi, if any."""
    starterDir: str | None = Field(default=None, pattern=r"^/")
    """The task's starter files, for the seed-reference exclusion."""
    cacheSeedDir: str | None = Field(default=None, pattern=r"^/")
    """A read-only mypy cache the analysis starts from (made by :func:`warm_analysis_cache`)."""
    searchPath: list[str] = Field(default_factory=list)
    """Import roots of the installed library, for mypy."""
    importPaths: list[str] = Field(default_factory=list)
    """PYTHONPATH of the analysis process (the staged harness modules)."""
    timeoutMs: int = Field(default=300_000, ge=1, le=3_600_000)
    """mypy's time limit."""


class VerifierAttempt(WireModel):
    """The attempt file: ``python3 -B -m verifier_runtime.attempt /verifier/attempt.json``."""

    schemaVersion: Literal[1]
    """Format version of the attempt file."""
    analysis: AttemptAnalysis
    """The static analysis, run first."""
    behaviour: VerifierJob
    """The behavioural job, run after the analysis (the job.json format)."""


class AnalysisErrorDetail(WireModel):
    """Why the analysis inside the container could not run."""

    kind: Literal["input", "infrastructure"]
    """input: the task's files are unusable; infrastructure: mypy or the analysis broke."""
    message: str = Field(max_length=4 * MAX_DIAGNOSTIC_CHARS)
    """What happened (bounded)."""


class AnalysisFailure(WireModel):
    """analysis.json when the analysis could not run (then nothing was graded)."""

    analysisError: AnalysisErrorDetail
    """The failure."""


# --- Staging ----------------------------------------------------------------------------


def _copy_file(source: Path, target: Path, mode: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target, follow_symlinks=False)
    os.chmod(target, mode)


def _copy_modules(source: Path, target: Path, *, skip: Sequence[str] = ()) -> None:
    """The ``*.py`` files of one package directory (no caches, no subpackages), world-readable."""
    target.mkdir(mode=0o755)
    for module in sorted(source.glob("*.py")):
        if module.name not in skip and module.is_file() and not module.is_symlink():
            _copy_file(module, target / module.name, 0o644)
    os.chmod(target, 0o755)


def _stage_runtime(target: Path, graders_dir: Path | None) -> None:
    harness = Path(agent_eval.__file__).resolve().parent
    target.mkdir(mode=0o755)
    os.chmod(target, 0o755)
    (target / "agent_eval").mkdir(mode=0o755)
    for module in _HARNESS_MODULES:
        _copy_file(harness / module, target / "agent_eval" / module, 0o644)
    for package in _HARNESS_PACKAGES:
        _copy_modules(harness / package, target / "agent_eval" / package)
    # The parent runs ``python3 -m verifier_runtime.attempt`` and ``import graders``.
    _copy_modules(harness / "verifier_runtime", target / "verifier_runtime")
    if graders_dir is not None:
        _copy_modules(graders_dir, target / "graders", skip=_HOST_ONLY_GRADER_MODULES)
    os.chmod(target / "agent_eval", 0o755)


def _stage_grader(task_dir: Path, target: Path) -> tuple[bool, bool]:
    """grader.py 0700, task.json/contract.pyi/starter 0600 in a 0700 directory."""
    target.mkdir(mode=0o700)
    os.chmod(target, 0o700)
    _copy_file(task_dir / GRADER_FILE, target / GRADER_FILE, 0o700)
    _copy_file(task_dir / TASK_FILE, target / TASK_FILE, 0o600)
    has_contract = (task_dir / CONTRACT_FILE).is_file()
    if has_contract:
        _copy_file(task_dir / CONTRACT_FILE, target / CONTRACT_FILE, 0o600)
    starter = task_dir / STARTER_DIR
    has_starter = starter.is_dir() and not starter.is_symlink()
    if has_starter:
        try:
            files = solution_files(starter)
        except DigestError as exc:
            raise SuiteError(f"{starter}: {exc}") from exc
        (target / STARTER_DIR).mkdir(mode=0o700)
        for rel in files:
            _copy_file(starter / rel, target / STARTER_DIR / rel, 0o600)
        for directory in (target / STARTER_DIR).rglob("*"):
            if directory.is_dir():
                os.chmod(directory, 0o700)
    return has_contract, has_starter


def _stage_solution(solution_dir: Path, target: Path) -> str:
    """Copy the regular files of the solution, readable by the child; return their digest."""
    try:
        files = solution_files(solution_dir)
    except DigestError as exc:
        raise ConfigError(f"solution {solution_dir}: {exc}") from exc
    target.mkdir(mode=0o755)
    for rel in files:
        _copy_file(solution_dir / rel, target / rel, 0o644)
    for directory in [target, *(p for p in target.rglob("*") if p.is_dir())]:
        os.chmod(directory, 0o755)
    try:
        staged = solution_files(target)
    except DigestError as exc:
        raise InfrastructureError(f"the staged solution {target}: {exc}") from exc
    if staged != files:
        raise InfrastructureError(f"solution {solution_dir} changed while it was staged")
    return solution_digest(staged)


@dataclass(frozen=True)
class StagedAttempt:
    """The host side of one verification's mounts, under one fresh directory."""

    root: Path
    """The fresh directory; removed after the verification."""
    runtime: Path
    """Mounted at /verifier."""
    grader: Path
    """Mounted at /grader/task."""
    solution: Path
    """Mounted at /solution."""
    result: Path
    """Mounted at /result, the only writable mount."""
    solution_digest: str
    """Digest of the staged solution files."""

    def mounts(self, consumer_dir: Path, cache_seed: Path | None = None) -> tuple[Mount, ...]:
        """The container's bind mounts; only /result is writable."""
        seed = () if cache_seed is None else (Mount(cache_seed, _CACHE_SEED),)
        return (
            Mount(self.runtime, _RUNTIME),
            *seed,
            Mount(self.grader, _GRADER),
            Mount(self.solution, _SOLUTION),
            Mount(consumer_dir, _CONSUMER),
            Mount(self.result, _RESULT, read_only=False),
        )


def _attempt(
    task: TaskSpec,
    *,
    has_contract: bool,
    has_starter: bool,
    slot: int,
    limits: VerificationLimits,
    analysis_scratch: str,
    cache_seeded: bool,
) -> VerifierAttempt:
    site = f"{_CONSUMER}/{_CONSUMER_SITE}"
    uid = CHILD_UID_BASE + slot
    return VerifierAttempt(
        schemaVersion=1,
        analysis=AttemptAnalysis(
            taskPath=f"{_GRADER}/{TASK_FILE}",
            catalogPath="/".join((_CONSUMER, *_CONSUMER_CATALOG)),
            solutionDir=_SOLUTION,
            scratchDir=analysis_scratch,
            resultPath=f"{_RESULT}/{ANALYSIS_FILE}",
            contractPath=f"{_GRADER}/{CONTRACT_FILE}" if has_contract else None,
            starterDir=f"{_GRADER}/{STARTER_DIR}" if has_starter else None,
            cacheSeedDir=_CACHE_SEED if cache_seeded else None,
            searchPath=[site],
            importPaths=[_RUNTIME],
            timeoutMs=round(limits.analysis_timeout_s * 1000),
        ),
        behaviour=VerifierJob(
            schemaVersion=1,
            taskId=task.id,
            graderPath=f"{_GRADER}/{GRADER_FILE}",
            taskPath=f"{_GRADER}/{TASK_FILE}",
            solutionDir=_SOLUTION,
            scratchDir=_SCRATCH,
            resultPath=f"{_RESULT}/{RESULT_FILE}",
            parentImportPaths=[_RUNTIME, site],
            solutionImportPaths=[site],
            limits=limits.behaviour,
            isolation=VerifierIsolation(
                dropPrivileges=True, childUid=uid, childGid=uid, killAllOnCleanup=True
            ),
        ),
    )


def stage_attempt(
    root: Path,
    task: TaskSpec,
    task_dir: Path,
    solution_dir: Path,
    *,
    graders_dir: Path,
    slot: int,
    limits: VerificationLimits,
    cache_seeded: bool = False,
) -> StagedAttempt:
    """Stage copies of everything one verification mounts, in a fresh directory under *root*.

    Args:
        root: Where the fresh directory is made (never the repository).
        task: The task's validated task.json.
        task_dir: ``tasks/<id>/``: grader.py, task.json, contract.pyi, starter/.
        solution_dir: The collected solution (regular files only).
        graders_dir: The shared graders kit.
        slot: The concurrency slot (chooses the child's UID).
        limits: The verification's limits (written into the attempt file).
        cache_seeded: A mypy cache seed will be mounted (its mount point is made).

    Returns:
        The staged directories.

    Raises:
        ConfigError: The solution holds a link or a special file.
        SuiteError: The task's starter holds one.
    """
    stage = Path(tempfile.mkdtemp(prefix="agent-eval-verifier-", dir=root))
    try:
        runtime, grader = stage / "runtime", stage / "grader"
        solution, result = stage / "solution", stage / "result"
        _stage_runtime(runtime, graders_dir)
        if cache_seeded:
            (runtime / Path(_CACHE_SEED).name).mkdir(mode=0o755)
        has_contract, has_starter = _stage_grader(task_dir, grader)
        digest = _stage_solution(solution_dir, solution)
        result.mkdir(mode=0o700)
        os.chmod(result, 0o700)
        attempt = _attempt(
            task,
            has_contract=has_contract,
            has_starter=has_starter,
            slot=slot,
            limits=limits,
            analysis_scratch=f"{_SCRATCH}/analysis-{uuid.uuid4().hex}",
            cache_seeded=cache_seeded,
        )
        attempt_path = runtime / ATTEMPT_FILE
        attempt_path.write_text(attempt.model_dump_json(indent=2), encoding="utf-8")
        os.chmod(attempt_path, 0o600)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return StagedAttempt(stage, runtime, grader, solution, result, digest)


# --- One verification -------------------------------------------------------------------


class ContainerVerification(NamedTuple):
    """What one verifier container's parent wrote, validated: unpacks as a 3-tuple."""

    analysis_json: bytes
    """analysis.json exactly as the parent wrote it (the evidence bytes)."""
    analysis: Analysis
    """The same, validated."""
    behaviour: BehaviourResult
    """result.json, validated."""

    def as_verification(self) -> Verification:
        """The batch's ``Verification`` of the same facts."""
        return Verification(
            analysis=self.analysis, analysis_json=self.analysis_json, behaviour=self.behaviour
        )


class RunningContainers:
    """The verifier containers in flight, so that an interrupted batch can kill them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[str] = set()

    def add(self, container_id: str) -> None:
        with self._lock:
            self._ids.add(container_id)

    def discard(self, container_id: str) -> None:
        with self._lock:
            self._ids.discard(container_id)

    def snapshot(self) -> list[str]:
        with self._lock:
            return sorted(self._ids)


def _label(run_id: str) -> str:
    """*run_id* as a label value (letters, digits, ``._-``, at most 128 characters)."""
    cleaned = _LABEL_UNSAFE.sub("-", run_id).strip("-._")[:128]
    return cleaned or "verification"


def _check_consumer(consumer_dir: Path) -> None:
    site = consumer_dir / _CONSUMER_SITE
    catalog = consumer_dir.joinpath(*_CONSUMER_CATALOG)
    if not site.is_dir() or not catalog.is_file():
        raise ConfigError(
            f"consumer {consumer_dir}: needs site/ (the library installed with pip --target) "
            f"and docs/{CATALOG_FILE}"
        )
    for path in (consumer_dir, site):
        if stat.S_IMODE(path.stat().st_mode) & 0o005 != 0o005:
            raise ConfigError(
                f"consumer {path} is not readable by other users (mode "
                f"{oct(stat.S_IMODE(path.stat().st_mode))}); the solution's process runs as "
                "its own UID and must read it: chmod o+rx"
            )


def _failure_detail(engine: ContainerEngine, container_id: str, exit_code: int) -> str:
    try:
        output = engine.logs(container_id, _LOG_TAIL_BYTES)
    except InfrastructureError:
        return f"exit status {exit_code}"
    tail = output.stderr.decode("utf-8", errors="replace").strip()[-1000:]
    return f"exit status {exit_code}" + (f"; the verifier said: {tail}" if tail else "")


def _read_analysis(data: bytes, task: TaskSpec, digest: str, where: str) -> tuple[Analysis, bytes]:
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InfrastructureError(f"{where}: {ANALYSIS_FILE} is not JSON: {exc}") from None
    if isinstance(raw, dict) and "analysisError" in raw:
        try:
            failure = AnalysisFailure.model_validate(raw).analysisError
        except ValidationError as exc:
            raise InfrastructureError(f"{where}: a malformed analysis error: {exc}") from None
        if failure.kind == "input":
            raise SuiteError(
                f"task {task.id!r}: the analysis refused its inputs: {failure.message}"
            )
        raise InfrastructureError(f"{where}: the analysis could not run: {failure.message}")
    try:
        analysis = Analysis.model_validate(raw)
    except ValidationError as exc:
        raise InfrastructureError(f"{where}: {ANALYSIS_FILE} is not an analysis: {exc}") from None
    if analysis.taskId != task.id or analysis.solutionDigest != digest:
        raise InfrastructureError(
            f"{where}: the analysis is of task {analysis.taskId!r}, solution "
            f"{analysis.solutionDigest}; expected {task.id!r}, {digest}"
        )
    return analysis, data


def _read_behaviour(data: bytes, task: TaskSpec, where: str) -> BehaviourResult:
    try:
        result = BehaviourResult.model_validate_json(data)
    except ValidationError as exc:
        raise InfrastructureError(f"{where}: {RESULT_FILE} is not a result: {exc}") from None
    if result.taskId != task.id:
        raise InfrastructureError(
            f"{where}: the verifier graded task {result.taskId!r}, expected {task.id!r}"
        )
    return result


def verify_in_container(
    engine: ContainerEngine,
    verifier_image: str,
    task: TaskSpec,
    task_dir: Path,
    solution_dir: Path,
    consumer_dir: Path,
    *,
    batch_id: str,
    run_id: str,
    slot: int,
    limits: VerificationLimits | None = None,
    graders_dir: Path | None = None,
    staging_root: Path | None = None,
    running: RunningContainers | None = None,
    analysis_cache: Path | None = None,
) -> ContainerVerification:
    """Analyse and grade one attempt in one verifier container.

    Args:
        engine: The container engine.
        verifier_image: The pinned verifier image (``name@sha256:…`` or ``sha256:…``).
        task: The task's validated task.json.
        task_dir: ``tasks/<id>/`` holding grader.py, task.json, contract.pyi, starter/.
        solution_dir: The collected solution.
        consumer_dir: The batch's consumer: ``site/`` (the library and its
            dependencies, installed with ``pip install --target``) and
            ``docs/api-catalog.json``; readable by every user.
        batch_id: Batch label of the container.
        run_id: Run label of the container (made label-safe).
        slot: Concurrency slot, 0 ≤ slot < :data:`MAX_SLOTS`: the child runs
            as UID/GID ``CHILD_UID_BASE + slot``. Concurrent verifications
            must use distinct slots.
        limits: The verification's limits; the defaults otherwise.
        graders_dir: The shared graders kit; the project's of *task_dir* by default.
        staging_root: Where the per-attempt staging directory is made; the
            system's temporary directory by default.
        running: Registry of containers in flight, for cancellation.
        analysis_cache: A mypy cache made by :func:`warm_analysis_cache` for
            this consumer and image, mounted read-only; the analysis starts
            from a copy of it (only faster: the findings are the same).

    Returns:
        ``(analysis_json, analysis, behaviour)``: the exact analysis.json
        bytes, the same validated, and the behavioural result, all written
        by the trusted parent.

    Raises:
        ConfigError: A limit, the consumer, the solution or a mount is refused.
        SuiteError: The analysis refused the task's own files.
        InfrastructureError: The image is absent, the container outlived its
            deadline, or a result is missing, malformed or about something else.
        CleanupError: The container's removal was not confirmed.
    """
    if not 0 <= slot < MAX_SLOTS:
        raise ConfigError(f"verifier slot {slot} is not in [0, {MAX_SLOTS})")
    limits = limits or VerificationLimits()
    _check_consumer(consumer_dir)
    if graders_dir is None:
        graders_dir = find_project(task_dir).graders
    staged = stage_attempt(
        staging_root or Path(tempfile.gettempdir()),
        task,
        task_dir,
        solution_dir,
        graders_dir=graders_dir,
        slot=slot,
        limits=limits,
        cache_seeded=analysis_cache is not None,
    )
    try:
        spec = ContainerSpec(
            image=verifier_image,
            command=_COMMAND,
            role="verifier",
            batch_id=batch_id,
            run_id=_label(run_id),
            mounts=staged.mounts(consumer_dir.resolve(), analysis_cache),
            environment={
                "PYTHONPATH": _RUNTIME,
                "PYTHONDONTWRITEBYTECODE": "1",
                "LANG": "C.UTF-8",
                "LC_ALL": "C.UTF-8",
            },
            working_dir=_RUNTIME,
            limits=limits.container,
        )
        return _run_verifier(engine, spec, task, staged, limits, running)
    finally:
        shutil.rmtree(staged.root, ignore_errors=True)


def _run_verifier(
    engine: ContainerEngine,
    spec: ContainerSpec,
    task: TaskSpec,
    staged: StagedAttempt,
    limits: VerificationLimits,
    running: RunningContainers | None,
) -> ContainerVerification:
    where = f"verifier of {spec.run_id}"
    container_id = engine.create(spec)
    if running is not None:
        running.add(container_id)
    try:
        engine.start(container_id)
        waited = engine.wait(container_id, limits.deadline_s)
        if waited.timed_out:
            raise InfrastructureError(
                f"{where}: the verifier container outlived its deadline of "
                f"{limits.deadline_s:g} s and was killed; no result is trusted"
            )

        def read(name: str) -> bytes:
            try:
                return engine.copy_file_out(
                    container_id, f"{_RESULT}/{name}", limits.max_result_bytes
                )
            except InfrastructureError as exc:
                detail = _failure_detail(engine, container_id, waited.exit_code)
                oom = " (the engine reports an OOM kill)" if waited.oom_killed else ""
                raise InfrastructureError(f"{where}: no {name}{oom}: {exc}; {detail}") from None

        analysis, analysis_json = _read_analysis(
            read(ANALYSIS_FILE), task, staged.solution_digest, where
        )
        behaviour = _read_behaviour(read(RESULT_FILE), task, where)
    finally:
        try:
            engine.remove(container_id)
        finally:
            if running is not None:
                running.discard(container_id)
    return ContainerVerification(analysis_json, analysis, behaviour)


# --- A verifier port over the container -----------------------------------------------------


class DockerVerifier:
    """Verifies attempts in verifier containers, up to *slots* at once.

    Implements the batch's ``VerifierPort`` and the ``FixtureEngine`` of
    ``agent-eval tasks verify``. Each verification takes a free slot (its
    own child UID) for its duration.
    """

    name = "docker"

    def __init__(
        self,
        engine: ContainerEngine,
        verifier_image: str,
        *,
        tasks_dir: Path,
        graders_dir: Path,
        consumer_dir: Path,
        batch_id: str,
        slots: int = 1,
        limits: VerificationLimits | None = None,
        staging_root: Path | None = None,
        analysis_cache: Path | None = None,
    ) -> None:
        if not 1 <= slots <= MAX_SLOTS:
            raise ConfigError(f"verifier slots {slots} is not in [1, {MAX_SLOTS}]")
        _check_consumer(consumer_dir)
        self._engine = engine
        self._image = verifier_image
        self._tasks_dir = tasks_dir
        self._graders_dir = graders_dir
        self._consumer_dir = consumer_dir
        self._batch_id = batch_id
        self._limits = limits or VerificationLimits()
        self._staging_root = staging_root
        self._analysis_cache = analysis_cache
        self._running = RunningContainers()
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(slots):
            self._slots.put(slot)
        self._catalog: Mapping[str, Any] | None = None

    def api_catalog(self) -> Mapping[str, Any]:
        """The consumer's API catalog (what static analysis supports)."""
        if self._catalog is None:
            path = self._consumer_dir.joinpath(*_CONSUMER_CATALOG)
            try:
                self._catalog = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise InfrastructureError(f"{path}: cannot read the API catalog: {exc}") from exc
        return self._catalog

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        """Analyse and grade *solution_dir* for *task* in a verifier container.

        Raises:
            SuiteError: The analysis refused the task's own files.
            InfrastructureError: No trusted result could be produced.
            CleanupError: A container's removal was not confirmed.
        """
        slot = self._slots.get()
        try:
            return verify_in_container(
                self._engine,
                self._image,
                task,
                self._tasks_dir / task.id,
                solution_dir,
                self._consumer_dir,
                batch_id=self._batch_id,
                run_id=run_id,
                slot=slot,
                limits=self._limits,
                graders_dir=self._graders_dir,
                staging_root=self._staging_root,
                running=self._running,
                analysis_cache=self._analysis_cache,
            ).as_verification()
        finally:
            self._slots.put(slot)

    def cancel_all(self) -> None:
        """Remove every verifier container still running (each removal confirmed).

        Raises:
            CleanupError: One or more removals were not confirmed (all are tried first).
        """
        failures = []
        for container_id in self._running.snapshot():
            try:
                self._engine.remove(container_id)
            except CleanupError as exc:
                failures.append(str(exc))
        if failures:
            raise CleanupError("; ".join(failures))


# --- mypy's cache, warmed once per batch --------------------------------------------------------


def warm_analysis_cache(
    engine: ContainerEngine,
    verifier_image: str,
    consumer_dir: Path,
    target: Path,
    *,
    batch_id: str,
    limits: VerificationLimits | None = None,
) -> Path:
    """Make a mypy cache of the consumer's library, to seed every attempt's analysis.

    One verifier container (the same image, hardening and mount points)
    analyses a solution that only imports the library's packages (from the
    catalog), with nothing submitted anywhere; mypy's cache is kept in
    *target*. Attempts mount it read-only and copy it into their own scratch.
    It only saves time: mypy checks every entry against its source and
    options, so a stale cache is rebuilt, never believed.

    Args:
        engine: The engine.
        verifier_image: The pinned verifier image the attempts use.
        consumer_dir: The batch's consumer (see :func:`verify_in_container`).
        target: Created; must not exist. Holds the cache afterwards.
        batch_id: Batch label of the container.
        limits: The container limits and the analysis time limit.

    Returns:
        The cache directory, for ``analysis_cache``.

    Raises:
        ConfigError: The consumer is unusable.
        InfrastructureError: The analysis did not produce a cache.
        CleanupError: The container's removal was not confirmed.
    """
    limits = limits or VerificationLimits()
    _check_consumer(consumer_dir)
    catalog = json.loads(consumer_dir.joinpath(*_CONSUMER_CATALOG).read_text(encoding="utf-8"))
    packages = sorted(
        {str(p) for d in catalog.get("distributions", []) for p in d.get("packages", [])}
    )
    if not packages:
        raise ConfigError(f"consumer {consumer_dir}: the API catalog names no package")
    target.mkdir(mode=0o700)
    runtime, task_stage, solution, out = (target / n for n in ("runtime", "task", "sol", "out"))
    _stage_runtime(runtime, None)  # the analysis alone: no grader runs
    task_stage.mkdir(mode=0o700)
    warm_task = {
        "schemaVersion": 1,
        "id": "analysis-cache",
        "allowedOutputPaths": ["warm.py"],
        "allowedImports": [f"{p}/*" for p in packages],
        "seedReferences": [],
        "requiredIntegration": [],
    }
    (task_stage / TASK_FILE).write_text(json.dumps(warm_task), encoding="utf-8")
    solution.mkdir(mode=0o755)
    (solution / "warm.py").write_text("".join(f"import {p}\n" for p in packages), "utf-8")
    os.chmod(solution / "warm.py", 0o644)
    out.mkdir(mode=0o700)
    spec = ContainerSpec(
        image=verifier_image,
        command=(
            "/usr/bin/python3",
            "-B",
            "-m",
            "agent_eval.analysis",
            *("--task", f"{_GRADER}/{TASK_FILE}", "--solution", _SOLUTION),
            *("--catalog", "/".join((_CONSUMER, *_CONSUMER_CATALOG))),
            *("--scratch", f"{_RESULT}/scratch", "--output", f"{_RESULT}/{ANALYSIS_FILE}"),
            *("--search-path", f"{_CONSUMER}/{_CONSUMER_SITE}"),
            *("--timeout", f"{limits.analysis_timeout_s:g}"),
        ),
        role="verifier",
        batch_id=batch_id,
        run_id="analysis-cache",
        mounts=(
            Mount(runtime, _RUNTIME),
            Mount(task_stage, _GRADER),
            Mount(solution, _SOLUTION),
            Mount(consumer_dir.resolve(), _CONSUMER),
            Mount(out, _RESULT, read_only=False),
        ),
        environment={"PYTHONPATH": _RUNTIME, "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"},
        working_dir=_RUNTIME,
        limits=limits.container,
    )
    done = run_container(
        engine,
        spec,
        timeout_s=limits.analysis_timeout_s + ANALYSIS_GRACE_S,
        log_limit_bytes=_LOG_TAIL_BYTES,
    )
    cache = out / "scratch" / MYPY_CACHE_DIR
    if done.wait.timed_out or done.wait.exit_code != 0 or not cache.is_dir():
        tail = done.output.stderr.decode("utf-8", errors="replace").strip()[-1000:]
        raise InfrastructureError(
            f"warming the analysis cache failed (exit {done.wait.exit_code}"
            f"{', timed out' if done.wait.timed_out else ''}): {tail or 'no output'}"
        )
    return cache


# --- A consumer from the library's sources (tasks verify, tests) ------------------------------


def _requirement_name(requirement: str) -> str | None:
    if ";" in requirement and "extra" in requirement.split(";", 1)[1]:
        return None  # an optional extra is never installed
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return match.group(1) if match else None


def _dependency_closure(names: Sequence[str], skip: set[str]) -> list[metadata.Distribution]:
    """The host's installed distributions *names* need, transitively."""
    canonical = {re.sub(r"[-_.]+", "-", n).lower() for n in skip}
    found: dict[str, metadata.Distribution] = {}
    pending = list(names)
    while pending:
        name = re.sub(r"[-_.]+", "-", pending.pop()).lower()
        if name in canonical or name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ConfigError(
                f"the library depends on {name!r}, which is not installed for {sys.executable}; "
                "install the project's dependencies (scripts/setup does)"
            ) from None
        found[name] = dist
        pending += [n for r in dist.requires or () if (n := _requirement_name(r))]
    return [found[name] for name in sorted(found)]


def _copy_distribution(dist: metadata.Distribution, site: Path) -> None:
    for file in dist.files or ():
        parts = file.parts
        if not parts or parts[0] in {"..", "__pycache__"} or "__pycache__" in parts:
            continue
        source = Path(str(dist.locate_file(file)))
        if source.is_file() and not source.is_symlink():
            _copy_file(source, site.joinpath(*parts), 0o644)


def prepare_source_consumer(packages_dir: Path, consumer_dir: Path) -> Path:
    """A consumer made from the library's source tree, for ``tasks verify`` and tests.

    The same layout the batch prepares from the archives: ``site/`` holds the
    library's packages (copied from ``packages/*/src`` with a minimal
    ``.dist-info``, as the local engine sees them) and their third-party
    dependencies (copied from this interpreter's installed distributions);
    ``docs/api-catalog.json`` is generated from ``site/`` by
    ``python -m agent_eval.catalog``. Everything is readable by every user.

    Args:
        packages_dir: ``packages/`` with one ``*/pyproject.toml`` per distribution.
        consumer_dir: Created; must not exist.

    Returns:
        *consumer_dir*.

    Raises:
        ConfigError: A distribution or a dependency cannot be found.
        InfrastructureError: The catalog could not be generated.
    """
    distributions = find_source_distributions(packages_dir)
    site = consumer_dir / _CONSUMER_SITE
    site.mkdir(parents=True)
    names: list[str] = []
    for dist in distributions:
        for package in dist.packages:
            shutil.copytree(
                dist.src / package,
                site / package,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        info = site / f"{re.sub(r'[-_.]+', '_', dist.name)}-{dist.version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {dist.version}\n",
            encoding="utf-8",
        )
        (info / "top_level.txt").write_text("\n".join(dist.packages) + "\n", encoding="utf-8")
        pyproject = dist.src.parent / "pyproject.toml"
        names += _declared_dependencies(pyproject)
    library = {d.name for d in distributions}
    for dependency in _dependency_closure(names, library):
        _copy_distribution(dependency, site)
    docs = consumer_dir / _CONSUMER_CATALOG[0]
    generate_catalog([site.resolve()], docs, [d.name for d in distributions])
    for path in [consumer_dir, *consumer_dir.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return consumer_dir


def _declared_dependencies(pyproject: Path) -> list[str]:
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise ConfigError(f"{pyproject}: cannot read [project]: {exc}") from exc
    return [n for r in project.get("dependencies", []) if (n := _requirement_name(str(r)))]


# --- tasks verify --engine docker ---------------------------------------------------------


def local_verifier_image(engine: ContainerEngine) -> str:
    """The id of the locally built verifier image (``agent-eval images build`` makes it).

    Raises:
        InfrastructureError: It is not present.
    """
    image_id = engine.image_id(VERIFIER_TAG)
    if image_id is None:
        raise InfrastructureError(
            f"the verifier image {VERIFIER_TAG} is not present; build it with "
            "`agent-eval images build` (or pass --verifier-image with a pinned reference)"
        )
    return image_id


@contextlib.contextmanager
def docker_fixture_engine(
    project: Project,
    *,
    verifier_image: str | None = None,
    slots: int = 1,
    limits: VerificationLimits | None = None,
) -> Iterator[Callable[[Path], DockerVerifier]]:
    """Connect to the local engine and yield a factory of container verifiers for fixtures.

    The factory prepares a consumer from the project's library sources in the
    work directory it is given. On exit, every container of this run's batch
    is removed (confirmed) and the connection closed.

    Raises:
        EngineUnavailableError: No local engine answers.
        InfrastructureError: The verifier image is absent or not the pinned one.
        CleanupError: A container's removal was not confirmed.
    """
    engine = connect_local_engine()
    batch_id = f"tasks-verify-{uuid.uuid4().hex[:12]}"
    try:
        image = verifier_image or local_verifier_image(engine)
        engine.resolve_image(image)

        def build(work_dir: Path) -> DockerVerifier:
            consumer = prepare_source_consumer(project.packages, work_dir / "consumer")
            cache = warm_analysis_cache(
                engine, image, consumer, work_dir / "analysis-cache", batch_id=batch_id
            )
            return DockerVerifier(
                engine,
                image,
                tasks_dir=project.tasks,
                graders_dir=project.graders,
                consumer_dir=consumer,
                batch_id=batch_id,
                slots=slots,
                limits=limits,
                staging_root=work_dir,
                analysis_cache=cache,
            )

        yield build
    finally:
        try:
            remove_leftovers(engine, batch_id)
        finally:
            engine.close()


# --- The batch's verifier -----------------------------------------------------------------


def batch_verifier_factory(project: Project) -> Callable[[VerifierContext], DockerVerifier]:
    """The verifier port of a batch: a warm analysis cache, then one container per attempt."""

    def make(context: VerifierContext) -> DockerVerifier:
        context.work_dir.mkdir(parents=True, exist_ok=True)
        cache = warm_analysis_cache(
            context.engine,
            context.image_id,
            context.consumer.root,
            context.work_dir / "mypy-cache",
            batch_id=context.batch_id,
        )
        return DockerVerifier(
            context.engine,
            context.image_id,
            tasks_dir=project.tasks,
            graders_dir=project.graders,
            consumer_dir=context.consumer.root,
            batch_id=context.batch_id,
            slots=context.slots,
            staging_root=context.work_dir,
            analysis_cache=cache,
        )

    return make
