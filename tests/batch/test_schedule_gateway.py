"""What the schedule makes of the gateway's records and the runner's own account of a failure.

The gateway's records are the evidence: each attempt's gateway.jsonl is saved as the gateway
wrote it and summarised in the receipt; a served model outside the accepted set is an identity
mismatch and stops the batch, so does a spent token budget; a provider failure while the runner
did not complete is the infrastructure's (kind provider), never the agent's, while a runner that
completed despite a retried 429 is graded as usual. The runner's failureKind names budget,
error and provider failures; runner.log keeps the end of its stderr with every allowlisted value
replaced by its name. Runner and verifier are the in-memory fakes of test_schedule.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.ports import RunnerOutcome
from agent_eval.batch.schedule import run_schedule
from agent_eval.digests import sha256_bytes
from agent_eval.models import Receipt, RunnerRequest
from tests.batch.test_schedule import FakeRunner, FakeVerifier, plan, reply, saved
from tests.evidence_builders import gateway_line
from tests.paths import EXAMPLE_SUITE


class FakeRoute:
    def __init__(self, token: str) -> None:
        self.token = token

    @property
    def environment(self) -> dict[str, str]:
        return {"AGENT_EVAL_GATEWAY_TOKEN": self.token}


class FakeGateway:
    """Records per attempt from a script: (run id, attempt) -> the bytes of gateway.jsonl."""

    def __init__(self, records: dict[tuple[str, int], bytes] | None = None) -> None:
        self.records = records or {}
        self.default = gateway_line()
        self.opened: list[tuple[str, int]] = []
        self.closed: list[str] = []
        self.dead: str | None = None
        self.probed: list[bool] = []
        self.lock = threading.Lock()

    def open_route(self, run_id: str, attempt: int) -> FakeRoute:
        with self.lock:
            self.opened.append((run_id, attempt))
        return FakeRoute(f"ae-{run_id}-{attempt}")

    def close_route(self, route: FakeRoute) -> bytes:
        run_id, _, attempt = route.token.removeprefix("ae-").rpartition("-")
        with self.lock:
            self.closed.append(route.token)
        return self.records.get((run_id, int(attempt)), self.default)

    def problem(self, *, probe: bool = False) -> str | None:
        self.probed.append(probe)
        return self.dead

    def accepted_models(self) -> dict[str, frozenset[str]]:
        return {"provider": frozenset({"model-x-2026"})}


FIRST = EXAMPLE_SUITE.run_ids()[0]


def good(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
    (workspace / "solution.py").write_text("GOOD")
    return reply(request)


def schedule(tmp_path: Path, gateway: FakeGateway, script: Any = good, **changes: Any) -> Receipt:
    runner = FakeRunner(script)
    return run_schedule(
        plan(tmp_path, gateway=gateway, slots=1, **changes), on_this_engine(runner, FakeVerifier())
    )


def test_each_attempt_gets_its_own_token_and_its_record_is_saved_and_summarised(
    tmp_path: Path,
) -> None:
    gateway = FakeGateway()
    runner = FakeRunner(good)
    receipt = run_schedule(plan(tmp_path, gateway=gateway), on_this_engine(runner, FakeVerifier()))
    assert receipt.status == "completed" and receipt.finalSuccesses == 18
    tokens = [e["AGENT_EVAL_GATEWAY_TOKEN"] for e in runner.environments]
    assert len(set(tokens)) == 18 and sorted(tokens) == sorted(gateway.closed)
    record = tmp_path / "batch" / "runs" / "forms-1" / "attempt-1" / "gateway.jsonl"
    assert record.read_bytes() == gateway.default
    use = receipt.runs[0].attempts[0].gateway
    assert use is not None and use.recordDigest == sha256_bytes(gateway.default)
    assert (use.requests, use.answered, use.servedModels) == (1, 1, ["model-x-2026"])
    assert (use.inputTokens, use.outputTokens) == (10, 20)


def test_a_served_model_outside_the_accepted_set_stops_the_batch_as_an_identity_mismatch(
    tmp_path: Path,
) -> None:
    second = EXAMPLE_SUITE.run_ids()[1]
    gateway = FakeGateway({(second, 1): gateway_line(served="cheaper-model")})
    receipt = schedule(tmp_path, gateway)
    assert receipt.status == "stopped"
    assert any("identity mismatch" in r and "cheaper-model" in r for r in receipt.reasons)
    last = receipt.runs[-1]
    assert last.runId == second
    assert last.attempts[0].failureCategory == "identity-mismatch"
    assert len(receipt.runs) == 2, "no run starts after the mismatch"
    assert saved(tmp_path).status == "stopped"


def test_the_first_identity_the_runner_reports_wrongly_stops_the_batch(tmp_path: Path) -> None:
    def wrong(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return reply(request, model={"id": "fallback", "settings": {}})

    receipt = schedule(tmp_path, FakeGateway(), wrong)
    assert receipt.status == "stopped" and len(receipt.runs) == 1
    assert receipt.runs[0].attempts[0].failureCategory == "identity-mismatch"


def test_a_spent_token_budget_stops_the_batch(tmp_path: Path) -> None:
    gateway = FakeGateway()
    receipt = schedule(tmp_path, gateway, token_budget=75)  # 30 tokens an attempt
    assert receipt.status == "stopped" and len(receipt.runs) == 3
    assert any("token budget of 75 is spent (90 used)" in r for r in receipt.reasons)


def test_a_request_the_gateway_refused_for_the_budget_exhausts_the_attempt(tmp_path: Path) -> None:
    refused = gateway_line(status=429, served=None, failure="budget", inputTokens=None)

    def gave_up(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return reply(request, "failed")

    receipt = schedule(tmp_path, FakeGateway({(FIRST, 1): refused}), gave_up)
    assert receipt.status == "stopped"
    assert receipt.runs[0].attempts[0].failureCategory == "budget-exhausted"


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        ("authentication", 401),
        ("rate-limit", 429),
        ("server-error", 503),
        ("unknown-model", 404),
        ("unreachable", None),
    ],
)
def test_a_provider_failure_while_the_runner_did_not_complete_is_the_infrastructures(
    tmp_path: Path, failure: str, status: int | None
) -> None:
    line = gateway_line(status=status, served=None, failure=failure, message=f"{failure} said")

    def gave_up(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return reply(request, "failed")

    receipt = schedule(tmp_path, FakeGateway({(FIRST, 1): line}), gave_up)
    assert receipt.status == "infrastructure-failure"
    first = receipt.runs[0].attempts[0]
    assert (first.failureCategory, first.infrastructureKind) == ("infrastructure", "provider")
    assert first.diagnostics[0].category == "provider"
    assert f"{failure} said" in first.diagnostics[0].message


def test_a_runner_that_completed_after_a_retried_rate_limit_is_graded(tmp_path: Path) -> None:
    retried = gateway_line(status=429, served=None, failure="rate-limit") + gateway_line()
    receipt = schedule(tmp_path, FakeGateway({(FIRST, 1): retried}))
    assert receipt.status == "completed" and receipt.runs[0].attempts[0].success
    assert receipt.runs[0].attempts[0].gateway.failures == ["rate-limit"]  # type: ignore[union-attr]


def test_a_gateway_that_stopped_serving_fails_the_attempt_on_the_infrastructure(
    tmp_path: Path,
) -> None:
    gateway = FakeGateway()
    gateway.dead = "its container is exited"

    def gave_up(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return reply(request, "failed")

    receipt = schedule(tmp_path, gateway, gave_up)
    first = receipt.runs[0].attempts[0]
    assert first.infrastructureKind == "provider"
    assert "stopped serving: its container is exited" in first.diagnostics[0].message


def test_an_unreadable_gateway_record_is_the_infrastructures_failure(tmp_path: Path) -> None:
    gateway = FakeGateway({(FIRST, 1): b"not a record\n"})
    receipt = schedule(tmp_path, gateway)
    assert receipt.status == "infrastructure-failure"
    assert "gateway.jsonl line 1" in receipt.runs[0].attempts[0].diagnostics[0].message


@pytest.mark.parametrize(
    ("kind", "category", "infrastructure"),
    [
        ("budget", "budget-exhausted", "ok"),
        ("error", "runner-error", "ok"),
        ("refused", "refused", "ok"),
        (None, "refused", "ok"),
        ("provider", "infrastructure", "failed"),
    ],
)
def test_the_runners_failure_kind_names_the_category_and_never_makes_a_success(
    tmp_path: Path, kind: str | None, category: str, infrastructure: str
) -> None:
    def failed(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        (workspace / "solution.py").write_text("GOOD")  # written, but the runner says failed
        extra = {"failureKind": kind} if kind else {}
        return reply(request, "failed", message="the CLI said why", **extra)

    receipt = schedule(tmp_path, FakeGateway(), failed)
    first = receipt.runs[0].attempts[0]
    assert (first.failureCategory, first.infrastructureStatus) == (category, infrastructure)
    assert not first.success and first.failureKind == kind
    assert "the CLI said why" in first.diagnostics[0].message


def test_runner_log_keeps_the_end_of_stderr_with_allowlisted_values_replaced(
    tmp_path: Path,
) -> None:
    secret = "setting-value-1234"

    def chatty(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        (workspace / "solution.py").write_text("GOOD")
        stderr = ("x" * 20_000 + f"\nthe setting was {secret}\nlast line\n").encode()
        good_reply = reply(request, message="done")
        return RunnerOutcome(good_reply.stdout, False, False, 0, stderr=stderr)

    receipt = schedule(tmp_path, FakeGateway(), chatty, redactions={secret: "AIDER_SETTING"})
    log = tmp_path / "batch" / "runs" / FIRST / "attempt-1" / "runner.log"
    text = log.read_text()
    assert secret not in text and "the setting was [redacted:AIDER_SETTING]" in text
    assert text.rstrip().endswith("runner message: done") and "last line" in text
    assert len(log.read_bytes()) < 9 * 1024
    assert receipt.runs[0].attempts[0].runnerLogDigest == sha256_bytes(log.read_bytes())


def test_runner_log_says_nothing_was_written_rather_than_counting_none(tmp_path: Path) -> None:
    def quiet(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        (workspace / "solution.py").write_text("GOOD")
        return RunnerOutcome(reply(request, message="done").stdout, False, False, 0, stderr=b"")

    schedule(tmp_path, FakeGateway(), quiet)
    log = tmp_path / "batch" / "runs" / FIRST / "attempt-1" / "runner.log"
    assert log.read_text() == "runner stderr: nothing\nrunner message: done\n"


def test_without_a_gateway_no_token_is_given_and_no_record_is_kept(tmp_path: Path) -> None:
    runner = FakeRunner(good)
    receipt = run_schedule(plan(tmp_path), on_this_engine(runner, FakeVerifier()))
    assert all(e == {} for e in runner.environments)
    assert all(a.gateway is None for r in receipt.runs for a in r.attempts)
    assert not list((tmp_path / "batch").rglob("gateway.jsonl"))
    assert {r.runId for r in receipt.runs} == set(EXAMPLE_SUITE.run_ids())
    assert json.loads((tmp_path / "batch" / "receipt.json").read_text())["status"] == "completed"


def test_a_transcript_is_kept_redacted_bounded_at_a_line_and_bound_by_its_digest(
    tmp_path: Path,
) -> None:
    secret = "setting-value-1234"
    events = [json.dumps({"type": "event", "n": n, "pad": "p" * 1000}) for n in range(2400)]
    events[1] = json.dumps({"type": "tool", "said": f"{secret} and ae-{FIRST}-1"})

    def talkative(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        (workspace / "solution.py").write_text("GOOD")
        good_reply = reply(request)
        transcript = ("\n".join(events) + "\n").encode()
        return RunnerOutcome(good_reply.stdout, False, False, 0, transcript=transcript)

    receipt = schedule(tmp_path, FakeGateway(), talkative, redactions={secret: "AIDER_SETTING"})
    kept = tmp_path / "batch" / "runs" / FIRST / "attempt-1" / "transcript.jsonl"
    lines = [json.loads(line) for line in kept.read_text().splitlines()]
    assert lines[1]["said"] == "[redacted:AIDER_SETTING] and [redacted:AGENT_EVAL_GATEWAY_TOKEN]"
    assert lines[-1]["agentEvalTranscriptCut"] is True
    assert all(line.get("type") == "event" for line in lines[2:-1])  # cut between lines
    assert 2 * 1024 * 1024 - 1100 < len(kept.read_bytes()) <= 2 * 1024 * 1024 + 100
    assert receipt.runs[0].attempts[0].transcriptDigest == sha256_bytes(kept.read_bytes())


def test_a_runner_that_kept_no_transcript_has_none(tmp_path: Path) -> None:
    receipt = schedule(tmp_path, FakeGateway())
    assert all(a.transcriptDigest is None for r in receipt.runs for a in r.attempts)
    assert not list((tmp_path / "batch").rglob("transcript.jsonl"))


def test_an_attempt_with_no_answered_request_is_judged_only_once_the_gateway_answers(
    tmp_path: Path,
) -> None:
    """A frozen gateway (its container still running) is found by asking it, never blamed on
    the agent; attempts the gateway did answer need no such question."""
    gateway = FakeGateway({(FIRST, 1): b""})
    receipt = schedule(tmp_path, gateway)
    # One probe, for the unanswered attempt (the schedule's watch asks without probing).
    assert gateway.probed.count(True) == 1

    silent = FakeGateway({(FIRST, 1): b""})
    silent.dead = "its socket for provider gave no answer within 30 s (TimeoutError: timed out)"

    def nothing(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return RunnerOutcome(b"", False, False, 0)

    (tmp_path / "silent").mkdir()
    receipt = schedule(tmp_path / "silent", silent, nothing)
    first = receipt.runs[0].attempts[0]
    assert (first.failureCategory, first.infrastructureKind) == ("infrastructure", "provider")
    assert receipt.status == "infrastructure-failure"
    assert "stopped serving: its socket for provider gave no answer" in first.diagnostics[0].message


@pytest.mark.parametrize(
    ("path", "stops"),
    [("/v1/messages", True), ("/v1/chat/completions?x=1", True),
     ("/v1/messages/count_tokens", False)],
)  # fmt: skip
def test_a_model_call_answered_without_a_readable_model_stops_the_batch(
    tmp_path: Path, path: str, stops: bool
) -> None:
    """An answer the gateway cannot attribute to a model is never passed as measured."""
    records = gateway_line(served=None, path=path) + gateway_line()
    receipt = schedule(tmp_path, FakeGateway({(FIRST, 1): records}))
    first = receipt.runs[0].attempts[0]
    if stops:
        assert receipt.status == "stopped" and first.failureCategory == "identity-mismatch"
        assert any("without naming a model" in r for r in receipt.reasons), receipt.reasons
    else:
        assert receipt.status == "completed" and first.success


def test_a_gateway_that_dies_while_runs_are_in_flight_stops_the_batch_at_once(
    tmp_path: Path,
) -> None:
    """Not at the next attempt's end (which could be the whole submission timeout away): the
    schedule watches the gateway's container while runs are in flight, stops every attempt,
    and none of them is the agent's."""
    gateway = FakeGateway()
    release = threading.Event()
    started = threading.Event()

    def waits_for_its_model(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        started.set()
        release.wait(timeout=60)  # the runner is killed when the batch stops
        return RunnerOutcome(b"", False, False, 137)

    runner = FakeRunner(waits_for_its_model)
    original = runner.cancel_all

    def cancel_all() -> None:
        original()
        release.set()

    runner.cancel_all = cancel_all  # type: ignore[method-assign]

    def die() -> None:
        started.wait(timeout=30)
        gateway.dead = "its container is exited (137, out of memory)"

    threading.Thread(target=die, daemon=True).start()
    began = time.monotonic()
    receipt = run_schedule(
        plan(tmp_path, gateway=gateway, slots=2), on_this_engine(runner, FakeVerifier()), grace_s=10
    )
    took = time.monotonic() - began
    assert took < 30, f"the schedule noticed the dead gateway only after {took:.0f} s"
    assert receipt.status == "infrastructure-failure"
    assert any("gateway stopped serving: its container is exited" in r for r in receipt.reasons)
    attempts = [a for run in receipt.runs for a in run.attempts]
    assert attempts and len(attempts) <= 2
    assert all(a.infrastructureStatus == "failed" for a in attempts), attempts
    assert not any(a.failureCategory in {"timeout", "no-submission"} for a in attempts)
