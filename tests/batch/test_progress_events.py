"""What a batch tells its watcher: each preparing phase's start and end, each run's end in words.

Invariants: every phase before the first run is told when it starts and when
it ends, with how long it took, before the schedule's first event (and the
one a failure cut short ends as stopped); a repair's events carry its own
state; each run's end says its duration and its outcome in words taken from
its attempt records (passed on first attempt, passed on repair, or failed
with the reason: timeout, assertion failed, no submission, unsafe, analysis
findings, infrastructure, ...), with infrastructure before safety before
the last attempt's verdict; every failure category has its words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.ports import RunnerOutcome
from agent_eval.batch.progress import (
    FAILURE_WORDS,
    PhaseSteps,
    ProgressEvent,
    run_outcome,
)
from agent_eval.batch.run import run_batch
from agent_eval.batch.schedule import run_schedule
from agent_eval.engine.fake import Outcome
from agent_eval.models import FailureCategory, RunnerRequest, RunRecord
from tests.batch.test_run import Fixture, PassingVerifier, install_consumer
from tests.batch.test_schedule import FakeRunner, FakeVerifier, plan, reply
from tests.evidence_builders import attempt, run


def record(run_id: str, attempts: list[dict[str, Any]]) -> RunRecord:
    return RunRecord.model_validate(run(run_id, attempts))


def failed(run_id: str, number: int, category: str, **changes: Any) -> dict[str, Any]:
    data = attempt(run_id, number, success=False)
    return {**data, "failureCategory": category, **changes}


def test_every_failure_category_has_words() -> None:
    assert set(FAILURE_WORDS) == set(get_args(FailureCategory))
    words = {FAILURE_WORDS[c] for c in ("timeout", "behaviour", "no-submission", "safety")}
    assert words == {"timeout", "assertion failed", "no submission", "unsafe"}
    assert FAILURE_WORDS["type-check"].startswith("analysis findings")


def test_a_run_ends_in_words_from_its_attempt_records() -> None:
    first = record("forms-1", [attempt("forms-1")])
    repaired = record("forms-2", [attempt("forms-2", success=False), attempt("forms-2", 2)])
    timed_out = record("forms-3", [failed("forms-3", 1, "timeout")])
    analysed = record("forms-3", [failed("forms-3", 1, "type-check")])
    nothing = record("forms-3", [attempt("forms-3", success=False, submitted=False)])
    assert run_outcome(first) == ("passed", "passed on first attempt")
    assert run_outcome(repaired) == ("passed", "passed on repair (attempt 1: assertion failed)")
    assert run_outcome(timed_out) == ("failed", "failed: timeout")
    assert run_outcome(analysed) == ("failed", "failed: analysis findings (type check)")
    assert run_outcome(nothing) == ("failed", "failed: no submission")


def test_infrastructure_comes_before_safety_and_safety_before_the_last_verdict() -> None:
    unsafe = record("forms-1", [attempt("forms-1", success=False, safe=False)])
    assert run_outcome(unsafe) == ("unsafe", "failed: unsafe")
    broken = failed(
        "forms-1", 1, "infrastructure", infrastructureStatus="failed", infrastructureKind="engine"
    )
    assert run_outcome(record("forms-1", [broken])) == ("infrastructure", "failed: infrastructure")
    # An attempt cannot be both; the run's second attempt can be the infrastructure's.
    unsafe_then_broken = record(
        "forms-1",
        [attempt("forms-1", success=False, safe=False), {**broken, "attempt": 2, **_repair()}],
    )
    assert run_outcome(unsafe_then_broken)[0] == "infrastructure"


def _repair() -> dict[str, Any]:
    return {"repairFeedback": {"schemaVersion": 1, "failedAssertionIds": ["x"], "diagnostics": []}}


def test_the_steps_end_each_phase_with_its_duration_and_a_failure_as_stopped() -> None:
    seen: list[ProgressEvent] = []
    clock = iter([0.0, 3.0, 3.0, 70.5])
    steps = PhaseSteps(seen.append, monotonic=lambda: next(clock))
    try:
        with steps:
            steps.start("packing", "packing the candidate archives")
            steps.start("consumer", "preparing the consumer")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert [(e.message, e.phase, e.seconds) for e in seen] == [
        ("packing the candidate archives", "packing", None),
        ("packing the candidate archives: done in 3s", "packing", 3.0),
        ("preparing the consumer", "consumer", None),
        ("preparing the consumer: stopped after 1m08s", "consumer", 67.5),
    ]


def test_a_batch_tells_every_preparing_phase_before_its_first_run(tmp_path: Path) -> None:
    batch = Fixture(tmp_path)
    seen: list[ProgressEvent] = []
    batch.engine.script(Outcome(on_start=install_consumer))  # the consumer, then the runners
    outcome = run_batch(
        batch.config,
        batch.project,
        verifier_factory=lambda context: PassingVerifier(),
        connect=lambda _path: batch.engine,
        environ={},
        progress=seen.append,
    )
    assert outcome.status == "completed"
    scheduled = next(i for i, e in enumerate(seen) if e.scheduled)
    phases = [(e.phase, e.seconds is not None) for e in seen[:scheduled]]
    assert phases == [
        (phase, end)
        for phase in ("preflight", "packing", "consumer", "verifier")
        for end in (False, True)
    ]
    assert all(
        e.message.startswith(seen[i - 1].message + ": done in ")
        for i, e in enumerate(seen[:scheduled])
        if e.seconds is not None
    )
    ends = [e for e in seen if e.tally is not None]
    assert len(ends) == 18
    assert all(e.message.startswith(f"{e.run_id} passed on first attempt (took ") for e in ends)


def test_a_preflight_that_fails_ends_its_phase_as_stopped(tmp_path: Path) -> None:
    batch = Fixture(tmp_path)
    batch.config.write_text("{not json")
    seen: list[ProgressEvent] = []
    run_batch(
        batch.config,
        batch.project,
        verifier_factory=lambda context: PassingVerifier(),
        connect=lambda _path: batch.engine,
        environ={},
        progress=seen.append,
    )
    assert [e.phase for e in seen] == ["preflight", "preflight"]
    assert "stopped after" in seen[-1].message


def test_a_repair_has_its_own_state_and_each_runs_end_says_its_outcome(tmp_path: Path) -> None:
    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        text = {"forms-1": "GOOD", "forms-2": "BAD", "forms-3": "UNSAFE"}.get(request.runId)
        if text is None:
            return RunnerOutcome(b"", False, True, None)  # a timeout
        if request.runId == "forms-2" and request.attempt == 2:
            text = "GOOD"
        (workspace / "solution.py").write_text(text)
        return reply(request)

    seen: list[ProgressEvent] = []
    run_ids = ["forms-1", "forms-2", "forms-3", "storage-hash-1"]
    run_schedule(
        plan(tmp_path, run_ids=run_ids, slots=1, progress=seen.append),
        on_this_engine(FakeRunner(script), FakeVerifier()),
    )
    states = [(e.run_id, e.state) for e in seen if e.run_id == "forms-2"]
    assert states == [
        ("forms-2", "running"),
        ("forms-2", "verifying"),
        ("forms-2", "repairing"),
        ("forms-2", "repairing"),
        ("forms-2", "passed"),
    ]
    ends = {e.run_id: e for e in seen if e.tally is not None}
    assert ends["forms-1"].message.startswith("forms-1 passed on first attempt (took 0s); 1/4")
    assert ends["forms-2"].message.startswith("forms-2 passed on repair (attempt 1: ")
    assert ends["forms-3"].state == "unsafe"
    assert ends["forms-3"].message.startswith("forms-3 failed: unsafe (took ")
    assert ends["storage-hash-1"].message.startswith("storage-hash-1 failed: timeout (took ")
    assert ends["storage-hash-1"].message.endswith("4/4 runs done, 1 first / 2 final successes")
