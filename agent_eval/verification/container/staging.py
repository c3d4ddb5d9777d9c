"""Staging one verification: fresh copies of exactly what its container mounts.

Per attempt a fresh host directory holds a copy of what the container needs,
and nothing the solution's UID can read holds grader material:

* ``/verifier`` (read-only, 0711: it cannot be listed) has two halves.
  ``trusted/`` (0700, root) holds the ``verifier`` set of
  :data:`agent_eval.layout.STAGED_HARNESS` (runtime, grading kit, analysis,
  contract), the repository's own ``graders/`` and the attempt file: the
  parent's import path. ``sandbox/`` (world-readable) holds only the
  ``sandbox`` set, the modules the child imports before the solution.
  Every staged module has its bytecode beside it (``__pycache__``, checked
  against the source's hash), so no process of the container compiles the
  harness: the interpreter takes it only when its version and the source's
  hash match, and compiles the source as ever otherwise.
* ``/grader/task``: the task's ``grader.py``, ``task.json``, ``contract.pyi``
  and starter files, below the 0700 ``/grader``.
* ``/solution``: a read-only copy of the solution, readable by the child.
* ``/result``: a fresh 0700 directory, the only writable mount.

Never the repository itself.
"""

from __future__ import annotations

import functools
import importlib.util
import marshal
import os
import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from agent_eval.digests import DigestError, solution_digest, solution_files
from agent_eval.engine import Mount
from agent_eval.errors import ConfigError, InfrastructureError, SuiteError
from agent_eval.layout import (
    ANALYSIS_FILE,
    CONSUMER_MOUNT,
    HARNESS_ROOT,
    IN_CONTAINER_CONSUMER,
    RESULT_FILE,
    RESULT_MOUNT,
    SOLUTION_MOUNT,
    TIMINGS_FILE,
    VERIFIER_GRADER_MOUNT,
    VERIFIER_RUNTIME_MOUNT,
    VERIFIER_SANDBOX,
    VERIFIER_TRUSTED,
    staged_files,
)
from agent_eval.models.behaviour import VerifierIsolation, VerifierJob
from agent_eval.models.task import TaskSpec
from agent_eval.models.verifier_attempt import AttemptAnalysis, VerifierAttempt
from agent_eval.suite.tasks import CONTRACT_FILE, GRADER_FILE, STARTER_DIR, TASK_FILE
from agent_eval.verification.container.limits import CHILD_UID_BASE, VerificationLimits
from agent_eval.verification.runtime.zygote import zygote_command

__all__ = [
    "ATTEMPT_COMMAND",
    "StagedAttempt",
    "stage_attempt",
    "stage_runtime",
]

ATTEMPT_FILE = "attempt.json"
SCRATCH = "/tmp"
CACHE_SEED_MOUNT = f"{VERIFIER_TRUSTED}/mypy-cache-seed"
ATTEMPT_COMMAND = zygote_command(
    "/usr/bin/python3",
    VERIFIER_SANDBOX,
    (
        "/usr/bin/python3",
        "-B",
        "-m",
        "agent_eval.verification.runtime.attempt",
        f"{VERIFIER_TRUSTED}/{ATTEMPT_FILE}",
    ),
)
"""The verifier container's command: the zygote (PID 1), which starts the trusted parent
(analysis, then the scenarios, each in a child the zygote forks)."""
SWEPT = ("/tmp", "/dev/shm", "/dev/mqueue")
"""The writable places a verifier container shares between the solution's processes."""


def _copy_file(source: Path, target: Path, mode: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target, follow_symlinks=False)
    os.chmod(target, mode)


# PEP 552: the pyc's flags say "compared with the source's hash at every import".
_CHECKED_HASH = (0b11).to_bytes(4, "little")


