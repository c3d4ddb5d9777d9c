"""What grading produced: assertion outcomes, findings, and the reason grading stopped early."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = [
    "MAX_ASSERTION_TEXT_CHARS",
    "MAX_FINDINGS",
    "AssertionResult",
    "Category",
    "Finding",
    "GradeReport",
    "bounded",
]

MAX_FINDINGS = 50
MAX_FINDING_CHARS = 2000
MAX_ASSERTION_TEXT_CHARS = 500
"""An assertion's message and observed value are cut to this (the result model's bound;
a test keeps the two equal)."""

Category = Literal[
    "syntax",
    "type-error",
    "wrong-arguments",
    "missing-dependency",
    "unsupported-api",
    "contract-mismatch",
    "integration",
    "behaviour",
    "safety",
    "runner",
    "collection",
    "tampering",
    "timeout",
    "infrastructure",
    "provider",
    "gateway",
]
"""The diagnostic categories of the evidence format (never merged): the same list as
``agent_eval.models.analysis.DiagnosticCategory`` (this kit runs without pydantic;
a test keeps the two equal)."""

CATEGORIES: frozenset[str] = frozenset(get_args(Category))


def bounded(text: str, limit: int = MAX_FINDING_CHARS) -> str:
    """*text* cut to *limit* characters, marking the cut."""
    if len(text) <= limit:
        return text
    marker = "... [truncated]"
    return text[: max(0, limit - len(marker))] + marker


@dataclass(frozen=True)
class AssertionResult:
    """One declared assertion and whether it held."""

    id: str
    passed: bool
    safety: bool
    detail: str = ""
    """Grader-side explanation; kept out of the result file (it may hold expected values)."""
    observed: bool = True
    """False when the solution failed before the grader could record this assertion: a
    crash is a failure, but not an observed unsafe behaviour."""
    message: str = ""
    """Why it failed, for a reviewer; written to the result file when it failed, so it
    must never hold an expected value (``detail`` is where those may go)."""
    observed_value: str = ""
    """What the solution did or returned, as the grader saw it; written when it failed."""

    def to_json(self) -> dict[str, Any]:
        """The result-file form: the grade, and for a failure the reviewer's explanation."""
        data: dict[str, Any] = {
            "id": self.id,
            "passed": self.passed,
            "observed": self.observed,
            "safety": self.safety,
        }
        if not self.passed:
            # Absent when empty, so a grader that explains nothing writes what it always did.
            if self.message:
                data["message"] = bounded(self.message, MAX_ASSERTION_TEXT_CHARS)
            if self.observed_value:
                data["observedValue"] = bounded(self.observed_value, MAX_ASSERTION_TEXT_CHARS)
        return data


@dataclass(frozen=True)
class Finding:
    """One diagnostic: a category and a bounded message."""

    category: Category
    message: str

    def to_json(self) -> dict[str, Any]:
        """The result-file form."""
        return {"category": self.category, "message": self.message}


@dataclass(frozen=True)
class GradeReport:
    """Everything one grading run decided, in declaration order."""

    task_id: str
    assertions: tuple[AssertionResult, ...]
    needs_review: bool
    diagnostics: tuple[Finding, ...]
    error: Finding | None
    """Why grading did not complete normally: the solution failed (timeout, crash,
    import error, unexpected exception) or the grader/infrastructure broke."""

    def outcome(self, assertion_id: str) -> AssertionResult:
        """The result of *assertion_id*; KeyError when it is not declared."""
        for result in self.assertions:
            if result.id == assertion_id:
                return result
        raise KeyError(assertion_id)

    def passed(self, assertion_id: str) -> bool:
        """Whether *assertion_id* held."""
        return self.outcome(assertion_id).passed

    @property
    def failed_ids(self) -> list[str]:
        """Declared assertions that did not hold, in declaration order."""
        return [a.id for a in self.assertions if not a.passed]

    @property
    def all_passed(self) -> bool:
        """Every assertion held and grading completed without an error."""
        return self.error is None and all(a.passed for a in self.assertions)

    def to_json(self) -> dict[str, Any]:
        """The result-file form (schema version 1); details stay out."""
        return {
            "schemaVersion": 1,
            "taskId": self.task_id,
            "assertions": [a.to_json() for a in self.assertions],
            "needsReview": self.needs_review,
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "error": None if self.error is None else self.error.to_json(),
        }
