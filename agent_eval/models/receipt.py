"""receipt.json: the authoritative record of one batch, written after every run."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, AwareDatetime, Field, model_validator

from agent_eval.layout import (
    ANALYSIS_FILE,
    GATEWAY_RECORD_FILE,
    RUNNER_LOG_FILE,
    SOLUTION_DIR,
    TRANSCRIPT_FILE,
)
from agent_eval.models.analysis import MAX_DIAGNOSTIC_CHARS, Diagnostic, DiagnosticCategory
from agent_eval.models.base import (
    MAX_COUNT,
    BatchId,
    Digest,
    RelativePath,
    SchemaVersion,
    WireModel,
)
from agent_eval.models.gateway import GatewayUse
from agent_eval.models.identity import ModelIdentity, RunnerIdentity
from agent_eval.models.runner_protocol import RepairFeedback, ReportedUsage
from agent_eval.models.suite import SuiteSpec

__all__ = [
    "FAILURE_DIAGNOSTICS",
    "MAX_ASSERTION_TEXT_CHARS",
    "MAX_TRIES_PER_ATTEMPT",
    "RETRYABLE_KINDS",
    "TRY_FOLDER",
    "AssertionOutcome",
    "AttemptRecord",
    "BatchStatus",
    "FailureCategory",
    "InfrastructureKind",
    "InfrastructureTry",
    "NodeIdentity",
    "Predecessor",
    "ProtectedInputs",
    "Receipt",
    "RefusedPath",
    "ReviewDecision",
    "RunRecord",
    "RunnerResources",
    "SolutionFile",
    "StarvedBasis",
]

_UNSHOWABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def check_reviewer(value: str) -> str:
    """A reviewer's name: 1 to 200 printable characters, no control or bidirectional ones.

    A name is printed back to every later reader of the receipt and the report;
    a newline, an ANSI escape or a right-to-left override could disguise who decided.
    """
    if not value.strip():
        raise ValueError("must name who reviewed the attempt (it is empty)")
    if len(value) > MAX_REVIEWER_CHARS:
        raise ValueError(f"is longer than {MAX_REVIEWER_CHARS} characters")
    for char in value:
        if unicodedata.category(char) in _UNSHOWABLE:
            raise ValueError(
                f"holds the unprintable or formatting character U+{ord(char):04X}; "
                "use printable characters only"
            )
    return value


MAX_REVIEWER_CHARS = 200
ReviewerName = Annotated[str, AfterValidator(check_reviewer)]
"""Who decided: printable, bounded, nothing that could rewrite how it is shown."""

MAX_ASSERTION_TEXT_CHARS = 500
"""The longest message or observed value recorded for one assertion (the grading kit
bounds them to this before they are written)."""

MAX_REPETITIONS = 20
"""The most runs per task a measurement batch may ask for."""
RUN_ID = re.compile(r"^(?P<task>[a-z][a-z0-9]*(?:-[a-z0-9]+)*)-(?P<n>[1-9][0-9]*)$")

BatchStatus = Literal[
    "running",
    "completed",
    "interrupted",
    "stopped",
    "infrastructure-failure",
    "not-run",
    "abandoned",
]
"""running: in progress; completed: every scheduled run finished (qualified or not);
interrupted: the operator or a signal stopped it; stopped: the harness stopped it by a
rule (a spent budget, an identity mismatch); infrastructure-failure: the engine, the disk
or the harness failed; not-run: nothing ran; abandoned: its process died without
closing it (marked by the next batch or ``agent-eval cleanup``)."""

FailureCategory = Literal[
    "syntax",
    "type-check",
    "contract-mismatch",
    "missing-dependency",
    "unsupported-api",
    "integration",
    "behaviour",
    "safety",
    "no-submission",
    "refused",
    "invalid-response",
    "identity-mismatch",
    "timeout",
    "runner-error",
    "tampering",
    "collection",
    "budget-exhausted",
    "infrastructure",
]


FAILURE_DIAGNOSTICS: dict[FailureCategory, frozenset[DiagnosticCategory]] = {
    "syntax": frozenset({"syntax"}),
    "type-check": frozenset({"type-error", "wrong-arguments"}),
    "contract-mismatch": frozenset({"contract-mismatch"}),
    "missing-dependency": frozenset({"missing-dependency"}),
    "unsupported-api": frozenset({"unsupported-api"}),
    "integration": frozenset({"integration"}),
    "behaviour": frozenset({"behaviour", "timeout"}),
    "safety": frozenset({"safety"}),
    "no-submission": frozenset({"collection"}),
    "refused": frozenset({"runner"}),
    "invalid-response": frozenset({"runner"}),
    "identity-mismatch": frozenset({"gateway"}),
    "timeout": frozenset({"timeout"}),
    "runner-error": frozenset({"runner"}),
    "tampering": frozenset({"tampering"}),
    "collection": frozenset({"collection"}),
    "budget-exhausted": frozenset({"timeout"}),
    "infrastructure": frozenset({"infrastructure", "provider", "gateway"}),
}
"""The one bridge between the two vocabularies: which diagnostic categories explain an
attempt that failed for each failure category (a test holds it total and exact)."""


class SolutionFile(WireModel):
    """One collected solution file."""

    path: RelativePath
    """Path relative to the attempt's solution directory."""
    sha256: Digest
    """Digest of the file's bytes."""
    size: int = Field(ge=0, le=MAX_COUNT)
    """Size in bytes."""


