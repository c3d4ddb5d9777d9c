"""A task whose calls carry dates, decimals, durations and a record grades them as those types.

The task in ``tests/data/value-types`` gives the solution a ``date`` and a
``Decimal`` and expects a ``timedelta``, a ``date`` and the contract's
``Window`` record back. A solution that uses those types passes; one that
returns a wrong but carried type fails the assertion; one that returns a type
the grader did not declare, or a record of other fields, fails on its own
account (a behaviour error), never as the infrastructure's.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from agent_eval.grading import Grader, GradeReport
from agent_eval.grading.errors import GraderError
from agent_eval.verification.in_process import grade_in_process, load_module_from
from tests.paths import REPO

TASK = REPO / "tests" / "data" / "value-types"

SOLUTION = """
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal


@dataclass(frozen=True)
class Window:
    start: date
    length: timedelta


def grace_period(due: date, balance: Decimal) -> timedelta:
    if not isinstance(due, date) or not isinstance(balance, Decimal):
        raise TypeError(f"given {type(due).__name__} and {type(balance).__name__}")
    return timedelta(days=min(30, 14 + int(balance // 100)))


def pay_by(due: date, grace: timedelta) -> date:
    return due + grace


def window(due: date, balance: Decimal) -> Window:
    return Window(due, grace_period(due, balance))


def remind(due: date, send: Callable[[date], Decimal]) -> Decimal:
    return send(due - timedelta(days=1))
"""


def grader() -> Grader:
    spec = importlib.util.spec_from_file_location("value_types_grader", TASK / "grader.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loaded = module.GRADER
    assert isinstance(loaded, Grader)
    return loaded


def grade(tmp_path: Path, source: str) -> GradeReport:
    path = tmp_path / "solution.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return grade_in_process(grader(), load_module_from(path))


def failed(report: GradeReport) -> list[str]:
    return [a.id for a in report.assertions if not a.passed]


def test_a_solution_using_the_declared_types_passes(tmp_path: Path) -> None:
    report = grade(tmp_path, SOLUTION)
    assert report.all_passed and report.error is None, report


def test_a_duration_returned_as_a_number_of_days_fails_the_assertion(tmp_path: Path) -> None:
    source = SOLUTION.replace(
        "return timedelta(days=min(30, 14 + int(balance // 100)))",
        "return min(30, 14 + int(balance // 100))",
    ).replace("return Window(due, grace_period(due, balance))", "return Window(due, None)")
    report = grade(tmp_path, source)
    assert report.error is None
    assert failed(report) == ["grace-for-small-balance", "grace-capped", "window-record"]


def test_a_type_the_grader_did_not_declare_is_the_solutions_failure(tmp_path: Path) -> None:
    source = SOLUTION.replace(
        "return due + grace", "from datetime import datetime\n    return datetime(2026, 12, 19)"
    )
    report = grade(tmp_path, source)
    assert report.error is not None and report.error.category == "behaviour"
    assert "non-JSON value of type datetime" in report.error.message
    assert failed(report) == ["pay-by-date"]


def test_a_record_with_other_fields_than_declared_is_the_solutions_failure(
    tmp_path: Path,
) -> None:
    source = SOLUTION.replace(
        "    length: timedelta\n", "    length: timedelta\n    note: str = ''\n"
    )
    report = grade(tmp_path, source)
    assert report.error is not None and report.error.category == "behaviour"
    assert "unknown ['note']" in report.error.message
    assert failed(report) == ["window-record"]


def test_an_argument_of_a_type_the_grader_did_not_declare_is_the_graders_error(
    tmp_path: Path,
) -> None:
    undeclaring = grader()  # a fresh module: changing its class changes no other test
    type(undeclaring).value_types = ()
    path = tmp_path / "solution.py"
    path.write_text(SOLUTION, encoding="utf-8")
    with pytest.raises(GraderError, match="type date at \\[0\\]"):
        grade_in_process(undeclaring, load_module_from(path), reraise=True)
    report = grade_in_process(undeclaring, load_module_from(path))
    assert report.error is not None and report.error.category == "infrastructure"
