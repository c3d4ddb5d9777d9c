"""What a batch tells its watcher as it goes: one event per step, with the state of a run.

The batch only emits :class:`ProgressEvent`; how they are shown (a display
updated in place on a terminal, one line per event in a log, nothing) is
the caller's choice. Events come from the schedule's worker threads too, so
a display must take them from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ProgressEvent", "RunState", "Tally"]

RunState = Literal["running", "verifying", "passed", "failed", "infrastructure"]
"""Where one run is: an attempt's runner, its verification, or the run's end."""


@dataclass(frozen=True)
class Tally:
    """The batch so far."""

    done: int
    total: int
    first: int
    """Runs whose first attempt succeeded."""
    final: int
    """Runs whose last attempt succeeded."""


@dataclass(frozen=True)
class ProgressEvent:
    """One step: its plain line, and what it changed."""

    message: str
    """The step as one line (what a log shows)."""
    run_id: str | None = None
    """The run it is about, if any."""
    state: RunState | None = None
    """The run's state after it."""
    tally: Tally | None = None
    """The counts after a run finished."""
    scheduled: tuple[str, ...] = ()
    """Every run of the schedule, in order (on the event that starts it)."""
