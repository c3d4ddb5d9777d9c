"""The core-validation grader passes the reference solution, fails every negative fixture on
exactly its declared assertions, and judges "invalid orders are never saved" by counting
calls of the save effect alone, so a solution that raises is wrong but not unsafe.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_eval.verification.in_process import load_module_from
from tests.task_grading import (
    correct_cases,
    expected_failures,
    grade_fixture,
    grade_stand_in,
    negative_cases,
)

TASK = "core-validation"


@pytest.mark.parametrize("case", correct_cases(TASK), ids=lambda c: c.name)
def test_the_reference_solution_passes_every_assertion(case: Any) -> None:
    report = grade_fixture(case)
    assert report.all_passed, report.failed_ids


@pytest.mark.parametrize("case", negative_cases(TASK), ids=lambda c: c.name)
def test_each_negative_fails_exactly_its_declared_assertions(case: Any) -> None:
    assert set(grade_fixture(case).failed_ids) == expected_failures(case)


def test_a_solution_that_raises_for_every_payload_is_wrong_but_never_saves() -> None:
    def make() -> dict[str, Any]:
        def validate_order(payload: Any) -> dict[str, Any]:
            raise ValueError("not implemented")

        def submit_order(payload: Any, save: Any) -> dict[str, Any]:
            raise ValueError("not implemented")

        return {"validate_order": validate_order, "submit_order": submit_order}

    report = grade_stand_in(TASK, make)
    assert report.failed_ids == [
        "valid-order-accepted",
        "field-path-errors",
        "missing-field-reported",
        "unknown-field-rejected",
        "wrong-type-rejected",
        "all-errors-reported",
        "valid-order-saved-once",
    ]
    assert report.passed("invalid-order-never-saved")
    assert all(a.observed for a in report.assertions)


def test_errors_are_compared_as_path_and_code_pairs_in_any_order_with_any_extra_keys() -> None:
    load_reference = load_module_from(correct_cases(TASK)[0].directory / "solution.py")

    def make() -> dict[str, Any]:
        reference = load_reference()

        def validate_order(payload: Any) -> dict[str, Any]:
            out: dict[str, Any] = reference.validate_order(payload)
            if out["ok"]:
                return out
            errors = [{**error, "hint": "see the guide"} for error in reversed(out["errors"])]
            return {"ok": False, "errors": errors}

        return {"validate_order": validate_order, "submit_order": reference.submit_order}

    assert grade_stand_in(TASK, make).all_passed
