"""A container's own wait for a CPU, and the rule that calls a runner's timeout starved.

The meter sums each thread's counters by their growth between readings (a thread
that ends loses only its last interval, a reused id counts afresh) and keeps the
run's last part apart (its last half when short, without the start); the /proc
reader finds the container's threads in its cgroup and never takes threads it
cannot read for idle ones; a runner is starved only when the host was crowded
and its own threads were kept waiting.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.engine.docker_engine import ProcThreadClocks
from agent_eval.engine.pressure import starved_runner
from agent_eval.engine.run_queue import RunQueue, RunQueueMeter, ThreadTimes

S = 1_000_000_000


def times(on_cpu_s: float, waiting_s: float) -> ThreadTimes:
    return ThreadTimes(round(on_cpu_s * S), round(waiting_s * S))


def test_the_meter_sums_each_threads_growth_and_keeps_what_an_ended_thread_had() -> None:
    meter = RunQueueMeter(100.0, last_part_s=60)
    assert meter.figures() is None
    meter.add(101.0, {1: times(0.5, 0.2)})
    meter.add(102.0, {1: times(1.0, 0.7), 2: times(0.3, 0.3)})
    # Thread 2 ended; thread 1 goes on; id 3 is new.
    meter.add(103.0, {1: times(1.5, 1.0), 3: times(0.1, 0.0)})
    got = meter.figures()
    assert got is not None
    assert (got.seconds, round(got.on_cpu_s, 9), got.waiting_s) == (3.0, 1.9, 1.3)
    # A run shorter than twice the last part: its last half, from the reading before it
    # (at 101 s: the start's 0.2 s of waiting stays out).
    part = (got.last_part_s, round(got.last_part_on_cpu_s, 9), round(got.last_part_waiting_s, 9))
    assert part == (2.0, 1.4, 1.1)


def test_a_counter_that_went_down_is_a_new_thread_under_a_reused_id() -> None:
    meter = RunQueueMeter(0.0)
    meter.add(1.0, {7: times(5.0, 5.0)})
    meter.add(2.0, {7: times(0.5, 0.25)})
    got = meter.figures()
    assert got is not None and (got.on_cpu_s, got.waiting_s) == (5.5, 5.25)


def test_the_last_part_counts_from_the_last_reading_before_it_and_unreadable_ones_are_skipped() -> (
    None
):
    meter = RunQueueMeter(0.0, last_part_s=10)
    # Waiting hard for 20 s, then asleep for 15 s (a hang): the last part sees the hang.
    for t in range(1, 21):
        meter.add(float(t), {1: times(0.1 * t, 0.9 * t)})
    for t in range(21, 36):
        meter.add(float(t), None if t % 2 else {1: times(2.0, 18.0)})
    got = meter.figures()
    assert got is not None
    assert got.seconds == 34.0 and got.waiting_s == pytest.approx(18.0)
    assert got.last_part_s == 10.0 and got.last_part_waiting_s == 0.0


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_proc_reader_finds_the_threads_in_the_containers_cgroup(tmp_path: Path) -> None:
    cid = "c" * 64
    cgroups, proc = tmp_path / "cgroup", tmp_path / "proc"
    write(cgroups / f"cpuacct/docker/{cid}/tasks", "11\n12\n13\n")
    write(proc / "11/schedstat", "2000000000 500000000 40\n")
    write(proc / "12/schedstat", "1 2 3\n")  # 13 ended since the list was read
    clocks = ProcThreadClocks(cgroups, proc)
    assert clocks.read(cid) == {11: ThreadTimes(2 * S, S // 2), 12: ThreadTimes(1, 2)}
    assert clocks.read("d" * 64) is None  # no cgroup of it here


def test_threads_listed_but_none_readable_are_not_measured_never_idle(tmp_path: Path) -> None:
    """Another pid namespace lists ids this process cannot open: not a sleeping runner."""
    cid = "e" * 64
    write(tmp_path / f"cgroup/docker/{cid}/cgroup.threads", "0\n0\n")
    assert ProcThreadClocks(tmp_path / "cgroup", tmp_path / "proc").read(cid) is None
    write(tmp_path / f"cgroup/docker/{cid}/cgroup.threads", "")
    assert ProcThreadClocks(tmp_path / "cgroup", tmp_path / "proc").read(cid) == {}


def queue(part_s: float, waiting_s: float, on_cpu_s: float) -> RunQueue:
    return RunQueue(
        seconds=600.0,
        on_cpu_s=on_cpu_s,
        waiting_s=waiting_s,
        last_part_s=part_s,
        last_part_on_cpu_s=on_cpu_s,
        last_part_waiting_s=waiting_s,
    )


HUNG = queue(60.0, waiting_s=0.02, on_cpu_s=0.05)
"""Asleep on a model that never answers: next to no CPU, next to no wait."""
KEPT_WAITING = queue(60.0, waiting_s=40.0, on_cpu_s=20.0)
"""One busy thread that got a third of a CPU."""
OWN_QUOTA = queue(60.0, waiting_s=60.0, on_cpu_s=58.0)
"""Two busy threads on a one-CPU quota: throttled by its own limit."""


@pytest.mark.parametrize(
    ("pressure", "measured", "expected"),
    [
        (0.97, HUNG, (False, "run-queue")),
        (0.97, KEPT_WAITING, (True, "run-queue")),
        (0.97, OWN_QUOTA, (False, "run-queue")),
        (0.10, KEPT_WAITING, (False, "run-queue")),
        (0.10, HUNG, (False, "run-queue")),
        (0.97, None, (True, "host-pressure")),
        (0.10, None, (False, "host-pressure")),
        (None, None, (False, "host-pressure")),
    ],
    ids=[
        "hung-crowded",
        "waiting-crowded",
        "own-quota-crowded",
        "waiting-quiet",
        "hung-quiet",
        "unmeasured-crowded",
        "unmeasured-quiet",
        "unmeasured-no-psi",
    ],
)
def test_a_timeout_is_starved_only_when_the_runner_itself_was_kept_waiting(
    pressure: float | None, measured: RunQueue | None, expected: tuple[bool, str]
) -> None:
    got = starved_runner(timed_out=True, host_pressure=pressure, run_queue=measured, cpus=1.0)
    assert got == expected


def test_a_runner_that_ended_in_time_is_never_starved() -> None:
    got = starved_runner(timed_out=False, host_pressure=1.0, run_queue=KEPT_WAITING, cpus=1.0)
    assert got == (False, None)
