"""The bar on a real terminal: tmux runs the real display, and its screen is read back.

Invariants, at 80 and 160 columns: the screen holds exactly one progress line,
redrawn in place (never stacked copies); its clock advances between two
captures a bit over a second apart with no event in between, during a
preparing phase and during the schedule; no line wraps; finished phases and
notices stay on lines of their own above it; after close the bar is left on
its line once and nothing more is written. Each tmux server is the test's
own (its own socket under ``tmp_path``), with no configuration read, and is
stopped at the end; every wait is bounded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import in_ci

SCRIPT = Path(__file__).with_name("progress_script.py")
WAIT_S = 20.0


class Pane:
    """One tmux session of a size, on a server of the test's own."""

    def __init__(self, tmp_path: Path, width: int) -> None:
        self.dir, self.width = tmp_path, width
        self.socket = str(tmp_path / "tmux.sock")
        command = f"{sys.executable} {SCRIPT} {tmp_path}"
        self.tmux(*("new-session", "-d", "-s", "progress", "-x", str(width), "-y", "24", command))

    def tmux(self, *args: str) -> str:
        environment = {k: v for k, v in os.environ.items() if k != "TMUX"}
        done = subprocess.run(
            ["tmux", "-f", os.devnull, "-S", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=True,
            env=environment,
        )
        return done.stdout

    def screen(self, *, joined: bool = False) -> list[str]:
        """The visible lines (``joined``: lines the terminal wrapped are joined back)."""
        text = self.tmux("capture-pane", "-p", *(["-J"] if joined else []), "-t", "progress")
        return text.rstrip("\n").split("\n")

    def reach(self, stage: str) -> None:
        """Wait (bounded) until the script has reached *stage*."""
        deadline = time.monotonic() + WAIT_S
        while not (self.dir / stage).exists():
            assert time.monotonic() < deadline, f"the script never reached {stage}"
            time.sleep(0.05)
        time.sleep(0.3)  # its last redraw reaches the screen

    def go(self, stage: str) -> None:
        (self.dir / f"go-{stage}").touch()

    def close(self) -> None:
        for stage in ("schedule", "close", "exit"):
            self.go(stage)
        self.tmux("kill-server")


@pytest.fixture(params=[80, 160], ids=["80-columns", "160-columns"])
def pane(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pane]:
    if shutil.which("tmux") is None:
        message = "tmux is missing; run scripts/setup as root to install it"
        if in_ci():
            pytest.fail(f"terminal tests may not be skipped in CI: {message}", pytrace=False)
        pytest.skip(message)
    opened = Pane(tmp_path, request.param)
    try:
        yield opened
    finally:
        opened.close()


def _only(lines: list[str], pattern: str) -> re.Match[str]:
    found = [m for line in lines if (m := re.search(pattern, line))]
    assert len(found) == 1, lines
    return found[0]


def _unwrapped(pane: Pane) -> list[str]:
    # The bar is redrawn twice a second: two captures may straddle a redraw, which is no
    # wrap; a wrapped line differs in every pair of captures.
    for _ in range(5):
        lines = pane.screen()
        if lines == pane.screen(joined=True):
            break
    else:
        raise AssertionError(f"a line wrapped: {lines}")
    assert all(len(line) < pane.width for line in lines), lines
    return lines


def test_the_bar_is_one_line_redrawn_in_place_whose_clock_moves_without_events(
    pane: Pane,
) -> None:
    pane.reach("phase")
    before = _unwrapped(pane)
    assert "eval-agent: packing the candidate archives: done in 0s" in before
    timer = int(_only(before, r"preparing the consumer · (\d+)s").group(1))
    time.sleep(1.3)
    after = _unwrapped(pane)
    assert int(_only(after, r"preparing the consumer · (\d+)s").group(1)) > timer

    pane.go("schedule")
    pane.reach("schedule")
    before = _unwrapped(pane)
    bar = _only(before, r"/18 runs")
    assert before.index(bar.string) == max(i for i, line in enumerate(before) if line)
    assert "eval-agent: reaped a batch whose owner died" in before
    assert "eval-agent: preparing the consumer: done in" in before[1]
    assert not any("preparing the consumer ·" in line for line in before)  # no timer left
    assert "1 first / 1 final" in bar.string  # the counts stay at any of these widths
    if pane.width == 160:
        assert "core ✓↻· storage ⚠…·" in bar.string
        for mark in "✓↻⚠…":
            assert mark in bar.string
    elapsed = int(re.search(r"elapsed (\d+)s", bar.string).group(1))  # type: ignore[union-attr]
    time.sleep(1.3)
    after = _unwrapped(pane)
    moved = _only(after, r"/18 runs · .*elapsed (\d+)s")
    assert int(moved.group(1)) > elapsed

    pane.go("close")
    pane.reach("closed")
    closed = _unwrapped(pane)
    assert _only(closed, r"/18 runs")
    time.sleep(1.2)
    assert pane.screen() == closed  # the clock stopped with the display