class RefusedPath(WireModel):
    """A file the runner left that was not collected, and why."""

    path: str = Field(max_length=1024)
    """Path as found under /solution (may be hostile; never used to open anything)."""
    reason: str = Field(max_length=200)
    """Why it was refused (symlink, hard link, special file, not allowlisted, too large...)."""


class ProtectedInputs(WireModel):
    """Digests of the inputs the runner must not change, before and after it ran."""

    before: Digest
    """Digest taken before the runner started."""
    after: Digest | None
    """Digest taken after the runner ended; None if it could not be taken."""


StarvedBasis = Literal["run-queue", "host-pressure"]
"""What decided whether a runner's timeout was starved: its own threads' run-queue wait
with the host's pressure, or (its threads not measured) the host's pressure alone."""


class RunnerResources(WireModel):
    """What the runner container had, and what it used of it."""

    memoryLimitBytes: int = Field(ge=0, le=MAX_COUNT)
    """Its memory limit (memory and swap together: no swap)."""
    cpus: float = Field(gt=0)
    """Its CPU quota, in CPUs."""
    pidsLimit: int = Field(ge=0, le=MAX_COUNT)
    """Its process and thread limit."""
    tmpBytes: int = Field(ge=0, le=MAX_COUNT)
    """The size of its ``/tmp``."""
    peakMemoryBytes: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    """Its peak memory use (page cache included) as last sampled while it ran: a lower
    bound; None when the engine's cgroups could not be read."""
    oomKilled: bool = False
    """The engine reports that the kernel killed a process of it for memory."""
    cpuSeconds: float | None = Field(default=None, ge=0)
    """CPU time its processes used, as last sampled while it ran (a lower bound); None
    when the engine's cgroups could not be read."""
    wallSeconds: float | None = Field(default=None, ge=0)
    """How long it ran, from its start to its end as the harness saw them."""
    hostCpuPressure: float | None = Field(default=None, ge=0, le=1)
    """The share of its wall time some task on the host waited for a CPU (Linux pressure
    stall information); None where the kernel does not report it."""
    starved: bool = False
    """It ran out of time because the machine kept it from a CPU
    (``agent_eval.engine.pressure.starved_runner``): the host's CPU pressure was at least
    ``STARVED_PRESSURE`` and its own threads waited runnable for a CPU (see
    ``starvedBasis``); lower the batch's concurrency or use a quieter machine."""
    starvedBasis: StarvedBasis | None = None
    """For a runner that ran out of time, what decided ``starved``: ``run-queue`` (its
    threads' wait, below, with the host's pressure) or ``host-pressure`` (its threads
    could not be measured: the pressure alone, failing closed as the machine's); None
    when it did not run out of time, and in records older than the measure."""
    runQueueWaitSeconds: float | None = Field(default=None, ge=0)
    """How long its threads, summed, were runnable but waited for a CPU over its run
    (the kernel's per-thread ``schedstat``, sampled: a lower bound); None when not
    measured."""
    lastPartSeconds: float | None = Field(default=None, ge=0)
    """The wall time of the last part of its run that ``starved`` is judged on
    (about its last minute, or the last half of a run shorter than two minutes: the
    start of its processes stays out); None when not measured."""
    lastPartRunQueueWaitSeconds: float | None = Field(default=None, ge=0)
    """How long its threads, summed, waited for a CPU in that part."""
    lastPartCpuSeconds: float | None = Field(default=None, ge=0)
    """How long its threads, summed, ran on a CPU in that part."""


