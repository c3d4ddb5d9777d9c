"""The qualification decision printed by check-agent-eval."""

from __future__ import annotations

from pydantic import model_validator

from agent_eval.models.base import WireModel
from agent_eval.models.chain import ChainBatch

__all__ = ["QualificationResult"]


class QualificationResult(WireModel):
    """``{"qualified": bool, "reasons": [...]}``; a rejection always has reasons."""

    qualified: bool
    """True only when every rule holds."""
    reasons: list[str]
    """One line per failed rule: ``<rule>: <what, where>``."""
    chain: list[ChainBatch] | None = None
    """For a resumed batch, each batch of its chain, first first: the runs the decision
    took from it, and what it spent (None: a batch of its own)."""
    notes: list[str] | None = None
    """What the decision cannot rule out without ``--reverify`` (a consumer taken from
    the consumer cache), one line each; None when there is nothing to note."""

    @model_validator(mode="after")
    def _reasons_iff_rejected(self) -> QualificationResult:
        if self.qualified == bool(self.reasons):
            raise ValueError("a rejection needs reasons and a qualification has none")
        return self
