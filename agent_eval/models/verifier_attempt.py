"""The verifier container's attempt file, and what its analysis writes when it cannot run."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_eval.models.analysis import MAX_DIAGNOSTIC_CHARS
from agent_eval.models.base import SchemaVersion, WireModel
from agent_eval.models.behaviour import VerifierJob

__all__ = ["AnalysisFailure", "AttemptAnalysis", "VerifierAttempt"]


class AttemptAnalysis(WireModel):
    """Where the analysis inside the container finds its inputs and puts its output."""

    taskPath: str = Field(pattern=r"^/")
    """The task's task.json."""
    catalogPath: str = Field(pattern=r"^/")
    """The consumer's api-catalog.json."""
    solutionDir: str = Field(pattern=r"^/")
    """The submitted files."""
    scratchDir: str = Field(pattern=r"^/")
    """A directory the parent makes fresh (0700) for mypy and removes afterwards."""
    resultPath: str = Field(pattern=r"^/")
    """Where the parent writes analysis.json."""
    contractPath: str | None = Field(default=None, pattern=r"^/")
    """The task's contract.pyi, if any."""
    starterDir: str | None = Field(default=None, pattern=r"^/")
    """The task's starter files, for the seed-reference exclusion."""
    cacheSeedDir: str | None = Field(default=None, pattern=r"^/")
    """A read-only mypy cache the analysis starts from (made by :func:`warm_analysis_cache`)."""
    searchPath: list[str] = Field(default_factory=list)
    """Import roots of the installed library, for mypy."""
    importPaths: list[str] = Field(default_factory=list)
    """PYTHONPATH of the analysis process (the staged harness modules)."""
    timeoutMs: int = Field(default=300_000, ge=1, le=3_600_000)
    """mypy's time limit."""


class VerifierAttempt(WireModel):
    """The attempt file the verifier container runs with (``/verifier/trusted/attempt.json``)."""

    schemaVersion: SchemaVersion
    """Format version of the attempt file."""
    analysis: AttemptAnalysis
    """The static analysis, run first."""
    behaviour: VerifierJob
    """The behavioural job, run after the analysis (the job.json format)."""
    timingsPath: str | None = Field(default=None, pattern=r"^/")
    """Where the parent also writes where its time went (a profile the benchmark
    asks for, never a grade); none is written by default."""


class AnalysisErrorDetail(WireModel):
    """Why the analysis inside the container could not run."""

    kind: Literal["input", "infrastructure"]
    """input: the task's files are unusable; infrastructure: mypy or the analysis broke."""
    message: str = Field(max_length=4 * MAX_DIAGNOSTIC_CHARS)
    """What happened (bounded)."""


class AnalysisFailure(WireModel):
    """analysis.json when the analysis could not run (then nothing was graded)."""

    analysisError: AnalysisErrorDetail
    """The failure."""
