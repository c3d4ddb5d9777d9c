"""Recording a reviewer's digest-bound decision on one attempt.

The decision is bound to the solution digest recomputed from the saved files,
so a reviewer can only accept the exact code they could have read. A decision
never changes grades, assertions or hashes, and never overrides safety.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Literal

from agent_eval.digests import DigestError, solution_digest, solution_files
from agent_eval.errors import ReviewError
from agent_eval.evidence_io import read_model, write_bytes_atomic
from agent_eval.layout import RunDirectory
from agent_eval.models import Receipt, ReviewDecision

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
        EvidenceError: the receipt cannot be read or is invalid.
        ReviewError: the attempt does not exist, has no saved solution, its saved
            files no longer match the recorded digest, the reviewer is empty, the
            attempt already has a decision, or an accept would override safety.
    """
    if not reviewer.strip():
        raise ReviewError("--reviewer must name who reviewed the attempt (it is empty)")
    receipt = read_model(receipt_path, Receipt, what="receipt")
    record = receipt.find_attempt(run_id, attempt)
    if record is None:
        raise ReviewError(f"{receipt_path}: no run {run_id!r} attempt {attempt} in this receipt")
    where = f"{run_id} attempt {attempt}"
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
    if decision == "accept" and record.submitted and record.safetyPassed is not True:
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
        reviewer=reviewer.strip(),
        reviewedAt=now,
    )
    # Edit the file's own JSON rather than re-serialising the model, so every
    # other field stays exactly as written.
    raw = json.loads(receipt_path.read_bytes())
    raw["reviewDecisions"] = [*raw["reviewDecisions"], entry.model_dump(mode="json")]
    Receipt.model_validate(raw)
    write_bytes_atomic(
        receipt_path, (json.dumps(raw, indent=2, ensure_ascii=False) + "\n").encode()
    )
    return entry
