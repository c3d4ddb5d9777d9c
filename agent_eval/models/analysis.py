"""analysis.json: static analysis of one submitted attempt, and the diagnostic shape."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_eval.models.base import MAX_COUNT, Digest, SchemaVersion, WireModel

__all__ = [
    "MAX_DIAGNOSTIC_CHARS",
    "Analysis",
    "Diagnostic",
    "DiagnosticCategory",
    "IntegrationResult",
]

MAX_DIAGNOSTIC_CHARS = 2000

DiagnosticCategory = Literal[
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


class Diagnostic(WireModel):
    """One finding, bounded in size, never carrying an expected value."""

    category: DiagnosticCategory
    """What kind of finding this is; categories are never merged."""
    message: str = Field(max_length=MAX_DIAGNOSTIC_CHARS)
    """Human-readable text (compiler output, analysis finding)."""
    path: str | None = Field(default=None, max_length=255)
    """Solution-relative file the finding is in, when known."""
    line: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """1-based line number, when known."""


class IntegrationResult(WireModel):
    """Whether one required-integration entry is satisfied by a value use."""

    symbols: list[str]
    """The entry's candidate symbols."""
    satisfied: bool
    """At least one symbol is used as a value (call, construction, argument, decorator)."""


class Analysis(WireModel):
    """Static analysis of a submitted solution; never executes it."""

    schemaVersion: SchemaVersion
    """Format version of analysis.json."""
    taskId: str
    """Task the solution was submitted for."""
    solutionDigest: Digest
    """Digest of the analysed solution files."""
    syntaxOk: bool
    """Every file parses."""
    typeCheckOk: bool
    """mypy reports no error against the library's types and the contract."""
    contractOk: bool
    """Every export required by the contract exists with a compatible signature."""
    integrationOk: bool
    """Every required-integration entry is satisfied by a value use."""
    unsupportedApi: list[str]
    """Distinct library references that do not exist in the API catalog."""
    unsupportedApiCount: int = Field(ge=0, le=MAX_COUNT)
    """len(unsupportedApi)."""
    hallucinatedApi: list[str]
    """unsupportedApi minus seed references left exactly as seeded."""
    hallucinatedApiCount: int = Field(ge=0, le=MAX_COUNT)
    """len(hallucinatedApi)."""
    missingDependencies: list[str]
    """Imported modules outside the task's allowedImports."""
    integration: list[IntegrationResult]
    """One entry per required-integration requirement."""
    diagnostics: list[Diagnostic]
    """Every finding, by category."""
    mypyVersion: str
    """Version of the type checker used."""

    @property
    def passed(self) -> bool:
        """Whether the solution clears static analysis."""
        return (
            self.syntaxOk
            and self.typeCheckOk
            and self.contractOk
            and self.integrationOk
            and self.unsupportedApiCount == 0
            and not self.missingDependencies
        )
