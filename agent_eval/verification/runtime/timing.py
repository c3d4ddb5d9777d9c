"""An opt-in record of where a verification's time goes inside the container: a profile.

Off unless the attempt file names a ``timingsPath`` (only the verification
benchmark does); then the trusted parent, and the analysis process it starts,
note named spans (the interpreter's start, copying the cache seed, the
analysis, mypy, each scenario's child start, run and clean-up, writing the
results) and the parent writes them beside its results. It is a measurement
of the harness, never a grade: nothing the solution does is in it but how
long its scenarios took, and the host reads it only when it asked for it.

Times are on ``CLOCK_BOOTTIME``, which the whole machine shares (the
container has no time namespace), so a benchmark can set them against its own
engine calls; a span is ``{"name", "start", "seconds", "cpu"}`` with ``start``
in seconds of that clock and ``cpu`` the CPU time this process and the
children it reaped meanwhile used (on a crowded machine the wall clock says
more about the others than about the verification; its CPU time does not).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_TIMINGS_BYTES",
    "Timings",
    "add",
    "cpu",
    "enable",
    "now",
    "process_started",
    "record",
    "span",
]

MAX_TIMINGS_BYTES = 256 * 1024
"""Largest timing record written or read (a few hundred spans at most)."""
_MAX_SPANS = 1000


def now() -> float:
    """Seconds on the clock every process of the machine shares."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def cpu() -> float:
    """CPU seconds this process and every child it has reaped have used so far."""
    used = os.times()
    return used.user + used.system + used.children_user + used.children_system


def process_started(pid: int | str = "self") -> float | None:
    """When process *pid* started, on :func:`now`'s clock (to a clock tick), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count after its end.
    fields = stat[stat.rindex(")") + 2 :].split()
    try:
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError):
        return None


class Timings:
    """Named spans of one process, kept only while enabled."""

    def __init__(self) -> None:
        self.enabled = False
        self.spans: list[dict[str, Any]] = []

    def add(self, name: str, start: float, end: float, cpu_s: float | None = None) -> None:
        """Note that *name* ran from *start* to *end* (seconds of :func:`now`), using *cpu_s*."""
        if self.enabled and len(self.spans) < _MAX_SPANS:
            span: dict[str, Any] = {
                "name": name[:200],
                "start": round(start, 6),
                "seconds": round(end - start, 6),
            }
            if cpu_s is not None:
                span["cpu"] = round(cpu_s, 6)
            self.spans.append(span)

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[None]:
        """Note how long the body of the ``with`` took, as *name*."""
        if not self.enabled:
            yield
            return
        began, used = now(), cpu()
        try:
            yield
        finally:
            self.add(name, began, now(), cpu() - used)

    def extend(self, path: Path, prefix: str) -> None:
        """Add the spans another process wrote to *path* (bounded), each name prefixed."""
        if not self.enabled:
            return
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_TIMINGS_BYTES + 1)
            spans = json.loads(data.decode("utf-8")) if len(data) <= MAX_TIMINGS_BYTES else []
        except (OSError, UnicodeDecodeError, ValueError):
            return  # a profile with a gap, never a failed verification
        for item in spans if isinstance(spans, list) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                start, seconds, used = item.get("start"), item.get("seconds"), item.get("cpu")
                if isinstance(start, float | int) and isinstance(seconds, float | int):
                    used = used if isinstance(used, float | int) else None
                    self.add(f"{prefix}{item['name']}", start, start + seconds, used)

    def write(self, path: Path) -> None:
        """Write the spans to *path* as one JSON list (0600, bounded)."""
        data = json.dumps(self.spans).encode()
        if len(data) > MAX_TIMINGS_BYTES:
            data = b"[]"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)


record = Timings()
"""This process's record (one per process: the parent's and the analysis's)."""


def enable() -> None:
    """Start recording, with the interpreter's own start as the first span."""
    record.enabled = True
    started = process_started()
    if started is not None:
        record.add("interpreter start and imports", started, now(), cpu())


def add(name: str, start: float, end: float, cpu_s: float | None = None) -> None:
    """:meth:`Timings.add` on this process's record."""
    record.add(name, start, end, cpu_s)


def span(name: str) -> contextlib.AbstractContextManager[None]:
    """:meth:`Timings.span` on this process's record."""
    return record.span(name)
