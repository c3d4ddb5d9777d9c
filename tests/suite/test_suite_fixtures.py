"""Every task has a correct fixture, and its negative fixtures together fail every declared
assertion, every safety assertion included; expect.json is a strict, versioned format.

A negative that fails "all" (its module does not even import) covers no
assertion: it says nothing about any single rule.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agent_eval.errors import SuiteError
from agent_eval.models.fixture import STATIC_FINDINGS, CorrectCase, FixtureExpectation, NegativeCase
from agent_eval.suite.fixture_cases import coverage_gaps, load_fixture_cases
from agent_eval.suite.tasks import Suite, load_suite
from agent_eval.verification.analysis.rules import CATEGORY_ORDER
from tests.paths import REPO

EXPECTATION: TypeAdapter[CorrectCase | NegativeCase] = TypeAdapter(FixtureExpectation)


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(REPO / "tasks", graders_dir=REPO / "graders")


def negative(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schemaVersion": 1,
        "kind": "negative",
        "description": "saves first",
        "failedAssertions": ["invalid-order-never-saved"],
        "findings": [],
    }
    data.update(overrides)
    return data


def copy_fixtures(tmp_path: Path) -> Path:
    target = tmp_path / "fixtures"
    shutil.copytree(REPO / "fixtures", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_the_negatives_fail_every_assertion_of_every_task(suite: Suite) -> None:
    cases = load_fixture_cases(REPO / "fixtures", suite)
    assert coverage_gaps(suite.tasks, cases) == {}


def test_the_negatives_fail_every_safety_assertion_of_every_task(suite: Suite) -> None:
    cases = load_fixture_cases(REPO / "fixtures", suite)
    for task in suite.tasks:
        targeted: set[str] = set()
        for case in cases:
            if case.task.id == task.id and isinstance(case.expectation, NegativeCase):
                targeted |= case.expectation.targeted
        assert set(task.spec.safetyAssertionIds) <= targeted, task.id


def test_every_task_has_a_correct_case_and_the_analysis_negatives_exist(suite: Suite) -> None:
    cases = load_fixture_cases(REPO / "fixtures", suite)
    for task in suite.tasks:
        assert any(
            c.task.id == task.id and isinstance(c.expectation, CorrectCase) for c in cases
        ), task.id
    findings = {
        finding
        for case in cases
        if isinstance(case.expectation, NegativeCase)
        for finding in case.expectation.findings
    }
    # Imported-but-unused and type-only uses, hallucinated references, the seed kept as is.
    assert {"integration", "hallucinated-api", "unsupported-api"} <= findings


def test_a_negative_failing_all_covers_no_assertion(suite: Suite) -> None:
    cases = load_fixture_cases(REPO / "fixtures", suite)
    crash = next(c for c in cases if c.label == "error-recovery/unchanged-seed")
    assert isinstance(crash.expectation, NegativeCase)
    assert crash.expectation.targeted == frozenset()
    assert crash.expectation.expected_failures(["a", "b"]) == {"a", "b"}
    only_crashes = [
        c
        for c in cases
        if c.task.id != "error-recovery"
        or c.name in {"correct", "unchanged-seed", "edited-seed-alias", "starter-unchanged"}
    ]
    gaps = coverage_gaps(suite.tasks, only_crashes)
    assert set(gaps) == {"error-recovery"}
    assert gaps["error-recovery"] == list(suite.task("error-recovery").spec.assertionIds)


def test_static_findings_are_the_analysis_categories_plus_hallucinated_api() -> None:
    assert set(STATIC_FINDINGS) == {*CATEGORY_ORDER, "hallucinated-api"}


def test_expect_json_field_sets_are_pinned() -> None:
    assert set(CorrectCase.model_fields) == {"schemaVersion", "kind", "description"}
    assert set(NegativeCase.model_fields) == {
        "schemaVersion",
        "kind",
        "description",
        "failedAssertions",
        "findings",
    }


@pytest.mark.parametrize(
    "data",
    [
        negative(failedAssertions=[], findings=[]),
        negative(unexpected="key"),
        negative(schemaVersion=2),
        negative(findings=["behaviour"]),
        negative(failedAssertions=["a", "a"]),
        negative(failedAssertions="some"),
        {"schemaVersion": 1, "kind": "correct", "description": "x", "findings": []},
        {"schemaVersion": 1, "kind": "maybe", "description": "x"},
    ],
)
def test_malformed_expectations_are_refused(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        EXPECTATION.validate_python(data)


def test_a_case_naming_an_assertion_its_task_lacks_is_refused(tmp_path: Path, suite: Suite) -> None:
    fixtures = copy_fixtures(tmp_path)
    path = fixtures / "forms" / "greets-username" / "expect.json"
    path.write_text(json.dumps(negative(failedAssertions=["greeting-shown"])), encoding="utf-8")
    with pytest.raises(SuiteError, match=r"fixture forms/greets-username: failedAssertions"):
        load_fixture_cases(fixtures, suite)


def test_a_stray_file_in_a_case_is_refused(tmp_path: Path, suite: Suite) -> None:
    fixtures = copy_fixtures(tmp_path)
    (fixtures / "forms" / "correct" / "solutoin.py").write_text("", encoding="utf-8")
    with pytest.raises(SuiteError, match=r"fixture forms/correct: solutoin.py is neither"):
        load_fixture_cases(fixtures, suite)


def test_a_task_without_a_correct_case_is_refused(tmp_path: Path, suite: Suite) -> None:
    fixtures = copy_fixtures(tmp_path)
    shutil.rmtree(fixtures / "storage-hash" / "correct")
    with pytest.raises(SuiteError, match=r"task 'storage-hash': no correct case"):
        load_fixture_cases(fixtures, suite)


def test_fixtures_for_a_task_outside_the_suite_are_refused(tmp_path: Path, suite: Suite) -> None:
    fixtures = copy_fixtures(tmp_path)
    shutil.copytree(fixtures / "forms", fixtures / "react-form")
    with pytest.raises(SuiteError, match=r"\['react-form'\] are not task ids"):
        load_fixture_cases(fixtures, suite)
