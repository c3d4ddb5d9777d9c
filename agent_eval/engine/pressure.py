"""The host's CPU pressure: how long runnable tasks waited for a CPU.

Linux's pressure stall information (``/proc/pressure/cpu``) counts, in
microseconds, the time at least one runnable task waited; over an interval
its growth divided by the interval is the share of that time the machine was
crowded. A crowded machine alone does not starve a runner: one asleep on a
model that never answers runs out of time on a busy machine as on a quiet
one. :func:`starved_runner` calls a runner's timeout starved only when the
runner itself was kept waiting for a CPU (its threads' run-queue wait,
:mod:`agent_eval.engine.run_queue`) while the host was crowded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval.engine.run_queue import RunQueue
from agent_eval.models.receipt import StarvedBasis

__all__ = [
    "OWN_QUOTA_SHARE",
    "STARVED_PRESSURE",
    "STARVED_WAIT_SHARE",
    "CrowdedDeadline",
    "PressureWindow",
    "cpu_pressure_total_us",
    "recent_cpu_pressure",
    "starved_runner",
]

CPU_PRESSURE = Path("/proc/pressure/cpu")
STARVED_PRESSURE = 0.5
"""The host's CPU pressure over a runner's run at or above which the machine may have
starved it (a share of the run's wall time)."""
STARVED_WAIT_SHARE = 0.25
"""The run-queue wait of a runner's threads, summed, over the last part of its run
(``run_queue.LAST_PART_S``), as a share of that part's wall time, at or above which the
runner was kept waiting for a CPU: on average a quarter of a thread runnable and not
running throughout. A runner asleep (on its model, or hung) waits next to nothing; a
single busy thread on a machine where it gets half a CPU waits half its time."""
OWN_QUOTA_SHARE = 0.9
"""A runner whose threads ran at least this share of its CPU quota in that part had
every CPU it was given: its wait was its own quota's throttling, not the machine's."""


def _some(path: Path) -> dict[str, str]:
    """The ``some`` line's fields (avg10, avg60, avg300, total); empty without PSI."""
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            if line.startswith("some "):
                return dict(field.split("=", 1) for field in line.split()[1:] if "=" in field)
    except OSError:
        pass
    return {}


def cpu_pressure_total_us(path: Path = CPU_PRESSURE) -> int | None:
    """The host's cumulative CPU pressure (``some`` total, µs); None without PSI."""
    try:
        return int(_some(path)["total"])
    except (KeyError, ValueError):
        return None


def recent_cpu_pressure(path: Path = CPU_PRESSURE) -> str:
    """The host's CPU pressure over the last minute, in words for a message."""
    value = _some(path).get("avg60")
    return f"{value} % over the last minute" if value else "not reported by the kernel"


@dataclass(frozen=True)
class PressureWindow:
    """The pressure counter at the start of an interval."""

    started_us: int | None

    @classmethod
    def open(cls, path: Path = CPU_PRESSURE) -> PressureWindow:
        return cls(cpu_pressure_total_us(path))

    def share(self, seconds: float, path: Path = CPU_PRESSURE) -> float | None:
        """The share (0 to 1) of the last *seconds* some task waited for a CPU; None unknown."""
        ended = cpu_pressure_total_us(path)
        if self.started_us is None or ended is None or seconds <= 0:
            return None
        return round(min(1.0, max(0.0, (ended - self.started_us) / (seconds * 1e6))), 3)


@dataclass
class CrowdedDeadline:
    """A harness step's limit counted in the time the machine let it run, with a backstop.

    A step of the harness itself (the gateway's start, a cache warm-up) is bounded by
    *limit_s* of wall time less the share of it some task waited for a CPU (the
    machine's time, not the step's), and by *backstop_s* of wall time whatever the
    machine did: a crowded machine delays a batch's start instead of failing it, and a
    step that hangs on a quiet one still fails within *limit_s*. Without a pressure
    counter the wall clock alone counts.
    """

    limit_s: float
    backstop_s: float
    monotonic: Callable[[], float] = time.monotonic
    path: Path = CPU_PRESSURE
    started: float = field(init=False)
    window: PressureWindow = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.monotonic()
        self.window = PressureWindow.open(self.path)

    def counted_s(self) -> float:
        """The seconds counted so far: wall time less the share the machine was crowded."""
        elapsed = self.monotonic() - self.started
        share = self.window.share(elapsed, self.path) or 0.0
        return elapsed * (1.0 - share)

    def expired(self) -> bool:
        elapsed = self.monotonic() - self.started
        return elapsed >= self.backstop_s or self.counted_s() >= self.limit_s

    def describe(self) -> str:
        """How the limit ran out, for a one-line error."""
        elapsed = self.monotonic() - self.started
        return (
            f"{self.counted_s():.0f} s counted of its {self.limit_s:g} s limit "
            f"({elapsed:.0f} s of wall time, backstop {self.backstop_s:g} s; "
            f"host CPU pressure {recent_cpu_pressure(self.path)})"
        )


def starved_runner(
    *,
    timed_out: bool,
    host_pressure: float | None,
    run_queue: RunQueue | None,
    cpus: float,
) -> tuple[bool, StarvedBasis | None]:
    """Whether a runner's timeout is the machine's, and on what it was decided.

    Starved: it timed out, the host's CPU pressure over its run (*host_pressure*) was
    at least :data:`STARVED_PRESSURE`, and in the last part of its run its threads
    waited on a run queue for at least :data:`STARVED_WAIT_SHARE` of that part while
    running less than :data:`OWN_QUOTA_SHARE` of its quota of *cpus* (``"run-queue"``).
    Where its threads' counters could not be read (*run_queue* None: another pid
    namespace, a remote engine, the fake engine), the host's pressure alone decides
    (``"host-pressure"``): failing closed, as the infrastructure's, tried again rather
    than charged to the agent unseen. None: it did not time out.
    """
    if not timed_out:
        return False, None
    crowded = (host_pressure or 0.0) >= STARVED_PRESSURE
    if run_queue is None or run_queue.last_part_s <= 0:
        return crowded, "host-pressure"
    part = run_queue.last_part_s
    kept_waiting = run_queue.last_part_waiting_s / part >= STARVED_WAIT_SHARE
    within_quota = run_queue.last_part_on_cpu_s / part < OWN_QUOTA_SHARE * cpus
    return crowded and kept_waiting and within_quota, "run-queue"
