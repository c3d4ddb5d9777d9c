"""How long a container's own threads were runnable but waiting for a CPU.

The host's CPU pressure says the machine was crowded, not that a given
container suffered from it: a runner asleep on a model that never answers
waits for nothing but its model. The kernel counts, per thread, the time it
ran on a CPU and the time it sat runnable on a run queue (the first two
fields of ``/proc/<tid>/schedstat``, nanoseconds since the thread began). A
container's threads are read through :class:`ThreadClocks` (the engine's
side effect; ``DockerEngine`` reads its cgroup and ``/proc``, the fake is
scripted) and summed by :class:`RunQueueMeter` from the growth between
readings, so a thread that ends loses only its last interval and the figures
are lower bounds.

Pure: no I/O here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["LAST_PART_S", "RunQueue", "RunQueueMeter", "ThreadClocks", "ThreadTimes"]

LAST_PART_S = 60.0
"""The part of a run, at its end, whose figures are kept apart: what a runner was doing
when its time ran out. A run shorter than twice this keeps its last half apart, so the
start of its processes (which waits for a CPU on a crowded machine whatever the runner
then does) stays out."""


@dataclass(frozen=True)
class ThreadTimes:
    """One thread's scheduler counters, nanoseconds since it began."""

    on_cpu_ns: int
    """Time it ran on a CPU."""
    waiting_ns: int
    """Time it was runnable but waited on a run queue (a CPU quota's throttling included)."""


class ThreadClocks(Protocol):
    """The scheduler counters of a running container's threads."""

    def read(self, container_id: str) -> Mapping[int, ThreadTimes] | None:
        """Each of the container's threads by id; None when they cannot be read (no
        cgroup of it where the engine keeps them, no ``schedstat``, another host)."""
        ...


@dataclass(frozen=True)
class RunQueue:
    """What a container's threads did with the CPU while it ran, summed over its threads
    (lower bounds: a thread that ended between two readings lost its last interval)."""

    seconds: float
    """Wall time from the start of the measurement to its last reading."""
    on_cpu_s: float
    """Time its threads ran on a CPU."""
    waiting_s: float
    """Time its threads were runnable but waited for a CPU."""
    last_part_s: float
    """Wall time of the run's last part (:data:`LAST_PART_S`, or the last half of a
    shorter run), from the last reading at or before its start to the last reading."""
    last_part_on_cpu_s: float
    """Time its threads ran on a CPU in that part."""
    last_part_waiting_s: float
    """Time its threads waited for a CPU in that part."""


class RunQueueMeter:
    """Sums the growth of a container's thread counters between readings.

    The first reading counts each thread's whole counters: every thread of a container
    began after the measurement's *started* time (the container's start). A counter
    that went down belongs to a new thread under a reused id and counts whole.
    """

    def __init__(self, started: float, *, last_part_s: float = LAST_PART_S) -> None:
        self._started = started
        self._last_part_s = last_part_s
        self._previous: dict[int, ThreadTimes] = {}
        self._on_cpu_ns = 0
        self._waiting_ns = 0
        self._read = False
        # (when, on-CPU so far, waiting so far): enough of them to span the last part.
        self._series: deque[tuple[float, int, int]] = deque([(started, 0, 0)])

    def add(self, at: float, threads: Mapping[int, ThreadTimes] | None) -> None:
        """One reading at monotonic time *at*; None (unreadable) is skipped."""
        if threads is None:
            return
        for tid, now in threads.items():
            before = self._previous.get(tid) or ThreadTimes(0, 0)
            if now.on_cpu_ns < before.on_cpu_ns or now.waiting_ns < before.waiting_ns:
                before = ThreadTimes(0, 0)
            self._on_cpu_ns += now.on_cpu_ns - before.on_cpu_ns
            self._waiting_ns += now.waiting_ns - before.waiting_ns
        self._previous = dict(threads)
        self._read = True
        self._series.append((at, self._on_cpu_ns, self._waiting_ns))
        # Keep the newest reading at or before the last part's start, and all after it.
        while len(self._series) > 2 and self._series[1][0] <= at - self._last_part_s:
            self._series.popleft()

    def figures(self) -> RunQueue | None:
        """The figures so far; None when no reading succeeded."""
        if not self._read:
            return None
        end, on_cpu, waiting = self._series[-1]
        cut = end - min(self._last_part_s, (end - self._started) / 2)
        # The reading at or before the part's start: the part is as long as it says. The
        # series reaches back that far: its half is within the last part of a shorter run.
        started_at, on_cpu_then, waiting_then = next(
            reading for reading in reversed(self._series) if reading[0] <= cut
        )
        return RunQueue(
            seconds=round(end - self._started, 3),
            on_cpu_s=on_cpu / 1e9,
            waiting_s=waiting / 1e9,
            last_part_s=round(end - started_at, 3),
            last_part_on_cpu_s=(on_cpu - on_cpu_then) / 1e9,
            last_part_waiting_s=(waiting - waiting_then) / 1e9,
        )
