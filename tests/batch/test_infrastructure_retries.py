"""An attempt that ends in infrastructure is tried again in fresh containers, within bounds.

Every try's files are kept below ``attempt-<k>/try-<n>/`` and accounted for in the
recorded attempt, so the checker's evidence-integrity rule holds; the batch stops only
when the batch's budget of tries is spent, and its headline names the cause.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.ports import RunnerOutcome
from agent_eval.batch.schedule import run_schedule
from agent_eval.batch.signals import Stop
from agent_eval.models import RunnerRequest, TaskSpec
from agent_eval.verdict.qualification import _evidence_file_rules
from agent_eval.verification.protocol import Verification
from tests.batch.test_schedule import FakeRunner, FakeVerifier, plan, reply, saved, writes
from tests.paths import EXAMPLE_SUITE


def integrity(tmp_path: Path) -> list[str]:
    """The checker's evidence-integrity and log-integrity reasons (the fake verifier's
    analysis is not of the solution, so analysis-integrity is not asked here)."""
    reasons = _evidence_file_rules(saved(tmp_path), tmp_path / "batch")
    return [r for r in reasons if not r.startswith("analysis-integrity")]


class Hiccups(FakeVerifier):
    """Fails on the harness's side for the calls numbered in *failing* (from 0)."""

    def __init__(self, failing: set[int]) -> None:
        super().__init__()
        self.failing, self.calls = failing, 0

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        self.calls += 1
        if self.calls - 1 in self.failing:
            from agent_eval.errors import InfrastructureError

            raise InfrastructureError("the engine answered 500: Cannot kill container")
        return super().verify(task, solution_dir, run_id)


def test_one_engine_hiccup_is_tried_again_and_the_batch_completes(tmp_path: Path) -> None:
    runner = FakeRunner(writes("GOOD"))
    receipt = run_schedule(plan(tmp_path, slots=1), on_this_engine(runner, Hiccups({2})))
    assert (receipt.status, receipt.finalSuccesses, len(receipt.runs)) == ("completed", 18, 18)
    third = receipt.runs[2].attempts[0]
    assert third.success and third.tries == 2
    [kept] = third.infrastructureTries
    assert kept.kind == "verifier" and "Cannot kill container" in kept.reason
    assert "solution/solution.py" in kept.files
    folder = tmp_path / "batch" / "runs" / receipt.runs[2].runId / "attempt-1"
    assert (folder / "try-1" / "solution" / "solution.py").read_text() == "GOOD"
    assert len(runner.requests) == 19
    # Every kept file is accounted for: the checker finds nothing added or changed.
    assert integrity(tmp_path) == []


def test_the_batch_stops_when_its_budget_of_tries_is_spent_and_names_the_cause(
    tmp_path: Path,
) -> None:
    runner = FakeRunner(writes("BROKEN"))
    receipt = run_schedule(
        plan(tmp_path, slots=1, retry_budget=4), on_this_engine(runner, FakeVerifier())
    )
    assert receipt.status == "infrastructure-failure"
    # Two runs, three tries each (the first went on, the second spent the budget).
    assert len(receipt.runs) == 2 and len(runner.requests) == 6
    assert all(r.attempts[0].tries == 3 for r in receipt.runs)
    assert receipt.reasons[0] == (
        f"infrastructure failure in {receipt.runs[0].runId} after 3 tries (verifier: "
        "verifier container removal unconfirmed); the other runs went on"
    )
    assert receipt.reasons[1] == (
        "the verifier's harness failed 6 times: verifier container removal unconfirmed "
        f"(last in {receipt.runs[1].runId}); the batch stopped"
    )
    assert integrity(tmp_path) == []


def test_an_attempt_a_signal_cut_short_accounts_for_what_it_left(tmp_path: Path) -> None:
    """An honest stop is an incomplete batch, never a file added to the run directory."""

    class Signalled(FakeVerifier):
        calls = 0

        def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
            self.calls += 1
            if self.calls == 3:
                raise Stop(signal.SIGINT)
            return super().verify(task, solution_dir, run_id)

    final = run_schedule(
        plan(tmp_path, slots=1), on_this_engine(FakeRunner(writes("GOOD")), Signalled())
    )
    assert final.status == "interrupted"
    [cut] = final.runs[2].attempts
    assert (cut.failureCategory, cut.infrastructureKind) == ("infrastructure", "stopped")
    assert "solution/solution.py" in cut.leftFiles
    assert integrity(tmp_path) == []


