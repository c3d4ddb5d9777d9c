"""How eval-agent shows a batch's progress: in place on a terminal, one line per event in a log.

``--progress auto`` picks the bar when stderr is a terminal and lines when it
is not (a CI log then shows every step); ``none`` shows nothing but the
notices and the end. The bar is click's own progress bar (the dependency the
CLI already has; it does the in-place redraw, the width and the estimate),
with the runs done, the successes so far, the elapsed time and each task's
runs as one mark each after it. Events arrive from the schedule's threads,
so every display takes a lock.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Literal, TextIO

import click

from agent_eval.batch.progress import ProgressEvent, RunState

__all__ = ["MODES", "Display", "Mode", "make_display"]

Mode = Literal["auto", "bar", "lines", "none"]
MODES: tuple[Mode, ...] = ("auto", "bar", "lines", "none")
MARKS: dict[RunState | None, str] = {
    None: "·",
    "running": "▸",
    "verifying": "…",
    "passed": "✓",
    "failed": "✗",
    "infrastructure": "!",
}
"""One mark per run: waiting, its runner, its verification, and how it ended."""


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
    """One plain line per event."""

    def __call__(self, event: ProgressEvent) -> None:
        self.say(event.message)


class Bar(Display):
    """click's progress bar, redrawn in place with each run's mark."""

    def __init__(self, stream: TextIO, prefix: str) -> None:
        super().__init__(stream, prefix)
        self._bar: Any = None
        self._states: dict[str, RunState | None] = {}
        self._counts = "0 first / 0 final"
        self._started = time.monotonic()

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            if event.scheduled:
                self._open(event)
                return
            if self._bar is None or event.run_id is None:
                self._write(event.message)  # the preflight's steps, before the bar
                return
            self._states[event.run_id] = event.state
            if event.tally is not None:
                self._counts = f"{event.tally.first} first / {event.tally.final} final"
                self._bar.update(1, event.run_id)
            self._bar.render_progress()

    def say(self, line: str) -> None:
        with self._lock:
            if self._bar is not None:
                self.stream.write("\r\x1b[2K")  # clear the bar's line, print, redraw below
            self._write(line)
            if self._bar is not None:
                self._bar.render_progress()

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.render_finish()
                self._bar = None

    def _open(self, event: ProgressEvent) -> None:
        self._states = dict.fromkeys(event.scheduled)
        self._started = time.monotonic()
        self._bar = click.progressbar(
            length=len(event.scheduled),
            label=f"{self.prefix}: runs",
            file=self.stream,
            show_eta=True,
            show_pos=True,
            width=20,
            item_show_func=lambda _item: self._status(),
        )
        self._bar.render_progress()

    def _status(self) -> str:
        elapsed = int(time.monotonic() - self._started)
        tasks: dict[str, str] = {}
        for run_id, state in self._states.items():
            task = run_id.rsplit("-", 1)[0]
            tasks[task] = tasks.get(task, "") + MARKS[state]
        marks = " ".join(f"{task.split('-')[0]} {runs}" for task, runs in tasks.items())
        return f"{elapsed // 60}:{elapsed % 60:02d} elapsed, {self._counts} · {marks}"


def make_display(mode: Mode, stream: TextIO, prefix: str) -> Display:
    """The display for *mode* on *stream* (``auto``: the bar on a terminal, lines otherwise)."""
    if mode == "auto":
        mode = "bar" if stream.isatty() else "lines"
    if mode == "bar":
        return Bar(stream, prefix)
    if mode == "lines":
        return Lines(stream, prefix)
    return Display(stream, prefix)
