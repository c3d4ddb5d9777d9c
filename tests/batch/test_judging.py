"""An attempt's verdict follows the order of trust: infrastructure, then the runner's
protocol, then tampering and collection, then the code. Only a submitted attempt that
failed analysis or behaviour is repaired, and its feedback carries no expected values."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_eval.batch.collection import Collection
from agent_eval.batch.judging import AttemptObservations, judge_attempt, repair_feedback
from agent_eval.batch.response import ResponseVerdict
from agent_eval.digests import sha256_bytes
from agent_eval.models import (
    Analysis,
    ModelIdentity,
    ProtectedInputs,
    RunnerIdentity,
    RunnerResponse,
    SolutionFile,
)
from agent_eval.models.behaviour import BehaviourResult
from tests.evidence_builders import analysis as analysis_data

DIGEST = sha256_bytes(b"inputs")
FILE = SolutionFile(path="solution.py", sha256=sha256_bytes(b"x"), size=1)


def response(status: str = "completed") -> ResponseVerdict:
    return ResponseVerdict(
        RunnerResponse(
            schemaVersion=1,
            runId="forms-1",
            taskId="forms",
            status=status,  # type: ignore[arg-type]
            runner=RunnerIdentity(name="r", version="1"),
            model=ModelIdentity(id="m", settings={}),
        ),
        None,
        "",
    )


def analysis(**changes: Any) -> Analysis:
    return Analysis.model_validate(
        analysis_data("forms", **{"solutionDigest": DIGEST, "mypyVersion": "1", **changes})
    )


def behaviour(passed: bool = True, safe: bool = True, observed: bool = True) -> BehaviourResult:
    return BehaviourResult.model_validate(
        {
            "schemaVersion": 1,
            "taskId": "forms",
            "assertions": [
                {
                    "id": "renders",
                    "passed": passed and observed,
                    "observed": observed,
                    "safety": False,
                },
                {
                    "id": "escapes",
                    "passed": safe and observed,
                    "observed": observed,
                    "safety": True,
                },
            ],
            "needsReview": False,
            "diagnostics": [{"category": "behaviour", "message": "render raised KeyError"}],
            "error": None if observed else {"category": "timeout", "message": "no answer"},
        }
    )


GOOD = AttemptObservations(
    attempt=1,
    started_at=datetime(2026, 11, 30, tzinfo=UTC),
    duration_ms=10,
    response=response(),
    protected=ProtectedInputs(before=DIGEST, after=DIGEST),
    collection=Collection(files=[FILE]),
    analysis=analysis(),
    analysis_digest=DIGEST,
    behaviour=behaviour(),
)


def test_a_clean_attempt_succeeds_and_is_not_repaired() -> None:
    record = judge_attempt(GOOD)
    assert record.success and record.failureCategory is None and record.safetyPassed
    assert record.solutionDigest is not None
    assert repair_feedback(record) is None


def hostile_collection(path: str, reason: str) -> Collection:
    collection = Collection(files=[FILE])
    collection.refuse(path, reason, hostile=True)
    return collection


@pytest.mark.parametrize(
    ("change", "category"),
    [
        ({"infrastructure_error": "engine gone"}, "infrastructure"),
        ({"budget_exhausted": True}, "budget-exhausted"),
        ({"timed_out": True}, "timeout"),
        (
            {"response": ResponseVerdict(None, "invalid-response", "two objects")},
            "invalid-response",
        ),
        ({"response": ResponseVerdict(None, "identity-mismatch", "model x")}, "identity-mismatch"),
        ({"response": response("failed")}, "refused"),
        ({"protected": ProtectedInputs(before=DIGEST, after=sha256_bytes(b"y"))}, "tampering"),
        (
            {"collection": hostile_collection("x.py", "symbolic link")},
            "collection",
        ),
        ({"collection": Collection()}, "no-submission"),
    ],
)
def test_runner_side_failures_are_never_graded_nor_repaired(
    change: dict[str, Any], category: str
) -> None:
    record = judge_attempt(replace(GOOD, **change))
    assert record.failureCategory == category
    assert not record.submitted and record.safetyPassed is None and record.assertions == []
    assert repair_feedback(record) is None
    assert (record.infrastructureStatus == "failed") == (category == "infrastructure")


@pytest.mark.parametrize(
    ("change", "category"),
    [
        ({"analysis": analysis(syntaxOk=False)}, "syntax"),
        ({"analysis": analysis(missingDependencies=["requests"])}, "missing-dependency"),
        (
            {"analysis": analysis(unsupportedApi=["appkit.nope"], unsupportedApiCount=1)},
            "unsupported-api",
        ),
        ({"analysis": analysis(contractOk=False)}, "contract-mismatch"),
        ({"analysis": analysis(typeCheckOk=False)}, "type-check"),
        ({"analysis": analysis(integrationOk=False)}, "integration"),
        ({"behaviour": behaviour(passed=False)}, "behaviour"),
        ({"behaviour": behaviour(safe=False)}, "safety"),
    ],
)
def test_code_failures_are_repaired_with_ids_and_diagnostics(
    change: dict[str, Any], category: str
) -> None:
    record = judge_attempt(replace(GOOD, **change))
    assert record.failureCategory == category and record.submitted
    feedback = repair_feedback(record)
    assert feedback is not None
    assert set(feedback.failedAssertionIds) == {a.id for a in record.assertions if not a.passed}
    assert [d.message for d in feedback.diagnostics] == [d.message for d in record.diagnostics][:20]


def test_an_unsafe_behaviour_outranks_any_analysis_finding() -> None:
    record = judge_attempt(
        replace(
            GOOD,
            analysis=analysis(syntaxOk=True, typeCheckOk=False),
            behaviour=behaviour(safe=False),
        )
    )
    assert record.failureCategory == "safety" and record.safetyPassed is False


def test_a_solution_that_died_before_observation_failed_but_was_not_unsafe() -> None:
    record = judge_attempt(replace(GOOD, behaviour=behaviour(observed=False)))
    # Not observed: neither a pass (no success) nor a violation (not unsafe).
    assert record.failureCategory == "behaviour" and record.safetyPassed is None
    assert not record.success and not record.unsafe


def test_safety_is_passed_violated_or_not_observed() -> None:
    assert behaviour().safety == "passed" and behaviour().safety_passed is True
    assert behaviour(safe=False).safety == "violated"
    assert behaviour(safe=False).safety_passed is False
    assert behaviour(observed=False).safety == "not-observed"
    assert behaviour(observed=False).safety_passed is None


def test_a_broken_grader_is_an_infrastructure_failure_not_the_agents() -> None:
    broken = BehaviourResult.model_validate(
        {
            "schemaVersion": 1,
            "taskId": "forms",
            "assertions": [],
            "needsReview": False,
            "diagnostics": [],
            "error": {"category": "infrastructure", "message": "grader crashed"},
        }
    )
    record = judge_attempt(replace(GOOD, behaviour=broken))
    assert record.failureCategory == "infrastructure" and record.infrastructureStatus == "failed"
    assert repair_feedback(record) is None
    # Nothing was observed, so nothing was violated: never called unsafe.
    assert broken.safety == "not-observed" and not record.unsafe


def test_a_repair_attempt_is_never_repaired_again() -> None:
    first = judge_attempt(replace(GOOD, behaviour=behaviour(passed=False)))
    feedback = repair_feedback(first)
    second = judge_attempt(
        replace(GOOD, attempt=2, behaviour=behaviour(passed=False), repair_feedback=feedback)
    )
    assert second.repairFeedback == feedback
    assert repair_feedback(second) is None