class _StillEnding:
    """Run 1 is verified only once run 2's runner has started; then a signal stops the
    batch. Run 2's runner goes on for *ends_after_s* (a container still being removed)."""

    def __init__(self, ends_after_s: float) -> None:
        self.ends_after_s = ends_after_s
        self.started, self.ended = threading.Event(), threading.Event()
        self.runner = FakeRunner(self.script)

    def script(self, request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        (workspace / "solution.py").write_text("GOOD")
        if request.runId != "core-validation-1":
            self.started.set()
            time.sleep(self.ends_after_s)
            self.ended.set()
        return reply(request)

    def verifier(self) -> FakeVerifier:
        started = self.started

        class Signalled(FakeVerifier):
            def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
                assert started.wait(10)
                raise Stop(signal.SIGINT)

        return Signalled()


def test_a_run_the_stop_cut_short_is_given_its_moment_to_end_before_the_batch_cleans_up(
    tmp_path: Path,
) -> None:
    """Its container was killed, but its thread may still be removing it or writing into
    the work directory: the schedule returns (and the batch cleans up) once it ended."""
    runs = _StillEnding(ends_after_s=1.0)
    final = run_schedule(
        plan(tmp_path, slots=2), on_this_engine(runs.runner, runs.verifier()), grace_s=0.0
    )
    assert runs.ended.is_set()
    assert final.status == "interrupted" and len(final.runs) == 2
    assert saved(tmp_path) == final
    assert integrity(tmp_path) == []


def test_the_wait_for_a_run_cut_short_is_bounded(tmp_path: Path) -> None:
    """A thread that does not end (an engine that stopped answering) is not waited out:
    the cleanup then says what it could not remove, and the lease stays for the reaper."""
    runs = _StillEnding(ends_after_s=3.0)
    began = time.monotonic()
    final = run_schedule(
        plan(tmp_path, slots=2),
        on_this_engine(runs.runner, runs.verifier()),
        grace_s=0.0,
        settle_s=0.2,
    )
    assert time.monotonic() - began < 2.5 and not runs.ended.is_set()
    assert final.status == "interrupted"
    assert runs.ended.wait(10)  # it ends on its own, writing nothing into the evidence
    assert saved(tmp_path) == final
    assert integrity(tmp_path) == []


def test_the_checker_and_the_terminal_say_how_often_the_machine_failed_the_batch(
    tmp_path: Path,
) -> None:
    from agent_eval.models import RunnerResources
    from agent_eval.verdict.qualification import _success_rules, infrastructure_note

    starved = RunnerResources(
        memoryLimitBytes=1, cpus=1.0, pidsLimit=1, tmpBytes=1, cpuSeconds=2.3,
        wallSeconds=181.0, hostCpuPressure=0.97, starved=True,
    )  # fmt: skip

    def script(request: object, workspace: Path) -> RunnerOutcome:
        return RunnerOutcome(b"", False, True, 137, resources=starved)

    receipt = run_schedule(
        plan(tmp_path, slots=1, retry_budget=2), on_this_engine(FakeRunner(script), FakeVerifier())
    )
    note = infrastructure_note(receipt)
    assert note == (
        "infrastructure: 2 attempt tries were run again, 3 starved of CPU by the machine, "
        "1 run(s) ended in infrastructure, host CPU pressure up to 97 %; lower the batch's "
        "concurrency or use a quieter machine, then run the lost runs again"
    )
    suite = EXAMPLE_SUITE
    [final] = [r for r in _success_rules(receipt, suite) if r.startswith("final-successes")]
    assert "lost to infrastructure (not the agent's): " + receipt.runs[0].runId in final
    assert note in final


def test_an_attempt_booked_as_cut_short_writes_nothing_more(tmp_path: Path) -> None:
    """Its thread may go on (the cleanup removed its container, a second signal ended the
    wait): once the batch counted what it left, no later write reaches the run directory."""
    import time
    from datetime import UTC, datetime

    from agent_eval.batch.schedule import Schedule

    the_plan = plan(tmp_path)
    clock = lambda: datetime(2026, 12, 1, tzinfo=UTC)  # noqa: E731
    schedule = Schedule(the_plan, clock=clock, monotonic=time.monotonic, deadline=1e12)
    run_id = the_plan.run_ids[0]
    schedule.begin_attempt(run_id, 1)
    folder = schedule.evidence.attempt(run_id, 1).root
    folder.mkdir(parents=True)
    (folder / "runner.log").write_text("written before the stop\n")
    with schedule.evidence_writes(run_id, 1) as open_:
        assert open_
    cut = schedule.unfinished(run_id, "interrupted by the operator (Ctrl-C)")
    assert list(cut.attempts[0].leftFiles) == ["runner.log"]
    with schedule.evidence_writes(run_id, 1) as open_:
        assert not open_
    # Another run's attempt, not booked, writes as before.
    with schedule.evidence_writes(the_plan.run_ids[1], 1) as open_:
        assert open_


class _Outage:
    """A runner whose container calls fail on the engine; each try takes 20 s of the clock."""

    def __init__(self, failing: Callable[[int], bool]) -> None:
        self.now, self.failing, self.probes = 0.0, failing, 0
        self.runner = FakeRunner(self.script)

    def script(self, request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        self.now += 20.0
        if self.failing(len(self.runner.requests)):
            return RunnerOutcome(
                b"", False, False, None,
                "runner container: creating it: the connection to the engine failed "
                "(the engine stayed unreachable)",
            )  # fmt: skip
        (workspace / "solution.py").write_text("GOOD")
        return reply(request)

    def gone(self) -> str | None:
        self.probes += 1
        return "no engine socket at /run/engine.sock (No such file or directory)"


def test_an_engine_gone_for_good_stops_the_batch_before_its_budget_and_says_so(
    tmp_path: Path,
) -> None:
    """Three tries in a row over 30 s failed on the engine and it does not answer: the
    batch stops there, rather than wait out every try of its budget on a dead engine."""
    outage = _Outage(lambda _n: True)
    receipt = run_schedule(
        plan(tmp_path, slots=1, engine_problem=outage.gone),
        on_this_engine(outage.runner, FakeVerifier()),
        monotonic=lambda: outage.now,
    )
    assert receipt.status == "infrastructure-failure"
    assert len(outage.runner.requests) == 3 and outage.probes == 1
    first = receipt.runs[0]
    assert first.attempts[0].tries == 3 and first.attempts[0].infrastructureKind == "engine"
    assert receipt.reasons[0] == (
        "the engine is gone: no engine socket at /run/engine.sock (No such file or "
        "directory); 3 tries in a row over 40 s failed on it (last in "
        f"{first.runId}); the batch stopped"
    )
    assert all(not r.finalSuccess for r in receipt.runs)
    assert integrity(tmp_path) == []


def test_an_engine_that_fails_but_answers_or_recovers_in_between_is_tried_again(
    tmp_path: Path,
) -> None:
    """Gone needs all three: tries in a row, time, and no answer. A success in between
    starts the count again, and an engine that still answers its ping is never gone."""
    outage = _Outage(lambda n: n % 3 != 0)  # two failures, then a success, and again
    receipt = run_schedule(
        plan(tmp_path, slots=1, engine_problem=outage.gone, retry_budget=100),
        on_this_engine(outage.runner, FakeVerifier()),
        monotonic=lambda: outage.now,
    )
    assert (receipt.status, receipt.finalSuccesses) == ("completed", 18), receipt.reasons
    assert outage.probes == 0

    answering = _Outage(lambda _n: True)
    (tmp_path / "answers").mkdir()
    receipt = run_schedule(
        plan(tmp_path / "answers", slots=1, engine_problem=lambda: None, retry_budget=5),
        on_this_engine(answering.runner, FakeVerifier()),
        monotonic=lambda: answering.now,
    )
    # It stops only when its budget of tries is spent, as before.
    assert receipt.status == "infrastructure-failure"
    assert len(answering.runner.requests) == 3 + 3 + 2  # 5 tries run again, over 3 runs
    assert not any("gone" in r for r in receipt.reasons), receipt.reasons


class Swapper(FakeVerifier):
    """On its first call, swaps the run's work directory for a link to where it was moved
    outside (as a planted link would be), then fails on the harness's side."""

    def __init__(self, work_dir: Path, outside: Path) -> None:
        super().__init__()
        self.work_dir, self.outside, self.calls = work_dir, outside, 0

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        self.calls += 1
        if self.calls == 1:
            from agent_eval.errors import InfrastructureError

            (self.work_dir / run_id).rename(self.outside / run_id)
            (self.work_dir / run_id).symlink_to(self.outside / run_id, target_is_directory=True)
            (self.outside / run_id / "attempt-1" / "theirs.txt").write_text("not the harness's")
            raise InfrastructureError("the engine answered 500: Cannot kill container")
        return super().verify(task, solution_dir, run_id)


def test_a_workspace_behind_a_link_swapped_in_mid_attempt_is_neither_removed_nor_made_again(
    tmp_path: Path,
) -> None:
    work_dir = tmp_path / ".work" / "b" / "runs"
    outside = tmp_path / "outside"
    outside.mkdir()
    verifier = Swapper(work_dir, outside)
    receipt = run_schedule(
        plan(tmp_path, slots=1, work_dir=work_dir, work_anchor=tmp_path, run_ids=["forms-1"]),
        on_this_engine(FakeRunner(writes("GOOD")), verifier),
    )
    # The failed try's workspace, now behind the link, is left where it is; the next try
    # makes none through the link, and the harness says why it stopped.
    assert (outside / "forms-1" / "attempt-1" / "theirs.txt").is_file()
    assert [p.name for p in (outside / "forms-1").iterdir()] == ["attempt-1"]
    assert receipt.status == "infrastructure-failure"
    assert any("is a symbolic link" in r for r in receipt.reasons), receipt.reasons
