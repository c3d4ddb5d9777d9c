"""Recording a reviewer's digest-bound decision on one attempt.

The decision is bound to the solution digest recomputed from the saved files,
so a reviewer can only accept the exact code they could have read. A decision
never changes grades, assertions or hashes, and never overrides safety.
"""

from __future__ import annotations

import json
import stat
from datetime import datetime
from pathlib import Path
from typing import Literal

from agent_eval.digests import DigestError, solution_digest, solution_files
from agent_eval.errors import ReviewError
from agent_eval.evidence_io import (
    MAX_EVIDENCE_BYTES,
    parse_model,
    read_bounded,
    write_bytes_atomic,
)
from agent_eval.layout import RunDirectory
from agent_eval.models import Receipt, ReviewDecision
from agent_eval.models.receipt import check_reviewer

__all__ = ["record_review"]


def record_review(
    receipt_path: Path,
    *,
    run_id: str,
    attempt: int,
    reviewer: str,
    decision: Literal["accept", "reject"],
    now: datetime,
) -> ReviewDecision:
    """Append a decision to the receipt's reviewDecisions and rewrite it atomically.

    Raises:
        EvidenceError: the receipt cannot be read (a link, a FIFO, too large) or is invalid.
        ReviewError: the reviewer's name is refused, the attempt does not exist,
            needs no review, has no saved solution, its saved files no longer
            match the recorded digest, it already has a decision, an accept
            would override safety, or the receipt cannot be rewritten.
    """
    try:
        name = check_reviewer(reviewer.strip())
    except ValueError as exc:
        raise ReviewError(f"--reviewer {exc}") from None
    # The receipt itself, never a link to one: its replacement would leave the
    # target without the decision.
    data = read_bounded(
        receipt_path, what="receipt", max_bytes=MAX_EVIDENCE_BYTES, follow_symlinks=False
    )
    receipt = parse_model(data, Receipt, where=f"receipt {receipt_path}")
    record = receipt.find_attempt(run_id, attempt)
    if record is None:
        waiting = [
            f"{run.runId} attempt {a.attempt}"
            for run in receipt.runs
            for a in run.attempts
            if a.needsReview
        ]
        hint = (
            f"; attempts that need a review: {', '.join(waiting[:20])}"
            if waiting
            else "; no attempt of it needs a review"
        )
        raise ReviewError(
            f"{receipt_path}: no run {run_id!r} attempt {attempt} in this receipt{hint}"
        )
    where = f"{run_id} attempt {attempt}"
    if not record.needsReview:
        raise ReviewError(
            f"{where} needs no review (needsReview is false); a decision there would "
            "be a stray one, which check-agent-eval rejects"
        )
    if record.solutionDigest is None:
        raise ReviewError(f"{where} has no saved solution to review")
    folder = RunDirectory(receipt_path.parent).attempt(run_id, attempt).solution
    try:
        actual = solution_digest(solution_files(folder))
    except DigestError as exc:
        raise ReviewError(f"{where}: cannot hash the saved solution: {exc}") from exc
    if actual != record.solutionDigest:
        raise ReviewError(
            f"{where}: the saved solution is {actual} but the receipt records "
            f"{record.solutionDigest}; refusing to bind a decision to changed code"
        )
    if decision == "accept" and (
        record.unsafe or (record.submitted and record.safetyPassed is not True)
    ):
        raise ReviewError(
            f"{where} failed safety; a review cannot override a safety failure, so it cannot be "
            "accepted"
        )
    if any(d.run == run_id and d.attempt == attempt for d in receipt.reviewDecisions):
        raise ReviewError(f"{where} already has a review decision")
    entry = ReviewDecision(
        run=run_id,
        attempt=attempt,
        solutionDigest=actual,
        decision=decision,
        reviewer=name,
        reviewedAt=now,
    )
    # Edit the file's own JSON (the bytes validated above) rather than
    # re-serialising the model, so every other field stays exactly as written.
    raw = json.loads(data)
    raw["reviewDecisions"] = [*raw["reviewDecisions"], entry.model_dump(mode="json")]
    Receipt.model_validate(raw)
    _rewrite(receipt_path, (json.dumps(raw, indent=2, ensure_ascii=False) + "\n").encode())
    return entry


def _rewrite(path: Path, data: bytes) -> None:
    mode = path.lstat().st_mode
    if not mode & stat.S_IWUSR:
        raise ReviewError(
            f"{path} is read-only; make it writable (chmod u+w) to record a decision in it"
        )
    try:
        write_bytes_atomic(path, data)
    except OSError as exc:
        raise ReviewError(
            f"cannot rewrite {path}: {exc.strerror or exc} (is the file or its directory "
            "immutable, read-only or on a full disk?); the receipt is unchanged"
        ) from None
