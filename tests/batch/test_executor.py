"""The schedule through its executor boundary: where runs execute is the executor's, what a
run's record means for the batch is the schedule's.

A node lost mid-batch costs only the runs it held and the batch goes on with
the nodes left, ending ``infrastructure-failure``; with no node left the runs
not started are recorded as such; any other infrastructure failure from an
executor stops the batch as on one machine; an executor that cannot be made
still closes the receipt."""

from __future__ import annotations

import threading
from collections.abc import Collection
from concurrent.futures import Future
from pathlib import Path

from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.schedule import Schedule, run_schedule
from agent_eval.models import RunRecord
from tests.batch.test_schedule import FakeRunner, FakeVerifier, plan, saved, writes


class NodeExecutor:
    """Two 'nodes' of one slot each: runs on the local executor, except that the runs in
    *lost_runs* come back as their node lost (and that node takes no more runs)."""

    def __init__(
        self, schedule: Schedule, lost_runs: set[str], *, other_failure: bool = False
    ) -> None:
        self.local = on_this_engine(FakeRunner(writes("GOOD")), FakeVerifier())(schedule)
        self.schedule = schedule
        self.lost_runs = lost_runs
        self.other_failure = other_failure
        self.alive = 2
        self.submitted: list[str] = []
        self.lock = threading.Lock()
        self.gone: str | None = None
        self.held: set[str] = set()
        """Runs that never come back by themselves; handing one out loses the executor."""

    def slots(self) -> int:
        return self.alive

    def submit(self, run_id: str) -> Future[RunRecord]:
        self.submitted.append(run_id)
        if run_id in self.held:
            self.gone = "the cluster's head at 127.0.0.1:1 has not answered for 15 s"
            return Future()
        if run_id not in self.lost_runs:
            return self.local.submit(run_id)
        future: Future[RunRecord] = Future()
        if self.other_failure:
            future.set_result(self.schedule.failed(run_id, "node n1 sent a changed file"))
        else:
            with self.lock:
                self.alive -= 1
            record = self.schedule.failed(run_id, "node n1 was lost", node_lost=True)
            future.set_result(record)
        return future

    def rule_stop(self) -> str | None:
        return None

    def lost(self) -> str | None:
        return self.gone

    def stop_everything(self, reason: str) -> list[str]:
        return self.local.stop_everything(reason)

    def unfinished(self, run_id: str, reason: str) -> RunRecord:
        return self.local.unfinished(run_id, reason)

    def shutdown(self, *, wait: bool) -> None:
        self.local.shutdown(wait=wait)

    def settle(self, runs: Collection[Future[RunRecord]], timeout_s: float) -> bool:
        return self.local.settle(runs, timeout_s)


def test_a_lost_node_costs_only_its_run_and_the_others_go_on(tmp_path: Path) -> None:
    made: list[NodeExecutor] = []

    def executor(schedule: Schedule) -> NodeExecutor:
        made.append(NodeExecutor(schedule, {"forms-2"}))
        return made[0]

    receipt = run_schedule(plan(tmp_path), executor)
    assert receipt.status == "infrastructure-failure"
    assert len(receipt.runs) == 18 and receipt.finalSuccesses == 17
    (lost,) = [r for r in receipt.runs if not r.finalSuccess]
    assert lost.runId == "forms-2"
    assert (lost.attempts[0].infrastructureStatus, lost.attempts[0].infrastructureKind) == (
        "failed",
        "node",
    )
    assert receipt.reasons == [
        "infrastructure failure in forms-2: the node running it was lost; the other runs went on"
    ]
    assert made[0].submitted == [r.runId for r in receipt.runs]
    assert saved(tmp_path) == receipt


def test_with_no_node_left_the_runs_not_started_are_recorded_as_such(tmp_path: Path) -> None:
    first_two = {"core-validation-1", "storage-hash-1"}  # both nodes' first runs

    def executor(schedule: Schedule) -> NodeExecutor:
        return NodeExecutor(schedule, first_two)

    receipt = run_schedule(plan(tmp_path), executor)
    assert receipt.status == "infrastructure-failure"
    not_started = [r for r in receipt.runs if not r.attempts]
    assert len(receipt.runs) == 18 and len(not_started) == 16
    assert receipt.reasons[-1].startswith("no node is left to run them; 16 run(s) not started: ")


def test_an_executor_that_can_reach_nothing_more_stops_the_batch_and_books_its_runs(
    tmp_path: Path,
) -> None:
    """A cluster whose head is gone: what is in flight cannot come back through it, and
    nothing more starts; the receipt closes naming why, before the cluster ends the driver."""
    made: list[NodeExecutor] = []

    def executor(schedule: Schedule) -> NodeExecutor:
        made.append(NodeExecutor(schedule, set()))
        made[0].held = {"storage-hash-1"}
        return made[0]

    receipt = run_schedule(plan(tmp_path), executor, grace_s=0.2)
    assert receipt.status == "infrastructure-failure"
    assert receipt.reasons[0] == (
        "the cluster's head at 127.0.0.1:1 has not answered for 15 s; the batch stopped"
    )
    held = next(r for r in receipt.runs if r.runId == "storage-hash-1")
    assert not held.finalSuccess
    assert held.attempts[-1].infrastructureKind == "stopped"
    # Nothing is started once it is lost; what was started is booked once.
    assert made[0].submitted.index("storage-hash-1") >= len(made[0].submitted) - 2
    assert sorted(r.runId for r in receipt.runs) == sorted(set(made[0].submitted))
    assert saved(tmp_path) == receipt


def test_any_other_failure_an_executor_reports_stops_the_batch(tmp_path: Path) -> None:
    def executor(schedule: Schedule) -> NodeExecutor:
        return NodeExecutor(schedule, {"storage-hash-1"}, other_failure=True)

    receipt = run_schedule(
        plan(tmp_path, slots=1), executor,
    )  # fmt: skip
    assert receipt.status == "infrastructure-failure"
    assert receipt.reasons == [
        "the engine failed: node n1 sent a changed file (last in storage-hash-1); the batch stopped"
    ]
    assert len(receipt.runs) < 18


def test_an_executor_that_cannot_be_made_still_closes_the_receipt(tmp_path: Path) -> None:
    def executor(schedule: Schedule) -> NodeExecutor:
        raise RuntimeError("no cluster")

    receipt = run_schedule(plan(tmp_path), executor)
    assert (receipt.status, receipt.runs) == ("infrastructure-failure", [])
    assert receipt.reasons == ["the harness failed: RuntimeError: no cluster"]
    assert saved(tmp_path).status == "infrastructure-failure"
