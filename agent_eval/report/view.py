"""What the report shows, read from a run directory that is never written to.

The decision is computed here and now with the checker's own rules
(``verdict.qualification``), not read from anywhere; the rest is the
evidence as saved (:mod:`attempts`) and the numbers it gives
(:mod:`summary`). Only an unreadable receipt stops the report (an
``EvidenceError`` naming the file); any other missing or damaged file
becomes a note where it would have been.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agent_eval.errors import AgentEvalError, EvidenceError
from agent_eval.evidence_io import read_model
from agent_eval.layout import RunDirectory
from agent_eval.models import (
    ArchivesManifest,
    QualificationResult,
    Receipt,
    ReviewDecision,
    RunRecord,
    SuiteSpec,
)
from agent_eval.report.attempts import (
    AttemptReader,
    AttemptView,
    Budget,
    ReviewItem,
    attempt_view,
)
from agent_eval.report.summary import (
    GridRow,
    ModelUse,
    Statistics,
    batch_statistics,
    grid,
    model_use,
)
from agent_eval.verdict.qualification import Anchors, qualify_files
from agent_eval.verdict.registry import RegistryChange
from agent_eval.verdict.words import expected_self_test

__all__ = ["BatchView", "load_batch"]


@dataclass(frozen=True)
class Provenance:
    """When what the batch was bound to was committed, beside when the batch started: a
    registry entry committed after its batch is a review written after the fact."""

    commit: str
    committed_at: datetime | None
    """The source commit's committer date (None: the repository does not know it)."""
    registry: str
    registry_change: RegistryChange | None
    """The registry's last change at or before the source commit (None: none found)."""
    started_at: datetime

    @property
    def committed_late(self) -> bool:
        return self.committed_at is not None and self.committed_at > self.started_at

    @property
    def registry_late(self) -> bool:
        change = self.registry_change
        return change is not None and change.committed_at > self.started_at


def _provenance(run: RunDirectory, receipt: Receipt, current: Anchors) -> Provenance | None:
    """The source commit's and the registry's commit times, read from the repository at
    hand (never from the run directory); None without a repository or a commit."""
    try:
        archives = read_model(
            run.archives_manifest, ArchivesManifest, what="archives.json", follow_symlinks=False
        )
    except AgentEvalError:
        return None  # the decision already says why
    commit = archives.source.commit
    if commit is None or current.committed_at is None:
        return None
    changed = current.registry_changed
    return Provenance(
        commit=commit,
        committed_at=current.committed_at(commit),
        registry=current.registry_name,
        registry_change=changed(commit) if changed is not None else None,
        started_at=receipt.createdAt,
    )


@dataclass(frozen=True)
class RunView:
    """One run and its attempts."""

    record: RunRecord
    anchor: str
    attempts: tuple[AttemptView, ...]
    duration_ms: int


@dataclass(frozen=True)
class BatchView:
    """The whole report's content."""

    run_dir: Path
    receipt_path: Path
    receipt: Receipt
    decision: QualificationResult
    current: Anchors
    """What the batch was held against (the suite and harness digests now)."""
    provenance: Provenance | None
    """When its source commit and registry were committed (None: no repository at hand)."""
    suite: SuiteSpec
    """The schedule and thresholds the batch is shown against."""
    suite_source: str
    """Where they come from: ``receipt`` (as the batch recorded them), ``checkout`` (the
    repository's declaration), or ``inferred`` (from the runs alone, thresholds strict)."""
    statistics: Statistics
    model_use: ModelUse
    grid: tuple[GridRow, ...]
    runs: tuple[RunView, ...]
    review: tuple[ReviewItem, ...]
    decisions: tuple[tuple[ReviewDecision, bool], ...]
    """Every recorded decision, and whether it is bound to the attempt's recorded digest."""
    problems: tuple[str, ...]
    """Evidence that could not be read or does not match, in the order found."""
    generated_at: datetime
    wall_ms: int | None
    attempts: int
    anything_cut: bool

    @property
    def expected_self_test(self) -> bool:
        """Rejected only as self-test: what a built-in reference runner's batch always is."""
        return expected_self_test(self.decision)

    @property
    def cause(self) -> str | None:
        """Why the batch did not complete, in words, before any rule (None: it completed)."""
        return batch_cause(self.receipt)