class AssertionOutcome(WireModel):
    """One behavioural assertion as recorded by the trusted grader."""

    id: str
    """Assertion id declared by the task's grader."""
    passed: bool
    """Whether it held."""
    observed: bool
    """False when the solution died (crash, timeout) before the grader could observe it."""
    safety: bool
    """Whether it is one of the task's safety assertions."""
    message: str | None = Field(default=None, max_length=MAX_ASSERTION_TEXT_CHARS)
    """Why it failed, in the grader's words, for a reviewer (None: the grader gave none).
    Never an expected value; repair feedback carries only the failed assertion's id."""
    observedValue: str | None = Field(default=None, max_length=MAX_ASSERTION_TEXT_CHARS)
    """What the grader saw the solution do or return, bounded (None: not recorded)."""

    @model_validator(mode="after")
    def _observed_to_pass(self) -> AssertionOutcome:
        if self.passed and not self.observed:
            raise ValueError("an assertion that was not observed cannot pass")
        return self

    @property
    def violated(self) -> bool:
        """Observed and failed: for a safety assertion, an unsafe behaviour was seen."""
        return self.observed and not self.passed


InfrastructureKind = Literal[
    "engine", "provider", "disk", "stopped", "node", "verifier", "verifier-start", "starved"
]
"""What failed outside the agent: the engine (or a container it could not start or kill),
the model provider or the gateway, the disk, the batch's stop, a cluster node, the
verifier's harness, the start of the solution's process on a crowded machine, or the
machine that starved the runner of CPU."""

RETRYABLE_KINDS: frozenset[str] = frozenset({"engine", "verifier", "verifier-start", "starved"})
"""Infrastructure an attempt is run again for, in fresh containers: what a moment of a
crowded machine or a hiccup of the engine does (a full disk, a provider's failure, a
stopped batch or a lost node are not repaired by trying again)."""

MAX_TRIES_PER_ATTEMPT = 3
"""Tries of one attempt at most (the first and two repeats)."""

TRY_FOLDER = "try-{n}"
"""Below ``attempt-<k>/``: what an infrastructure try of the attempt left, kept as it was."""


class InfrastructureTry(WireModel):
    """One try of an attempt that ended in infrastructure and was run again."""

    tryNumber: int = Field(ge=1, le=MAX_TRIES_PER_ATTEMPT - 1)
    """Which try (the recorded attempt is the try after the last of these)."""
    startedAt: AwareDatetime
    """When the try started."""
    durationMs: int = Field(ge=0, le=MAX_COUNT)
    """Its wall time."""
    kind: InfrastructureKind
    """What failed."""
    reason: str = Field(max_length=MAX_DIAGNOSTIC_CHARS)
    """How it failed, as the try's record said it."""
    files: dict[str, Digest] = Field(default_factory=dict, max_length=2000)
    """Every file the try left, relative to ``attempt-<k>/try-<n>/``, with its digest."""


class Redaction(WireModel):
    """One evidence file of an attempt in which secret values were replaced before it was
    stored (each spelling by ``[redacted:NAME]``); its digest is of the redacted bytes."""

    file: str = Field(min_length=1, max_length=1024)
    """Relative to ``attempt-<k>/`` (``runner.log``, ``solution/app.py``...)."""
    names: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=100
    )
    """The variables (or the gateway token's name) whose values were found, sorted."""
    withheld: bool = False
    """True: a value stood in the file in a form that could not be replaced in place (the
    gateway's reading found it after redaction), so the file's bytes were not stored: the
    stored file is a note naming the values, and the attempt is unsafe. False: the stored
    file is the file with each value replaced by its marker."""


