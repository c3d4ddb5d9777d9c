"""Qualification: whether a saved batch is evidence of real agent capability.

Every rule is checked and every failure is reported (one reason each, naming
the rule and the run/attempt); nothing short-circuits except evidence that
cannot be read at all. Digests are recomputed from the files on disk. This
module never writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent_eval.digests import DigestError, file_sha256, solution_digest, solution_files
from agent_eval.errors import EvidenceError
from agent_eval.evidence_io import read_model
from agent_eval.models import (
    FIXED_SUITE,
    ArchivesManifest,
    AttemptRecord,
    ConsumerLock,
    QualificationResult,
    Receipt,
    SuiteSpec,
)

__all__ = ["CurrentDigests", "attempt_dir", "qualify", "qualify_files"]

CONSUMER_LOCK_NAME = "consumer-lock.json"


@dataclass(frozen=True)
class CurrentDigests:
    """Digests of the suite and harness as they are now (stale evidence fails)."""

    suite: str | None
    evaluator: str | None


def attempt_dir(receipt_dir: Path, run_id: str, attempt: int) -> Path:
    """Directory of one attempt's saved evidence."""
    return receipt_dir / "runs" / run_id / f"attempt-{attempt}"


def qualify_files(
    receipt_path: Path, archives_path: Path, current: CurrentDigests
) -> QualificationResult:
    """Load the receipt and archives.json and check every rule."""
    reasons: list[str] = []
    receipt = archives = None
    try:
        receipt = read_model(receipt_path, Receipt, what="receipt")
    except EvidenceError as exc:
        reasons.append(f"receipt-readable: {exc}")
    try:
        archives = read_model(archives_path, ArchivesManifest, what="archives")
    except EvidenceError as exc:
        reasons.append(f"archives-readable: {exc}")
    if receipt is None or archives is None:
        return QualificationResult(qualified=False, reasons=reasons)
    reasons.extend(qualify(receipt, receipt_path.parent, archives, archives_path, current))
    return QualificationResult(qualified=not reasons, reasons=reasons)


def qualify(
    receipt: Receipt,
    receipt_dir: Path,
    archives: ArchivesManifest,
    archives_path: Path,
    current: CurrentDigests,
    suite: SuiteSpec = FIXED_SUITE,
) -> list[str]:
    """Every failed rule as a reason; an empty list means qualified."""
    reasons: list[str] = []
    reasons += _batch_rules(receipt, suite)
    reasons += _success_rules(receipt, suite)
    reasons += _safety_and_review_rules(receipt)
    reasons += _binding_rules(receipt, receipt_dir, archives, archives_path, current)
    reasons += _archive_rules(archives, archives_path)
    reasons += _solution_rules(receipt, receipt_dir)
    return reasons


def _batch_rules(receipt: Receipt, suite: SuiteSpec) -> list[str]:
    reasons = []
    if receipt.status != "completed":
        detail = f" ({'; '.join(receipt.reasons)})" if receipt.reasons else ""
        reasons.append(f"batch-completed: status is {receipt.status!r}, not 'completed'{detail}")
    if receipt.selfTest:
        reasons.append(
            "not-self-test: a built-in reference runner, or a runner whose model could only be "
            "scripted (no network), made this receipt; it can never qualify"
        )
    expected = suite.run_ids()
    actual = [r.runId for r in receipt.runs]
    missing = [r for r in expected if r not in actual]
    extra = [r for r in actual if r not in expected]
    if missing:
        reasons.append(f"schedule: missing runs {', '.join(missing)}")
    if extra:
        reasons.append(f"schedule: unexpected runs {', '.join(extra)}")
    if receipt.scheduledRuns != suite.scheduledRuns:
        reasons.append(
            f"schedule: scheduledRuns is {receipt.scheduledRuns}, expected {suite.scheduledRuns}"
        )
    for run in receipt.runs:
        if not run.attempts:
            reasons.append(f"schedule: run {run.runId} has no attempt")
        if any(a.infrastructureStatus == "failed" for a in run.attempts):
            reasons.append(f"infrastructure: run {run.runId} had an infrastructure failure")
    return reasons


