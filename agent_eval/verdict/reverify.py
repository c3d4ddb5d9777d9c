"""Re-verification: every saved solution, verified again, must get the verdict the receipt records.

``check-agent-eval --reverify`` runs the recorded, pinned verifier image on
every attempt that was verified, from the batch's own archives, and holds
what it observes against the receipt and the saved ``analysis.json``: the
analysis (every finding and count), every assertion and whether it was
observed, safety, whether a review is asked for, and success. Any difference
rejects the batch, naming the attempt and the field. This rests on the
verification being deterministic (pinned image, locale, time zone and hash
seed; graders that take time as an input), which ``tasks verify --repeat``
checks for the fixtures.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path

from agent_eval.errors import AgentEvalError
from agent_eval.evidence_io import parse_model, read_bounded, read_model
from agent_eval.layout import RunDirectory
from agent_eval.models import (
    Analysis,
    ArchivesManifest,
    AttemptRecord,
    ConsumerLock,
    LockedDistribution,
    Receipt,
    RunRecord,
    TaskSpec,
)
from agent_eval.project import Project
from agent_eval.suite.tasks import load_suite
from agent_eval.verification.failure import code_failure_category
from agent_eval.verification.protocol import Verification, Verifier

__all__ = ["EvidenceVerifiers", "reverify", "reverify_files", "reverify_workers"]

_MAX_ANALYSIS_BYTES = 8 * 1024 * 1024


EvidenceVerifiers = Callable[
    [ArchivesManifest, Path],
    AbstractContextManager[tuple[Verifier, list[LockedDistribution], str]],
]
"""Opens the recorded verifier over a consumer installed again from a batch's archives:
the verifier, the distributions that consumer holds and the digest of its files
(``agent_eval.consumer.archives.installed_digest``)."""


def reverify_files(
    receipt_path: Path,
    archives_path: Path,
    project: Project,
    open_verifier: EvidenceVerifiers,
    *,
    workers: int | None = None,
) -> list[str]:
    """Verify every saved solution of a batch again; each difference is a reason.

    The consumer installed again from the batch's archives (never one from
    the consumer cache, nor its kept mypy caches: whoever writes the cache
    could have changed both with their records) must hold exactly the
    distributions and the files its consumer-lock.json records, and every
    verdict must come out as recorded. *workers* verifications run at once (default: one
    per core; *open_verifier* should give the verifier as many slots).
    """
    evidence = RunDirectory(receipt_path.parent)
    try:
        receipt = read_model(receipt_path, Receipt, what="receipt", follow_symlinks=False)
        archives = read_model(
            archives_path, ArchivesManifest, what="archives", follow_symlinks=False
        )
        recorded_lock = read_model(evidence.consumer_lock, ConsumerLock, what="consumer lock")
        suite = load_suite(project.tasks, graders_dir=project.graders)
    except AgentEvalError as exc:
        return [f"reverify: {exc}"]
    tasks = {task.id: task.spec for task in suite.tasks}
    try:
        with open_verifier(archives, evidence.root) as (verifier, installed, files):
            reasons = []
            if installed != recorded_lock.distributions:
                reasons.append(
                    "reverify: the consumer installed again from the archives holds other "
                    "distributions than consumer-lock.json records"
                )
            reasons += _consumer_integrity(recorded_lock, files)
            return reasons + reverify(
                receipt,
                evidence.root,
                tasks,
                verifier,
                workers=reverify_workers() if workers is None else workers,
            )
    except AgentEvalError as exc:
        return [f"reverify: the recorded verifier could not be prepared: {exc}"]


def _consumer_integrity(recorded: ConsumerLock, files: str) -> list[str]:
    """The batch's consumer against one installed again: the cache cannot vouch for itself."""
    origin = (
        f"the consumer-cache entry {recorded.cacheEntry}"
        if recorded.cacheEntry is not None
        else "the consumer installed for the batch"
    )
    if recorded.installedDigest is None:
        return [
            "consumer-integrity: consumer-lock.json records no digest of the consumer's files "
            f"(from {origin}); what the batch verified against cannot be compared"
        ]
    if recorded.installedDigest != files:
        return [
            f"consumer-integrity: {origin} held files {recorded.installedDigest}, but the "
            f"consumer installed again from the archives holds {files}"
        ]
    return []


