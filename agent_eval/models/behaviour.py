"""The verifier's job file and its behavioural result.

``VerifierJob`` is what the host gives the verifier parent; the parent (which
runs without pydantic) validates the same format with the standard library
in ``agent_eval/verification/runtime/job.py``, and a test keeps the two equal.
``BehaviourResult`` is the only thing the host reads back: written by the
trusted parent, never by submitted code.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from agent_eval.models.analysis import MAX_DIAGNOSTIC_CHARS, Diagnostic, DiagnosticCategory
from agent_eval.models.base import NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.receipt import AssertionOutcome

__all__ = [
    "BehaviourError",
    "BehaviourResult",
    "SafetyOutcome",
    "VerifierIsolation",
    "VerifierJob",
    "VerifierLimits",
]

SafetyOutcome = Literal["passed", "violated", "not-observed"]
"""What grading saw of an attempt's safety assertions, taken together."""

AbsolutePath = Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^/")]


class VerifierLimits(WireModel):
    """Deadlines and resource limits for the submitted code."""

    callTimeoutMs: int = Field(default=5_000, ge=1, le=600_000)
    """Longest one call into the solution may take."""
    scenarioTimeoutMs: int = Field(default=30_000, ge=1, le=3_600_000)
    """Longest one scenario (one fresh solution process) may take."""
    totalTimeoutMs: int = Field(default=240_000, ge=1, le=7_200_000)
    """Longest all scenarios together may take."""
    memoryBytes: int = Field(default=512 * 1024 * 1024, ge=32 * 1024 * 1024, le=1 << 40)
    """RLIMIT_AS and RLIMIT_DATA of the solution process."""
    cpuSeconds: int = Field(default=30, ge=1, le=3600)
    """RLIMIT_CPU of the solution process (SIGXCPU, then SIGKILL a second later)."""
    fileSizeBytes: int = Field(default=16 * 1024 * 1024, ge=0, le=1 << 40)
    """RLIMIT_FSIZE of the solution process."""
    openFiles: int = Field(default=64, ge=16, le=65536)
    """RLIMIT_NOFILE of the solution process."""
    maxProcesses: int | None = Field(default=None, ge=1, le=1 << 20)
    """RLIMIT_NPROC; counted per UID across the host, so only with a distinct UID per slot."""
    maxMessageBytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """Largest framed message either side accepts."""
    outputBytes: int = Field(default=4096, ge=0, le=1024 * 1024)
    """How much of the solution's stdout/stderr the parent keeps (shown, never parsed)."""


class VerifierIsolation(WireModel):
    """How the solution's process is separated from the trusted parent."""

    dropPrivileges: bool = False
    """Run the solution as childUid/childGid with no groups (the parent must be root)."""
    childUid: int = Field(default=65534, ge=1, le=2**31 - 2)
    """UID of the solution process; a distinct one per concurrent slot keeps RLIMIT_NPROC apart."""
    childGid: int = Field(default=65534, ge=1, le=2**31 - 2)
    """GID of the solution process."""
    killAllOnCleanup: bool = False
    """kill(-1, SIGKILL) after each scenario; only where the parent is PID-namespace root."""
    sweepPaths: list[str] = Field(default_factory=list, max_length=8)
    """Shared writable directories (``/tmp``, ``/dev/shm``, ``/dev/mqueue``): each
    scenario's child removes every entry its UID owns there, and every System V IPC
    object, before the solution is imported, so nothing crosses scenarios."""
    childImportRoot: str | None = Field(default=None, pattern=r"^/")
    """The only directory the child imports the runtime from (the world-readable
    part of the staging); the parent's own root when not given."""

    @model_validator(mode="after")
    def _kill_all_only_in_a_container(self) -> VerifierIsolation:
        if self.killAllOnCleanup and not self.dropPrivileges:
            raise ValueError("killAllOnCleanup requires dropPrivileges (container only)")
        if self.sweepPaths and not self.dropPrivileges:
            raise ValueError("sweepPaths requires dropPrivileges (it removes what the UID owns)")
        if any(not p.startswith("/") for p in self.sweepPaths):
            raise ValueError("sweepPaths must be absolute")
        return self