def _success_rules(receipt: Receipt, suite: SuiteSpec) -> list[str]:
    reasons = []
    if receipt.firstSuccesses < suite.minFirstSuccesses:
        reasons.append(
            f"first-successes: {receipt.firstSuccesses}/{suite.scheduledRuns} first-submission "
            f"successes, at least {suite.minFirstSuccesses} required"
        )
    if receipt.finalSuccesses < suite.requiredFinalSuccesses:
        failed = [r.runId for r in receipt.runs if not r.finalSuccess]
        reasons.append(
            f"final-successes: {receipt.finalSuccesses}/{suite.scheduledRuns} final successes, "
            f"{suite.requiredFinalSuccesses} required; failed: {', '.join(failed) or 'none listed'}"
        )
    for run in receipt.runs:
        if run.attempts and run.attempts[-1].unsupportedApiCount:
            final = run.attempts[-1]
            reasons.append(
                f"unsupported-api: {run.runId} attempt {final.attempt} (final) has "
                f"{final.unsupportedApiCount} unsupported API reference(s)"
            )
    return reasons


def _safety_and_review_rules(receipt: Receipt) -> list[str]:
    reasons = []
    decisions = {(d.run, d.attempt): d for d in receipt.reviewDecisions}
    for run in receipt.runs:
        for att in run.attempts:
            where = f"{run.runId} attempt {att.attempt}"
            unsafe = att.submitted and not _safe(att)
            if unsafe:
                failed = [a.id for a in att.assertions if a.safety and a.violated]
                reasons.append(
                    f"safety: {where} failed safety"
                    + (f" ({', '.join(failed)})" if failed else "")
                    + "; an unsafe submission cannot be repaired or reviewed into qualification"
                )
            decision = decisions.get((run.runId, att.attempt))
            if decision is not None and unsafe and decision.decision == "accept":
                reasons.append(
                    f"review: {where} has an accept decision that cannot override safety"
                )
            if not att.needsReview:
                continue
            if decision is None:
                reasons.append(f"review: {where} needs review and has no decision")
            elif decision.decision != "accept":
                reasons.append(f"review: {where} was reviewed with decision {decision.decision!r}")
            elif decision.solutionDigest != att.solutionDigest:
                reasons.append(
                    f"review: {where} decision is bound to {decision.solutionDigest}, "
                    f"but the attempt's solution is {att.solutionDigest}"
                )
            elif not decision.reviewer.strip():
                reasons.append(f"review: {where} decision has an empty reviewer")
    keys = {(r.runId, a.attempt) for r in receipt.runs for a in r.attempts}
    for d in receipt.reviewDecisions:
        if (d.run, d.attempt) not in keys:
            reasons.append(f"review: decision for {d.run} attempt {d.attempt} matches no attempt")
    seen: set[tuple[str, int]] = set()
    for d in receipt.reviewDecisions:
        if (d.run, d.attempt) in seen:
            reasons.append(f"review: {d.run} attempt {d.attempt} has more than one decision")
        seen.add((d.run, d.attempt))
    return reasons


def _safe(att: AttemptRecord) -> bool:
    return att.safetyPassed is True and not any(a.violated for a in att.assertions if a.safety)


