"""Whatever way a schedule is split over a chain of resumed batches, the checker counts each
run once, from the batch that gave it its verdict, and decides as on one batch of those runs.

Each example spreads the 18 runs over a chain of 1 to 4 batches: a run's
origin is the batch that ran it to a verdict (a success or a failure); every
earlier batch left it unstarted or cut by the infrastructure. Each batch
after the first resumes the one before, reusing exactly the runs with a
verdict so far.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.digests import file_sha256
from agent_eval.verdict.qualification import qualify_files
from tests.evidence_builders import CURRENT, attempt, receipt, run, write_batch
from tests.paths import EXAMPLE_SUITE
from tests.verdict.test_chain import interrupted

RUNS = EXAMPLE_SUITE.run_ids()


@st.composite
def chains(draw: st.DrawFn) -> tuple[int, dict[str, int], dict[str, bool], dict[str, bool]]:
    """(batches, each run's origin, whether its verdict is a success, whether each run left
    behind before its origin was cut rather than never started)."""
    length = draw(st.integers(1, 4))
    origins = {r: draw(st.integers(0, length - 1)) for r in RUNS}
    origins[RUNS[-1]] = length - 1  # the last batch runs at least one run
    passed = {r: draw(st.booleans()) for r in RUNS}
    cut = {r: draw(st.booleans()) for r in RUNS}
    return length, origins, passed, cut


def verdict(run_id: str, success: bool) -> dict[str, Any]:
    return run(run_id, [attempt(run_id, success=success)])


@settings(max_examples=25, deadline=None)
@given(chains())
def test_every_run_is_counted_once_from_its_origin_and_decided_as_one_batch(
    chain: tuple[int, dict[str, int], dict[str, bool], dict[str, bool]],
) -> None:
    length, origins, passed, cut = chain
    with tempfile.TemporaryDirectory() as temp:
        evidence = Path(temp) / "evidence"
        before = None
        for index in range(length):
            left = [r for r in RUNS if origins[r] >= index]
            runs = [
                verdict(r, passed[r])
                if origins[r] == index
                else (interrupted(r) if cut[r] else run(r, []))
                for r in left
            ]
            extra: dict[str, Any] = {"batchId": f"batch-{index}", "scheduledRuns": len(left)}
            if index < length - 1:
                extra |= {"status": "interrupted", "reasons": ["stopped"]}
            if before is not None:
                extra["predecessor"] = {
                    "batchId": f"batch-{index - 1}",
                    "receiptDigest": file_sha256(before.receipt),
                    "reusedRuns": sorted(r for r in RUNS if origins[r] < index),
                }
            before = write_batch(evidence / f"batch-{index}", receipt(runs, **extra))
        assert before is not None
        result = qualify_files(before.receipt, before.archives, CURRENT)
        whole = write_batch(Path(temp) / "whole", receipt([verdict(r, passed[r]) for r in RUNS]))
        alone = qualify_files(whole.receipt, whole.archives, CURRENT)

    assert not [r for r in result.reasons if r.startswith("chain:")], result.reasons
    assert sorted(r.split(":")[0] for r in result.reasons) == sorted(
        r.split(":")[0] for r in alone.reasons
    ), (result.reasons, alone.reasons)
    if length > 1:
        assert result.chain is not None
        assert [c.runs for c in result.chain] == [
            [r for r in RUNS if origins[r] == index] for index in range(length)
        ]