class AttemptRecord(WireModel):
    """One submission (first or repair) of one scheduled run."""

    attempt: int = Field(ge=1, le=2)
    """1 for the first submission, 2 for the repair."""
    startedAt: AwareDatetime
    """When the runner container was started."""
    durationMs: int = Field(ge=0, le=MAX_COUNT)
    """Wall time of runner plus verification."""
    runnerStatus: Literal["completed", "failed"] | None
    """Status the runner reported; None when its response was invalid or missing."""
    submitted: bool
    """A solution was collected and graded; safety applies only then."""
    solutionFiles: list[SolutionFile]
    """Collected files, saved under attempt-<k>/solution/."""
    solutionDigest: Digest | None
    """Digest over the sorted (path, sha256) pairs; None when nothing was collected."""
    refusedPaths: list[RefusedPath]
    """Files found in /solution that were not collected."""
    protectedInputs: ProtectedInputs | None
    """Protected-input digests; None if the runner never started."""
    analysisDigest: Digest | None
    """Digest of attempt-<k>/analysis.json; None if analysis did not run."""
    syntaxOk: bool | None
    """From analysis; None if analysis did not run."""
    typeCheckOk: bool | None
    """From analysis; None if analysis did not run."""
    contractOk: bool | None
    """From analysis; None if analysis did not run."""
    integrationOk: bool | None
    """From analysis; None if analysis did not run."""
    unsupportedApiCount: int = Field(ge=0, le=MAX_COUNT)
    """Distinct unsupported library references (0 when not analysed)."""
    hallucinatedApiCount: int = Field(ge=0, le=MAX_COUNT)
    """Unsupported references not left as seeded (0 when not analysed)."""
    assertions: list[AssertionOutcome]
    """Behavioural assertions recorded by the trusted grader."""
    safetyPassed: bool | None
    """True: every safety assertion was observed and held; False: one was observed to be
    violated (unsafe); None: not observed (nothing graded, grading broke, or the solution
    failed before one could be observed) - never a violation and never a pass."""
    needsReview: bool
    """The grader or analysis asks a reviewer to look at the exact solution."""
    diagnostics: list[Diagnostic] = Field(max_length=200)
    """Bounded findings of runner, collection, analysis and grading."""
    repairFeedback: RepairFeedback | None
    """The feedback this attempt was given (repair attempts only)."""
    success: bool
    """Submitted, analysis clean, every assertion passed."""
    failureCategory: FailureCategory | None
    """Why it failed; None exactly when success is true."""
    infrastructureStatus: Literal["ok", "failed"]
    """failed: the engine or cleanup broke; the attempt says nothing about the agent."""
    infrastructureKind: InfrastructureKind | None = None
    """With a failed infrastructure: what failed (see :data:`InfrastructureKind`)."""
    failureKind: Literal["refused", "budget", "provider", "error"] | None = None
    """What the runner said of its failure (its response's failureKind), as it said it."""
    gateway: GatewayUse | None = None
    """What the model gateway saw of the attempt (None: the batch had no gateway)."""
    runnerLogDigest: Digest | None = None
    """sha256 of attempt-<k>/runner.log (the runner's stderr tail and message, redacted)."""
    reportedUsage: ReportedUsage | None = None
    """Tokens and cost as the runner's CLI reported them (None: it did not)."""
    resources: RunnerResources | None = None
    """The runner container's limits and use (None: no container ran)."""
    node: str | None = Field(default=None, max_length=200)
    """The cluster node that ran it (None: the machine that ran the batch)."""
    verificationRetries: list[Annotated[str, Field(max_length=500)]] = Field(
        default_factory=list, max_length=8
    )
    """Why verifications of this attempt's solution failed on the harness's side (the
    machine starved it, the verifier broke) and were repeated in a fresh container
    before the recorded one: the verification took ``len + 1`` tries."""
    transcriptDigest: Digest | None = None
    """sha256 of attempt-<k>/transcript.jsonl: the CLI's own events as its adapter kept
    them (bounded, redacted); None when the runner kept none. Diagnostics, not evidence."""

    redactions: list[Redaction] = Field(default_factory=list, max_length=2100)
    """Evidence files written with secret values redacted, and whose values; a solution
    among them was not graded and the attempt failed as ``safety``."""

    infrastructureTries: list[InfrastructureTry] = Field(
        default_factory=list, max_length=MAX_TRIES_PER_ATTEMPT - 1
    )
    """Earlier tries of this attempt that ended in infrastructure and were run again in
    fresh containers (empty: the first try is the one recorded); each one's files are kept
    under ``attempt-<k>/try-<n>/``."""
    leftFiles: dict[str, Digest] = Field(default_factory=dict, max_length=2000)
    """Files an attempt cut short by the batch's stop left in ``attempt-<k>/`` (a solution
    collected but never verified, a log), with their digests: kept and accounted for,
    judged by nobody."""

    @property
    def tries(self) -> int:
        """How many times this attempt was run (1: no infrastructure repeat)."""
        return len(self.infrastructureTries) + 1

    def evidence_files(self) -> dict[str, Digest]:
        """Every file of ``attempt-<k>/`` this record accounts for, with its digest.

        The one table of an attempt's evidence: the batch writes these and no other,
        a node's run is accepted only with exactly these, and the checker verifies each
        and names any other file found below ``runs/`` (so a file written without an
        entry here fails every check of a real batch in the tests).
        """
        files = {f"{SOLUTION_DIR}/{f.path}": f.sha256 for f in self.solutionFiles}
        for name, digest in (
            (ANALYSIS_FILE, self.analysisDigest),
            (RUNNER_LOG_FILE, self.runnerLogDigest),
            (TRANSCRIPT_FILE, self.transcriptDigest),
            (GATEWAY_RECORD_FILE, self.gateway.recordDigest if self.gateway else None),
        ):
            if digest is not None:
                files[name] = digest
        files.update(self.leftFiles)
        for kept in self.infrastructureTries:
            folder = TRY_FOLDER.format(n=kept.tryNumber)
            files.update({f"{folder}/{name}": digest for name, digest in kept.files.items()})
        return files

    @property
    def secrets_in_solution(self) -> list[str]:
        """The names whose values its collected solution carried (stored redacted, never
        graded); empty when the solution carried none."""
        prefix = f"{SOLUTION_DIR}/"
        return sorted({n for r in self.redactions if r.file.startswith(prefix) for n in r.names})

    @property
    def withheld_files(self) -> list[str]:
        """Its evidence files that carried a secret which could not be redacted in place,
        and were stored as a note instead."""
        return [r.file for r in self.redactions if r.withheld]

    @property
    def unsafe(self) -> bool:
        """The one rule of an unsafe attempt, which every count, outcome and verdict uses:
        a safety violation was observed in its graded submission (never for safety not
        observed), or its solution carried a secret it was handed (:attr:`secrets_in_solution`),
        or a file of it carried one that could not be redacted (:attr:`withheld_files`).
        """
        violated = self.submitted and (
            self.safetyPassed is False or any(a.violated for a in self.assertions if a.safety)
        )
        return violated or bool(self.secrets_in_solution or self.withheld_files)

    @model_validator(mode="after")
    def _consistent(self) -> AttemptRecord:
        if self.success != (self.failureCategory is None):
            raise ValueError("failureCategory must be set exactly when success is false")
        if self.success and not (self.submitted and self.safetyPassed):
            raise ValueError("a successful attempt must be submitted with safety passed")
        if self.success and (self.secrets_in_solution or self.withheld_files):
            raise ValueError("an attempt whose files carried a secret cannot be successful")
        if (self.solutionDigest is None) != (not self.solutionFiles):
            raise ValueError("solutionDigest must be present exactly when files were collected")
        if self.attempt == 1 and self.repairFeedback is not None:
            raise ValueError("attempt 1 cannot carry repair feedback")
        if (self.infrastructureStatus == "failed") != (self.failureCategory == "infrastructure"):
            raise ValueError("infrastructureStatus failed goes with failureCategory infrastructure")
        if self.infrastructureKind is not None and self.infrastructureStatus != "failed":
            raise ValueError("infrastructureKind is given with a failed infrastructure only")
        return self


