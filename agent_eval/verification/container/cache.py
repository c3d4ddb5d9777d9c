"""mypy's cache of the consumer's library, warmed once per batch in a verifier container."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent_eval.engine import ContainerRuntime, ContainerSpec, Mount, run_container
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.layout import (
    ANALYSIS_FILE,
    CONSUMER_MOUNT,
    IN_CONTAINER_CONSUMER,
    RESULT_MOUNT,
    SOLUTION_MOUNT,
    VERIFIER_GRADER_MOUNT,
    VERIFIER_RUNTIME_MOUNT,
    VERIFIER_TRUSTED,
    ConsumerLayout,
)
from agent_eval.suite.tasks import TASK_FILE
from agent_eval.verification.container.limits import VerificationLimits
from agent_eval.verification.container.run import (
    LOG_TAIL_BYTES,
    VERIFIER_ENVIRONMENT,
    check_consumer,
)
from agent_eval.verification.container.staging import stage_runtime
from agent_eval.verification.runtime.attempt import ANALYSIS_GRACE_S, MYPY_CACHE_DIR

__all__ = ["warm_analysis_cache"]


def warm_analysis_cache(
    engine: ContainerRuntime,
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
        consumer_dir: The batch's consumer (see
            :class:`~agent_eval.verification.container.run.VerifierSetup`).
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
    check_consumer(consumer_dir)
    catalog = json.loads(ConsumerLayout(consumer_dir).catalog.read_text(encoding="utf-8"))
    packages = sorted(
        {str(p) for d in catalog.get("distributions", []) for p in d.get("packages", [])}
    )
    if not packages:
        raise ConfigError(f"consumer {consumer_dir}: the API catalog names no package")
    target.mkdir(mode=0o700)
    runtime, task_stage, solution, out = (target / n for n in ("runtime", "task", "sol", "out"))
    stage_runtime(runtime, None)  # the analysis alone: no grader runs
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
            "agent_eval.verification.analysis",
            *("--task", f"{VERIFIER_GRADER_MOUNT}/{TASK_FILE}", "--solution", SOLUTION_MOUNT),
            *("--catalog", str(IN_CONTAINER_CONSUMER.catalog)),
            *(
                "--scratch",
                f"{RESULT_MOUNT}/scratch",
                "--output",
                f"{RESULT_MOUNT}/{ANALYSIS_FILE}",
            ),
            *("--search-path", str(IN_CONTAINER_CONSUMER.site)),
            *("--timeout", f"{limits.analysis_timeout_s:g}"),
        ),
        role="verifier",
        batch_id=batch_id,
        run_id="analysis-cache",
        mounts=(
            Mount(runtime, VERIFIER_RUNTIME_MOUNT),
            Mount(task_stage, VERIFIER_GRADER_MOUNT),
            Mount(solution, SOLUTION_MOUNT),
            Mount(consumer_dir.resolve(), CONSUMER_MOUNT),
            Mount(out, RESULT_MOUNT, read_only=False),
        ),
        environment=VERIFIER_ENVIRONMENT,
        working_dir=VERIFIER_TRUSTED,
        limits=limits.container,
    )
    done = run_container(
        engine,
        spec,
        timeout_s=limits.analysis_timeout_s + ANALYSIS_GRACE_S,
        log_limit_bytes=LOG_TAIL_BYTES,
    )
    cache = out / "scratch" / MYPY_CACHE_DIR
    if done.wait.timed_out or done.wait.exit_code != 0 or not cache.is_dir():
        tail = done.output.stderr.decode("utf-8", errors="replace").strip()[-1000:]
        raise InfrastructureError(
            f"warming the analysis cache failed (exit {done.wait.exit_code}"
            f"{', timed out' if done.wait.timed_out else ''}): {tail or 'no output'}"
        )
    return cache
