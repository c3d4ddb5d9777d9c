"""A resumed batch is decided on its chain's union: each scheduled run once, from exactly one
batch, every batch's bindings and evidence checked as its own.

Every test starts from a chain that qualifies (a first batch interrupted
after 9 of 18 runs, the second running the 9 others) and breaks one thing: a
predecessor edited, missing or in a cycle, a run counted twice, a reused run
without a verdict, a predecessor bound to other identities, a file of a
predecessor's evidence changed. Each is a reason and none is silently taken.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent_eval.digests import file_sha256
from agent_eval.verdict.qualification import qualify_files
from tests.evidence_builders import (
    CURRENT,
    Batch,
    attempt,
    receipt,
    run,
    write_batch,
)
from tests.paths import EXAMPLE_SUITE

RUNS = EXAMPLE_SUITE.run_ids()
DONE, LEFT = RUNS[:9], RUNS[9:]


def interrupted(run_id: str) -> dict[str, Any]:
    """A run the batch was stopped in: its one attempt the infrastructure's."""
    cut = attempt(run_id, submitted=False, success=False)
    cut |= {
        "failureCategory": "infrastructure",
        "infrastructureStatus": "failed",
        "infrastructureKind": "stopped",
    }
    return run(run_id, [cut])


def first_batch(evidence: Path, archives: Any = None, **overrides: Any) -> Batch:
    runs = [run(r) for r in DONE] + [interrupted(LEFT[0])] + [run(r, []) for r in LEFT[1:]]
    data = receipt(runs, batchId="batch-a", status="interrupted", reasons=["SIGTERM"])
    return write_batch(evidence / "batch-a", data | overrides, archives)


def resumed(
    evidence: Path,
    before: Batch,
    runs: list[dict[str, Any]] | None = None,
    reused: list[str] | None = None,
    batch_id: str = "batch-b",
    archives: Any = None,
) -> Batch:
    runs = runs if runs is not None else [run(r) for r in LEFT]
    predecessor = {
        "batchId": json.loads(before.receipt.read_text())["batchId"],
        "receiptDigest": file_sha256(before.receipt),
        "reusedRuns": sorted(DONE if reused is None else reused),
    }
    data = receipt(runs, batchId=batch_id, scheduledRuns=len(runs), predecessor=predecessor)
    return write_batch(evidence / batch_id, data, archives)


def check(batch: Batch) -> list[str]:
    result = qualify_files(batch.receipt, batch.archives, CURRENT)
    assert result.qualified == (not result.reasons)
    return result.reasons


def test_a_chain_whose_union_is_whole_qualifies_though_neither_batch_would(
    tmp_path: Path,
) -> None:
    first = first_batch(tmp_path)
    last = resumed(tmp_path, first)
    assert check(last) == []
    result = qualify_files(last.receipt, last.archives, CURRENT)
    assert result.chain is not None
    assert [(b.batchId, b.runs, b.durationMs) for b in result.chain] == [
        ("batch-a", DONE, 10 * 1000),
        ("batch-b", LEFT, 9 * 1000),
    ]
    # Alone, the first is interrupted and incomplete.
    assert {r.split(":")[0] for r in check(first)} >= {"batch-completed", "infrastructure"}


def test_the_union_is_judged_as_one_batch_would_be(tmp_path: Path) -> None:
    first = first_batch(tmp_path)
    failed = [run(r, [attempt(r, success=False)]) for r in LEFT[:2]] + [run(r) for r in LEFT[2:]]
    reasons = check(resumed(tmp_path, first, failed))
    assert [r.split(":")[0] for r in reasons] == ["final-successes"], reasons
    assert "16/18 final successes" in reasons[0]
    assert f"failed: {LEFT[0]}, {LEFT[1]}" in reasons[0]


def test_an_edited_predecessor_breaks_the_chain(tmp_path: Path) -> None:
    first = first_batch(tmp_path)
    last = resumed(tmp_path, first)
    first.edit_receipt(lambda data: data["reasons"].append("edited"))
    (reason,) = [r for r in check(last) if r.startswith("chain:")]
    assert "batch-b resumes batch-a, whose receipt.json is sha256:" in reason
    assert "the predecessor was changed" in reason


def test_a_missing_predecessor_breaks_the_chain_and_its_runs_are_missing(
    tmp_path: Path,
) -> None:
    first = first_batch(tmp_path)
    last = resumed(tmp_path, first)
    shutil.rmtree(first.root)
    reasons = check(last)
    assert any(r.startswith("chain: batch-b resumes batch-a, which is missing") for r in reasons)
    assert any(r.startswith("schedule: missing runs") for r in reasons), reasons


def test_a_chain_with_a_cycle_is_refused(tmp_path: Path) -> None:
    back = {"batchId": "batch-b", "receiptDigest": "sha256:" + "e" * 64, "reusedRuns": []}
    first = first_batch(tmp_path, predecessor=back)
    reasons = check(resumed(tmp_path, first))
    assert "chain: batch-a resumes batch-b, already in its chain (a cycle)" in reasons, reasons


def test_a_run_both_run_and_reused_is_counted_twice(tmp_path: Path) -> None:
    first = first_batch(tmp_path)
    reasons = check(resumed(tmp_path, first, [run(r) for r in [DONE[0], *LEFT]]))
    assert any("both runs and reuses" in r and DONE[0] in r for r in reasons), reasons


def test_a_reused_run_without_a_verdict_in_the_predecessor_is_refused(tmp_path: Path) -> None:
    first = first_batch(tmp_path)
    reasons = check(resumed(tmp_path, first, [run(r) for r in LEFT[1:]], [*DONE, LEFT[0]]))
    assert any(
        r.startswith("chain:") and f"reuses {LEFT[0]}, which have no valid final verdict" in r
        for r in reasons
    ), reasons


def test_a_predecessor_bound_to_other_identities_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    first = first_batch(tmp_path)

    def other_command(manifest: dict[str, Any]) -> None:
        manifest["runnerCommand"] = ["/usr/bin/python3", "-m", "another.adapter"]

    reasons = check(resumed(tmp_path, first, archives=other_command))
    assert any(
        r.startswith("chain:") and "archives.json field runnerCommand" in r for r in reasons
    ), reasons


@pytest.mark.parametrize("where", ["solution", "archive"])
def test_a_predecessors_evidence_is_verified_as_its_own(tmp_path: Path, where: str) -> None:
    first = first_batch(tmp_path)
    last = resumed(tmp_path, first)
    if where == "solution":
        first.solution(DONE[0]).write_bytes(b"VALUE = 2\n")
    else:
        next((first.root / "archives").iterdir()).write_bytes(b"changed")
    reasons = check(last)
    assert reasons and all("in predecessor batch-a: " in r for r in reasons), reasons


def test_files_left_by_a_run_the_predecessor_did_not_finish_are_no_part_of_the_decision(
    tmp_path: Path,
) -> None:
    first = first_batch(tmp_path)
    last = resumed(tmp_path, first)
    # The run in flight when the first batch died wrote its solution, never its record.
    left = first.solution(LEFT[1])
    left.parent.mkdir(parents=True)
    left.write_bytes(b"VALUE = 1\n")
    assert check(last) == []
    # Beside a run the decision takes from the predecessor, the same file is a reason.
    (first.attempt_dir(DONE[0]) / "extra.py").write_bytes(b"x = 1\n")
    reasons = check(last)
    assert [r.split(":")[0] for r in reasons] == ["evidence-integrity"], reasons
    assert f"runs/{DONE[0]}/attempt-1/extra.py" in reasons[0]
