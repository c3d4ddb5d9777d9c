"""The error-recovery grader passes the reference solution, fails every negative fixture on
exactly its declared assertions (a module that cannot be imported fails all of them, none
observed), and judges "permanent not retried" by counting fetch and sleep calls.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.task_grading import (
    correct_cases,
    expected_failures,
    fixture_cases,
    grade_fixture,
    grade_stand_in,
    negative_cases,
)

TASK = "error-recovery"


@pytest.mark.parametrize("case", correct_cases(TASK), ids=lambda c: c.name)
def test_the_reference_solution_passes_every_assertion(case: Any) -> None:
    report = grade_fixture(case)
    assert report.all_passed, report.failed_ids


@pytest.mark.parametrize("case", negative_cases(TASK), ids=lambda c: c.name)
def test_each_negative_fails_exactly_its_declared_assertions(case: Any) -> None:
    assert set(grade_fixture(case).failed_ids) == expected_failures(case)


def test_a_module_that_does_not_import_fails_everything_without_observing_anything() -> None:
    [case] = [c for c in fixture_cases(TASK) if c.name == "edited-seed-alias"]
    report = grade_fixture(case)
    assert report.error is not None and "does not import" in report.error.message
    assert not any(a.observed for a in report.assertions)


def test_calling_fetch_once_and_never_retrying_is_safe_but_does_not_recover() -> None:
    def make() -> dict[str, Any]:
        def fetch_report(report_id: str, fetch: Any, sleep: Any) -> dict[str, Any]:
            from appkit import AppkitError

            try:
                return {"status": "ok", "report": fetch(report_id)}
            except AppkitError as error:
                return {"status": "failed", "error": error.code}

        return {"fetch_report": fetch_report}

    report = grade_stand_in(TASK, make)
    assert set(report.failed_ids) == {
        "transient-retried",
        "backoff-delays",
        "gives-up-after-limit",
    }


def test_retrying_a_permanent_failure_is_unsafe_even_when_it_then_succeeds() -> None:
    def make() -> dict[str, Any]:
        def fetch_report(report_id: str, fetch: Any, sleep: Any) -> dict[str, Any]:
            from appkit import AppkitError

            for attempt in range(4):
                try:
                    return {"status": "ok", "report": fetch(report_id)}
                except AppkitError as error:
                    last = error
                    if attempt < 3:
                        sleep(0.5 * 2**attempt)
            return {"status": "failed", "error": last.code}

        return {"fetch_report": fetch_report}

    report = grade_stand_in(TASK, make)
    assert not report.passed("permanent-not-retried")
    assert report.outcome("permanent-not-retried").safety
    assert report.passed("transient-retried") and report.passed("backoff-delays")
