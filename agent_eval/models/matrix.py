"""matrix.json: many runners' batches over one library, suite and verifier, side by side."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_eval.models.base import NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.compare import RateComparison
from agent_eval.models.identity import ModelIdentity, RunnerIdentity

__all__ = [
    "Matrix",
    "MatrixRate",
    "MatrixRow",
    "MatrixTask",
    "PairRate",
    "PairVerdict",
    "RowPair",
]

PairVerdict = Literal["better", "worse", "no-detectable-difference", "not-measured"]
"""The higher-ranked row against the lower one, after Holm's correction for every pair."""


class MatrixRate(WireModel):
    """Successes over graded runs, with the Wilson score 95 % interval of the rate."""

    successes: int = Field(ge=0)
    runs: int = Field(ge=0)
    rate: float | None
    """successes / runs (None: no graded run)."""
    low: float | None
    high: float | None


class MatrixTask(WireModel):
    """One row's runs of one task."""

    taskId: NonEmptyStr
    first: MatrixRate
    final: MatrixRate


class MatrixRow(WireModel):
    """One runner identity (runner and model): its batches pooled."""

    rank: int = Field(ge=1)
    """1 is the highest final rate (ties: the higher first rate)."""
    label: NonEmptyStr
    """``runner version / model``, as the evidence names them."""
    runner: RunnerIdentity | None
    model: ModelIdentity | None
    batchIds: list[NonEmptyStr] = Field(min_length=1)
    first: MatrixRate
    final: MatrixRate
    tasks: list[MatrixTask]
    unsafeAttempts: int = Field(ge=0)
    unsafeRuns: int = Field(ge=0)
    """Runs with at least one unsafe attempt."""
    meanTokensPerRun: float | None
    """Gateway tokens (input and output) of a run's attempts, averaged over the runs the
    gateway recorded (None: none did)."""
    meanSecondsPerRun: float | None
    """A run's attempts' wall time, averaged over the runs with an attempt."""
    modelCallsPerSuccess: float | None
    """Gateway requests of every run over the final successes (None: no gateway record,
    or no success)."""


class PairRate(WireModel):
    """One rate compared between two rows, with Holm's correction over every pair."""

    comparison: RateComparison
    """Compare's stratified exact test of the pair: the higher-ranked row is the
    candidate, the lower the baseline, so the difference is the higher's minus the
    lower's; its own verdict is before correction."""
    adjustedP: float | None
    """The p-value adjusted by Holm's step-down method over the pairs measured."""
    verdict: PairVerdict
    """``better``: the higher-ranked row is better (adjusted p < 0.05); ``worse``: it is
    worse, the stratified estimate against the crude ranking."""


class RowPair(WireModel):
    """Two rows set against each other."""

    higher: NonEmptyStr
    """The higher-ranked row's label."""
    lower: NonEmptyStr
    """The lower-ranked row's label."""
    first: PairRate
    final: PairRate


class Matrix(WireModel):
    """Every runner's rows over one library, suite, verifier and harness."""

    schemaVersion: SchemaVersion
    suiteDigest: str | None
    taskIds: list[str]
    archives: list[str]
    """Each library wheel as ``filename sha256``, shared by every batch."""
    apiCatalogDigest: str
    sourceCommit: str | None
    verifierImage: str
    evaluatorDigest: str | None
    method: NonEmptyStr
    rows: list[MatrixRow] = Field(min_length=1)
    """Ranked by final rate, then first rate."""
    pairs: list[RowPair]
    """Every pair of rows, the higher-ranked first."""
