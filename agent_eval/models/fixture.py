"""expect.json: what a fixture case is for, and the verdict it must get."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal, get_args

from pydantic import Field, TypeAdapter, model_validator

from agent_eval.models.base import NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.task import AssertionId

__all__ = [
    "STATIC_FINDINGS",
    "CorrectCase",
    "FixtureCaseRow",
    "FixtureExpectation",
    "FixtureReport",
    "NegativeCase",
    "StaticFinding",
    "parse_expectation",
]

ALL_ASSERTIONS = "all"

StaticFinding = Literal[
    "syntax",
    "type-error",
    "wrong-arguments",
    "missing-dependency",
    "unsupported-api",
    "contract-mismatch",
    "integration",
    "hallucinated-api",
]
"""What static analysis can find: its diagnostic categories, plus ``hallucinated-api``."""

STATIC_FINDINGS: tuple[str, ...] = get_args(StaticFinding)


class CorrectCase(WireModel):
    """A reference solution: every assertion passes and static analysis finds nothing."""

    schemaVersion: SchemaVersion
    """Format version of expect.json."""
    kind: Literal["correct"]
    """Discriminator: a solution that must pass."""
    description: NonEmptyStr
    """How the solution solves the task."""


class NegativeCase(WireModel):
    """A flawed solution and exactly how it must fail."""

    schemaVersion: SchemaVersion
    """Format version of expect.json."""
    kind: Literal["negative"]
    """Discriminator: a solution that must fail for the stated reason."""
    description: NonEmptyStr
    """What is wrong with the solution."""
    failedAssertions: list[AssertionId] | Literal["all"]
    """Exactly the assertions that fail; "all" when the module does not even import."""
    findings: list[StaticFinding]
    """Exactly the static-analysis findings it triggers."""

    @model_validator(mode="after")
    def _says_why(self) -> NegativeCase:
        if not self.failedAssertions and not self.findings:
            raise ValueError("a negative case must name failing assertions or findings")
        for name, values in (
            ("failedAssertions", self.failedAssertions),
            ("findings", self.findings),
        ):
            if isinstance(values, list) and len(set(values)) != len(values):
                raise ValueError(f"{name} lists a value twice")
        return self

    def expected_failures(self, assertion_ids: Sequence[str]) -> frozenset[str]:
        """The failing assertions, with "all" expanded to *assertion_ids*."""
        if self.failedAssertions == ALL_ASSERTIONS:
            return frozenset(assertion_ids)
        return frozenset(self.failedAssertions)

    @property
    def targeted(self) -> frozenset[str]:
        """The assertions this case fails one by one (none for "all")."""
        if self.failedAssertions == ALL_ASSERTIONS:
            return frozenset()
        return frozenset(self.failedAssertions)


FixtureExpectation = Annotated[CorrectCase | NegativeCase, Field(discriminator="kind")]
"""The contents of ``expect.json``."""

_EXPECTATION: TypeAdapter[CorrectCase | NegativeCase] = TypeAdapter(FixtureExpectation)


def parse_expectation(data: bytes) -> CorrectCase | NegativeCase:
    """Validate expect.json's bytes, strictly (pydantic's ValidationError names the field)."""
    return _EXPECTATION.validate_json(data, strict=True)


class FixtureCaseRow(WireModel):
    """One row of ``agent-eval tasks verify``: a fixture case, or a check of the suite."""

    taskId: NonEmptyStr
    """The task the row is about."""
    case: NonEmptyStr
    """The fixture case's directory name, or ``(references)`` / ``(coverage)``."""
    expected: str
    """What the case declares (``pass``, or the assertions and findings it must fail)."""
    observed: str
    """What the verifier saw, in the same words (``infrastructure failure``: nothing decided)."""
    ok: bool
    """The observation is what the case declares."""
    infrastructure: bool
    """The harness could not verify the case: it says nothing about the case or its task."""
    detail: str
    """Why it does not match (empty when it does)."""
    explanations: list[str]
    """For a mismatch: each finding as ``path:line: category: message`` and each failed
    assertion as ``assertion id: its message``, in the verifier's words."""


class FixtureReport(WireModel):
    """The result of ``agent-eval tasks verify --json``."""

    schemaVersion: SchemaVersion
    """Format version of this report."""
    verifier: NonEmptyStr
    """Which verifier checked the cases (``local``, ``docker``)."""
    seconds: float
    """How long the check took."""
    ok: bool
    """Every row matched."""
    rows: list[FixtureCaseRow]
    """Every row, coverage and references first, then the cases in the suite's order."""
