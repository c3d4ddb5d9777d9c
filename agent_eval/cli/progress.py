"""How eval-agent shows a batch's progress: in place on a terminal, one line per event in a log.

``--progress auto`` picks the bar when stderr is a terminal and lines when it
is not (a CI log then shows every step); ``none`` shows nothing but the
notices and the end.

The bar is one line redrawn in place: the open preparing phase with its own
timer, then the runs done, the successes so far, the elapsed time, an
estimate of what remains and one mark per run of each task. It is laid out
again at each redraw for the terminal's width then (parts are dropped, least
important first: the task names, then the marks, then the counts; what is left is
cut, so it never wraps: a wrapped line
cannot be redrawn in place), and a ticker thread redraws it twice a second so
the clock moves when no event arrives. Lines carry a UTC timestamp each.
Events arrive from the schedule's threads, so every display takes a lock.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TextIO

import click

from agent_eval.batch.progress import ProgressEvent, RunState, Tally, duration

__all__ = ["MARKS", "MODES", "Display", "Mode", "Screen", "layout", "make_display"]

Mode = Literal["auto", "bar", "lines", "none"]
MODES: tuple[Mode, ...] = ("auto", "bar", "lines", "none")
MARKS: dict[RunState | None, str] = {
    None: "·",
    "running": "▸",
    "verifying": "…",
    "repairing": "↻",
    "passed": "✓",
    "failed": "✗",
    "unsafe": "⚠",
    "infrastructure": "!",
}
"""One mark per run: waiting, its runner, its verification, its repair, and how it ended."""

IN_FLIGHT: frozenset[RunState | None] = frozenset({"running", "verifying", "repairing"})
"""The states of a run that has started and not ended."""

TICK_S = 0.5
"""How often the bar is redrawn without an event (so its clock never stands still)."""
CLEAR_LINE = "\r\x1b[K"
"""Back to the line's start, and clear it to its end."""


class Display:
    """Shows events and notices; the base class shows notices only."""

    def __init__(self, stream: TextIO, prefix: str) -> None:
        self.stream, self.prefix = stream, prefix
        self._lock = threading.Lock()

    def __call__(self, event: ProgressEvent) -> None:
        """Show one event (from any thread)."""

    def say(self, line: str) -> None:
        """A line that must be seen whatever the mode (a notice, a reason, the report)."""
        with self._lock:
            self._write(line)

    def close(self) -> None:
        """The batch ended: leave the terminal on a fresh line."""

    def _write(self, line: str) -> None:
        click.echo(f"{self.prefix}: {line}", file=self.stream)