def reverify(
    receipt: Receipt,
    run_dir: Path,
    tasks: dict[str, TaskSpec],
    verifier: Verifier,
    *,
    workers: int = 1,
) -> list[str]:
    """Every difference between the recorded verdicts and a fresh verification, as reasons.

    Up to *workers* attempts are verified at once; the reasons come in the
    receipt's order whatever order they finish in. When interrupted, no
    verification is started any more, those under way are stopped
    (``cancel_all``) and waited for, so none outlives this call.

    Args:
        receipt: The batch's receipt (already checked for integrity).
        run_dir: Its run directory.
        tasks: The suite's task specs by id (the current ones; a stale suite is
            a reason of its own).
        verifier: The recorded verifier image, prepared from the batch's archives.
        workers: Verifications at once (the verifier's own slots bound them too).
    """
    evidence = RunDirectory(run_dir)
    jobs: list[Callable[[], list[str]]] = []
    for run in receipt.runs:
        for record in run.attempts:
            if record.analysisDigest is None or not record.submitted:
                continue  # never verified: nothing to verify again
            jobs.append(functools.partial(_reverify_one, evidence, run, record, tasks, verifier))
    if workers <= 1 or len(jobs) <= 1:
        return [reason for job in jobs for reason in job()]
    pool = ThreadPoolExecutor(max_workers=min(workers, len(jobs)), thread_name_prefix="reverify")
    futures = [pool.submit(job) for job in jobs]
    try:
        found = [future.result() for future in futures]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(AgentEvalError):
            verifier.cancel_all()
        raise
    finally:
        # Also on an interruption: a verification still under way ends (its container
        # removed) before the caller's clean-up looks for what is left.
        pool.shutdown(wait=True)
    return [reason for reasons in found for reason in reasons]


def _reverify_one(
    evidence: RunDirectory,
    run: RunRecord,
    record: AttemptRecord,
    tasks: dict[str, TaskSpec],
    verifier: Verifier,
) -> list[str]:
    where = f"reverify: {run.runId} attempt {record.attempt}"
    task = tasks.get(run.taskId)
    if task is None:
        return [f"{where}: the suite has no task {run.taskId!r}"]
    folder = evidence.attempt(run.runId, record.attempt)
    try:
        recorded = parse_model(
            read_bounded(folder.analysis, what="analysis", max_bytes=_MAX_ANALYSIS_BYTES),
            Analysis,
            where=str(folder.analysis),
        )
        again = verifier.verify(task, folder.solution, run.runId)
    except AgentEvalError as exc:
        return [f"{where}: cannot verify it again: {exc}"]
    return [f"{where}: {d}" for d in _differences(record, recorded, again)]


def reverify_workers() -> int:
    """Verifications at once: one per core of this machine."""
    return max(1, os.cpu_count() or 1)


def _differences(record: AttemptRecord, recorded: Analysis, again: Verification) -> list[str]:
    found = []
    for name in Analysis.model_fields:
        before, after = getattr(recorded, name), getattr(again.analysis, name)
        if before != after:
            found.append(f"analysis.{name} was {_short(before)}, is now {_short(after)}")
    behaviour = again.behaviour
    was = {a.id: (a.passed, a.observed, a.safety) for a in record.assertions}
    now = {a.id: (a.passed, a.observed, a.safety) for a in behaviour.assertions}
    for assertion in sorted(set(was) | set(now)):
        if was.get(assertion) != now.get(assertion):
            found.append(
                f"assertion {assertion} was {_outcome(was.get(assertion))}, "
                f"is now {_outcome(now.get(assertion))}"
            )
    if record.safetyPassed != behaviour.safety_passed:
        found.append(f"safetyPassed was {record.safetyPassed}, is now {behaviour.safety_passed}")
    if record.needsReview != behaviour.needsReview:
        found.append(f"needsReview was {record.needsReview}, is now {behaviour.needsReview}")
    success = code_failure_category(again.analysis, behaviour) is None
    if record.success != success:
        found.append(f"success was {record.success}, is now {success}")
    return found


def _outcome(value: tuple[bool, bool, bool] | None) -> str:
    if value is None:
        return "absent"
    passed, observed, _ = value
    return "not observed" if not observed else "passed" if passed else "failed"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
