"""The schedule runs every scheduled run once, repairs only what the rules allow,
writes a truthful receipt after every run, and stops cleanly on a time budget,
an infrastructure failure or Ctrl-C. Runner and verifier are in-memory fakes here;
the container-backed ones are tested against a real engine."""

from __future__ import annotations

import errno
import json
import signal
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_eval.batch import receipt_book
from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.ports import RunnerOutcome
from agent_eval.batch.schedule import BatchPlan, ReceiptNotWritten, ScheduledTask, run_schedule
from agent_eval.batch.signals import Stop
from agent_eval.digests import sha256_bytes
from agent_eval.errors import InfrastructureError
from agent_eval.models import (
    Analysis,
    ModelIdentity,
    Receipt,
    RunnerIdentity,
    RunnerRequest,
    TaskSpec,
)
from agent_eval.models.behaviour import BehaviourResult
from agent_eval.verification.protocol import Verification
from tests.paths import EXAMPLE_SUITE

RUNNER = RunnerIdentity(name="scripted", version="1")
MODEL = ModelIdentity(id="m", settings={})
NOW = datetime(2026, 11, 30, tzinfo=UTC)

Script = Callable[[RunnerRequest, Path], RunnerOutcome]


def reply(request: RunnerRequest, status: str = "completed", **extra: Any) -> RunnerOutcome:
    body = {
        "schemaVersion": 1,
        "runId": request.runId,
        "taskId": request.taskId,
        "status": status,
        "runner": RUNNER.model_dump(),
        "model": MODEL.model_dump(),
        **extra,
    }
    return RunnerOutcome(json.dumps(body).encode(), False, False, 0)


def writes(content: str) -> Script:
    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        (workspace / "solution.py").write_text(content)
        return reply(request)

    return script


class FakeRunner:
    def __init__(self, script: Callable[[RunnerRequest, Path], RunnerOutcome]) -> None:
        self.script = script
        self.requests: list[RunnerRequest] = []
        self.environments: list[dict[str, str]] = []
        self.cancelled = False
        self.lock = threading.Lock()

    def run_attempt(
        self,
        request: RunnerRequest,
        workspace: Path,
        environment: Mapping[str, str] | None = None,
    ) -> RunnerOutcome:
        with self.lock:
            self.requests.append(request)
            self.environments.append(dict(environment or {}))
        return self.script(request, workspace)

    def cancel_all(self) -> None:
        self.cancelled = True


class FakeVerifier:
    """GOOD passes; BAD fails behaviour; UNSAFE violates safety; BROKEN breaks the verifier."""

    name = "fake"

    def __init__(self) -> None:
        self.cancelled = False

    def api_catalog(self) -> Mapping[str, Any]:
        return {}

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        text = (solution_dir / "solution.py").read_text()
        if "BROKEN" in text:
            raise InfrastructureError("verifier container removal unconfirmed")
        good, safe = "GOOD" in text, "UNSAFE" not in text
        analysis = Analysis.model_validate(
            {
                "schemaVersion": 1, "taskId": task.id, "solutionDigest": sha256_bytes(b"s"),
                "syntaxOk": True, "typeCheckOk": True, "contractOk": True, "integrationOk": True,
                "unsupportedApi": [], "unsupportedApiCount": 0, "hallucinatedApi": [],
                "hallucinatedApiCount": 0, "missingDependencies": [], "integration": [],
                "diagnostics": [], "mypyVersion": "1",
            }
        )  # fmt: skip
        behaviour = BehaviourResult.model_validate(
            {
                "schemaVersion": 1, "taskId": task.id, "needsReview": False, "error": None,
                "diagnostics": [] if good else [{"category": "behaviour", "message": "wrong"}],
                "assertions": [
                    {"id": "works", "passed": good, "observed": True, "safety": False},
                    {"id": "safe", "passed": safe, "observed": True, "safety": True},
                ],
            }
        )  # fmt: skip
        return Verification(analysis, analysis.model_dump_json().encode(), behaviour)

    def cancel_all(self) -> None:
        self.cancelled = True


def plan(tmp_path: Path, **changes: Any) -> BatchPlan:
    tasks = {
        t: ScheduledTask(
            spec=TaskSpec.model_validate(
                {
                    "schemaVersion": 1,
                    "id": t,
                    "title": t,
                    "allowedOutputPaths": ["solution.py"],
                    "allowedImports": ["appkit/*"],
                    "requiredPeers": [],
                    "assertionIds": ["works", "safe"],
                    "safetyAssertionIds": ["safe"],
                    "seedReferences": [],
                    "requiredIntegration": [],
                }
            ),
            prompt=f"Do {t}.",
            starter_dir=None,
        )
        for t in EXAMPLE_SUITE.taskIds
    }
    receipt = Receipt(
        schemaVersion=1, batchId="b", status="running", reasons=[], selfTest=True,
        createdAt=NOW, updatedAt=NOW, suiteDigest=None, evaluatorDigest=None,
        archivesDigest=None, consumerLockDigest=None, runner=RUNNER, model=MODEL,
        runnerImage=None, verifierImage=None, scheduledRuns=18, firstSuccesses=0,
        finalSuccesses=0, runs=[], reviewDecisions=[],
    )  # fmt: skip
    values: dict[str, Any] = {
        "batch_dir": tmp_path / "batch",
        "work_dir": tmp_path / "work",
        "run_ids": EXAMPLE_SUITE.run_ids(),
        "tasks": tasks,
        "runner": RUNNER,
        "model": MODEL,
        "submission_timeout_ms": 60_000,
        "batch_timeout_ms": 3_600_000,
        "slots": 2,
        "consumer_dir_in_runner": "/consumer",
        "output_dir_in_runner": "/solution",
        "protected_digest": lambda: sha256_bytes(b"consumer"),
        "receipt": receipt,
    }
    values.update(changes)
    (tmp_path / "batch").mkdir(exist_ok=True)
    return BatchPlan(**values)


