"""A host tool run with a time limit leaves no process of its group alive, however it ends.

The rule: after :func:`run_group` returns or raises (time limit, an exception in
the caller, a normal exit that left children running), no process of the
command's process group is alive. Each command here starts a tree of busy
children and grandchildren, writes their pids to a file, and the test then
reads each pid's state from ``/proc``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_eval.processes import run_group

# Its busy process trees would load a neighbour's timed run; it runs in the serial phase.
pytestmark = pytest.mark.serial

_TREE = textwrap.dedent(
    """
    import os, subprocess, sys, time
    depth, width, pids, mode, total = sys.argv[1:6]
    for _ in range(int(width) if int(depth) > 0 else 0):
        subprocess.Popen(
            [sys.executable, "-c", sys.argv[6], str(int(depth) - 1), width, pids, "wait", total,
             sys.argv[6]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    with open(pids, "a") as f:
        f.write(f"{os.getpid()}\\n")
    if mode == "exit":  # once the whole tree runs, the leader alone exits
        while len(open(pids).read().split()) < int(total):
            time.sleep(0.02)
        sys.exit(0)
    end = time.monotonic() + 600
    while time.monotonic() < end:  # busy, as the orphaned pip runner was
        pass
    """
)


def _state(pid: int) -> str | None:
    """The /proc state letter of *pid* (None: gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat.rpartition(")")[2].split()[0]


def _alive(pids: Iterator[int]) -> list[int]:
    deadline = time.monotonic() + 5  # SIGKILL is delivered at once; reaping by init may lag
    remaining = list(pids)
    while remaining and time.monotonic() < deadline:
        remaining = [p for p in remaining if _state(p) not in (None, "Z", "X")]
        if remaining:
            time.sleep(0.05)
    return remaining


def _tree(tmp: Path, depth: int, width: int, leader: str) -> tuple[list[str], Path]:
    pids = tmp / f"pids-{depth}-{width}-{leader}"
    pids.unlink(missing_ok=True)
    total = str(_size(depth, width))
    command = [sys.executable, "-c", _TREE, str(depth), str(width), str(pids), leader, total, _TREE]
    return command, pids


def _wait_for(pids: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if pids.exists():
            found = [int(line) for line in pids.read_text().split()]
            if len(found) >= count:
                return found
        time.sleep(0.05)
    raise AssertionError(f"the tree never started its {count} processes")


def _size(depth: int, width: int) -> int:
    return sum(width**level for level in range(depth + 1))


def test_a_command_over_its_time_limit_leaves_no_grandchild_running(tmp_path: Path) -> None:
    command, pids = _tree(tmp_path, depth=2, width=2, leader="wait")
    with pytest.raises(subprocess.TimeoutExpired):
        run_group(command, timeout=8)
    started = _wait_for(pids, _size(2, 2))
    assert _alive(iter(started)) == []


def test_children_a_command_left_running_when_it_exited_are_ended(tmp_path: Path) -> None:
    command, pids = _tree(tmp_path, depth=1, width=3, leader="exit")
    done = run_group(command, timeout=60)
    assert done.returncode == 0, done.stderr
    started = _wait_for(pids, _size(1, 3))
    assert _alive(iter(started)) == []


def test_an_exception_in_the_caller_while_it_waits_ends_the_group(tmp_path: Path) -> None:
    command, pids = _tree(tmp_path, depth=1, width=2, leader="wait")

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(3)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_group(command, timeout=120)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    started = _wait_for(pids, _size(1, 2))
    assert _alive(iter(started)) == []


@pytest.mark.slow
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(depth=st.integers(0, 2), width=st.integers(1, 2), leader=st.sampled_from(["wait", "exit"]))
def test_no_shape_of_process_tree_outlives_its_run(
    tmp_path: Path, depth: int, width: int, leader: str
) -> None:
    command, pids = _tree(tmp_path, depth, width, leader)
    if leader == "wait":
        with pytest.raises(subprocess.TimeoutExpired):
            run_group(command, timeout=6)
    else:
        run_group(command, timeout=60)
    started = _wait_for(pids, _size(depth, width))
    assert _alive(iter(started)) == []


def test_output_and_exit_status_are_those_of_the_command() -> None:
    done = run_group(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); exit(3)"],
        timeout=60,
        text=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