@functools.lru_cache(maxsize=1024)
def _bytecode(source: bytes) -> bytes | None:
    """A checked-hash pyc of *source* for this interpreter, or None when it does not compile."""
    try:
        code = compile(source, "<staged>", "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError):
        return None  # the interpreter in the container reports it, as without bytecode
    return (
        importlib.util.MAGIC_NUMBER
        + _CHECKED_HASH
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def _copy_module(source: Path, target: Path, mode: int) -> None:
    """Copy a file; a module gets its bytecode too, so no container compiles it again."""
    _copy_file(source, target, mode)
    tag = sys.implementation.cache_tag
    if target.suffix != ".py" or tag is None:
        return
    pyc = _bytecode(target.read_bytes())
    if pyc is not None:
        cached = target.parent / "__pycache__" / f"{target.stem}.{tag}.pyc"
        cached.parent.mkdir(exist_ok=True)
        cached.write_bytes(pyc)
        os.chmod(cached, mode)


def stage_runtime(target: Path, graders_dir: Path | None) -> None:
    """The staged harness: ``trusted/`` for the parent (root only), ``sandbox/`` for the child.

    ``graders_dir`` is the repository's own ``graders/`` (its tasks' shared
    helpers), staged as the top-level package ``graders`` in ``trusted/``;
    None stages the harness alone (the analysis-cache warm-up runs no grader).
    """
    harness = HARNESS_ROOT
    trusted, sandbox = target / "trusted", target / "sandbox"
    target.mkdir(mode=0o711)
    for half, kind, mode in ((trusted, "verifier", 0o600), (sandbox, "sandbox", 0o644)):
        half.mkdir()
        for rel in staged_files(harness, kind):
            _copy_module(harness / rel, half / "agent_eval" / rel, mode)
    if graders_dir is not None:
        (trusted / "graders").mkdir()
        for module in sorted(graders_dir.glob("*.py")):
            if module.is_file() and not module.is_symlink():
                _copy_module(module, trusted / "graders" / module.name, 0o600)
    for directory in (p for p in trusted.rglob("*") if p.is_dir()):
        os.chmod(directory, 0o700)
    for directory in (p for p in sandbox.rglob("*") if p.is_dir()):
        os.chmod(directory, 0o755)
    os.chmod(trusted, 0o700)
    os.chmod(sandbox, 0o755)
    os.chmod(target, 0o711)


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
        seed = () if cache_seed is None else (Mount(cache_seed, CACHE_SEED_MOUNT),)
        return (
            Mount(self.runtime, VERIFIER_RUNTIME_MOUNT),
            *seed,
            Mount(self.grader, VERIFIER_GRADER_MOUNT),
            Mount(self.solution, SOLUTION_MOUNT),
            Mount(consumer_dir, CONSUMER_MOUNT),
            Mount(self.result, RESULT_MOUNT, read_only=False),
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
    timings: bool,
) -> VerifierAttempt:
    site = str(IN_CONTAINER_CONSUMER.site)
    uid = CHILD_UID_BASE + slot
    return VerifierAttempt(
        schemaVersion=1,
        timingsPath=f"{RESULT_MOUNT}/{TIMINGS_FILE}" if timings else None,
        analysis=AttemptAnalysis(
            taskPath=f"{VERIFIER_GRADER_MOUNT}/{TASK_FILE}",
            catalogPath=str(IN_CONTAINER_CONSUMER.catalog),
            solutionDir=SOLUTION_MOUNT,
            scratchDir=analysis_scratch,
            resultPath=f"{RESULT_MOUNT}/{ANALYSIS_FILE}",
            contractPath=f"{VERIFIER_GRADER_MOUNT}/{CONTRACT_FILE}" if has_contract else None,
            starterDir=f"{VERIFIER_GRADER_MOUNT}/{STARTER_DIR}" if has_starter else None,
            cacheSeedDir=CACHE_SEED_MOUNT if cache_seeded else None,
            searchPath=[site],
            importPaths=[VERIFIER_TRUSTED],
            timeoutMs=round(limits.analysis_timeout_s * 1000),
        ),
        behaviour=VerifierJob(
            schemaVersion=1,
            taskId=task.id,
            graderPath=f"{VERIFIER_GRADER_MOUNT}/{GRADER_FILE}",
            taskPath=f"{VERIFIER_GRADER_MOUNT}/{TASK_FILE}",
            solutionDir=SOLUTION_MOUNT,
            scratchDir=SCRATCH,
            resultPath=f"{RESULT_MOUNT}/{RESULT_FILE}",
            parentImportPaths=[VERIFIER_TRUSTED, site],
            solutionImportPaths=[site],
            limits=limits.behaviour,
            isolation=VerifierIsolation(
                dropPrivileges=True,
                childUid=uid,
                childGid=uid,
                killAllOnCleanup=True,
                sweepPaths=list(SWEPT),
                childImportRoot=VERIFIER_SANDBOX,
            ),
        ),
    )


def stage_attempt(
    root: Path,
    task: TaskSpec,
    task_dir: Path,
    solution_dir: Path,
    *,
    graders_dir: Path | None,
    slot: int,
    limits: VerificationLimits,
    cache_seeded: bool = False,
    timings: bool = False,
) -> StagedAttempt:
    """Stage copies of everything one verification mounts, in a fresh directory under *root*.

    Args:
        root: Where the fresh directory is made (never the repository).
        task: The task's validated task.json.
        task_dir: ``tasks/<id>/``: grader.py, task.json, contract.pyi, starter/.
        solution_dir: The collected solution (regular files only).
        graders_dir: The repository's grading helpers (``graders/``), or None.
        slot: The concurrency slot (chooses the child's UID).
        limits: The verification's limits (written into the attempt file).
        cache_seeded: A mypy cache seed will be mounted (its mount point is made).
        timings: The parent also writes its timing record (a profile, never a grade).

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
        stage_runtime(runtime, graders_dir)
        if cache_seeded:
            (runtime / "trusted" / Path(CACHE_SEED_MOUNT).name).mkdir(mode=0o700)
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
            analysis_scratch=f"{SCRATCH}/analysis-{uuid.uuid4().hex}",
            cache_seeded=cache_seeded,
            timings=timings,
        )
        attempt_path = runtime / "trusted" / ATTEMPT_FILE
        attempt_path.write_text(attempt.model_dump_json(indent=2), encoding="utf-8")
        os.chmod(attempt_path, 0o600)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return StagedAttempt(stage, runtime, grader, solution, result, digest)