def saved(tmp_path: Path) -> Receipt:
    return Receipt.model_validate_json((tmp_path / "batch" / "receipt.json").read_bytes())


def test_eighteen_good_runs_complete_with_eighteen_successes(tmp_path: Path) -> None:
    runner = FakeRunner(writes("GOOD"))
    receipt = run_schedule(plan(tmp_path), on_this_engine(runner, FakeVerifier()))
    assert (receipt.status, receipt.firstSuccesses, receipt.finalSuccesses) == ("completed", 18, 18)
    assert [r.runId for r in receipt.runs] == EXAMPLE_SUITE.run_ids()
    assert len(runner.requests) == 18 and all(r.attempt == 1 for r in runner.requests)
    assert saved(tmp_path) == receipt
    solution = tmp_path / "batch" / "runs" / "forms-2" / "attempt-1" / "solution" / "solution.py"
    assert solution.read_text() == "GOOD"
    assert (solution.parent.parent / "analysis.json").is_file()


def test_a_failed_first_attempt_is_repaired_once_with_feedback(tmp_path: Path) -> None:
    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        if request.attempt == 2:
            assert (workspace / "solution.py").read_text() == "BAD"  # it sees its own code
        (workspace / "solution.py").write_text("BAD" if request.attempt == 1 else "GOOD")
        return reply(request)

    runner = FakeRunner(script)
    receipt = run_schedule(plan(tmp_path), on_this_engine(runner, FakeVerifier()))
    assert (receipt.firstSuccesses, receipt.finalSuccesses) == (0, 18)
    repairs = [r for r in runner.requests if r.attempt == 2]
    assert len(repairs) == 18
    assert repairs[0].repairFeedback is not None
    assert repairs[0].repairFeedback.failedAssertionIds == ["works"]


def test_a_refusal_is_not_repaired_and_no_replacement_run_is_scheduled(tmp_path: Path) -> None:
    runner = FakeRunner(lambda request, workspace: reply(request, "failed"))
    receipt = run_schedule(plan(tmp_path), on_this_engine(runner, FakeVerifier()))
    assert len(runner.requests) == 18
    assert {r.attempts[0].failureCategory for r in receipt.runs} == {"refused"}
    assert receipt.finalSuccesses == 0 and receipt.status == "completed"


def test_a_runner_that_exits_non_zero_gave_an_invalid_response(tmp_path: Path) -> None:
    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        good = reply(request)
        return RunnerOutcome(good.stdout, False, False, 3)

    receipt = run_schedule(plan(tmp_path), on_this_engine(FakeRunner(script), FakeVerifier()))
    assert {r.attempts[0].failureCategory for r in receipt.runs} == {"invalid-response"}
    assert "exited with status 3" in receipt.runs[0].attempts[0].diagnostics[0].message


def test_a_timed_out_runner_is_not_repaired(tmp_path: Path) -> None:
    runner = FakeRunner(lambda request, workspace: RunnerOutcome(b"", False, True, None))
    receipt = run_schedule(plan(tmp_path), on_this_engine(runner, FakeVerifier()))
    assert {len(r.attempts) for r in receipt.runs} == {1}
    assert {r.attempts[0].failureCategory for r in receipt.runs} == {"timeout"}


def test_tampering_with_protected_inputs_fails_the_attempt(tmp_path: Path) -> None:
    counter = iter(range(1000))
    receipt = run_schedule(
        plan(tmp_path, protected_digest=lambda: sha256_bytes(str(next(counter)).encode())),
        on_this_engine(FakeRunner(writes("GOOD")), FakeVerifier()),
    )
    assert {r.attempts[0].failureCategory for r in receipt.runs} == {"tampering"}


