"""The forms grader passes the reference solution, fails every negative fixture on exactly
its declared assertions, and judges escaping on the parsed HTML: escaped user input is text,
unescaped input becomes elements or event-handler attributes.
"""

from __future__ import annotations

import html
from typing import Any

import pytest

from agent_eval.grading.web import parse_html
from tests.task_grading import (
    correct_cases,
    expected_failures,
    grade_fixture,
    grade_stand_in,
    grader_module,
    negative_cases,
)

TASK = "forms"


@pytest.mark.parametrize("case", correct_cases(TASK), ids=lambda c: c.name)
def test_the_reference_solution_passes_every_assertion(case: Any) -> None:
    report = grade_fixture(case)
    assert report.all_passed, report.failed_ids


@pytest.mark.parametrize("case", negative_cases(TASK), ids=lambda c: c.name)
def test_each_negative_fails_exactly_its_declared_assertions(case: Any) -> None:
    assert set(grade_fixture(case).failed_ids) == expected_failures(case)


@pytest.mark.parametrize(
    ("markup", "unsafe"),
    [
        ('<p class="welcome">Welcome, &lt;script&gt;x&lt;/script&gt;!</p>', False),
        ('<input value="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;">', False),
        ('<p class="welcome">Welcome, <script>alert(1)</script>!</p>', True),
        ('<input value=""><img src=x onerror=alert(1)>">', True),
        ('<p><a href="#" onclick="steal()">hi</a></p>', True),
    ],
)
def test_injected_markup_is_recognised_in_the_parsed_page(markup: str, unsafe: bool) -> None:
    assert grader_module(TASK).injected(parse_html(markup)) is unsafe


def test_a_solution_that_raises_for_every_submission_is_wrong_but_not_unsafe() -> None:
    def make() -> dict[str, Any]:
        def handle_signup(submission: dict[str, Any], create_account: Any) -> dict[str, Any]:
            raise NotImplementedError

        return {"handle_signup": handle_signup}

    report = grade_stand_in(TASK, make)
    assert report.passed("user-values-escaped") and report.passed("no-account-on-invalid")
    assert not report.passed("valid-submission-accepted")


def test_a_hand_built_page_that_escapes_the_name_is_safe_even_without_the_library() -> None:
    def make() -> dict[str, Any]:
        def handle_signup(submission: dict[str, Any], create_account: Any) -> dict[str, Any]:
            name = str(submission.get("display_name") or submission.get("username"))
            body = f'<p class="welcome">Welcome, {html.escape(name.strip())}!</p>'
            return {"ok": False, "html": body}

        return {"handle_signup": handle_signup}

    report = grade_stand_in(TASK, make)
    assert report.passed("user-values-escaped")
    assert not report.passed("field-errors-shown")
