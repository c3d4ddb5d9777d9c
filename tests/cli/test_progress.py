"""eval-agent's progress displays: in place on a terminal, one line per event in a log.

Invariants: ``lines`` writes every event and notice as one line that starts
with its UTC time; the bar redraws one line that is never longer than the
terminal is wide (less one column) at any width, drops the least important
parts first, and shows the runs done, the successes, the elapsed time and a
labelled estimate in one duration format, the open preparing phase with its
own timer, and one mark per run (waiting, runner, verifying, repair, passed,
failed, unsafe, infrastructure, all distinct); notices and a phase's end stay
on lines of their own; its clock moves with no event (a ticker), and nothing
is written after close (a terminal that goes away stops it quietly);
``none`` shows notices only; ``auto`` is the bar on a
terminal and lines otherwise.
"""

from __future__ import annotations

import io
import re
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from agent_eval.batch.progress import ProgressEvent, Tally, duration
from agent_eval.cli.progress import (
    CLEAR_LINE,
    MARKS,
    Bar,
    Display,
    Lines,
    Screen,
    layout,
    make_display,
)

RUNS = ("forms-1", "tools-1", "forms-2", "tools-2")
SUITE = tuple(
    f"{task}-{n}"
    for task in (
        "core-validation",
        "storage-hash",
        "forms",
        "tool-validation",
        "approval-boundary",
        "error-recovery",
    )
    for n in (1, 2, 3)
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def events() -> list[ProgressEvent]:
    return [
        ProgressEvent("packing the candidate archives", phase="packing"),
        ProgressEvent("packing the candidate archives: done in 3s", phase="packing", seconds=3),
        ProgressEvent("4 runs scheduled, 2 at a time", scheduled=RUNS),
        ProgressEvent("forms-1 attempt 1: runner started", "forms-1", "running"),
        ProgressEvent("tools-1 attempt 1: verifying", "tools-1", "verifying"),
        ProgressEvent(
            "forms-1 passed on first attempt (took 1m05s); 1/4 runs done, 1 first / 1 final "
            "successes",
            "forms-1",
            "passed",
            Tally(1, 4, 1, 1),
        ),
        ProgressEvent(
            "tools-1 failed: assertion failed (took 2m00s); 2/4 runs done, 1 first / 1 final "
            "successes",
            "tools-1",
            "failed",
            Tally(2, 4, 1, 1),
        ),
    ]


def bar(width: int = 200, clock: Clock | None = None, tick_s: float = 60.0) -> tuple[Bar, Terminal]:
    stream = Terminal()
    return Bar(
        stream, "eval-agent", width=lambda: width, monotonic=clock or Clock(), tick_s=tick_s
    ), stream


def on_screen(text: str) -> str:
    """The bar's line as the terminal shows it last: after the last clear."""
    return text.rsplit(CLEAR_LINE, 1)[-1]


def suite_screen(left: float | None = 130.0) -> Screen:
    marks = ["✓✓▸", "✗↻·", "⚠!…", "···", "···", "···"]
    names = dict.fromkeys(r.rsplit("-", 1)[0] for r in SUITE)
    tasks = tuple(zip(names, marks, strict=True))
    return Screen("eval-agent", 3725.0, None, Tally(6, 18, 4, 5), left, tasks)


def test_durations_read_as_seconds_minutes_and_hours() -> None:
    assert [duration(s) for s in (0, 0.4, 42, 65, 599.6, 3600, 7385)] == [
        "0s", "0s", "42s", "1m05s", "10m00s", "1h00m", "2h03m",
    ]  # fmt: skip


@pytest.mark.parametrize("width", [20, 40, 80, 120, 160, 240])
def test_the_line_is_never_longer_than_the_terminal_is_wide(width: int) -> None:
    for screen in (
        suite_screen(),
        suite_screen(left=None),
        suite_screen(left=-75.0),
        Screen("eval-agent", 75.0, ("preparing the consumer", 12.0)),
    ):
        assert len(layout(screen, width)) <= width - 1


def test_at_160_columns_everything_shows_with_each_task_named() -> None:
    line = layout(suite_screen(), 160)
    assert line == (
        "eval-agent: 6/18 runs · 4 first / 5 final · elapsed 1h02m · about 2m10s left · "
        "core ✓✓▸ storage ✗↻· forms ⚠!… tool ··· approval ··· error ···"
    )


def test_at_80_columns_the_counts_and_the_time_stay_and_unlabelled_marks_go() -> None:
    line = layout(suite_screen(), 80)
    assert line == "6/18 runs · 4 first / 5 final · elapsed 1h02m · about 2m10s left"
    assert layout(suite_screen(), 60) == "6/18 runs · 4 first / 5 final · elapsed 1h02m"


def test_at_40_columns_the_time_stays_and_the_marks_go() -> None:
    assert layout(suite_screen(), 40) == "6/18 runs · elapsed 1h02m"
    assert layout(suite_screen(), 12) == "6/18 runs"
    assert layout(suite_screen(), 5) == "6/18"  # cut, never wrapped


def test_the_estimate_is_labelled_in_the_elapsed_format_and_says_when_it_has_passed() -> None:
    assert "elapsed 1h02m · about 2m10s left" in layout(suite_screen(130.0), 200)
    assert "about 1s left" in layout(suite_screen(0.2), 200)  # never "about 0s", never "over"
    assert "elapsed 1h02m · 1m15s over the estimate" in layout(suite_screen(-75.0), 200)
    assert "left" not in layout(suite_screen(None), 200)


def test_a_preparing_phase_shows_its_own_timer_beside_the_elapsed_time() -> None:
    screen = Screen("eval-agent", 75.0, ("preparing the consumer", 12.0))
    assert layout(screen, 80) == "eval-agent: preparing the consumer · 12s · elapsed 1m15s"
    assert layout(screen, 40) == "preparing the consumer · 12s"
    assert layout(screen, 16) == "12s preparing t"


def test_every_state_of_a_run_has_its_own_mark() -> None:
    assert set(MARKS) == {
        None, "running", "verifying", "repairing", "passed", "failed", "unsafe", "infrastructure",
    }  # fmt: skip
    assert len(set(MARKS.values())) == len(MARKS)
    assert all(len(mark) == 1 for mark in MARKS.values())


def test_the_bar_redraws_counts_and_marks_in_place_and_keeps_notices_apart() -> None:
    display, stream = bar()
    for event in events()[:5]:
        display(event)
    display.say("reaped a batch whose owner died")
    for event in events()[5:]:
        display(event)
    display.close()
    text = stream.getvalue()
    assert text.startswith(f"{CLEAR_LINE}eval-agent: packing the candidate archives · 0s")
    assert f"{CLEAR_LINE}eval-agent: packing the candidate archives: done in 3s\n" in text
    assert f"{CLEAR_LINE}eval-agent: reaped a batch whose owner died\n" in text
    last = on_screen(text)
    assert last.endswith("\n") and "\n" not in last.rstrip("\n")
    assert "2/4 runs" in last and "1 first / 1 final" in last
    assert "forms ✓·" in last and "tools ✗·" in last
    assert "runner started" not in text  # run events are marks, not lines


def test_a_repair_an_unsafe_run_and_an_infrastructure_failure_are_marked_as_such() -> None:
    display, stream = bar()
    display(ProgressEvent("4 runs scheduled", scheduled=RUNS))
    display(ProgressEvent("forms-1 attempt 2: runner started", "forms-1", "repairing"))
    display(ProgressEvent("tools-1 failed: unsafe", "tools-1", "unsafe", Tally(1, 4, 0, 0)))
    display(ProgressEvent("forms-2 failed: infrastructure", "forms-2", "infrastructure"))
    assert "forms ↻! tools ⚠·" in on_screen(stream.getvalue())
    display.close()


def test_the_estimate_follows_the_rate_of_progress_counting_runs_in_flight() -> None:
    clock = Clock()
    display, stream = bar(clock=clock)
    display(ProgressEvent("4 runs scheduled", scheduled=RUNS))
    display(ProgressEvent("forms-1 runner started", "forms-1", "running"))
    assert display.screen().left is None  # no run has finished: no rate yet
    clock.now += 60
    display(ProgressEvent("forms-1 passed", "forms-1", "passed", Tally(1, 4, 1, 1)))
    assert "about 3m00s left" in on_screen(stream.getvalue())
    display(ProgressEvent("forms-2 runner started", "forms-2", "running"))
    display(ProgressEvent("tools-1 runner started", "tools-1", "verifying"))
    # Two runs half done: 2 runs' worth in 60 s, 2 more to go.
    assert display.screen().left == 60
    clock.now += 30
    assert display.screen().left == 90
    display.close()


def test_the_phase_on_screen_is_timed_and_its_end_stays_with_its_duration() -> None:
    clock = Clock()
    display, stream = bar(clock=clock)
    display(ProgressEvent("preparing the consumer", phase="consumer"))
    clock.now += 7
    display.say("a notice")
    assert on_screen(stream.getvalue()).startswith("eval-agent: preparing the consumer · 7s ·")
    display(ProgressEvent("preparing the consumer: done in 7s", phase="consumer", seconds=7))
    display.close()
    assert stream.getvalue().endswith(
        f"{CLEAR_LINE}eval-agent: preparing the consumer: done in 7s\n"
    )  # the phase's timer does not stay behind it


def test_the_width_is_measured_at_each_redraw() -> None:
    columns = [160]
    stream = Terminal()
    display = Bar(stream, "eval-agent", width=lambda: columns[0], monotonic=Clock(), tick_s=60)
    display(ProgressEvent("18 runs scheduled", scheduled=SUITE))
    assert on_screen(stream.getvalue()).startswith("eval-agent: 0/18 runs")
    columns[0] = 40
    display(ProgressEvent("started", SUITE[0], "running"))
    assert len(on_screen(stream.getvalue())) <= 39
    display.close()


def test_the_clock_ticks_without_events_and_nothing_is_written_after_close() -> None:
    stream = Terminal()
    display = Bar(stream, "eval-agent", width=lambda: 80, tick_s=0.05)
    display(ProgressEvent("packing the candidate archives", phase="packing"))
    first = on_screen(stream.getvalue())
    deadline = time.monotonic() + 5
    while on_screen(stream.getvalue()) == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "· 1s ·" in on_screen(stream.getvalue()) and "· 0s ·" in first
    display.close()
    assert not any(t.name == "progress-clock" for t in threading.enumerate())
    closed = stream.getvalue()
    assert closed.endswith("\n")
    time.sleep(0.2)
    display(ProgressEvent("late", RUNS[0], "running"))
    assert stream.getvalue() == closed
    display.say("the report: report.html")  # the end's lines are still said, on their own
    assert stream.getvalue() == closed + "eval-agent: the report: report.html\n"


def test_lines_start_with_the_utc_time_and_carry_each_event_whole() -> None:
    stream = io.StringIO()
    start = datetime(2026, 12, 3, 16, 30, 5, 250_000, tzinfo=UTC)
    times = iter(start + timedelta(seconds=i) for i in range(100))
    display = Lines(stream, "eval-agent", now=lambda: next(times))
    for event in events():
        display(event)
    display.say("the report: report.html")
    display.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "2026-12-03T16:30:05Z eval-agent: packing the candidate archives"
    assert lines[1] == "2026-12-03T16:30:06Z eval-agent: packing the candidate archives: done in 3s"
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ eval-agent: ", line) for line in lines)
    assert [line.split(" ", 1)[1] for line in lines[:-1]] == [
        f"eval-agent: {e.message}" for e in events()
    ]


def test_none_shows_notices_only_and_auto_follows_the_terminal() -> None:
    stream = io.StringIO()
    display = make_display("none", stream, "eval-agent")
    for event in events():
        display(event)
    display.say("not-run: config: runner.json: no such file")
    assert stream.getvalue() == "eval-agent: not-run: config: runner.json: no such file\n"
    chosen = make_display("auto", Terminal(), "x")
    assert type(chosen) is Bar
    chosen.close()
    assert type(make_display("auto", io.StringIO(), "x")) is Lines
    assert type(display) is Display


class Gone(Terminal):
    """A terminal that went away after its first line."""

    def write(self, text: str) -> int:
        if self.getvalue():
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


def test_a_terminal_that_goes_away_stops_the_clock_quietly() -> None:
    stream = Gone()
    display = Bar(stream, "eval-agent", width=lambda: 80, tick_s=0.02)
    display(ProgressEvent("packing the candidate archives", phase="packing"))
    time.sleep(1.1)  # the ticker's redraw fails; a failure would be raised in its thread
    assert not any(t.name == "progress-clock" for t in threading.enumerate())
    with pytest.raises(BrokenPipeError):  # its last line has nowhere to go either
        display.close()
