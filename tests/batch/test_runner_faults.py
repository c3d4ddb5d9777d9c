"""What the machine and the engine do to a runner is never charged to the agent as its own.

An engine that could not be reached while the runner ran may have lost its output: unless
the runner still left a completed response, the attempt is the infrastructure's. A runner
that ran out of time while the host's CPU was crowded is flagged as starved, with the
figures and what to do, beside its timeout. The host's CPU pressure over an interval is
the growth of the kernel's counter over the interval's length.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.ports import RunnerOutcome
from agent_eval.batch.schedule import run_schedule
from agent_eval.engine.pressure import PressureWindow, cpu_pressure_total_us
from agent_eval.models import RunnerRequest, RunnerResources
from tests.batch.test_schedule import FakeRunner, FakeVerifier, plan, reply

RESOURCES = RunnerResources(memoryLimitBytes=1 << 30, cpus=1.0, pidsLimit=512, tmpBytes=1 << 20)


def test_a_runner_whose_output_the_engine_may_have_lost_is_the_infrastructures(
    tmp_path: Path,
) -> None:
    def lost(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return RunnerOutcome(b"", False, False, 0, engine_lost=True)

    receipt = run_schedule(
        plan(tmp_path, slots=1, retry_budget=0), on_this_engine(FakeRunner(lost), FakeVerifier())
    )
    first = receipt.runs[0].attempts[0]
    assert (first.failureCategory, first.infrastructureKind) == ("infrastructure", "engine")
    assert "output may have been lost with the engine" in first.diagnostics[0].message
    assert receipt.status == "infrastructure-failure" and len(receipt.runs) == 1


def test_a_completed_response_that_came_through_an_engine_outage_is_graded(
    tmp_path: Path,
) -> None:
    def through(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        (workspace / "solution.py").write_text("GOOD")
        return dataclasses.replace(reply(request), engine_lost=True)

    receipt = run_schedule(plan(tmp_path), on_this_engine(FakeRunner(through), FakeVerifier()))
    assert (receipt.status, receipt.finalSuccesses) == ("completed", 18)


def timed_out(resources: RunnerResources) -> FakeRunner:
    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return RunnerOutcome(b"", False, True, 137, resources=resources)

    return FakeRunner(script)


def test_a_runner_starved_on_a_crowded_machine_is_the_infrastructures_and_tried_again(
    tmp_path: Path,
) -> None:
    starved = RESOURCES.model_copy(
        update={"cpuSeconds": 3.2, "wallSeconds": 600.0, "hostCpuPressure": 0.93, "starved": True}
    )
    runner = timed_out(starved)
    receipt = run_schedule(
        plan(tmp_path, slots=1, retry_budget=2), on_this_engine(runner, FakeVerifier())
    )
    first = receipt.runs[0].attempts[0]
    # Never charged to the agent: the machine's failure, tried again in fresh containers.
    assert (first.failureCategory, first.infrastructureKind) == ("infrastructure", "starved")
    assert first.tries == 3 and [t.kind for t in first.infrastructureTries] == ["starved"] * 2
    assert len(runner.requests) == 3 and len(receipt.runs) == 1
    assert receipt.reasons[0].startswith(
        "the machine (a starved runner) failed 3 times: the machine starved the runner"
    )
    assert first.resources is not None and first.resources.starved
    said = [d.message for d in first.diagnostics]
    assert any(
        "starved the runner" in m and "93 %" in m and "3.2 s of CPU" in m and "concurrency" in m
        for m in said
    ), said


def test_a_runner_that_timed_out_on_a_quiet_machine_is_only_slow(tmp_path: Path) -> None:
    quiet = RESOURCES.model_copy(
        update={"cpuSeconds": 590.0, "wallSeconds": 600.0, "hostCpuPressure": 0.05}
    )
    receipt = run_schedule(
        plan(tmp_path, slots=1), on_this_engine(timed_out(quiet), FakeVerifier())
    )
    first = receipt.runs[0].attempts[0]
    assert first.failureCategory == "timeout"
    assert not any("starved" in d.message for d in first.diagnostics)


def test_cpu_pressure_is_the_counters_growth_over_the_interval(tmp_path: Path) -> None:
    counter = tmp_path / "cpu"
    counter.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n")
    window = PressureWindow.open(counter)
    counter.write_text(
        "some avg10=80.00 avg60=0.00 avg300=0.00 total=4000000\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert window.share(4.0, counter) == 0.75
    assert window.share(1.0, counter) == 1.0  # bounded: never above the whole interval
    assert PressureWindow.open(tmp_path / "absent").share(4.0, counter) is None
    assert cpu_pressure_total_us(tmp_path / "absent") is None


def test_recent_pressure_is_said_in_words_or_said_to_be_unreported(tmp_path: Path) -> None:
    from agent_eval.engine.pressure import recent_cpu_pressure

    counter = tmp_path / "cpu"
    counter.write_text("some avg10=80.00 avg60=71.25 avg300=60.00 total=4000000\n")
    assert recent_cpu_pressure(counter) == "71.25 % over the last minute"
    assert recent_cpu_pressure(tmp_path / "absent") == "not reported by the kernel"
