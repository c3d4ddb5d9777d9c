"""One verification: one hardened verifier container, analysis then scenarios.

Invariants:

* **Only the parent's files are read.** Once the container has exited, the
  host reads ``/result`` from its own side of the bind mount (no engine
  request): regular files only, never followed through a link, each read
  bounded; it validates ``analysis.json`` and ``result.json``, and any other
  entry there (but the timing record the host asked for) refuses the result.
  The container's stdout, stderr and exit status are never a grade (they
  appear only in the message of an infrastructure failure).
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
  (:data:`~agent_eval.verification.container.limits.CHILD_UID_BASE` + slot):
  per-UID process limits never couple them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from agent_eval.engine import ContainerRuntime, ContainerSpec
from agent_eval.errors import ConfigError, EvidenceError, InfrastructureError, SuiteError
from agent_eval.evidence_io import read_bounded
from agent_eval.layout import (
    ANALYSIS_FILE,
    CATALOG_FILE,
    RESULT_FILE,
    RESULT_MOUNT,
    TIMINGS_FILE,
    VERIFIER_TRUSTED,
    ConsumerLayout,
)
from agent_eval.models.analysis import Analysis
from agent_eval.models.behaviour import BehaviourResult
from agent_eval.models.task import TaskSpec
from agent_eval.models.verifier_attempt import AnalysisFailure
from agent_eval.verification.container.limits import MAX_SLOTS, VerificationLimits
from agent_eval.verification.container.staging import (
    ATTEMPT_COMMAND,
    StagedAttempt,
    stage_attempt,
)
from agent_eval.verification.protocol import Verification
from agent_eval.verification.runtime.timing import MAX_TIMINGS_BYTES

__all__ = [
    "VERIFIER_ENVIRONMENT",
    "ContainerVerification",
    "ResultRefused",
    "RunningContainers",
    "VerifierSetup",
    "check_consumer",
    "read_result_dir",
    "verify_in_container",
]

LOG_TAIL_BYTES = 4096
VERIFIER_ENVIRONMENT = {
    "PYTHONPATH": VERIFIER_TRUSTED,
    "PYTHONDONTWRITEBYTECODE": "1",
    # A verdict must not depend on the day or the machine: one locale, one time
    # zone and one hash seed for every process of the verification.
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
}
"""The verifier container's environment (the parent passes the same pins on)."""
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ContainerVerification(NamedTuple):
    """What one verifier container's parent wrote, validated: unpacks as a 3-tuple."""

    analysis_json: bytes
    """analysis.json exactly as the parent wrote it (the evidence bytes)."""
    analysis: Analysis
    """The same, validated."""
    behaviour: BehaviourResult
    """result.json, validated."""

    def as_verification(self) -> Verification:
        """The same facts as the :class:`Verifier` protocol returns them."""
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


def check_consumer(consumer_dir: Path) -> None:
    """Refuse a consumer the verifier cannot use: no site/ or catalog, or not world-readable.

    Raises:
        ConfigError: It is unusable; the message says why and how to fix it.
    """
    layout = ConsumerLayout(consumer_dir)
    site, catalog = layout.site, layout.catalog
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


def _failure_detail(engine: ContainerRuntime, container_id: str, exit_code: int) -> str:
    try:
        output = engine.logs(container_id, LOG_TAIL_BYTES)
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


@dataclass(frozen=True)
class VerifierSetup:
    """What every verification of one verifier shares: engine, image, consumer, limits.

    Attributes mirror what :func:`verify_in_container` needs besides the
    attempt itself.
    """

    engine: ContainerRuntime
    """The container engine."""
    image: str
    """The pinned verifier image (``name@sha256:…`` or ``sha256:…``)."""
    consumer_dir: Path
    """The consumer: ``site/`` (the library and its dependencies, installed with
    ``pip install --target``) and ``docs/api-catalog.json``; readable by every user."""
    graders_dir: Path | None
    """The repository's own grading helpers (``graders/``), staged beside the kit."""
    batch_id: str
    """Batch label of every container."""
    limits: VerificationLimits = field(default_factory=VerificationLimits)
    """The verification's limits."""
    staging_root: Path | None = None
    """Where per-attempt staging directories are made; the system's temporary
    directory by default (never the repository)."""
    analysis_cache: Path | None = None
    """A mypy cache made by :func:`~agent_eval.verification.container.cache.warm_analysis_cache`
    for this consumer and image, mounted read-only; the analysis starts from a copy
    of it (only faster: the findings are the same)."""
    running: RunningContainers = field(default_factory=RunningContainers)
    """The containers in flight, for cancellation."""
    timings: Callable[[list[dict[str, Any]]], None] | None = None
    """Given, every verification's parent also notes where its time went, and
    this is called with those spans (see ``verification.runtime.timing``): a
    profile for the benchmark, never part of a verdict."""


