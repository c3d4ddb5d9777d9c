"""A verification that failed on the harness's side is repeated before anything is
recorded; a verdict about the code never is; a cleanup failure stops at once."""

from __future__ import annotations

import re

import pytest

from agent_eval.errors import CleanupError, InfrastructureError
from agent_eval.models import Analysis
from agent_eval.models.behaviour import BehaviourResult
from agent_eval.verification.protocol import Verification
from agent_eval.verification.retry import verify_with_retries
from tests.evidence_builders import analysis as analysis_data


def verification(error: dict[str, str] | None = None, passed: bool = True) -> Verification:
    behaviour = BehaviourResult.model_validate(
        {
            "schemaVersion": 1,
            "taskId": "forms",
            "assertions": []
            if error and error["category"] == "infrastructure"
            else [{"id": "renders", "passed": passed, "observed": True, "safety": False}],
            "needsReview": False,
            "diagnostics": [],
            "error": error,
        }
    )
    analysis = Analysis.model_validate(analysis_data("forms", mypyVersion="1"))
    return Verification(analysis=analysis, analysis_json=b"{}", behaviour=behaviour)


STARVED = {"category": "infrastructure", "message": "verifier failure: starved: calling f"}


def run(*outcomes: Verification | Exception) -> tuple[Verification, list[float], int]:
    pauses: list[float] = []
    calls = iter(outcomes)
    count = 0

    def once() -> Verification:
        nonlocal count
        count += 1
        outcome = next(calls)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return verify_with_retries(once, sleep=pauses.append), pauses, count


def test_a_starved_verification_is_repeated_and_the_reason_kept() -> None:
    result, pauses, count = run(verification(STARVED), verification())
    assert count == 2 and pauses == [2.0]
    assert result.behaviour.passed and result.retried == (STARVED["message"],)


def test_an_engine_side_error_is_repeated_too() -> None:
    result, _, count = run(InfrastructureError("container outlived"), verification())
    assert count == 2 and result.retried == ("container outlived",)


def test_a_verdict_about_the_code_is_never_repeated() -> None:
    timeout = {"category": "timeout", "message": "calling f: no answer within its time limit"}
    result, pauses, count = run(verification(timeout, passed=False), verification())
    assert count == 1 and pauses == [] and result.retried == ()
    assert not result.behaviour.passed


def test_after_every_try_failed_it_is_infrastructure_saying_how_often() -> None:
    with pytest.raises(InfrastructureError, match=re.escape("3 times: a | b | c")):
        run(InfrastructureError("a"), InfrastructureError("b"), InfrastructureError("c"))
    result, pauses, count = run(verification(STARVED), verification(STARVED), verification(STARVED))
    assert count == 3 and pauses == [2.0, 8.0]
    assert result.behaviour.infrastructure_failed and len(result.retried) == 2


def test_an_unconfirmed_cleanup_is_never_retried() -> None:
    with pytest.raises(CleanupError):
        run(CleanupError("not removed"), verification())


def test_a_stopped_batch_starts_no_further_verification() -> None:
    """A try the batch's stop killed is never repeated: no container after the signal."""
    stopped = False
    calls = 0

    def once() -> Verification:
        nonlocal stopped, calls
        calls += 1
        stopped = True  # the stop arrives while the first try runs and kills it
        raise InfrastructureError("verifier container was removed")

    with pytest.raises(InfrastructureError, match="the batch stopped"):
        verify_with_retries(once, sleep=lambda _s: None, stopped=lambda: stopped)
    assert calls == 1
