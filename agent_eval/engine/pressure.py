"""The host's CPU pressure: how long runnable tasks waited for a CPU.

Linux's pressure stall information (``/proc/pressure/cpu``) counts, in
microseconds, the time at least one runnable task waited; over an interval
its growth divided by the interval is the share of that time the machine was
crowded. A runner that ran out of time while that share was high may have
been starved rather than slow; the attempt's record says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "STARVED_PRESSURE",
    "CrowdedDeadline",
    "PressureWindow",
    "cpu_pressure_total_us",
    "recent_cpu_pressure",
]

CPU_PRESSURE = Path("/proc/pressure/cpu")
STARVED_PRESSURE = 0.5
"""A runner that timed out while the host's CPU pressure over its run was at least
this share is flagged as starved by the machine."""


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