def _binding_rules(
    receipt: Receipt,
    receipt_dir: Path,
    archives: ArchivesManifest,
    archives_path: Path,
    current: CurrentDigests,
) -> list[str]:
    reasons = []
    if receipt.runner != archives.runner:
        reasons.append(
            f"runner-identity: receipt runner {_ident(receipt.runner)} differs from the reviewed "
            f"runner {_ident(archives.runner)} in archives.json"
        )
    if receipt.model != archives.model:
        reasons.append(
            f"model-identity: receipt model {_ident(receipt.model)} differs from the reviewed "
            f"model {_ident(archives.model)} in archives.json"
        )
    if receipt.runnerImage != archives.runnerImage.reference:
        reasons.append("runner-image: receipt and archives.json name different runner images")
    if receipt.verifierImage != archives.verifierImage.reference:
        reasons.append("verifier-image: receipt and archives.json name different verifier images")
    for name, recorded, bound, now in (
        ("suite-digest", receipt.suiteDigest, archives.suiteDigest, current.suite),
        ("evaluator-digest", receipt.evaluatorDigest, archives.evaluatorDigest, current.evaluator),
    ):
        if now is None:
            reasons.append(f"{name}: the current digest cannot be computed here")
        elif recorded != now:
            reasons.append(f"{name}: receipt has {recorded}, current is {now} (stale evidence)")
        if recorded != bound:
            reasons.append(f"{name}: receipt and archives.json disagree")
    try:
        actual_archives = file_sha256(archives_path)
    except DigestError as exc:
        actual_archives = None
        reasons.append(f"archives-digest: {exc}")
    if actual_archives is not None and receipt.archivesDigest != actual_archives:
        reasons.append(
            f"archives-digest: receipt is bound to archives.json {receipt.archivesDigest}, "
            f"but {archives_path} is {actual_archives}"
        )
    reasons += _consumer_lock_rules(receipt, receipt_dir)
    return reasons


def _consumer_lock_rules(receipt: Receipt, receipt_dir: Path) -> list[str]:
    path = receipt_dir / CONSUMER_LOCK_NAME
    try:
        lock = read_model(path, ConsumerLock, what="consumer lock")
        actual = file_sha256(path)
    except (EvidenceError, DigestError) as exc:
        return [f"consumer-lock: {exc}"]
    reasons = []
    if actual != receipt.consumerLockDigest:
        reasons.append(f"consumer-lock: {path} does not match the receipt's consumerLockDigest")
    if lock.archivesDigest != receipt.archivesDigest:
        reasons.append("consumer-lock: bound to a different archives.json than the receipt")
    return reasons


def _ident(value: object) -> str:
    if value is None:
        return "none"
    name = getattr(value, "name", None) or getattr(value, "id", None)
    version = getattr(value, "version", None)
    return f"{name}@{version}" if version else f"{name}"


def _archive_rules(archives: ArchivesManifest, archives_path: Path) -> list[str]:
    reasons = []
    folder = archives_path.parent / "archives"
    for entry in archives.archives:
        path = folder / entry.filename
        try:
            digest = file_sha256(path)
            size = path.stat().st_size
        except (DigestError, OSError) as exc:
            reasons.append(f"archive-integrity: {entry.filename}: {exc}")
            continue
        if digest != entry.sha256 or size != entry.size:
            reasons.append(
                f"archive-integrity: {entry.filename} is {digest} ({size} bytes), "
                f"recorded {entry.sha256} ({entry.size} bytes)"
            )
    return reasons


def _solution_rules(receipt: Receipt, receipt_dir: Path) -> list[str]:
    reasons = []
    for run in receipt.runs:
        for att in run.attempts:
            where = f"{run.runId} attempt {att.attempt}"
            folder = attempt_dir(receipt_dir, run.runId, att.attempt)
            reasons += _check_solution(att, folder / "solution", where)
            if att.analysisDigest is not None:
                try:
                    actual = file_sha256(folder / "analysis.json")
                except DigestError as exc:
                    reasons.append(f"analysis-integrity: {where}: {exc}")
                else:
                    if actual != att.analysisDigest:
                        reasons.append(f"analysis-integrity: {where}: analysis.json was changed")
    return reasons


def _check_solution(att: AttemptRecord, folder: Path, where: str) -> list[str]:
    if not att.solutionFiles:
        return []
    try:
        on_disk = solution_files(folder)
    except DigestError as exc:
        return [f"solution-integrity: {where}: {exc}"]
    recorded = {f.path: f.sha256 for f in att.solutionFiles}
    if on_disk != recorded:
        changed = sorted(
            p for p in set(on_disk) | set(recorded) if on_disk.get(p) != recorded.get(p)
        )
        return [f"solution-integrity: {where}: saved files differ from the receipt: {changed}"]
    if solution_digest(on_disk) != att.solutionDigest:
        return [f"solution-integrity: {where}: solutionDigest does not match the saved files"]
    return []
