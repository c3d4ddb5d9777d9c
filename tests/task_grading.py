"""Grade a task's fixtures or small stand-in solutions in this process, for grader unit tests.

Uses the grading kit's in-process session (the verifier's bookkeeping, the
solution's functions called directly), so a grader's decisions can be tested
without a subprocess or mypy. The library under evaluation is imported from
its sources in ``packages/``.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_eval.grading import Grader, GradeReport
from agent_eval.models.fixture import CorrectCase, NegativeCase
from agent_eval.suite.fixture_cases import FixtureCase, load_fixture_cases
from agent_eval.suite.tasks import Suite, load_suite
from agent_eval.verification.in_process import grade_in_process, load_module_from

REPO = Path(__file__).resolve().parents[1]

for _src in sorted((REPO / "packages").glob("*/src"), reverse=True):
    if str(_src) not in sys.path:
        sys.path.insert(0, str(_src))


@functools.cache
def suite() -> Suite:
    """The repository's suite."""
    return load_suite(REPO / "tasks", graders_dir=REPO / "graders")


@functools.cache
def grader_module(task_id: str) -> types.ModuleType:
    """The module of *task_id*'s grader.py, for its helper functions."""
    path = REPO / "tasks" / task_id / "grader.py"
    spec = importlib.util.spec_from_file_location(f"grader_under_test_{task_id}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task_grader(task_id: str) -> Grader:
    """The live grader of *task_id*."""
    grader = grader_module(task_id).GRADER
    assert isinstance(grader, Grader)
    return grader


def fixture_cases(task_id: str) -> list[FixtureCase]:
    """The fixture cases of *task_id*."""
    return [c for c in load_fixture_cases(REPO / "fixtures", suite()) if c.task.id == task_id]


def negative_cases(task_id: str) -> list[FixtureCase]:
    """The negative fixture cases of *task_id*."""
    return [c for c in fixture_cases(task_id) if isinstance(c.expectation, NegativeCase)]


def correct_cases(task_id: str) -> list[FixtureCase]:
    """The correct fixture cases of *task_id*."""
    return [c for c in fixture_cases(task_id) if isinstance(c.expectation, CorrectCase)]


def expected_failures(case: FixtureCase) -> set[str]:
    """The assertions a case declares as failing (none for a correct case)."""
    expectation = case.expectation
    if isinstance(expectation, CorrectCase):
        return set()
    return set(expectation.expected_failures(case.task.spec.assertionIds))


def grade_fixture(case: FixtureCase) -> GradeReport:
    """Grade a fixture solution, a fresh module per scenario as in the verifier."""
    return grade_in_process(
        task_grader(case.task.id), load_module_from(case.directory / "solution.py")
    )


def grade_stand_in(task_id: str, make: Callable[[], dict[str, Callable[..., Any]]]) -> GradeReport:
    """Grade a stand-in solution whose exports *make* builds afresh for each scenario.

    A grader error propagates, so a test sees the grader's own mistakes at once.
    """

    def fresh() -> types.ModuleType:
        module = types.ModuleType("solution")
        for name, function in make().items():
            setattr(module, name, function)
        return module

    return grade_in_process(task_grader(task_id), fresh, reraise=True)
