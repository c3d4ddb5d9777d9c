"""eval-agent's progress displays: in place on a terminal, one line per event in a log.

Invariants: ``lines`` writes every event as one prefixed line; the bar,
on a terminal, redraws one line with the runs done, the successes and one
mark per run grouped by task, keeps notices on lines of their own, and
ends on a fresh line; ``none`` shows notices only; ``auto`` is the bar on a
terminal and lines otherwise.
"""

from __future__ import annotations

import io

from agent_eval.batch.progress import ProgressEvent, Tally
from agent_eval.cli.progress import Bar, Display, Lines, make_display

RUNS = ("forms-1", "tools-1", "forms-2", "tools-2")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def events() -> list[ProgressEvent]:
    return [
        ProgressEvent("packing the candidate archives"),
        ProgressEvent("4 runs scheduled, 2 at a time", scheduled=RUNS),
        ProgressEvent("forms-1 attempt 1: runner started", "forms-1", "running"),
        ProgressEvent("tools-1 attempt 1: verifying", "tools-1", "verifying"),
        ProgressEvent(
            "1/4 runs done, 1 first / 1 final successes; forms-1: passed",
            "forms-1",
            "passed",
            Tally(1, 4, 1, 1),
        ),
        ProgressEvent(
            "2/4 runs done, 1 first / 1 final successes; tools-1: failed",
            "tools-1",
            "failed",
            Tally(2, 4, 1, 1),
        ),
    ]


def test_lines_write_every_event_as_one_line() -> None:
    stream = io.StringIO()
    display = Lines(stream, "eval-agent")
    for event in events():
        display(event)
    display.close()
    assert stream.getvalue().splitlines() == [f"eval-agent: {e.message}" for e in events()]


def test_the_bar_redraws_counts_and_marks_in_place_and_keeps_notices_apart() -> None:
    stream = Terminal()
    display = Bar(stream, "eval-agent")
    for event in events()[:4]:
        display(event)
    display.say("reaped a batch whose owner died")
    for event in events()[4:]:
        display(event)
    display.close()
    text = stream.getvalue()
    assert text.startswith("eval-agent: packing the candidate archives\n")
    assert "eval-agent: reaped a batch whose owner died\n" in text
    last = text.rstrip("\n").split("\r")[-1]
    assert "2/4" in last and "1 first / 1 final" in last
    assert "forms ✓·" in last and "tools ✗·" in last
    assert "\r\x1b[2K" in text and text.endswith("\n")
    assert "runner started" not in text  # run events are marks, not lines


def test_none_shows_notices_only_and_auto_follows_the_terminal() -> None:
    stream = io.StringIO()
    display = make_display("none", stream, "eval-agent")
    for event in events():
        display(event)
    display.say("not-run: config: runner.json: no such file")
    assert stream.getvalue() == "eval-agent: not-run: config: runner.json: no such file\n"
    assert type(make_display("auto", Terminal(), "x")) is Bar
    assert type(make_display("auto", io.StringIO(), "x")) is Lines
    assert type(display) is Display