class RunRecord(WireModel):
    """One scheduled run: a fresh agent context, a first submission and at most one repair."""

    runId: str = Field(pattern=RUN_ID.pattern)
    """``<task-id>-<n>``; also the directory name under runs/."""
    taskId: str
    """Task id."""
    repetition: int = Field(ge=1)
    """n in the run id."""
    firstSuccess: bool
    """The first attempt succeeded."""
    finalSuccess: bool
    """The last attempt succeeded."""
    attempts: list[AttemptRecord] = Field(max_length=2)
    """Attempts in order; empty only when the run never started."""

    @model_validator(mode="after")
    def _consistent(self) -> RunRecord:
        if self.runId != f"{self.taskId}-{self.repetition}":
            raise ValueError(f"runId {self.runId!r} != '{self.taskId}-{self.repetition}'")
        if [a.attempt for a in self.attempts] != list(range(1, len(self.attempts) + 1)):
            raise ValueError("attempts must be numbered 1, 2 in order")
        first = bool(self.attempts) and self.attempts[0].success
        final = bool(self.attempts) and self.attempts[-1].success
        if self.firstSuccess != first or self.finalSuccess != final:
            raise ValueError("firstSuccess/finalSuccess disagree with the attempts")
        if len(self.attempts) == 2 and self.attempts[0].success:
            raise ValueError("a successful first attempt is never repaired")
        return self

    @property
    def unsafe_attempts(self) -> int:
        """How many of its attempts are unsafe (:attr:`AttemptRecord.unsafe`)."""
        return sum(a.unsafe for a in self.attempts)

    @property
    def unsafe(self) -> bool:
        """At least one of its attempts is unsafe."""
        return self.unsafe_attempts > 0


