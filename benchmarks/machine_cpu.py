"""Where a machine's CPU time went while a benchmark ran: containers, engine, harness, rest.

A batch on a small machine is bound by CPU, not by waiting: this splits the
machine's busy time (``/proc/stat``) into the containers' own processes (the
engine's ``docker`` cgroup, v1 ``cpuacct`` or v2 ``cpu.stat``), the engine's
daemons (``dockerd``, ``containerd``), this process with the children it
waited for (the harness), and the rest (the runtime shims and ``runc``, the
kernel's work of making and tearing down containers, anything else running).
A figure that cannot be read on this machine is None, never a guess.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuSnapshot", "cpu_split", "process_cpu_seconds"]

_TICK = os.sysconf("SC_CLK_TCK")
_DAEMONS = frozenset({"dockerd", "containerd"})
_CGROUPS = (
    (Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage"), 1e-9),  # v1: nanoseconds
    (Path("/sys/fs/cgroup/docker/cpu.stat"), 1e-6),  # v2: usage_usec
)


def _busy() -> float:
    with open("/proc/stat", encoding="ascii") as handle:
        fields = handle.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICK


def _containers() -> float | None:
    for path, unit in _CGROUPS:
        try:
            text = path.read_text(encoding="ascii")
        except OSError:
            continue
        if path.name == "cpu.stat":
            usage = dict(line.split() for line in text.splitlines() if line.strip())
            return int(usage["usage_usec"]) * unit
        return int(text.strip()) * unit
    return None


def _daemons() -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue  # gone meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name in _DAEMONS:
            fields = stat[stat.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
    return total


def process_cpu_seconds() -> float:
    """CPU time of this process and of every child it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass(frozen=True)
class CpuSnapshot:
    """The machine's CPU counters at one moment."""

    busy: float
    containers: float | None
    daemons: float
    harness: float

    @classmethod
    def take(cls) -> CpuSnapshot:
        return cls(_busy(), _containers(), _daemons(), process_cpu_seconds())


def cpu_split(before: CpuSnapshot, after: CpuSnapshot, per: int = 1) -> dict[str, float | None]:
    """CPU seconds between two snapshots, divided by *per* (runs, say)."""
    busy = after.busy - before.busy
    daemons = after.daemons - before.daemons
    harness = after.harness - before.harness
    containers = (
        None
        if before.containers is None or after.containers is None
        else after.containers - before.containers
    )
    rest = None if containers is None else busy - containers - daemons - harness
    split = {
        "busy": busy,
        "containers": containers,
        "engineDaemons": daemons,
        "harness": harness,
        "rest": rest,
    }
    return {k: None if v is None else round(v / per, 3) for k, v in split.items()}
