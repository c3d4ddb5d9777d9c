"""A crowded machine on demand: busy loops that every container must share the CPU with.

Busy loops on the host do not starve containers (the kernel shares the CPU
between the host's tasks and the engine's cgroup as a whole). Placed in the
engine's parent cpu cgroup (cgroup v1: ``/sys/fs/cgroup/cpu/docker``), each
loop weighs as much as a whole container, so every runner and verifier
container competes with all of them while the harness on the host stays
responsive: with N loops and two containers busy, each container gets about
``cores / (N + 2)`` of the machine.

Every loop is ``timeout SECONDS sh -c 'while :; do :; done'``: bounded in time
even if this process dies, started and ended by its own pid, never by name.
Every loop runs at nice 0 whatever this process's nice: a loop that inherited
a harness's ``nice -n 19`` weighs 15 against a container's 1024 and crowds no
container (the host's CPU pressure still rises: it counts every waiting task).

    with LoadRig(loops=40):
        ...  # every container here runs on a crowded machine

A crowded machine is also a busy engine: neighbours' batches create, start,
stop and remove containers and take memory beside ours. :class:`EngineCrowd`
is that second rig: threads that each run one neighbour container after
another, every one allocating and touching memory for a moment, through the
same engine API and hardening as the batch's own containers.

    with EngineCrowd(engine, image, neighbours=3):
        ...  # every container here is created beside neighbours' containers
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Self

from agent_eval.engine import ContainerEngine, remove_leftovers
from agent_eval.engine.api import ContainerSpec, run_container

__all__ = ["ENGINE_CPU_CGROUP", "EngineCrowd", "LoadRig", "rig_available"]

ENGINE_CPU_CGROUP = Path("/sys/fs/cgroup/cpu/docker")
"""The engine's parent cpu cgroup (cgroup v1, the ``cgroupfs`` driver)."""
DEFAULT_BOUND_S = 3600


def rig_available(cgroup: Path = ENGINE_CPU_CGROUP) -> str | None:
    """None when loops can be placed in the engine's cgroup, else why not."""
    if os.geteuid() != 0:
        return "the load rig needs root to place processes in the engine's cgroup"
    if not (cgroup / "cgroup.procs").is_file():
        return f"{cgroup} does not exist (no cgroup v1 cpu controller, or no container ran yet)"
    return None


class _Rig:
    """A rig is on for the block: started as it begins, stopped however it ends."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LoadRig(_Rig):
    """*loops* busy loops in *cgroup*, each ended after *bound_s* seconds at the latest."""

    def __init__(
        self, loops: int, *, cgroup: Path = ENGINE_CPU_CGROUP, bound_s: int = DEFAULT_BOUND_S
    ) -> None:
        if not 0 <= loops <= 400:
            raise ValueError(f"loops {loops} is not in [0, 400]")
        self.loops = loops
        self.cgroup = cgroup
        self.bound_s = bound_s
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        if self.loops and (reason := rig_available(self.cgroup)) is not None:
            raise RuntimeError(reason)
        try:
            for _ in range(self.loops):
                proc = subprocess.Popen(
                    ["timeout", "-s", "KILL", str(self.bound_s), "sh", "-c", "while :; do :; done"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                self._procs.append(proc)
                _full_weight(proc.pid)
                # The shell (timeout's child) may not exist yet; move timeout itself
                # first: a child forked after the move starts in the same cgroup.
                (self.cgroup / "cgroup.procs").write_text(f"{proc.pid}\n", encoding="ascii")
            time.sleep(0.2)
            for proc in self._procs:
                for child in _children(proc.pid):
                    with contextlib.suppress(OSError):
                        (self.cgroup / "cgroup.procs").write_text(f"{child}\n", encoding="ascii")
                        _full_weight(child)  # forked before its parent's nice was reset
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End every loop by its process group (the loop and its ``timeout``), then reap."""
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self._procs.clear()


NEIGHBOUR = """\
import sys, time
block = bytearray(int(sys.argv[1]) << 20)
for page in range(0, len(block), 4096):
    block[page] = 1
time.sleep(float(sys.argv[2]))
"""
"""A neighbour's container: take and touch MIB of memory, hold it HOLD seconds, end."""


class EngineCrowd(_Rig):
    """*neighbours* threads, each running neighbour containers of *image* one after another
    (each takes *mib* MiB for *hold_s* seconds) until the block ends.

    Every container carries this rig's own batch label and is removed (confirmed) as it
    ends; whatever a failure left is removed by that label when the block ends.
    ``started`` counts the containers run, ``failures`` what the engine said when one
    could not be (a neighbour's failure is the neighbour's: it never stops the rig).
    """

    def __init__(
        self,
        engine: ContainerEngine,
        image: str,
        *,
        neighbours: int = 2,
        mib: int = 256,
        hold_s: float = 1.0,
    ) -> None:
        if not 0 <= neighbours <= 32:
            raise ValueError(f"neighbours {neighbours} is not in [0, 32]")
        self.engine, self.image = engine, image
        self.neighbours, self.mib, self.hold_s = neighbours, mib, hold_s
        self.batch_id = f"engine-crowd-{uuid.uuid4().hex[:10]}"
        self.started = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _neighbour(self, index: int) -> None:
        turn = 0
        while not self._stop.is_set():
            spec = ContainerSpec(
                image=self.image,
                command=("/usr/bin/python3", "-c", NEIGHBOUR, str(self.mib), str(self.hold_s)),
                role="runner",
                batch_id=self.batch_id,
                run_id=f"neighbour-{index}-{turn}",
            )
            turn += 1
            try:
                run_container(self.engine, spec, timeout_s=120, log_limit_bytes=4096)
            except Exception as exc:  # the neighbour's trouble, recorded, never ours
                with self._lock:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                self._stop.wait(1.0)
            else:
                with self._lock:
                    self.started += 1

    def start(self) -> None:
        for index in range(self.neighbours):
            thread = threading.Thread(
                target=self._neighbour, args=(index,), name=f"neighbour-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Start no more neighbours, wait for those running, remove anything left."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=180)
        self._threads.clear()
        remove_leftovers(self.engine, self.batch_id)


def _full_weight(pid: int) -> None:
    """Nice 0 for *pid* (root may lower a nice value): a loop weighs as a container."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, 0)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(p) for p in text.split()]
