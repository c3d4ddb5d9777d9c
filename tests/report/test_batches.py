"""Batches are named by their run directory, a unique prefix of their id, or latest;
listed newest first with the checker's decision; and shown on one screen. A name that
finds no batch, or several, says so; nothing is found through a link."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_eval.report.batches import (
    UnknownBatch,
    find_batch,
    list_batches,
    listing_lines,
    run_dirs,
    show_lines,
)
from tests.evidence_builders import CURRENT, attempt, receipt, reference_batch, run, write_batch
from tests.paths import EXAMPLE_SUITE

OLD = "20261201T100000Z-aaaaaaaa-1111-4111-8111-111111111111"
NEW = "20261202T100000Z-bbbbbbbb-2222-4222-8222-222222222222"
NEWER_SAME_PREFIX = "20261202T110000Z-bbbbcccc-3333-4333-8333-333333333333"


def test_latest_is_the_newest_run_directory_and_links_or_files_never_count(
    tmp_path: Path,
) -> None:
    for name in (OLD, NEW):
        (tmp_path / name).mkdir()
    outside = tmp_path.parent / "outside-batch"
    outside.mkdir(exist_ok=True)
    os.symlink(outside, tmp_path / "20301231T000000Z-ffffffff-ffff-4fff-8fff-ffffffffffff")
    (tmp_path / "20301231T000001Z-eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee").write_text("x")
    (tmp_path / ".work").mkdir()
    assert [p.name for p in run_dirs(tmp_path)] == [NEW, OLD]
    assert find_batch("latest", tmp_path) == tmp_path / NEW


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("aaaa", OLD), ("20261201", OLD), ("bbbbbbbb-2222", NEW), (NEW, NEW)],
)
def test_a_unique_prefix_of_the_id_or_of_its_uuid_names_one_batch(
    tmp_path: Path, spec: str, expected: str
) -> None:
    for name in (OLD, NEW, NEWER_SAME_PREFIX):
        (tmp_path / name).mkdir()
    assert find_batch(spec, tmp_path) == tmp_path / expected


def test_a_prefix_of_several_batches_lists_them_and_one_of_none_says_how_to_look(
    tmp_path: Path,
) -> None:
    for name in (OLD, NEW, NEWER_SAME_PREFIX):
        (tmp_path / name).mkdir()
    with pytest.raises(UnknownBatch, match=r"matches 2 batches .*bbbbcccc.*bbbbbbbb"):
        find_batch("bbbb", tmp_path)
    with pytest.raises(UnknownBatch, match="agent-eval list"):
        find_batch("zzzz", tmp_path)
    with pytest.raises(UnknownBatch, match="run eval-agent first"):
        find_batch("latest", tmp_path / "missing")


def test_a_path_is_taken_as_it_is(tmp_path: Path) -> None:
    assert find_batch(str(tmp_path / "somewhere" / "else"), tmp_path) == (
        tmp_path / "somewhere" / "else"
    )


def test_the_list_decides_each_batch_and_says_an_unreadable_one(tmp_path: Path) -> None:
    write_batch(tmp_path / NEW)
    reference_batch(tmp_path / OLD)
    broken = tmp_path / "20261130T000000Z-cccccccc-3333-4333-8333-333333333333"
    broken.mkdir()
    (broken / "receipt.json").write_text("{not json")
    listing = list_batches(tmp_path, CURRENT)
    assert [b.batchId for b in listing.batches] == [NEW, OLD, broken.name]
    qualified, self_test, unreadable = listing.batches
    assert (qualified.decision, qualified.reasons) == ("qualified", [])
    assert qualified.firstSuccesses == qualified.finalSuccesses == 18
    assert self_test.decision == "expected-self-test"
    assert unreadable.decision == "unknown" and "receipt" in (unreadable.problem or "")
    lines = listing_lines(listing, datetime(2026, 12, 3, tzinfo=UTC))
    assert lines[0].split()[:3] == ["BATCH", "STATUS", "RUNNER"]
    assert "QUALIFIED" in lines[1] and "18/18" in lines[1]
    assert "self-test" in lines[2] and "unreadable" in lines[3]
    assert json.loads(listing.model_dump_json())["batches"][0]["decision"] == "qualified"
    assert [b.decision for b in list_batches(tmp_path, None).batches] == ["unknown"] * 3


@pytest.mark.parametrize("field", ["createdAt", "updatedAt"])
def test_a_time_without_its_utc_offset_is_one_unreadable_batch_not_a_broken_list(
    tmp_path: Path, field: str
) -> None:
    """Every time the harness writes carries its offset; one without it cannot be ordered
    against the others (the listing crashed on every batch), so its receipt is refused."""
    write_batch(tmp_path / NEW)
    naive = write_batch(tmp_path / OLD)
    naive.edit_receipt(lambda data: data.update({field: "2026-11-30T12:00:00"}))
    listing = list_batches(tmp_path, CURRENT)
    assert [b.batchId for b in listing.batches] == [NEW, OLD]
    assert listing.batches[0].decision == "qualified"
    refused = listing.batches[1]
    assert refused.decision == "unknown" and field in (refused.problem or "")
    assert "timezone" in (refused.problem or "")
    lines = listing_lines(listing, datetime(2026, 12, 3, tzinfo=UTC))
    assert "unreadable" in lines[2]


def test_a_name_with_control_characters_cannot_move_the_terminal(tmp_path: Path) -> None:
    data = receipt(runner={"name": "evil\n\x1b[2J\u202eQUALIFIED", "version": "1"})
    write_batch(tmp_path / NEW, data)
    lines = listing_lines(list_batches(tmp_path, None), datetime(2026, 12, 3, tzinfo=UTC))
    assert len(lines) == 2
    assert all("\x1b" not in line and "\u202e" not in line for line in lines)
    assert "\\u000a" in lines[1] and "\\u202e" in lines[1]


def test_show_names_each_run_that_did_not_pass_with_its_lead_assertion(tmp_path: Path) -> None:
    runs = [run(r) for r in EXAMPLE_SUITE.run_ids()]
    failing = EXAMPLE_SUITE.run_ids()[4]
    first = attempt(failing, success=False)
    second = attempt(failing, 2, success=False)
    second["assertions"][0]["message"] = "the form accepted an empty name"
    runs[4] = run(failing, [first, second])
    data = receipt(runs)
    write_batch(tmp_path / NEW, data)
    lines, qualified = show_lines(tmp_path / NEW, CURRENT)
    assert not qualified
    assert lines[0].startswith("REJECTED")
    assert any(line.startswith("  - final-successes") for line in lines)
    (failed,) = [line for line in lines if line.startswith(f"  {failing}:")]
    assert "attempt 1 fail" in failed and "attempt 2 fail" in failed
    assert "behaves: the form accepted an empty name" in failed
    assert lines[-1].startswith("report: not written yet")