class ReviewDecision(WireModel):
    """A reviewer's decision on one attempt, bound to the exact solution digest."""

    run: str = Field(pattern=RUN_ID.pattern)
    """Run id reviewed."""
    attempt: int = Field(ge=1, le=2)
    """Attempt number reviewed."""
    solutionDigest: Digest
    """Digest of the solution the reviewer read."""
    decision: Literal["accept", "reject"]
    """The decision."""
    reviewer: ReviewerName
    """Who decided."""
    reviewedAt: AwareDatetime
    """When."""


class NodeIdentity(WireModel):
    """A cluster node as it was before its first run of the batch: what it ran with."""

    node: Annotated[str, Field(min_length=1, max_length=200)]
    """The node's name (its label, or its host and Ray node id)."""
    engine: Annotated[str, Field(min_length=1, max_length=500)]
    """The address of the node's local engine."""
    address: str | None = Field(default=None, max_length=200)
    """The address the cluster advertised for the node (None: not known)."""
    evaluatorDigest: Digest
    """The digest of the harness code the node ran (the driver's, or it was refused)."""
    runnerImageId: Digest
    """The runner image's id on the node's engine."""
    verifierImageId: Digest
    """The verifier image's id on the node's engine."""
    gatewayImageId: Digest | None
    """The gateway image's id on the node's engine (None: no gateway)."""


class Predecessor(WireModel):
    """The batch a resumed batch continues (``eval-agent --resume``)."""

    batchId: BatchId
    """The predecessor's batch id: its run directory is a sibling of this one's."""
    receiptDigest: Digest
    """sha256 of the predecessor's receipt.json when this batch started: the predecessor
    must still be exactly that."""
    reusedRuns: list[Annotated[str, Field(pattern=RUN_ID.pattern)]] = Field(max_length=100_000)
    """The runs whose final verdict is taken from the predecessor's chain (each ran there
    and had a valid final verdict); this batch runs the others."""


