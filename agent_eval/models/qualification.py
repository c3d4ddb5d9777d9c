"""The qualification decision printed by check-agent-eval."""

from __future__ import annotations

from pydantic import model_validator

from agent_eval.models.base import WireModel

__all__ = ["QualificationResult"]


class QualificationResult(WireModel):
    """``{"qualified": bool, "reasons": [...]}``; a rejection always has reasons."""

    qualified: bool
    """True only when every rule holds."""
    reasons: list[str]
    """One line per failed rule: ``<rule>: <what, where>``."""

    @model_validator(mode="after")
    def _reasons_iff_rejected(self) -> QualificationResult:
        if self.qualified == bool(self.reasons):
            raise ValueError("a rejection needs reasons and a qualification has none")
        return self
