"""The solution's clock: time the solution had, not time the machine took.

On a crowded machine a correct solution can wait far longer for a CPU than it
runs; a wall-clock limit would then judge the machine. Every limit that judges
submitted code is therefore measured on this clock, which advances, over each
interval between two readings, by the larger of

* the CPU time the solution's processes used (a busy loop is measured by what
  it burnt, however many processes burn it), and
* the wall time, less the time the solution's processes were runnable but
  waiting for a CPU (``run_delay`` of ``/proc/<pid>/task/*/schedstat``), less
  the time the parent itself waited for or used a CPU (while the solution
  waits for the parent's answer to an effect call, that is the parent's time).
  A solution that sleeps or blocks is measured by the wall clock: sleeping
  is its own doing; but an interval that every one of its processes spent in
  uninterruptible sleep (state ``D`` at both readings around it: a page
  fault waiting on the memory map's lock, memory reclaim on a crowded
  machine) is the machine's, not the solution's. A probe child took 119 s
  to start with 0.54 s of CPU, 43 s waiting for a CPU and 75 s in ``D``.

The wall clock still bounds everything, generously (:func:`backstop_s`): a
backstop that expires before the solution's clock reached its limit means
the machine starved the verification, which is the harness's failure, never
the agent's (see :class:`Starved`).

Standard library only: this module runs in the verifier container.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

__all__ = [
    "BACKSTOP_FACTOR",
    "BACKSTOP_MIN_S",
    "SolutionClock",
    "backstop_s",
    "namespace_pids",
    "process_state",
    "session_pids",
    "wall_clock",
]

BACKSTOP_FACTOR = 20.0
"""How many times its limit an operation may take in wall time before it counts as starved."""
BACKSTOP_MIN_S = 120.0
"""The least wall time any operation gets before it counts as starved."""

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def backstop_s(limit_s: float) -> float:
    """The wall-clock backstop of an operation whose limit on the solution's clock is *limit_s*."""
    return max(BACKSTOP_MIN_S, BACKSTOP_FACTOR * limit_s)


def wall_clock() -> float:
    """The monotonic wall clock (the clock of a process that is never starved)."""
    return time.monotonic()


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _cpu_s(proc_root: str, pid: int, *, children: bool = True) -> float | None:
    """utime + stime of *pid*, with its reaped children's (cutime + cstime) unless not
    *children*, in seconds."""
    text = _read(f"{proc_root}/{pid}/stat")
    if text is None:
        return None
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return sum(int(fields[i]) for i in ((11, 12, 13, 14) if children else (11, 12))) / _TICKS
    except (IndexError, ValueError):
        return None


def process_state(pid: int, proc_root: str = "/proc") -> str | None:
    """The scheduler state of *pid* (``R``, ``S``, ``D``...), None if it is gone."""
    text = _read(f"{proc_root}/{pid}/stat")
    if text is None:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0] if fields else None


def _delay_s(proc_root: str, pid: int) -> float:
    """Summed ``run_delay`` of *pid*'s threads: how long they were runnable without a CPU."""
    try:
        threads = os.listdir(f"{proc_root}/{pid}/task")
    except OSError:
        return 0.0
    total = 0
    for tid in threads:
        text = _read(f"{proc_root}/{pid}/task/{tid}/schedstat")
        if text is None:
            continue
        parts = text.split()
        if len(parts) >= 2 and parts[1].isdigit():
            total += int(parts[1])
    return total / 1e9


