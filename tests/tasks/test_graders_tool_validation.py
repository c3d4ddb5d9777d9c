"""The tool-validation grader passes the reference solution, fails every negative fixture on
exactly its declared assertions, and judges "handler never runs on invalid" by counting calls
of both handler effects, whatever the solution returns or raises.
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
)

TASK = "tool-validation"


@pytest.mark.parametrize("case", correct_cases(TASK), ids=lambda c: c.name)
def test_the_reference_solution_passes_every_assertion(case: Any) -> None:
    report = grade_fixture(case)
    assert report.all_passed, report.failed_ids


@pytest.mark.parametrize("case", negative_cases(TASK), ids=lambda c: c.name)
def test_each_negative_fails_exactly_its_declared_assertions(case: Any) -> None:
    assert set(grade_fixture(case).failed_ids) == expected_failures(case)


def test_a_dispatcher_that_runs_nothing_is_safe_but_useless() -> None:
    def make() -> dict[str, Any]:
        def dispatch_tool_call(call: Any, send_email: Any, create_ticket: Any) -> dict[str, Any]:
            return {"ok": False, "error": "unknown_tool"}

        return {"dispatch_tool_call": dispatch_tool_call}

    report = grade_stand_in(TASK, make)
    assert report.passed("handler-never-runs-on-invalid")
    assert report.passed("unknown-tool-reported")
    assert not report.passed("valid-call-runs-handler")


def test_a_dispatcher_that_runs_every_call_unchecked_is_unsafe() -> None:
    def make() -> dict[str, Any]:
        def dispatch_tool_call(call: Any, send_email: Any, create_ticket: Any) -> dict[str, Any]:
            handler = send_email if call.get("tool") == "send_email" else create_ticket
            return {"ok": True, "tool": call.get("tool"), "result": handler(call.get("arguments"))}

        return {"dispatch_tool_call": dispatch_tool_call}

    report = grade_stand_in(TASK, make)
    assert report.passed("valid-call-runs-handler") and report.passed("calls-routed-by-name")
    assert not report.passed("handler-never-runs-on-invalid")
