"""The grading kit's public names are pinned, and its web part is optional.

A grader may use what ``agent_eval.grading.__all__`` lists; the DOM of
rendered pages and forms lives in ``agent_eval.grading.web``, which the kit
does not import, so a plain-function task loads none of it.
"""

from __future__ import annotations

import subprocess
import sys

import agent_eval.grading
import agent_eval.grading.web

KIT = {
    "AssertionResult",
    "Effect",
    "EffectCall",
    "Finding",
    "GradeReport",
    "Grader",
    "GraderError",
    "Raise",
    "Return",
    "Scenario",
    "Session",
    "SolutionFailed",
    "SolutionRaised",
    "Transport",
    "VerifierBroken",
    "dig",
    "expect",
    "json_type",
    "record_safety",
}
WEB = {
    "Document",
    "Element",
    "control_value",
    "form_data",
    "is_checked",
    "normalise_space",
    "parse_html",
}


def test_the_kit_exports_exactly_its_pinned_names() -> None:
    assert set(agent_eval.grading.__all__) == KIT
    assert len(agent_eval.grading.__all__) == len(KIT)
    assert all(hasattr(agent_eval.grading, name) for name in KIT)


def test_the_web_part_exports_exactly_its_pinned_names() -> None:
    assert set(agent_eval.grading.web.__all__) == WEB
    assert all(hasattr(agent_eval.grading.web, name) for name in WEB)


def test_importing_the_kit_loads_no_web_part() -> None:
    probe = "import sys, agent_eval.grading; print('agent_eval.grading.web' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