_STATUS_WORDS = {
    "running": "is still recorded as running (its process may have died)",
    "interrupted": "was interrupted",
    "stopped": "was stopped",
    "infrastructure-failure": "stopped on an infrastructure failure",
    "not-run": "did not run",
    "abandoned": "was abandoned",
}
"""What a receipt's status says of the batch, when it did not complete."""


def batch_cause(receipt: Receipt) -> str | None:
    """The headline of a batch that did not complete ("The batch did not run"); None when
    it completed (its rules' reasons, if any, are then the whole story)."""
    words = _STATUS_WORDS.get(receipt.status)
    return None if words is None else f"The batch {words}"


def _suite_of(receipt: Receipt, current: Anchors) -> tuple[SuiteSpec, str]:
    """The batch's own record of its suite, else the checkout's, else what the runs show."""
    if receipt.suite is not None:
        return receipt.suite, "receipt"
    if current.spec is not None:
        return current.spec, "checkout"
    ids = tuple(dict.fromkeys(r.taskId for r in receipt.runs))
    repetitions = max((r.repetition for r in receipt.runs), default=0)
    runs = len(ids) * repetitions
    inferred = SuiteSpec.model_construct(
        schemaVersion=1, taskIds=ids, repetitions=repetitions, scheduledRuns=runs,
        minFirstSuccesses=runs, requiredFinalSuccesses=runs, maxAttemptsPerRun=2,
    )  # fmt: skip
    return inferred, "inferred"


def load_batch(
    run_dir: Path,
    current: Anchors,
    *,
    generated_at: datetime,
) -> BatchView:
    """Read a run directory into what the report shows.

    Raises:
        EvidenceError: *run_dir* is not a directory, or its receipt.json is
            missing, unreadable or invalid (the message names the file).
    """
    if not run_dir.is_dir():
        raise EvidenceError(f"run directory {run_dir}: not a directory")
    run = RunDirectory(run_dir.resolve())
    receipt = read_model(run.receipt, Receipt, what="receipt", follow_symlinks=False)
    decision = qualify_files(run.receipt, run.archives_manifest, current)
    attempts = sum(len(r.attempts) for r in receipt.runs)
    reader = AttemptReader(run=run, budget=Budget.for_attempts(attempts))
    decisions = {(d.run, d.attempt): d for d in receipt.reviewDecisions}
    run_views: dict[str, RunView] = {}
    for record in receipt.runs:
        views = tuple(
            attempt_view(
                reader, run.receipt, record, att, decisions.get((record.runId, att.attempt))
            )
            for att in record.attempts
        )
        reader.forget()
        run_views[record.runId] = RunView(
            record=record,
            anchor=f"run-{record.runId}",
            attempts=views,
            duration_ms=sum(a.durationMs for a in record.attempts),
        )
    recorded = {(r.runId, a.attempt): a for r in receipt.runs for a in r.attempts}
    bound = tuple(
        (
            d,
            (d.run, d.attempt) in recorded
            and d.solutionDigest == recorded[(d.run, d.attempt)].solutionDigest,
        )
        for d in receipt.reviewDecisions
    )
    wall = receipt.updatedAt - receipt.createdAt
    suite, suite_source = _suite_of(receipt, current)
    return BatchView(
        run_dir=run.root,
        receipt_path=run.receipt,
        receipt=receipt,
        decision=decision,
        current=current,
        provenance=_provenance(run, receipt, current),
        suite=suite,
        suite_source=suite_source,
        statistics=batch_statistics(receipt, suite),
        model_use=model_use(receipt),
        grid=grid(
            receipt,
            {
                (v.record.runId, a.record.attempt): a.outcome
                for v in run_views.values()
                for a in v.attempts
            },
            suite,
        ),
        runs=tuple(run_views.values()),
        review=tuple(
            a.review for v in run_views.values() for a in v.attempts if a.review is not None
        ),
        decisions=bound,
        problems=tuple(reader.problems),
        generated_at=generated_at,
        wall_ms=int(wall.total_seconds() * 1000) if wall.total_seconds() >= 0 else None,
        attempts=attempts,
        anything_cut=reader.cut,
    )