class SolutionClock:
    """A monotonic clock of the solution's own time (see the module's docstring).

    Args:
        pids: The solution's processes now (called at each reading).
        parent_pid: The trusted parent, whose waiting is not the solution's.
        helper_pids: Other processes working for the parent (the zygote that forks the
            solution's processes): their time is the harness's too.
        proc_root: ``/proc``, or a fake for tests.
        wall: The wall clock, injectable for tests.
    """

    def __init__(
        self,
        pids: Callable[[], Iterable[int]],
        *,
        parent_pid: int | None = None,
        helper_pids: Iterable[int] = (),
        proc_root: str = "/proc",
        wall: Callable[[], float] = wall_clock,
    ) -> None:
        self._pids = pids
        self._parent = os.getpid() if parent_pid is None else parent_pid
        self._helpers = tuple(helper_pids)
        self._proc = proc_root
        self._wall = wall
        # Per process the last (cpu, delay) seen: a process that died between two
        # readings keeps what it had used, so dying never winds the clock back.
        self._seen: dict[int, tuple[float, float]] = {}
        self._last_wall = wall()
        self._last_cpu, self._last_delay = 0.0, 0.0
        self._last_parent = self._parent_busy()
        self._now = 0.0
        self.cpu_s = 0.0
        """CPU time the solution's processes used since the clock started."""
        self.waited_s = 0.0
        """Time the solution's processes (or the parent, for them) waited for a CPU."""
        self.blocked_s = 0.0
        """Time every solution process was in uninterruptible sleep (not counted)."""
        self._blocked = self._all_blocked(pids())

    def _all_blocked(self, pids: Iterable[int]) -> bool:
        states = [process_state(pid, self._proc) for pid in pids if pid != self._parent]
        states = [state for state in states if state is not None]
        return bool(states) and all(state == "D" for state in states)

    def _parent_busy(self) -> float:
        # Its own CPU only: the solution it reaps is not the parent's time.
        busy = 0.0
        for pid in (self._parent, *self._helpers):
            busy += (_cpu_s(self._proc, pid, children=False) or 0.0) + _delay_s(self._proc, pid)
        return busy

    def __call__(self) -> float:
        """Seconds of the solution's time since the clock started; never decreases."""
        states = []
        for pid in self._pids():
            if pid == self._parent:
                continue
            cpu = _cpu_s(self._proc, pid)
            if cpu is None:
                continue
            states.append(process_state(pid, self._proc))
            before = self._seen.get(pid, (0.0, 0.0))
            self._seen[pid] = (max(cpu, before[0]), max(_delay_s(self._proc, pid), before[1]))
        cpu = sum(c for c, _ in self._seen.values())
        delay = sum(d for _, d in self._seen.values())
        wall, parent = self._wall(), self._parent_busy()
        d_cpu = max(0.0, cpu - self._last_cpu)
        d_waited = max(0.0, delay - self._last_delay) + max(0.0, parent - self._last_parent)
        d_wall = max(0.0, wall - self._last_wall)
        blocked = bool(states) and all(state == "D" for state in states)
        # In D at both ends of the interval: the kernel held every process, the machine's time.
        d_blocked = max(0.0, d_wall - d_waited) if blocked and self._blocked else 0.0
        self._blocked = blocked
        self._now += max(d_cpu, d_wall - min(d_wall, d_waited + d_blocked))
        self.cpu_s += d_cpu
        self.waited_s += min(d_wall, d_waited)
        self.blocked_s += d_blocked
        self._last_wall, self._last_cpu, self._last_delay = wall, cpu, delay
        self._last_parent = parent
        return self._now

    def forget(self) -> None:
        """Drop the processes seen so far (a scenario ended; its PIDs may be reused)."""
        self()
        self._seen.clear()
        self._last_cpu = self._last_delay = 0.0


def namespace_pids(proc_root: str = "/proc") -> list[int]:
    """Every process of this PID namespace but PID 1 (the container's init) and this one."""
    me = os.getpid()
    try:
        names = os.listdir(proc_root)
    except OSError:
        return []
    return [int(n) for n in names if n.isdigit() and int(n) not in (1, me)]


def session_pids(session: int, proc_root: str = "/proc") -> list[int]:
    """Every process whose session id is *session* (a child started with ``setsid``)."""
    found = []
    try:
        names = os.listdir(proc_root)
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        text = _read(f"{proc_root}/{name}/stat")
        if text is None:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 3 and fields[3] == str(session):
            found.append(int(name))
    return found
