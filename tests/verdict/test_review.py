"""A review decision binds to the exact saved code, never overrides safety, changes nothing else.

The receipt is rewritten atomically: a failure mid-write leaves the old file intact.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_eval.errors import EvidenceError, ReviewError
from agent_eval.verdict.qualification import qualify_files
from agent_eval.verdict.review import record_review
from tests.evidence_builders import CURRENT, attempt, receipt, run, write_batch
from tests.paths import EXAMPLE_SUITE

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
RUN = "forms-2"


def batch_with(tmp_path: Path, *attempts: dict[str, object]):  # type: ignore[no-untyped-def]
    runs = [run(r, list(attempts)) if r == RUN else run(r) for r in EXAMPLE_SUITE.run_ids()]
    return write_batch(tmp_path, receipt(runs))


def test_an_accept_is_appended_bound_to_the_recomputed_digest(tmp_path: Path) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    before = json.loads(batch.receipt.read_text())
    entry = record_review(
        batch.receipt, run_id=RUN, attempt=1, reviewer=" alice ", decision="accept", now=NOW
    )
    after = json.loads(batch.receipt.read_text())
    assert after["reviewDecisions"] == [
        {
            "run": RUN,
            "attempt": 1,
            "solutionDigest": entry.solutionDigest,
            "decision": "accept",
            "reviewer": "alice",
            "reviewedAt": "2026-12-01T09:30:00Z",
        }
    ]
    recorded = next(r for r in before["runs"] if r["runId"] == RUN)["attempts"][0]
    assert entry.solutionDigest == recorded["solutionDigest"]
    del after["reviewDecisions"], before["reviewDecisions"]
    assert after == before


def test_a_changed_saved_solution_is_refused(tmp_path: Path) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    batch.solution(RUN).write_text("edited after grading\n")
    with pytest.raises(ReviewError, match="refusing to bind a decision to changed code"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW
        )


def test_an_unsafe_attempt_cannot_be_accepted(tmp_path: Path) -> None:
    batch = batch_with(
        tmp_path, attempt(RUN, 1, success=False, safe=False, needs_review=True), attempt(RUN, 2)
    )
    original = batch.receipt.read_bytes()
    with pytest.raises(ReviewError, match="a review cannot override a safety failure"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW
        )
    assert batch.receipt.read_bytes() == original


def test_an_unsafe_attempt_can_be_recorded_as_rejected(tmp_path: Path) -> None:
    batch = batch_with(
        tmp_path, attempt(RUN, 1, success=False, safe=False, needs_review=True), attempt(RUN, 2)
    )
    entry = record_review(
        batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="reject", now=NOW
    )
    assert entry.decision == "reject"


@pytest.mark.parametrize("reviewer", ["", "   "])
def test_an_empty_reviewer_is_refused(tmp_path: Path, reviewer: str) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    with pytest.raises(ReviewError, match="reviewer"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer=reviewer, decision="accept", now=NOW
        )


def test_an_unknown_attempt_is_refused(tmp_path: Path) -> None:
    batch = batch_with(tmp_path, attempt(RUN))
    with pytest.raises(ReviewError, match="no run 'forms-2' attempt 2"):
        record_review(
            batch.receipt, run_id=RUN, attempt=2, reviewer="a", decision="accept", now=NOW
        )


def test_an_unknown_attempt_is_refused_naming_the_ones_that_need_a_review(
    tmp_path: Path,
) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    with pytest.raises(ReviewError, match=f"attempts that need a review: {RUN} attempt 1$"):
        record_review(
            batch.receipt, run_id="forms-4", attempt=1, reviewer="a", decision="accept", now=NOW
        )


def test_a_second_decision_for_the_same_attempt_is_refused(tmp_path: Path) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    record_review(batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW)
    with pytest.raises(ReviewError, match="already has a review decision"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer="b", decision="accept", now=NOW
        )


def test_a_failed_write_leaves_the_old_receipt_and_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    original = batch.receipt.read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(ReviewError, match=r"No space left on device.*the receipt is unchanged"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW
        )
    assert batch.receipt.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize(
    "reviewer",
    ["a" * 201, "alice\nbob", "eve\u202eecila", "mallory\x1b[2J", "tab\there", "zero\u200bwidth"],
)
def test_a_reviewer_name_that_could_disguise_who_decided_is_refused(
    tmp_path: Path, reviewer: str
) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    original = batch.receipt.read_bytes()
    with pytest.raises(ReviewError, match="--reviewer"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer=reviewer, decision="accept", now=NOW
        )
    assert batch.receipt.read_bytes() == original


def test_a_decision_for_an_attempt_that_needs_no_review_is_refused(tmp_path: Path) -> None:
    batch = batch_with(tmp_path, attempt(RUN))
    with pytest.raises(ReviewError, match="needs no review"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW
        )


def test_a_receipt_that_is_a_symbolic_link_is_refused_and_its_target_untouched(
    tmp_path: Path,
) -> None:
    batch = batch_with(tmp_path / "b", attempt(RUN, needs_review=True))
    link = tmp_path / "b" / "link.json"
    link.symlink_to(batch.receipt)
    original = batch.receipt.read_bytes()
    with pytest.raises(EvidenceError, match="symbolic link"):
        record_review(link, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW)
    assert link.is_symlink() and batch.receipt.read_bytes() == original


def test_a_read_only_receipt_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    batch.receipt.chmod(0o444)
    original = batch.receipt.read_bytes()
    with pytest.raises(ReviewError, match="read-only; make it writable"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW
        )
    assert batch.receipt.read_bytes() == original


def test_a_receipt_in_a_directory_that_cannot_be_written_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))

    def immutable(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(tempfile, "mkstemp", immutable)
    with pytest.raises(ReviewError, match=r"Operation not permitted.*immutable"):
        record_review(
            batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW
        )


def test_the_checker_rejects_a_reviewer_name_edited_into_the_receipt(tmp_path: Path) -> None:
    batch = batch_with(tmp_path, attempt(RUN, needs_review=True))
    record_review(batch.receipt, run_id=RUN, attempt=1, reviewer="a", decision="accept", now=NOW)
    batch.edit_receipt(lambda d: d["reviewDecisions"][0].update(reviewer="a\u202eb"))
    result = qualify_files(batch.receipt, batch.archives, CURRENT)
    assert result.reasons and result.reasons[0].startswith("receipt-readable:")
    assert "U+202E" in result.reasons[0]
