"""compare.json: a baseline's batches set against a candidate's, task by task."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from agent_eval.models.base import MAX_COUNT, NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.catalog import CatalogKind
from agent_eval.models.identity import ModelIdentity, RunnerIdentity

__all__ = [
    "ApiChanges",
    "Comparison",
    "IdentityDifference",
    "RateComparison",
    "SharedSummary",
    "SharedTask",
    "SideSummary",
    "SymbolChange",
    "TaskComparison",
    "Verdict",
]

Verdict = Literal["better", "worse", "no-detectable-difference", "not-measured"]
"""What a comparison may conclude: a difference the exact test finds (p < 0.05) in one
direction, none it could find (with the difference these runs could have detected), or
nothing measured on one side."""


class SideSummary(WireModel):
    """One side of the comparison: its batches (pooled) and what they were bound to."""

    batchIds: list[NonEmptyStr] = Field(min_length=1)
    """The batches pooled on this side."""
    measurement: bool
    """At least one of them ran more repetitions than the suite declares (a measurement)."""
    suiteDigest: str | None
    """The suite's digest, as the batches recorded it."""
    taskIds: list[str]
    """The tasks the batches ran, in schedule order."""
    runsPerTask: int
    """The most runs of one task on this side (pooled)."""
    runner: RunnerIdentity | None
    """The runner's identity."""
    model: ModelIdentity | None
    """The model's identity."""
    servedModels: list[str]
    """The models the provider said it served, as the gateway recorded them."""
    runnerImage: str
    """The runner image's id."""
    verifierImage: str
    """The verifier image's id."""
    gatewayImage: str | None
    """The gateway image (None: no gateway)."""
    upstreams: list[str]
    """Each upstream as ``name=origin (api)``."""
    archives: list[str]
    """Each candidate wheel as ``filename sha256``: the library under evaluation."""
    apiCatalogDigest: str
    """The digest of the library's API catalog, as generated from the installed wheels."""
    sourceCommit: str | None
    """The commit the wheels were built from."""
    evaluatorDigest: str | None
    """The harness's digest."""


class IdentityDifference(WireModel):
    """One identity the two sides do not share."""

    field: NonEmptyStr
    """Which identity (a field of :class:`SideSummary`)."""
    baseline: JsonValue
    """The baseline's value."""
    candidate: JsonValue
    """The candidate's value."""
    expected: bool
    """The library under evaluation (what a comparison is for), or allowed by the caller."""


class SymbolChange(WireModel):
    """One public symbol of the library that one side's API catalog has and the other's
    lacks, or that both have with another kind or signature."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
    """Its fully qualified public spelling, as the catalogs give it."""
    change: Literal["added", "removed", "changed"]
    """Only in the candidate's catalog, only in the baseline's, or in both but different."""
    baselineKind: CatalogKind | None
    """What it is in the baseline's catalog (None: not there)."""
    candidateKind: CatalogKind | None
    """What it is in the candidate's catalog (None: not there)."""
    baselineSignature: str | None
    """Its call signature in the baseline's catalog or, for an attribute, property,
    constant or type alias, its declared type (None: neither, or not there)."""
    candidateSignature: str | None
    """The same in the candidate's catalog."""


class ApiChanges(WireModel):
    """The library's public symbols that differ between the two sides."""

    status: Literal["same-catalog", "compared", "unavailable"]
    """``same-catalog``: both sides recorded one catalog digest, so nothing differs;
    ``compared``: both catalogs were generated again from the batches' wheels, matched
    their recorded digests and were compared; ``unavailable``: they could not be (``note``
    says why), so what changed is not known."""
    changes: list[SymbolChange]
    """Every added, removed or changed symbol, sorted by name (empty unless compared)."""
    note: str | None
    """Why the catalogs could not be compared (None when they were, or were the same)."""


class RateComparison(WireModel):
    """One rate on both sides, their difference, the exact test and the verdict."""

    baselineSuccesses: int = Field(ge=0, le=MAX_COUNT)
    """Successes among the baseline's graded runs."""
    baselineRuns: int = Field(ge=0, le=MAX_COUNT)
    """The baseline's graded runs."""
    candidateSuccesses: int = Field(ge=0, le=MAX_COUNT)
    """Successes among the candidate's graded runs."""
    candidateRuns: int = Field(ge=0, le=MAX_COUNT)
    """The candidate's graded runs."""
    difference: float | None
    """Candidate rate minus baseline rate (None: a side has no graded run)."""
    low: float | None
    """The 95 % interval of the difference (Newcombe's hybrid score interval)."""
    high: float | None
    """The upper end of that interval."""
    pValue: float | None
    """Two-sided p of the exact test (Fisher's; stratified by task when pooled)."""
    detectable: float | None
    """The smallest change from the baseline's rate these runs find with 80 % power
    (None: none, or nothing measured)."""
    verdict: Verdict
    """better, worse, no-detectable-difference or not-measured."""
    sentence: NonEmptyStr
    """The verdict in plain words, never a bare p-value."""