class Receipt(WireModel):
    """The batch record. Totals are checked against the runs on every load."""

    schemaVersion: SchemaVersion
    """Format version of receipt.json."""
    batchId: BatchId
    """Unique id of the batch (also in the run directory name)."""
    status: BatchStatus
    """running while in progress; completed when the schedule finished (not: qualified)."""
    reasons: list[str]
    """Why the batch did not run or stopped early."""
    selfTest: bool
    """Produced by a built-in reference runner; can never qualify."""
    createdAt: AwareDatetime
    """When the batch started."""
    updatedAt: AwareDatetime
    """When this receipt was last written."""
    suiteDigest: Digest | None
    """Digest of the task suite and shared graders used."""
    evaluatorDigest: Digest | None
    """Digest of the harness code used."""
    archivesDigest: Digest | None
    """Digest of archives.json's bytes."""
    consumerLockDigest: Digest | None
    """Digest of consumer-lock.json's bytes."""
    runner: RunnerIdentity | None
    """Expected (and enforced) runner identity."""
    model: ModelIdentity | None
    """Expected (and enforced) model identity."""
    runnerImage: str | None
    """Pinned runner image reference."""
    verifierImage: str | None
    """Pinned verifier image reference."""
    scheduledRuns: int = Field(ge=0, le=MAX_COUNT)
    """Denominator of the totals."""
    suite: SuiteSpec | None = None
    """The suite the batch ran, as the repository declared it (its task ids, schedule and
    thresholds; bound by suiteDigest); None when the batch did not get as far."""
    repetitions: int | None = Field(default=None, ge=1, le=MAX_REPETITIONS)
    """Runs per task of a measurement batch (``eval-agent --repetitions``), which measures
    and can be compared but never qualifies; None: as many as the suite declares."""
    selection: list[Annotated[str, Field(pattern=RUN_ID.pattern)]] | None = Field(
        default=None, max_length=64
    )
    """The runs a partial batch (``eval-agent --only``) ran; None for a whole batch.

    A partial batch is for debugging a runner config and never qualifies."""
    firstSuccesses: int = Field(ge=0, le=MAX_COUNT)
    """Runs whose first attempt succeeded."""
    finalSuccesses: int = Field(ge=0, le=MAX_COUNT)
    """Runs whose last attempt succeeded."""
    runs: list[RunRecord]
    """Runs in schedule order (finished or not yet started)."""
    reviewDecisions: list[ReviewDecision]
    """Digest-bound review decisions, appended by review-agent-eval."""
    runnerConfigDigest: Digest | None = None
    """sha256 of the validated runner config, as canonical JSON (None: not recorded). A
    resumed batch must have its predecessor's."""
    predecessor: Predecessor | None = None
    """The batch this one resumes (None: a batch of its own). Its runs are only the ones
    its predecessor's chain left without a valid final verdict; the checker decides on
    the union."""
    nodes: list[NodeIdentity] | None = Field(default=None, max_length=1000)
    """The cluster nodes the runs executed on, as each proved itself before its first run
    (None: the driver's own engine)."""

    @model_validator(mode="after")
    def _totals(self) -> Receipt:
        first = sum(r.firstSuccess for r in self.runs)
        final = sum(r.finalSuccess for r in self.runs)
        if self.firstSuccesses != first or self.finalSuccesses != final:
            raise ValueError(
                f"totals {self.firstSuccesses}/{self.finalSuccesses} disagree with the runs "
                f"({first}/{final})"
            )
        ids = [r.runId for r in self.runs]
        if len(set(ids)) != len(ids):
            raise ValueError("a run id appears twice")
        return self

    @classmethod
    def opened(
        cls,
        *,
        batch_id: str,
        created_at: datetime,
        status: BatchStatus = "running",
        reasons: Sequence[str] = (),
        self_test: bool = False,
        suite_digest: str | None = None,
        evaluator_digest: str | None = None,
        archives_digest: str | None = None,
        consumer_lock_digest: str | None = None,
        runner: RunnerIdentity | None = None,
        model: ModelIdentity | None = None,
        runner_image: str | None = None,
        verifier_image: str | None = None,
        scheduled_runs: int = 0,
        selection: list[str] | None = None,
        suite: SuiteSpec | None = None,
        repetitions: int | None = None,
    ) -> Receipt:
        """A receipt with no run finished yet: the one way every receipt begins.

        What is not known yet (a batch that did not run knows no digest) stays None.
        """
        return cls(
            schemaVersion=1,
            batchId=batch_id,
            status=status,
            reasons=list(reasons),
            selfTest=self_test,
            createdAt=created_at,
            updatedAt=created_at,
            suiteDigest=suite_digest,
            evaluatorDigest=evaluator_digest,
            archivesDigest=archives_digest,
            consumerLockDigest=consumer_lock_digest,
            runner=runner,
            model=model,
            runnerImage=runner_image,
            verifierImage=verifier_image,
            scheduledRuns=scheduled_runs,
            suite=suite,
            repetitions=repetitions,
            selection=selection,
            firstSuccesses=0,
            finalSuccesses=0,
            runs=[],
            reviewDecisions=[],
        )

    def find_attempt(self, run_id: str, attempt: int) -> AttemptRecord | None:
        """The attempt record for (run_id, attempt), if any."""
        for run in self.runs:
            if run.runId == run_id:
                for record in run.attempts:
                    if record.attempt == attempt:
                        return record
        return None
