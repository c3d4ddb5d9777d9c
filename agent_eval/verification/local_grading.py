"""Run one behavioural verification on this machine, in a subprocess: fast, never evidence.

The same verifier runtime as in the container (``python3 -m
agent_eval.verification.runtime JOB``, with the repository's ``graders/``
importable beside the harness), but without a container, without the
privilege drop and without ``kill(-1)``: a subprocess, not a sandbox. It is
for tests and ``tasks verify --verifier local`` on trusted fixtures; a
hostile solution is only contained by the verifier container.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agent_eval.errors import ConfigError, EvidenceError, InfrastructureError
from agent_eval.evidence_io import read_model
from agent_eval.layout import HARNESS_ROOT, RESULT_FILE
from agent_eval.models.behaviour import (
    BehaviourResult,
    VerifierIsolation,
    VerifierJob,
    VerifierLimits,
)
from agent_eval.models.task import TaskSpec
from agent_eval.project import find_project
from agent_eval.suite.tasks import GRADER_FILE, TASK_FILE
from agent_eval.verification.runtime.zygote import zygote_command

__all__ = ["grade_in_subprocess"]

_STDERR_TAIL = 2000
_GRACE_S = 30.0


def _link(target: Path, link: Path) -> None:
    link.symlink_to(target.resolve(), target_is_directory=True)


def grade_in_subprocess(
    task_dir: Path,
    solution_dir: Path,
    library_paths: Sequence[Path],
    *,
    graders_dir: Path | None = None,
    limits: VerifierLimits | None = None,
    timeout_s: float | None = None,
    python: str | None = None,
    zygote: bool = False,
) -> BehaviourResult:
    """Grade *solution_dir* with the grader of *task_dir* in a local subprocess.

    Args:
        task_dir: ``tasks/<id>/`` holding task.json and grader.py.
        solution_dir: The submitted files (the solution module's directory).
        library_paths: Import directories of the library under evaluation
            (for example ``packages/appkit-core/src``), for grader and solution.
        graders_dir: The repository's grading helpers; defaults to the project's.
        limits: Deadlines and resource limits; the verifier's defaults otherwise.
        timeout_s: Hard limit for the whole verifier process; defaults to the
            total grading limit plus a grace period.
        python: Interpreter to run the verifier with; defaults to this one.
        zygote: Fork each scenario's child from a zygote, as the verifier
            container does, instead of starting a fresh interpreter.

    Returns:
        The parent's validated result.

    Raises:
        ConfigError: task.json is unreadable or invalid.
        InfrastructureError: The verifier did not produce a valid result in time.
    """
    try:
        task = read_model(task_dir / TASK_FILE, TaskSpec, what="task")
    except EvidenceError as exc:
        raise ConfigError(str(exc)) from exc
    if graders_dir is None:
        graders_dir = find_project(task_dir).graders
    limits = limits or VerifierLimits()
    if timeout_s is None:
        timeout_s = limits.totalTimeoutMs / 1000 + _GRACE_S
    libraries = [str(Path(p).resolve()) for p in library_paths]
    with tempfile.TemporaryDirectory(prefix="agent-eval-verify-") as tmp:
        root = Path(tmp)
        runtime = root / "runtime"
        runtime.mkdir()
        _link(HARNESS_ROOT, runtime / "agent_eval")
        _link(graders_dir, runtime / "graders")
        (root / "scratch").mkdir()
        (root / "result").mkdir(mode=0o700)
        result_path = root / "result" / RESULT_FILE
        job = VerifierJob(
            schemaVersion=1,
            taskId=task.id,
            graderPath=str((task_dir / GRADER_FILE).resolve()),
            taskPath=str((task_dir / TASK_FILE).resolve()),
            solutionDir=str(solution_dir.resolve()),
            scratchDir=str(root / "scratch"),
            resultPath=str(result_path),
            parentImportPaths=libraries,
            solutionImportPaths=libraries,
            limits=limits,
            isolation=VerifierIsolation(dropPrivileges=False, killAllOnCleanup=False),
        )
        job_path = root / "job.json"
        job_path.write_text(job.model_dump_json(indent=2), encoding="utf-8")
        _run_parent(python or sys.executable, runtime, job_path, timeout_s, zygote=zygote)
        try:
            result = read_model(result_path, BehaviourResult, what="verifier result")
        except EvidenceError as exc:
            raise InfrastructureError(str(exc)) from exc
    if result.taskId != task.id:
        raise InfrastructureError(
            f"the verifier graded task {result.taskId!r}, expected {task.id!r}"
        )
    return result


def _run_parent(
    python: str, runtime: Path, job_path: Path, timeout_s: float, *, zygote: bool = False
) -> None:
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(runtime),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
    }
    command: Sequence[str] = (python, "-B", "-m", "agent_eval.verification.runtime", str(job_path))
    if zygote:
        command = zygote_command(python, str(runtime), command)
    with subprocess.Popen(
        command,
        cwd=runtime,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    ) as proc:
        try:
            _, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            # SIGTERM first: the parent then stops its current solution process.
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
            raise InfrastructureError(
                f"the local verifier did not finish within {timeout_s:.0f} s"
            ) from None
    if proc.returncode != 0:
        tail = stderr.decode("utf-8", errors="replace").strip()[-_STDERR_TAIL:]
        raise InfrastructureError(
            f"the local verifier exited with status {proc.returncode}: {tail or 'no output'}"
        )
