"""A batch's progress, scripted: eval-agent's real display on the terminal this runs in.

Run as ``python progress_script.py DIR`` by a test that watches the terminal.
It goes through its stages one at a time: after each it touches a file in DIR
(``phase``, ``schedule``, ``closed``) and shows nothing new until the test
touches the next ``go-*`` file there. Every wait is bounded, so a test that
went away never leaves it behind for long.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from agent_eval.batch.progress import PhaseSteps, ProgressEvent, Tally
from agent_eval.cli.progress import make_display

TASKS = (
    "core-validation",
    "storage-hash",
    "forms",
    "tool-validation",
    "approval-boundary",
    "error-recovery",
)
RUNS = tuple(f"{task}-{n}" for task in TASKS for n in (1, 2, 3))
WAIT_S = 30.0


def _stage(directory: Path, reached: str, then: str) -> None:
    (directory / reached).touch()
    deadline = time.monotonic() + WAIT_S
    while not (directory / then).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    directory = Path(sys.argv[1])
    display = make_display("auto", sys.stderr, "eval-agent")
    steps = PhaseSteps(display)
    steps.start("packing", "packing the candidate archives")
    steps.start("consumer", "preparing the consumer")
    _stage(directory, "phase", "go-schedule")
    steps.end()
    display(ProgressEvent("18 runs scheduled, 2 at a time", scheduled=RUNS))
    display(ProgressEvent("started", RUNS[0], "running"))
    display(ProgressEvent("passed", RUNS[0], "passed", Tally(1, 18, 1, 1)))
    display(ProgressEvent("started", RUNS[1], "repairing"))
    display(ProgressEvent("unsafe", RUNS[3], "unsafe", Tally(2, 18, 1, 1)))
    display(ProgressEvent("started", RUNS[4], "verifying"))
    display.say("reaped a batch whose owner died")
    _stage(directory, "schedule", "go-close")
    display.close()
    _stage(directory, "closed", "go-exit")


if __name__ == "__main__":
    main()
