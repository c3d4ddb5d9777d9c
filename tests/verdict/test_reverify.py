"""Re-verification names every attempt whose fresh verdict differs from the recorded one.

The verifier is a fake that answers from the receipt itself; editing one
field of what it answers must give exactly one reason, naming the attempt and
the field. Attempts never verified (nothing submitted) are not verified again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from agent_eval.digests import sha256_bytes
from agent_eval.models import Analysis, BehaviourResult, Receipt, TaskSpec
from agent_eval.verdict.reverify import reverify
from agent_eval.verification.protocol import Verification
from tests.evidence_builders import SAFETY_ID, attempt, receipt, run, write_batch

ANALYSIS: dict[str, Any] = {
    "schemaVersion": 1, "taskId": "forms", "solutionDigest": sha256_bytes(b"s"),
    "syntaxOk": True, "typeCheckOk": True, "contractOk": True, "integrationOk": True,
    "unsupportedApi": [], "unsupportedApiCount": 0, "hallucinatedApi": [],
    "hallucinatedApiCount": 0, "missingDependencies": [], "integration": [],
    "diagnostics": [], "mypyVersion": "1.0",
}  # fmt: skip


def task(task_id: str) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "schemaVersion": 1, "id": task_id, "title": "t",
            "allowedOutputPaths": ["solution.py"], "allowedImports": ["appkit/*"],
            "requiredPeers": [],
            "assertionIds": ["behaves", SAFETY_ID], "safetyAssertionIds": [SAFETY_ID],
            "seedReferences": [], "requiredIntegration": [],
        }
    )  # fmt: skip


class Echo:
    """Answers every verification with the recorded verdict, edited by *change*."""

    name = "fake"

    def __init__(self, change: Callable[[dict[str, Any], dict[str, Any]], None]) -> None:
        self.change = change
        self.verified: list[str] = []

    def api_catalog(self) -> Mapping[str, Any]:
        return {}

    def verify(self, spec: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        self.verified.append(run_id)
        analysis = {**ANALYSIS, "taskId": spec.id}
        behaviour: dict[str, Any] = {
            "schemaVersion": 1, "taskId": spec.id, "needsReview": False, "error": None,
            "diagnostics": [],
            "assertions": [
                {"id": "behaves", "passed": True, "observed": True, "safety": False},
                {"id": SAFETY_ID, "passed": True, "observed": True, "safety": True},
            ],
        }  # fmt: skip
        self.change(analysis, behaviour)
        return Verification(
            Analysis.model_validate(analysis),
            json.dumps(analysis).encode(),
            BehaviourResult.model_validate(behaviour),
        )

    def cancel_all(self) -> None:
        pass


def verified_batch(tmp_path: Path) -> tuple[Receipt, Path]:
    """Every attempt analysed (analysis.json saved), one run without a submission."""
    runs = [run(r) for r in ["forms-1", "forms-2"]] + [
        run("forms-3", [attempt("forms-3", success=False, submitted=False)])
    ]
    for record in runs[:2]:
        record["attempts"][0]["analysisDigest"] = sha256_bytes(b"a")
    batch = write_batch(tmp_path, receipt(runs))
    for run_id in ("forms-1", "forms-2"):
        folder = tmp_path / "runs" / run_id / "attempt-1"
        (folder / "analysis.json").write_text(json.dumps({**ANALYSIS, "taskId": "forms"}))
    return Receipt.model_validate_json(batch.receipt.read_bytes()), tmp_path


def test_the_same_verdicts_give_no_reason_and_unverified_attempts_are_skipped(
    tmp_path: Path,
) -> None:
    recorded, run_dir = verified_batch(tmp_path)
    echo = Echo(lambda analysis, behaviour: None)
    assert reverify(recorded, run_dir, {"forms": task("forms")}, echo) == []
    assert echo.verified == ["forms-1", "forms-2"]


def test_a_changed_assertion_finding_or_safety_is_named_with_its_attempt(tmp_path: Path) -> None:
    recorded, run_dir = verified_batch(tmp_path)

    def fail_behaviour(analysis: dict[str, Any], behaviour: dict[str, Any]) -> None:
        behaviour["assertions"][0]["passed"] = False

    reasons = reverify(recorded, run_dir, {"forms": task("forms")}, Echo(fail_behaviour))
    assert "reverify: forms-1 attempt 1: assertion behaves was passed, is now failed" in reasons
    assert "reverify: forms-1 attempt 1: success was True, is now False" in reasons

    def new_finding(analysis: dict[str, Any], behaviour: dict[str, Any]) -> None:
        analysis["unsupportedApiCount"] = 1
        analysis["unsupportedApi"] = ["appkit.nothing"]

    reasons = reverify(recorded, run_dir, {"forms": task("forms")}, Echo(new_finding))
    assert any(
        r.startswith("reverify: forms-2 attempt 1: analysis.unsupportedApiCount") for r in reasons
    )

    def unsafe(analysis: dict[str, Any], behaviour: dict[str, Any]) -> None:
        behaviour["assertions"][1]["passed"] = False

    reasons = reverify(recorded, run_dir, {"forms": task("forms")}, Echo(unsafe))
    assert "reverify: forms-1 attempt 1: safetyPassed was True, is now False" in reasons


class Slow(Echo):
    """Echo, each verification taking a while and finishing out of order."""

    def __init__(self) -> None:
        super().__init__(lambda analysis, behaviour: None)
        self.at_once = 0
        self.most_at_once = 0
        self.lock = threading.Lock()

    def verify(self, spec: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        with self.lock:
            self.at_once += 1
            self.most_at_once = max(self.most_at_once, self.at_once)
        time.sleep(0.3 if run_id.endswith("-1") else 0.05)
        try:
            return super().verify(spec, solution_dir, run_id)
        finally:
            with self.lock:
                self.at_once -= 1


def test_parallel_reverification_gives_the_same_reasons_in_the_same_order(
    tmp_path: Path,
) -> None:
    recorded, run_dir = verified_batch(tmp_path)

    def unsafe(analysis: dict[str, Any], behaviour: dict[str, Any]) -> None:
        behaviour["assertions"][1]["passed"] = False

    in_turn = reverify(recorded, run_dir, {"forms": task("forms")}, Echo(unsafe))
    at_once = reverify(recorded, run_dir, {"forms": task("forms")}, Echo(unsafe), workers=4)

    assert at_once == in_turn
    assert [r.split(":")[1] for r in at_once][:2] == [" forms-1 attempt 1"] * 2


def test_parallel_reverification_runs_several_at_once_within_its_workers(
    tmp_path: Path,
) -> None:
    recorded, run_dir = verified_batch(tmp_path)
    slow = Slow()

    assert reverify(recorded, run_dir, {"forms": task("forms")}, slow, workers=2) == []
    assert slow.most_at_once == 2
    assert sorted(slow.verified) == ["forms-1", "forms-2"]


class Interrupted(Echo):
    """The first verification is interrupted (Ctrl-C); the second is under way meanwhile."""

    def __init__(self) -> None:
        super().__init__(lambda analysis, behaviour: None)
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.finished: list[str] = []

    def verify(self, spec: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        if run_id == "forms-1":
            self.started.wait(timeout=10)
            raise KeyboardInterrupt
        self.started.set()
        self.cancelled.wait(timeout=10)
        time.sleep(0.2)  # the container's removal takes a moment
        self.finished.append(run_id)
        return super().verify(spec, solution_dir, run_id)

    def cancel_all(self) -> None:
        self.cancelled.set()


def test_an_interrupted_parallel_reverification_stops_and_waits_for_what_is_under_way(
    tmp_path: Path,
) -> None:
    recorded, run_dir = verified_batch(tmp_path)
    verifier = Interrupted()

    with pytest.raises(KeyboardInterrupt):
        reverify(recorded, run_dir, {"forms": task("forms")}, verifier, workers=2)

    assert verifier.cancelled.is_set()
    assert verifier.finished == ["forms-2"]  # ended before reverify returned