@pytest.mark.parametrize("where", ["runner-failed", "runner-answered", "while-verifying"])
def test_a_disk_that_fills_during_an_attempt_makes_it_the_infrastructures_failure(
    tmp_path: Path, where: str
) -> None:
    """A runner that could not write its solution, or a verifier its result, is not the agent."""
    full = threading.Event()

    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        if len(runner.requests) == 3 and where != "while-verifying":
            full.set()
            if where == "runner-failed":
                return RunnerOutcome(b"OSError: [Errno 28] No space left", False, False, 1)
        (workspace / "solution.py").write_text("GOOD")
        return reply(request)

    class FillingVerifier(FakeVerifier):
        def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
            if len(runner.requests) == 3 and where == "while-verifying":
                full.set()
            return super().verify(task, solution_dir, run_id)

    runner = FakeRunner(script)
    message = "the disk holding the work directory was full"
    receipt = run_schedule(
        plan(tmp_path, slots=1, disk_problem=lambda: message if full.is_set() else None),
        on_this_engine(runner, FillingVerifier()),
    )
    assert receipt.status == "infrastructure-failure"
    *finished, last = receipt.runs
    assert len(finished) == 2 and all(r.finalSuccess for r in finished)
    assert last.attempts[-1].failureCategory == "infrastructure"
    assert last.attempts[-1].diagnostics[-1].message == message


def test_a_spent_batch_budget_leaves_the_remaining_runs_failed(tmp_path: Path) -> None:
    ticks = iter([0.0] + [0.0] * 30 + [10_000.0] * 10_000)
    receipt = run_schedule(
        plan(tmp_path, slots=1, batch_timeout_ms=100_000),
        on_this_engine(FakeRunner(writes("GOOD")), FakeVerifier()),
        monotonic=lambda: next(ticks),
    )
    assert receipt.status == "completed"
    assert len(receipt.runs) == 18 and receipt.finalSuccesses < 18
    assert any("not started" in reason for reason in receipt.reasons)
    assert any(r.attempts == [] for r in receipt.runs)


def test_ctrl_c_kills_running_containers_and_leaves_an_interrupted_receipt(tmp_path: Path) -> None:
    calls = iter(range(1000))

    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        if next(calls) == 3:
            raise KeyboardInterrupt
        (workspace / "solution.py").write_text("GOOD")
        return reply(request)

    runner, verifier = FakeRunner(script), FakeVerifier()
    final = run_schedule(plan(tmp_path, slots=1), on_this_engine(runner, verifier))
    receipt = saved(tmp_path)
    assert final == receipt
    assert receipt.status == "interrupted" and runner.cancelled and verifier.cancelled
    assert receipt.reasons == ["interrupted by the operator (Ctrl-C)"]
    # Three runs finished; the one in flight is the batch's failure, never the agent's.
    assert len(receipt.runs) == 4 and receipt.finalSuccesses == 3
    [cut] = receipt.runs[3].attempts
    assert cut.failureCategory == "infrastructure"
    assert "the batch stopped during this attempt" in cut.diagnostics[0].message


def test_a_signal_while_a_run_is_verified_leaves_a_receipt_that_says_so(tmp_path: Path) -> None:
    calls = iter(range(1000))

    class Signalled(FakeVerifier):
        def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
            if next(calls) == 2:
                raise Stop(signal.SIGTERM)
            return super().verify(task, solution_dir, run_id)

    runner = FakeRunner(writes("GOOD"))
    final = run_schedule(plan(tmp_path, slots=1), on_this_engine(runner, Signalled()))
    assert final.status == "interrupted" and final.reasons == ["stopped by SIGTERM"]
    assert [r.finalSuccess for r in final.runs] == [True, True, False]
    [cut] = final.runs[2].attempts
    assert cut.infrastructureStatus == "failed" and "SIGTERM" in cut.diagnostics[0].message


def test_a_full_disk_mid_batch_ends_as_an_infrastructure_failure_with_every_finished_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch_plan = plan(tmp_path, slots=1)
    reserve = tmp_path / "batch" / ".reserve"
    reserve.write_bytes(bytes(1024))
    writes_left = iter(range(1000))
    real_write = receipt_book.write_model_atomic

    def filling(path: Path, model: Any) -> None:
        # The first receipt and four runs are written; then the disk is full until
        # the reserved space is given back.
        if next(writes_left) >= 5 and reserve.exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, model)

    monkeypatch.setattr(receipt_book, "write_model_atomic", filling)
    final = run_schedule(batch_plan, on_this_engine(FakeRunner(writes("GOOD")), FakeVerifier()))
    assert final.status == "infrastructure-failure"
    assert any("the disk is full where the evidence is written" in r for r in final.reasons)
    assert saved(tmp_path) == final
    # The run whose write failed is in the final receipt: nothing finished is lost.
    assert len(final.runs) == 5 and final.finalSuccesses == 5
    assert not reserve.exists()


def test_when_not_even_the_final_receipt_can_be_written_the_schedule_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes_left = iter(range(1000))
    real_write = receipt_book.write_model_atomic

    def full(path: Path, model: Any) -> None:
        if next(writes_left) >= 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, model)

    monkeypatch.setattr(receipt_book, "write_model_atomic", full)
    with pytest.raises(ReceiptNotWritten, match="the disk is full") as raised:
        run_schedule(
            plan(tmp_path, slots=1), on_this_engine(FakeRunner(writes("GOOD")), FakeVerifier())
        )
    assert raised.value.receipt.status == "running"  # the last receipt written stands
