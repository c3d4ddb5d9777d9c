"""One vocabulary of failure and diagnostic categories: the grading kit (standard
library), the evidence models, static analysis, judging and the checker use the same
words, and the one bridge between failure and diagnostic categories is total."""

from __future__ import annotations

from typing import get_args

from agent_eval.batch.judging import _FAILED_RUNS, REPAIRABLE
from agent_eval.grading.results import CATEGORIES as GRADING_CATEGORIES
from agent_eval.models.analysis import DiagnosticCategory
from agent_eval.models.behaviour import SafetyOutcome
from agent_eval.models.fixture import STATIC_FINDINGS
from agent_eval.models.receipt import FAILURE_DIAGNOSTICS, FailureCategory
from agent_eval.verification.analysis.rules import CATEGORY_ORDER

DIAGNOSTICS = set(get_args(DiagnosticCategory))
FAILURES = set(get_args(FailureCategory))


def test_the_grading_kit_speaks_the_evidence_formats_words() -> None:
    assert GRADING_CATEGORIES == DIAGNOSTICS


def test_static_analysis_categories_are_diagnostic_categories() -> None:
    assert set(CATEGORY_ORDER) <= DIAGNOSTICS
    assert set(STATIC_FINDINGS) - {"hallucinated-api"} == set(CATEGORY_ORDER)


def test_every_failure_category_is_explained_by_diagnostic_categories() -> None:
    assert set(FAILURE_DIAGNOSTICS) == FAILURES
    used = set().union(*FAILURE_DIAGNOSTICS.values())
    assert used == DIAGNOSTICS


def test_judging_uses_failure_categories_only() -> None:
    assert REPAIRABLE <= FAILURES
    assert {category for category, _ in _FAILED_RUNS.values()} <= FAILURES
    # Infrastructure of any kind is never repaired: it says nothing about the agent.
    assert "infrastructure" not in REPAIRABLE


def test_safety_has_three_outcomes() -> None:
    assert set(get_args(SafetyOutcome)) == {"passed", "violated", "not-observed"}
