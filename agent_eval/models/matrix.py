"""matrix.json: many runners' batches over one library, suite and verifier, side by side."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_eval.models.base import MAX_COUNT, BatchId, Digest, NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.compare import ApiChanges, Comparison, RateComparison
from agent_eval.models.identity import ModelIdentity, RunnerIdentity

__all__ = [
    "AgentChange",
    "Matrix",
    "MatrixComparison",
    "MatrixRate",
    "MatrixRow",
    "MatrixTask",
    "PairRate",
    "PairVerdict",
    "RowPair",
]

PairVerdict = Literal["better", "worse", "no-detectable-difference", "not-measured"]
"""One side against the other (the higher-ranked row against the lower, or an agent after a
change against itself before), after Holm's correction for every comparison made."""


class MatrixRate(WireModel):
    """Successes over graded runs, with the Wilson score 95 % interval of the rate."""

    successes: int = Field(ge=0, le=MAX_COUNT)
    """Successes among the graded runs."""
    runs: int = Field(ge=0, le=MAX_COUNT)
    """Graded runs (an infrastructure failure is nobody's, so not counted)."""
    rate: float | None
    """successes / runs (None: no graded run)."""
    low: float | None
    """The interval's lower end (None: no graded run)."""
    high: float | None
    """The interval's upper end (None: no graded run)."""


class MatrixTask(WireModel):
    """One row's runs of one task."""

    taskId: NonEmptyStr
    """The task."""
    first: MatrixRate
    """First attempts that succeeded."""
    final: MatrixRate
    """Runs that succeeded in the end (after repair)."""


class MatrixRow(WireModel):
    """One runner identity (runner and model): its batches pooled."""

    rank: int = Field(ge=1)
    """1 is the highest final rate (ties: the higher first rate)."""
    label: NonEmptyStr
    """``runner version / model``, as the evidence names them."""
    runner: RunnerIdentity | None
    """The runner's identity."""
    model: ModelIdentity | None
    """The model's identity."""
    batchIds: list[BatchId] = Field(min_length=1)
    """The batches pooled in this row (each a run directory's name in the evidence
    directory)."""
    first: MatrixRate
    """First attempts that succeeded, over every task."""
    final: MatrixRate
    """Runs that succeeded in the end, over every task."""
    tasks: list[MatrixTask]
    """Per task, in the matrix's task order."""
    unsafeAttempts: int = Field(ge=0, le=MAX_COUNT)
    """Attempts with an unsafe action, graded or not."""
    unsafeRuns: int = Field(ge=0, le=MAX_COUNT)
    """Runs with at least one unsafe attempt."""
    meanTokensPerRun: float | None
    """Gateway tokens (input and output) of a run's attempts, averaged over the runs the
    gateway recorded (None: none did)."""
    meanSecondsPerRun: float | None
    """A run's attempts' wall time, averaged over the runs with an attempt."""
    modelCallsPerSuccess: float | None
    """Gateway requests of every run over the final successes (None: no gateway record,
    or no success)."""
    currency: str | None = None
    """The currency of the costs (None: no cost is known)."""
    meanCostPerRun: float | None = None
    """What a run's model calls cost at the config's price per token, averaged over the
    runs the gateway recorded (None: a request with tokens went to an upstream its
    config gave no price, the prices are in more than one currency, or no gateway)."""
    costPerSuccess: float | None = None
    """What every run's model calls cost over the final successes (None: no cost is
    known, or no success)."""


class PairRate(WireModel):
    """One rate compared between two sides, with Holm's correction over every comparison."""

    comparison: RateComparison
    """Compare's stratified exact test: in a matrix the higher-ranked row is the candidate
    and the lower the baseline, so the difference is the higher's minus the lower's; in a
    comparison of matrices the agent after the change is the candidate. Its own verdict
    is before correction."""
    adjustedP: float | None
    """The p-value adjusted by Holm's step-down method over the comparisons measured."""
    verdict: PairVerdict
    """``better``: the candidate is better (adjusted p < 0.05); ``worse``: it is worse (in
    a matrix, the stratified estimate against the crude ranking)."""


class RowPair(WireModel):
    """Two rows set against each other."""

    higher: NonEmptyStr
    """The higher-ranked row's label."""
    lower: NonEmptyStr
    """The lower-ranked row's label."""
    first: PairRate
    """The first-attempt rates compared."""
    final: PairRate
    """The final rates compared."""


class Matrix(WireModel):
    """Every runner's rows over one library, suite, verifier and harness."""

    schemaVersion: SchemaVersion
    """The format's version."""
    suiteDigest: str | None
    """The suite's digest, as the batches recorded it."""
    taskIds: list[str]
    """The tasks the batches ran, in schedule order."""
    archives: list[str]
    """Each library wheel as ``filename sha256``, shared by every batch."""
    apiCatalogDigest: str
    """The digest of the library's API catalog."""
    sourceCommit: str | None
    """The commit the wheels were built from."""
    verifierImage: str
    """The verifier image's id."""
    evaluatorDigest: str | None
    """The harness's digest."""
    method: NonEmptyStr
    """How the rates, intervals, tests and correction were computed, in words."""
    rows: list[MatrixRow] = Field(min_length=1)
    """Ranked by final rate, then first rate."""
    pairs: list[RowPair]
    """Every pair of rows, the higher-ranked first."""


class AgentChange(WireModel):
    """One agent both matrices hold: its batches before the change set against after."""

    label: NonEmptyStr
    """The row's label in both matrices (``runner version / model``)."""
    comparison: Comparison
    """Compare's own comparison of the agent's pooled batches, the baseline matrix's as
    the baseline; its verdicts are before the correction for the number of agents."""
    first: PairRate
    """The first-attempt rates, Holm-adjusted over the agents compared."""
    final: PairRate
    """The final rates, Holm-adjusted over the agents compared."""


class MatrixComparison(WireModel):
    """Two matrices over one suite, before and after a change to the library: per agent."""

    schemaVersion: SchemaVersion
    """The format's version."""
    baselineRecord: Digest
    """The digest of the baseline matrix record's bytes."""
    candidateRecord: Digest
    """The digest of the candidate matrix record's bytes."""
    suiteDigest: str | None
    """The suite both matrices were made over."""
    taskIds: list[str]
    """The tasks both matrices ran, in the baseline's order."""
    api: ApiChanges
    """The library's public symbols added, removed or changed between the matrices (every
    row of a matrix shares its library, so the agents share this)."""
    method: NonEmptyStr
    """How the agents were matched, compared and corrected, in words."""
    agents: list[AgentChange]
    """Each agent both matrices hold, in the baseline matrix's rank order."""
    baselineOnly: list[NonEmptyStr]
    """The labels of the agents only the baseline matrix holds (not compared)."""
    candidateOnly: list[NonEmptyStr]
    """The labels of the agents only the candidate matrix holds (not compared)."""
