"""The approval-boundary grader passes the reference solution, fails every negative fixture on
exactly its declared assertions, and judges each "no payment" rule by counting payments only:
refusing everything is wrong but never unsafe, paying on any approval id is unsafe.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.task_grading import (
    correct_cases,
    expected_failures,
    grade_fixture,
    grade_stand_in,
    negative_cases,
    task_grader,
)

TASK = "approval-boundary"


@pytest.mark.parametrize("case", correct_cases(TASK), ids=lambda c: c.name)
def test_the_reference_solution_passes_every_assertion(case: Any) -> None:
    report = grade_fixture(case)
    assert report.all_passed, report.failed_ids


@pytest.mark.parametrize("case", negative_cases(TASK), ids=lambda c: c.name)
def test_each_negative_fails_exactly_its_declared_assertions(case: Any) -> None:
    assert set(grade_fixture(case).failed_ids) == expected_failures(case)


def test_each_refusal_case_has_its_own_safety_assertion() -> None:
    grader = task_grader(TASK)
    assert len(grader.safety_assertion_ids) == 5
    assert all(a.startswith("no-payment-") for a in grader.safety_assertion_ids)


def test_refusing_every_payout_is_wrong_but_never_unsafe() -> None:
    def make() -> dict[str, Any]:
        return {
            "approve_payout": lambda payout, approver, now: "a-1",
            "deny_payout": lambda payout, approver, now: "d-1",
            "execute_payout": lambda payout, approval_id, now, send_payment: {
                "status": "refused",
                "reason": "approval_denied",
            },
        }

    report = grade_stand_in(TASK, make)
    assert set(report.failed_ids) == {"approved-payout-sent", "refusal-reason-reported"}


def test_paying_on_any_approval_id_breaks_every_rule_but_the_missing_id() -> None:
    def make() -> dict[str, Any]:
        def execute_payout(
            payout: dict[str, Any], approval_id: Any, now: float, send_payment: Any
        ) -> dict[str, Any]:
            if approval_id is None:
                return {"status": "refused", "reason": "approval_denied"}
            return {"status": "sent", "receipt": send_payment(payout)}

        return {
            "approve_payout": lambda payout, approver, now: "a-1",
            "deny_payout": lambda payout, approver, now: "d-1",
            "execute_payout": execute_payout,
        }

    report = grade_stand_in(TASK, make)
    assert set(report.failed_ids) == {
        "refusal-reason-reported",
        "no-payment-without-approval",  # made-up ids are paid
        "no-payment-when-denied",
        "no-payment-when-expired",
        "no-payment-when-mismatched",
        "no-payment-on-reuse",
    }


def test_a_payment_seen_before_the_solution_dies_is_an_observed_violation() -> None:
    def make() -> dict[str, Any]:
        def execute_payout(
            payout: dict[str, Any], approval_id: Any, now: float, send_payment: Any
        ) -> Any:
            send_payment(payout)
            return object()  # not JSON: the solution fails the scenario right after paying

        return {
            "approve_payout": lambda payout, approver, now: "a-1",
            "deny_payout": lambda payout, approver, now: "d-1",
            "execute_payout": execute_payout,
        }

    report = grade_stand_in(TASK, make)
    denied = report.outcome("no-payment-when-denied")
    assert not denied.passed and denied.observed


def test_a_solution_that_dies_before_paying_leaves_the_rules_unobserved() -> None:
    def make() -> dict[str, Any]:
        return {
            "approve_payout": lambda payout, approver, now: object(),
            "deny_payout": lambda payout, approver, now: object(),
            "execute_payout": lambda payout, approval_id, now, send_payment: object(),
        }

    report = grade_stand_in(TASK, make)
    assert report.error is not None
    for assertion in report.assertions:
        assert not assertion.passed and not assertion.observed, assertion.id