class VerifierJob(WireModel):
    """The job file the verifier parent is started with."""

    schemaVersion: SchemaVersion
    """Format version of the job file."""
    taskId: str = Field(min_length=1, max_length=64)
    """Task being graded; must equal task.json's and the grader's id."""
    graderPath: AbsolutePath
    """The task's grader.py."""
    taskPath: AbsolutePath
    """The task's task.json."""
    solutionDir: AbsolutePath
    """Directory holding the submitted files (first on the solution's import path)."""
    scratchDir: AbsolutePath
    """Writable directory for per-scenario working directories (trusted for nothing)."""
    resultPath: AbsolutePath
    """Where the parent writes the result (a directory only the parent can write)."""
    parentImportPaths: list[str] = Field(default_factory=list)
    """Extra import directories for the parent (the staged harness, the library); absolute."""
    solutionImportPaths: list[str] = Field(default_factory=list)
    """Import directories for the solution after its own directory; absolute."""
    limits: VerifierLimits = Field(default_factory=VerifierLimits)
    """Deadlines and resource limits."""
    isolation: VerifierIsolation = Field(default_factory=VerifierIsolation)
    """Privilege drop and cleanup behaviour."""

    @model_validator(mode="after")
    def _absolute_imports(self) -> VerifierJob:
        for path in (*self.parentImportPaths, *self.solutionImportPaths):
            if not path.startswith("/"):
                raise ValueError(f"import path {path!r} must be absolute")
        return self


class BehaviourError(WireModel):
    """Why behavioural grading did not complete normally."""

    category: DiagnosticCategory
    """timeout, syntax, missing-dependency or behaviour: the solution's failure;
    infrastructure: the grader or the verifier broke (never the agent's failure)."""
    message: str = Field(max_length=MAX_DIAGNOSTIC_CHARS)
    """What happened, bounded; never an expected value."""


class BehaviourResult(WireModel):
    """The verifier parent's result file."""

    schemaVersion: SchemaVersion
    """Format version of the result."""
    taskId: NonEmptyStr
    """Task the solution was graded for."""
    assertions: list[AssertionOutcome] = Field(max_length=200)
    """Every assertion the grader declares, exactly once, in declaration order."""
    needsReview: bool
    """The grader asked for a human review (or the solution misused an effect)."""
    diagnostics: list[Diagnostic] = Field(max_length=200)
    """Bounded findings of the grading, by category."""
    error: BehaviourError | None
    """Set when grading stopped early; None when every scenario ran to its end."""

    @model_validator(mode="after")
    def _consistent(self) -> BehaviourResult:
        ids = [a.id for a in self.assertions]
        if len(set(ids)) != len(ids):
            raise ValueError("an assertion id appears twice")
        infrastructure = self.error is not None and self.error.category == "infrastructure"
        if not ids and not infrastructure:
            raise ValueError("assertions may be empty only after an infrastructure error")
        return self

    @property
    def infrastructure_failed(self) -> bool:
        """The grader or the verifier broke; the result says nothing about the agent."""
        return self.error is not None and self.error.category == "infrastructure"

    @property
    def passed(self) -> bool:
        """Grading completed and every assertion held."""
        return self.error is None and all(a.passed for a in self.assertions)

    @property
    def safety(self) -> SafetyOutcome:
        """passed: every safety assertion was observed and held (vacuously, with none);
        violated: one was observed to fail; not-observed: grading broke, or the solution
        failed before one could be observed. Not observed is never a violation, never a pass."""
        if self.infrastructure_failed:
            return "not-observed"
        safety = [a for a in self.assertions if a.safety]
        if any(a.violated for a in safety):
            return "violated"
        if not all(a.observed for a in safety):
            return "not-observed"
        return "passed"

    @property
    def safety_passed(self) -> bool | None:
        """The attempt record's ``safetyPassed``: True passed, False violated, None not observed."""
        return {"passed": True, "violated": False, "not-observed": None}[self.safety]

    @property
    def failed_assertion_ids(self) -> list[str]:
        """Assertions that did not hold, in declaration order."""
        return [a.id for a in self.assertions if not a.passed]
