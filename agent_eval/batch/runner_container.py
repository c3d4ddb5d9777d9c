"""The runner port backed by the container engine: one hardened container per attempt.

The runner image is pinned; the command is ``executable`` + ``args`` with no
shell; the request goes to stdin; only allowlisted environment variables are
passed (their values are never written anywhere by the harness); the consumer
is read-only and the workspace, mounted at /solution, is the only writable
place besides a bounded tmpfs. The time limit is enforced from outside.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from agent_eval.anchored import hand_over, make_dirs, remove_tree
from agent_eval.batch.ports import RunnerOutcome
from agent_eval.engine import (
    RUNNER_USER,
    ContainerRuntime,
    ContainerSpec,
    Mount,
    ResourceLimits,
    remove_leftovers,
    run_container,
)
from agent_eval.engine.pressure import PressureWindow, starved_runner
from agent_eval.errors import CleanupError, InfrastructureError
from agent_eval.layout import (
    CONSUMER_MOUNT,
    IN_CONTAINER_CONSUMER,
    MAX_TRANSCRIPT_BYTES,
    SOLUTION_MOUNT,
    TRANSCRIPT_FILE,
    TRANSCRIPT_MOUNT,
)
from agent_eval.models import RunnerConfig, RunnerRequest, RunnerResources
from agent_eval.models.runner_protocol import MAX_RESPONSE_BYTES

__all__ = ["RUNNER_LIMITS", "ContainerRunner"]

RUNNER_LIMITS = ResourceLimits(pids=512, memory_bytes=2 << 30, tmp_bytes=512 << 20)
"""The runner container's limits unless a caller gives others."""

_RUNNER_UID, _RUNNER_GID = (int(part) for part in RUNNER_USER.split(":"))


