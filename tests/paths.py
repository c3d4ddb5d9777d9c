"""Where tests find the repository and their data, wherever in tests/ they live."""

from __future__ import annotations

from pathlib import Path

from agent_eval.models.suite import SuiteSpec

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"


def _example_suite() -> SuiteSpec:
    return SuiteSpec.model_validate_json((REPO / "tasks" / "suite.json").read_bytes())


EXAMPLE_SUITE = _example_suite()
"""The example repository's suite (tasks/suite.json): six tasks, three runs each, 15/18."""
SHIPPED = REPO / "agent_eval" / "shipped"
"""The image recipes and example runner configs shipped with the harness (package data)."""