def verify_in_container(
    setup: VerifierSetup,
    task: TaskSpec,
    task_dir: Path,
    solution_dir: Path,
    *,
    run_id: str,
    slot: int,
) -> ContainerVerification:
    """Analyse and grade one attempt in one verifier container.

    Args:
        setup: The engine, image, consumer and limits this verification shares.
        task: The task's validated task.json.
        task_dir: ``tasks/<id>/`` holding grader.py, task.json, contract.pyi, starter/.
        solution_dir: The collected solution.
        run_id: Run label of the container (made label-safe).
        slot: Concurrency slot, 0 ≤ slot < :data:`MAX_SLOTS`: the child runs
            as UID/GID ``CHILD_UID_BASE + slot``. Concurrent verifications
            must use distinct slots.

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
    check_consumer(setup.consumer_dir)
    limits = setup.limits
    staged = stage_attempt(
        setup.staging_root or Path(tempfile.gettempdir()),
        task,
        task_dir,
        solution_dir,
        graders_dir=setup.graders_dir,
        slot=slot,
        limits=limits,
        cache_seeded=setup.analysis_cache is not None,
        timings=setup.timings is not None,
    )
    try:
        spec = ContainerSpec(
            image=setup.image,
            command=ATTEMPT_COMMAND,
            role="verifier",
            batch_id=setup.batch_id,
            run_id=_label(run_id),
            mounts=staged.mounts(setup.consumer_dir.resolve(), setup.analysis_cache),
            environment=VERIFIER_ENVIRONMENT,
            working_dir=VERIFIER_TRUSTED,
            limits=limits.container,
            own_init=True,
        )
        return _run_verifier(setup.engine, spec, task, staged, limits, setup.running, setup.timings)
    finally:
        shutil.rmtree(staged.root, ignore_errors=True)


class ResultRefused(Exception):
    """The result directory holds something the parent never writes."""


def read_result_dir(directory: Path, bounds: dict[str, int]) -> dict[str, bytes]:
    """Read the files the parent wrote into *directory*, each at most its bound.

    The container wrote this directory as its root, so nothing in it is
    trusted: a name not in *bounds*, a link, a directory, a special file, a
    file with another hard link or over its bound refuses the whole result.
    The directory itself is the host's (the container saw only its inside).

    Raises:
        ResultRefused: Says what was found.
    """
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            raise ResultRefused("no result directory: not a directory")
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise ResultRefused(f"no result directory: {exc.strerror}") from None
    extra = [name for name in names if name not in bounds]
    if extra:
        raise ResultRefused(f"{RESULT_MOUNT} holds {extra}, which the verifier never writes")
    return {name: _read_bounded(directory / name, bounds[name]) for name in names}


def _read_bounded(path: Path, bound: int) -> bytes:
    # Looked at before it is opened: opening a device node can itself do something.
    try:
        seen = os.lstat(path)
    except OSError as exc:
        raise ResultRefused(f"{path.name} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(seen.st_mode) or seen.st_nlink != 1:
        raise ResultRefused(f"{path.name} is not a regular file with one link")
    if seen.st_size > bound:
        raise ResultRefused(f"{path.name} has {seen.st_size} bytes, over {bound}")
    try:
        return read_bounded(path, what=path.name, max_bytes=bound, follow_symlinks=False)
    except EvidenceError as exc:
        raise ResultRefused(str(exc)) from None


def _timings(data: bytes | None, where: str) -> list[dict[str, Any]]:
    try:
        spans = json.loads(data or b"")
    except (UnicodeDecodeError, ValueError) as exc:
        raise InfrastructureError(f"{where}: {TIMINGS_FILE} is not JSON: {exc}") from None
    if not isinstance(spans, list) or not all(isinstance(s, dict) for s in spans):
        raise InfrastructureError(f"{where}: {TIMINGS_FILE} is not a list of spans")
    return spans


def _run_verifier(
    engine: ContainerRuntime,
    spec: ContainerSpec,
    task: TaskSpec,
    staged: StagedAttempt,
    limits: VerificationLimits,
    running: RunningContainers | None,
    timings: Callable[[list[dict[str, Any]]], None] | None = None,
) -> ContainerVerification:
    where = f"verifier of {spec.run_id}"
    bounds = {ANALYSIS_FILE: limits.max_result_bytes, RESULT_FILE: limits.max_result_bytes}
    if timings is not None:
        bounds[TIMINGS_FILE] = MAX_TIMINGS_BYTES
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

        def refused(what: str) -> InfrastructureError:
            detail = _failure_detail(engine, container_id, waited.exit_code)
            oom = " (the engine reports an OOM kill)" if waited.oom_killed else ""
            return InfrastructureError(f"{where}: {what}{oom}; {detail}")

        # Read on the host's side of the mount: every process of the container is gone.
        try:
            files = read_result_dir(staged.result, bounds)
        except ResultRefused as exc:
            raise refused(str(exc)) from None
        if ANALYSIS_FILE not in files:
            raise refused(f"no {ANALYSIS_FILE}")
        analysis, analysis_json = _read_analysis(
            files[ANALYSIS_FILE], task, staged.solution_digest, where
        )
        if RESULT_FILE not in files:
            raise refused(f"no {RESULT_FILE}")
        behaviour = _read_behaviour(files[RESULT_FILE], task, where)
        if timings is not None:
            timings(_timings(files.get(TIMINGS_FILE), where))
    finally:
        try:
            engine.remove(container_id)
        finally:
            if running is not None:
                running.discard(container_id)
    return ContainerVerification(analysis_json, analysis, behaviour)
