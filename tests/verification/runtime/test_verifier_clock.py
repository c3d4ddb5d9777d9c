"""The solution's clock counts what the solution had, not what the machine took.

A fake /proc drives it: a busy process is measured by its CPU time, a sleeping
one by the wall clock, a starved one by neither its waiting nor the parent's.
Real processes check the readings against the kernel's own accounting.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_eval.verification.runtime.clock import (
    SolutionClock,
    backstop_s,
    namespace_pids,
    session_pids,
)

TICKS = os.sysconf("SC_CLK_TCK")
PARENT = 10


class FakeProc:
    """A /proc of a parent and solution processes whose figures a test sets."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.wall = 0.0
        self.set(PARENT, cpu=0.0, delay=0.0)

    def set(
        self, pid: int, *, cpu: float, delay: float, children: float = 0.0, state: str = "S"
    ) -> None:
        task = self.root / str(pid) / "task" / str(pid)
        task.mkdir(parents=True, exist_ok=True)
        ticks = round(cpu * TICKS)
        child_ticks = round(children * TICKS)
        # pid (comm) state ppid pgrp session ... utime stime cutime cstime
        fields = [
            state,
            "1",
            str(pid),
            str(pid),
            *["0"] * 7,
            str(ticks),
            "0",
            str(child_ticks),
            "0",
        ]
        (self.root / str(pid) / "stat").write_text(f"{pid} (py thon) " + " ".join(fields))
        (task / "schedstat").write_text(f"{int(cpu * 1e9)} {int(delay * 1e9)} 1\n")

    def clock(self, pids: list[int]) -> SolutionClock:
        return SolutionClock(
            lambda: pids, parent_pid=PARENT, proc_root=str(self.root), wall=lambda: self.wall
        )


@pytest.fixture
def proc(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path)


def test_a_busy_solution_is_measured_by_its_cpu_time(proc: FakeProc) -> None:
    proc.set(20, cpu=0.0, delay=0.0)
    clock = proc.clock([20])
    # 10 s of wall time on a crowded machine: 1 s of CPU, 9 s waiting for one.
    proc.wall, _ = 10.0, proc.set(20, cpu=1.0, delay=9.0)
    assert clock() == pytest.approx(1.0)
    assert clock.cpu_s == pytest.approx(1.0) and clock.waited_s == pytest.approx(9.0)


def test_time_the_kernel_held_every_solution_process_is_not_the_solutions(
    proc: FakeProc,
) -> None:
    """A child that waited 43 s for a CPU and 75 s in D (the mmap lock) did not take 119 s."""
    proc.set(20, cpu=0.0, delay=0.0, state="D")
    clock = proc.clock([20])
    proc.wall = 118.0
    proc.set(20, cpu=0.5, delay=43.0, state="D")
    assert clock() == pytest.approx(0.5) and clock.blocked_s == pytest.approx(75.0)
    proc.wall = 119.0
    proc.set(20, cpu=0.54, delay=43.0, state="R")
    assert clock() == pytest.approx(1.5)  # running again: the wall clock counts


def test_a_sleep_in_d_at_only_one_end_of_an_interval_is_still_counted(proc: FakeProc) -> None:
    proc.set(20, cpu=0.0, delay=0.0, state="S")
    proc.set(21, cpu=0.0, delay=0.0, state="D")
    clock = proc.clock([20, 21])
    proc.wall = 10.0
    proc.set(20, cpu=0.0, delay=0.0, state="D")
    assert clock() == pytest.approx(10.0)  # one process was not held: its own sleep


def test_a_sleeping_solution_is_measured_by_the_wall_clock(proc: FakeProc) -> None:
    proc.set(20, cpu=0.0, delay=0.0)
    clock = proc.clock([20])
    proc.wall = 30.0
    assert clock() == pytest.approx(30.0)


def test_many_busy_processes_count_all_their_cpu(proc: FakeProc) -> None:
    pids = [20, 21, 22, 23]
    for pid in pids:
        proc.set(pid, cpu=0.0, delay=0.0)
    clock = proc.clock(pids)
    proc.wall = 2.0
    for pid in pids:  # each ran half the time and waited for its siblings the other half
        proc.set(pid, cpu=1.0, delay=1.0)
    assert clock() == pytest.approx(4.0)


def test_time_the_solution_waits_for_the_parent_is_not_its_own(proc: FakeProc) -> None:
    proc.set(20, cpu=0.0, delay=0.0)
    clock = proc.clock([20])
    # The solution waits for an effect's answer while the parent waits 5 s for a CPU.
    proc.wall, _ = 6.0, proc.set(PARENT, cpu=0.5, delay=5.0)
    assert clock() == pytest.approx(0.5)


def test_time_the_zygote_spends_or_waits_forking_the_solution_is_not_its_own(
    proc: FakeProc,
) -> None:
    zygote = 1
    proc.set(zygote, cpu=0.0, delay=0.0)
    helped = SolutionClock(
        list, parent_pid=PARENT, helper_pids=(zygote,), proc_root=str(proc.root),
        wall=lambda: proc.wall,
    )  # fmt: skip
    alone = proc.clock([])
    # No solution process yet: the parent asked the zygote for one, and the zygote
    # waited 3 s for a CPU and spent 0.5 s forking it.
    proc.wall, _ = 4.0, proc.set(zygote, cpu=0.5, delay=3.0)
    assert helped() == pytest.approx(0.5)
    assert alone() == pytest.approx(4.0)


def test_the_clock_never_goes_back_when_processes_die(proc: FakeProc) -> None:
    proc.set(20, cpu=0.0, delay=0.0)
    pids = [20]
    clock = proc.clock(pids)
    proc.wall, _ = 1.0, proc.set(20, cpu=1.0, delay=0.0)
    first = clock()
    pids.clear()  # it died and was reaped
    proc.wall = 1.5
    assert clock() >= first


def test_a_new_scenario_starts_from_its_own_processes(proc: FakeProc) -> None:
    proc.set(20, cpu=0.0, delay=0.0)
    pids = [20]
    clock = proc.clock(pids)
    proc.wall, _ = 1.0, proc.set(20, cpu=1.0, delay=0.0)
    clock.forget()
    pids[:] = [30]
    proc.set(30, cpu=0.0, delay=0.0)
    before = clock()
    proc.wall, _ = 3.0, proc.set(30, cpu=0.2, delay=1.8)
    assert clock() - before == pytest.approx(0.2)


def test_the_backstop_is_generous_and_grows_with_the_limit() -> None:
    assert backstop_s(0.1) >= 60
    assert backstop_s(30) >= 20 * 30


def test_real_processes_are_found_and_measured() -> None:
    busy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt=time.process_time()\n"
            "while time.process_time()-t<0.4: pass\ntime.sleep(30)",
        ],
        start_new_session=True,
    )
    try:
        assert session_pids(busy.pid) == [busy.pid]
        assert busy.pid in namespace_pids()
        clock = SolutionClock(lambda: session_pids(busy.pid))
        deadline = time.monotonic() + 30
        while clock.cpu_s < 0.35 and time.monotonic() < deadline:
            clock()
            time.sleep(0.05)
        assert 0.35 <= clock.cpu_s < 5
    finally:
        busy.kill()
        busy.wait()