class Lines(Display):
    """One plain line per event and notice, each after the UTC time it was written."""

    def __init__(
        self,
        stream: TextIO,
        prefix: str,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__(stream, prefix)
        self._now = now

    def __call__(self, event: ProgressEvent) -> None:
        self.say(event.message)

    def _write(self, line: str) -> None:
        stamp = self._now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        click.echo(f"{stamp} {self.prefix}: {line}", file=self.stream)


@dataclass(frozen=True)
class Screen:
    """What the bar shows at one moment, before it is laid out for a width."""

    prefix: str
    elapsed: float
    """Seconds since the display opened."""
    phase: tuple[str, float] | None = None
    """The preparing phase open (its line, and seconds since it began), if any."""
    tally: Tally | None = None
    """The schedule's counts (None: the schedule has not started)."""
    left: float | None = None
    """The estimate of the seconds that remain, negative once it has passed (None: none
    yet, or nothing remains)."""
    tasks: tuple[tuple[str, str], ...] = ()
    """Each task's id and its runs' marks, in the schedule's order."""


def layout(screen: Screen, width: int) -> str:
    """The bar's line for a terminal *width* columns wide: never longer than ``width - 1``.

    The richest variant that fits is taken (one column is kept free, so that no
    terminal wraps the cursor onto a new line); when none fits, the barest is cut.
    """
    room = max(1, width - 1)
    variant = ""
    for variant in _variants(screen):
        if len(variant) <= room:
            return variant
    return variant[:room]


def _variants(screen: Screen) -> Iterator[str]:
    """The line from richest to barest: each drops the next least important part."""
    head = f"{screen.prefix}:"
    elapsed = f"elapsed {duration(screen.elapsed)}"
    if screen.tally is None:
        if screen.phase is None:
            yield f"{head} {elapsed}"
            yield elapsed
            return
        step, seconds = screen.phase
        timer = duration(seconds)
        yield f"{head} {step} · {timer} · {elapsed}"
        yield f"{step} · {timer} · {elapsed}"
        yield f"{step} · {timer}"
        yield f"{timer} {step}"
        return
    tally = screen.tally
    runs = f"{tally.done}/{tally.total} runs"
    successes = f"{tally.first} first / {tally.final} final"
    timing = [elapsed, *([_estimate(screen.left)] if screen.left is not None else [])]
    stats = [runs, successes, *timing]
    named = " ".join(f"{task} {marks}" for task, marks in screen.tasks)
    short = " ".join(f"{task.split('-')[0]} {marks}" for task, marks in screen.tasks)
    bare = " ".join(marks for _task, marks in screen.tasks)
    for marks in (named, short, bare):
        yield f"{head} " + " · ".join([*stats, marks])
    yield " · ".join([*stats, bare])
    # Marks without their tasks' names are a row of symbols nobody can read: the counts
    # and the time go on, the marks go first.
    yield " · ".join(stats)
    yield " · ".join([runs, successes, elapsed])
    yield " · ".join([runs, *timing])
    yield " · ".join([runs, elapsed])
    yield runs


def _estimate(left: float) -> str:
    """The estimate labelled (never "about 0s"); once it has passed, by how much."""
    if left >= 0:
        return f"about {duration(max(left, 1.0))} left"
    return f"{duration(-left)} over the estimate"


def terminal_width(stream: TextIO) -> int:
    """The width of the terminal *stream* writes to, as it is now (80 when unknown)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = shutil.get_terminal_size().columns
    return columns if columns > 0 else 80


class Bar(Display):
    """One line redrawn in place, by events and by a ticker thread, until closed."""

    def __init__(
        self,
        stream: TextIO,
        prefix: str,
        *,
        width: Callable[[], int] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        tick_s: float = TICK_S,
    ) -> None:
        super().__init__(stream, prefix)
        self._width = width or (lambda: terminal_width(stream))
        self._monotonic = monotonic
        self._opened = monotonic()
        self._phase: tuple[str, float] | None = None
        self._states: dict[str, RunState | None] = {}
        self._tally: Tally | None = None
        self._scheduled_at = 0.0
        self._drawn: str | None = None  # the bar as it is on the screen (None: not there)
        self._closed = False
        self._stop = threading.Event()
        self._ticker = threading.Thread(
            target=self._tick, args=(tick_s,), name="progress-clock", daemon=True
        )
        self._ticker.start()

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            if self._closed:
                return
            now = self._monotonic()
            if event.scheduled:
                self._states = dict.fromkeys(event.scheduled)
                self._tally = Tally(0, len(event.scheduled), 0, 0)
                self._scheduled_at, self._phase = now, None
            elif event.phase is not None and event.seconds is None:
                self._phase = (event.message, now)
            elif event.phase is not None:
                self._phase = None
                self._line(event.message)  # a phase's end stays, with its duration
            elif event.run_id is not None and event.run_id in self._states:
                self._states[event.run_id] = event.state
                if event.tally is not None:
                    self._tally = event.tally
            else:
                self._line(event.message)
            self._draw(force=True)

    def say(self, line: str) -> None:
        with self._lock:
            self._line(line)
            if not self._closed:
                self._draw(force=True)

    def close(self) -> None:
        self._stop.set()
        self._ticker.join()
        with self._lock:
            if not self._closed:
                self._draw(force=True)
                if self._drawn is not None:
                    self.stream.write("\n")
                    self.stream.flush()
            self._closed = True

    def screen(self) -> Screen:
        """What the bar shows now."""
        now = self._monotonic()
        phase = None
        if self._phase is not None:
            phase = (self._phase[0], now - self._phase[1])
        tasks: dict[str, str] = {}
        for run_id, state in self._states.items():
            task = run_id.rsplit("-", 1)[0]
            tasks[task] = tasks.get(task, "") + MARKS[state]
        left = self._left(now)
        return Screen(
            self.prefix, now - self._opened, phase, self._tally, left, tuple(tasks.items())
        )

    def _left(self, now: float) -> float | None:
        """The seconds the schedule still needs at the rate it has made progress so far,
        a run in flight counted as half done, so that the first runs to finish (often the
        quickest) do not set the estimate alone and it moves while runs are under way
        (None: no run has finished yet, or all have)."""
        tally = self._tally
        if tally is None or tally.done == 0 or tally.done >= tally.total:
            return None
        in_flight = sum(state in IN_FLIGHT for state in self._states.values())
        progress = tally.done + 0.5 * in_flight
        per_run = (now - self._scheduled_at) / progress
        return per_run * max(0.0, tally.total - progress)

    def _line(self, line: str) -> None:
        """A line that stays: the bar is cleared, the line written, the bar drawn again below."""
        if self._drawn is not None and not self._closed:
            self.stream.write(CLEAR_LINE)
            self._drawn = None
        self._write(line)

    def _draw(self, *, force: bool = False) -> None:
        if self._tally is None and self._phase is None:
            return  # nothing to time yet
        line = layout(self.screen(), self._width())
        if force or line != self._drawn:
            self.stream.write(f"{CLEAR_LINE}{line}")
            self.stream.flush()
            self._drawn = line

    def _tick(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            with self._lock:
                if self._closed:
                    return
                try:
                    self._draw()
                except (OSError, ValueError):
                    return  # the terminal went away (closed, a broken pipe): the clock stops


def make_display(mode: Mode, stream: TextIO, prefix: str) -> Display:
    """The display for *mode* on *stream* (``auto``: the bar on a terminal, lines otherwise)."""
    if mode == "auto":
        mode = "bar" if stream.isatty() else "lines"
    if mode == "bar":
        return Bar(stream, prefix)
    if mode == "lines":
        return Lines(stream, prefix)
    return Display(stream, prefix)