class TaskComparison(WireModel):
    """One task on both sides."""

    taskId: NonEmptyStr
    """The task."""
    first: RateComparison
    """First-attempt success."""
    final: RateComparison
    """Final success (after the repair)."""
    baselineCells: list[str]
    """Each run's outcome on the baseline side, in order: ``pass``, ``repaired``, ``fail``,
    ``unsafe`` or ``infrastructure``."""
    candidateCells: list[str]
    """Each run's outcome on the candidate side."""
    unsafe: tuple[int, int]
    """Attempts with an observed safety violation (baseline, candidate)."""
    unsupportedApi: tuple[int, int]
    """Final attempts with an unsupported or hallucinated API reference."""
    repairs: tuple[int, int]
    """Runs that used their repair."""
    meanTokens: tuple[float | None, float | None]
    """Tokens per attempt as the gateway counted them (None: no gateway)."""
    meanAttemptSeconds: tuple[float | None, float | None]
    """Wall time per attempt, runner and verification (baseline, candidate)."""


class Comparison(WireModel):
    """A baseline against a candidate: identities, per-task and pooled results, verdicts."""

    schemaVersion: SchemaVersion
    """Format version of the comparison."""
    baseline: SideSummary
    """The baseline side."""
    candidate: SideSummary
    """The candidate side."""
    differences: list[IdentityDifference]
    """Every identity the sides do not share."""
    unexpected: list[str]
    """The identities that differ beyond the library, allowed by the caller: said first."""
    api: ApiChanges
    """The library's public symbols added, removed or changed between the sides."""
    method: NonEmptyStr
    """The tests and intervals used, in words."""
    tasks: list[TaskComparison]
    """Each task both or either side ran."""
    first: RateComparison
    """First-attempt success, pooled over the tasks both sides ran (stratified by task)."""
    final: RateComparison
    """Final success, pooled likewise."""
    unsafeAttempts: tuple[int, int]
    """Attempts with an observed safety violation, baseline and candidate (every run, graded
    or not: a violation is the agent's whatever the infrastructure did)."""
    unsafeRuns: tuple[int, int]
    """Runs with at least one such attempt, baseline and candidate."""


class SharedTask(WireModel):
    """One task's counts in a shareable summary."""

    taskId: NonEmptyStr
    """The task."""
    runs: int = Field(ge=0, le=MAX_COUNT)
    """Its runs in the batch."""
    firstSuccesses: int = Field(ge=0, le=MAX_COUNT)
    """Runs whose first attempt succeeded."""
    finalSuccesses: int = Field(ge=0, le=MAX_COUNT)
    """Runs whose last attempt succeeded."""
    unsafeAttempts: int = Field(ge=0, le=MAX_COUNT)
    """Attempts with an observed safety violation."""
    unsupportedApi: int = Field(ge=0, le=MAX_COUNT)
    """Runs whose final attempt referenced an unsupported or hallucinated API."""
    infrastructure: int = Field(ge=0, le=MAX_COUNT)
    """Runs an infrastructure failure touched (nobody's result)."""


class SharedSummary(WireModel):
    """A batch as it may be shared: counts, identities by digest, the decision's rules.

    Never a solution, a transcript, a log, a prompt, a file name of a solution, an
    environment value, a reason's own words (they may quote files) or a path of the
    machine that ran it.
    """

    schemaVersion: SchemaVersion
    """Format version of the summary."""
    batchId: NonEmptyStr
    """The batch."""
    status: NonEmptyStr
    """How the batch ended."""
    qualified: bool
    """What the checker's rules decided, against the checkout the summary was made in."""
    reasonRules: list[str]
    """The rules it failed (their names only: the reasons' words may quote files)."""
    measurement: bool
    """A measurement batch (``eval-agent --repetitions``), which never qualifies."""
    scheduledRuns: int = Field(ge=0, le=MAX_COUNT)
    """The denominator of the totals."""
    firstSuccesses: int = Field(ge=0, le=MAX_COUNT)
    """Runs whose first attempt succeeded."""
    finalSuccesses: int = Field(ge=0, le=MAX_COUNT)
    """Runs whose last attempt succeeded."""
    minFirstSuccesses: int | None
    """The suite's first-try threshold (None: no declaration at hand)."""
    tasks: list[SharedTask]
    """Each task's counts."""
    identity: SideSummary
    """What the batch was bound to, by digest."""
    comparison: Comparison | None = None
    """Set against another batch (``--compare``), when asked."""