class ContainerRunner:
    """Runs each attempt in a fresh runner container."""

    def __init__(
        self,
        engine: ContainerRuntime,
        *,
        config: RunnerConfig,
        image_id: str,
        consumer_dir: Path,
        batch_id: str,
        environment: Mapping[str, str],
        gateway_mounts: tuple[Mount, ...] = (),
        limits: ResourceLimits | None = None,
        work_anchor: Path | None = None,
    ) -> None:
        """*work_anchor*: the directory the project names that each workspace lies below;
        each attempt's transcript directory is made and removed from it following no link
        (None: from the workspace's parent)."""
        self._work_anchor = work_anchor
        self._engine = engine
        self._config = config
        self._image = image_id
        self._consumer = consumer_dir
        self._batch = batch_id
        self._environment = dict(environment)
        self._gateway_mounts = gateway_mounts
        self._limits = limits or RUNNER_LIMITS
        self._cancelled = threading.Event()

    def run_attempt(
        self,
        request: RunnerRequest,
        workspace: Path,
        environment: Mapping[str, str] | None = None,
    ) -> RunnerOutcome:
        """Run one attempt; infrastructure problems are returned, not raised."""
        if self._cancelled.is_set():
            return RunnerOutcome(b"", False, False, None, "the batch was interrupted")
        # Beside the workspace, not in it: the transcript is never collected as code.
        transcripts = workspace.with_name(f"{workspace.name}.transcript")
        anchor = self._work_anchor or workspace.parent
        try:
            hand_over(anchor, workspace, _RUNNER_UID, _RUNNER_GID)
        except CleanupError as exc:
            return RunnerOutcome(b"", False, False, None, f"runner workspace: {exc}")
        try:
            make_dirs(anchor, transcripts, 0o700, exist_ok=False)
            hand_over(anchor, transcripts, _RUNNER_UID, _RUNNER_GID)
        except CleanupError as exc:
            return RunnerOutcome(b"", False, False, None, f"runner transcripts: {exc}")
        spec = ContainerSpec(
            image=self._image,
            command=(self._config.executable, *self._config.args),
            role="runner",
            batch_id=self._batch,
            run_id=request.runId,
            mounts=(
                Mount(self._consumer, CONSUMER_MOUNT),
                Mount(workspace, SOLUTION_MOUNT, read_only=False),
                Mount(transcripts, TRANSCRIPT_MOUNT, read_only=False),
                *self._gateway_mounts,
            ),
            # The agent's own code must import the installed library too.
            environment={
                **self._environment,
                **(environment or {}),
                "HOME": "/tmp",
                "PYTHONPATH": str(IN_CONTAINER_CONSUMER.site),
            },
            working_dir=SOLUTION_MOUNT,
            limits=self._limits,
            # No network at all: its only way out is the gateway's sockets.
            stdin=True,
        )
        if self._cancelled.is_set():  # a stop while the workspace was handed over
            return RunnerOutcome(b"", False, False, None, "the batch was interrupted")
        pressure = PressureWindow.open()
        began = time.monotonic()
        try:
            done = run_container(
                self._engine,
                spec,
                timeout_s=request.timeBudgetMs / 1000,
                log_limit_bytes=MAX_RESPONSE_BYTES + 1,
                stdin=request.model_dump_json().encode("utf-8") + b"\n",
            )
        except InfrastructureError as exc:
            # Its limits and wall time say a container was asked for (it may have run).
            tried = RunnerResources(
                memoryLimitBytes=spec.limits.memory_bytes,
                cpus=spec.limits.nano_cpus / 1e9,
                pidsLimit=spec.limits.pids,
                tmpBytes=spec.limits.tmp_bytes,
                wallSeconds=round(time.monotonic() - began, 3),
                hostCpuPressure=pressure.share(time.monotonic() - began),
            )
            return RunnerOutcome(
                b"", False, False, None, f"runner container: {exc}", resources=tried
            )
        finally:
            transcript = _read_transcript(transcripts / TRANSCRIPT_FILE)
            with contextlib.suppress(CleanupError):
                remove_tree(anchor, transcripts)
        wall_s = time.monotonic() - began
        crowded = pressure.share(wall_s)
        limits = spec.limits
        queue = done.wait.run_queue
        starved, basis = starved_runner(
            timed_out=done.wait.timed_out,
            host_pressure=crowded,
            run_queue=queue,
            cpus=limits.nano_cpus / 1e9,
        )
        return RunnerOutcome(
            stdout=done.output.stdout,
            stdout_truncated=done.output.stdout_truncated,
            timed_out=done.wait.timed_out,
            exit_code=done.wait.exit_code,
            stderr=done.output.stderr,
            resources=RunnerResources(
                memoryLimitBytes=limits.memory_bytes,
                cpus=limits.nano_cpus / 1e9,
                pidsLimit=limits.pids,
                tmpBytes=limits.tmp_bytes,
                peakMemoryBytes=done.wait.peak_memory_bytes,
                oomKilled=done.wait.oom_killed,
                cpuSeconds=done.wait.cpu_seconds,
                wallSeconds=round(wall_s, 3),
                hostCpuPressure=crowded,
                starved=starved,
                starvedBasis=basis,
                runQueueWaitSeconds=None if queue is None else round(queue.waiting_s, 3),
                lastPartSeconds=None if queue is None else round(queue.last_part_s, 3),
                lastPartRunQueueWaitSeconds=(
                    None if queue is None else round(queue.last_part_waiting_s, 3)
                ),
                lastPartCpuSeconds=None if queue is None else round(queue.last_part_on_cpu_s, 3),
            ),
            transcript=transcript,
            engine_lost=done.wait.engine_lost,
        )

    def cancel_all(self) -> None:
        """Kill and remove this batch's runner containers."""
        self._cancelled.set()
        remove_leftovers(self._engine, self._batch)


def _read_transcript(path: Path) -> bytes | None:
    """The runner's transcript, if it left a regular file there (never followed, bounded)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_TRANSCRIPT_BYTES + 1)
    finally:
        os.close(fd)
