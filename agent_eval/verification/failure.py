"""Why a verified solution failed: the one ranking of its analysis and its grading.

The batch judges each attempt's code with it (``batch.judging``) and the checker's
re-verification re-derives the verdict with it (``verdict.reverify``), so both rank
the same findings the same way.
"""

from __future__ import annotations

from agent_eval.models.analysis import Analysis
from agent_eval.models.behaviour import BehaviourResult
from agent_eval.models.receipt import FailureCategory

__all__ = ["code_failure_category"]


def code_failure_category(
    analysis: Analysis | None, behaviour: BehaviourResult | None
) -> FailureCategory | None:
    """Why a submitted solution failed, from its analysis and grading; None when it passed.

    In the order of trust: a verifier that broke first, then safety, then the
    static findings from the most basic up, then behaviour. The batch judges
    attempts with it and the checker re-derives verdicts with it.
    """
    if analysis is None or behaviour is None or behaviour.infrastructure_failed:
        return "infrastructure"
    if behaviour.safety == "violated":
        return "safety"
    if not analysis.syntaxOk:
        return "syntax"
    if analysis.missingDependencies:
        return "missing-dependency"
    if analysis.unsupportedApiCount:
        return "unsupported-api"
    if not analysis.contractOk:
        return "contract-mismatch"
    if not analysis.typeCheckOk:
        return "type-check"
    if not analysis.integrationOk:
        return "integration"
    if not behaviour.passed:
        return "behaviour"
    return None
