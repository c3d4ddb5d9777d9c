"""A run sent back by a node becomes evidence only when every file matches its record.

The record and files come from a real schedule (in-memory runner and
verifier), as a node's would; then each way a node could send something
else is tried: a file changed, one missing, one added, a solution list that
no longer adds up to its digest, another run's record, a path outside the
run. Nothing is written for any of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_eval.batch.attempt import Attempts
from agent_eval.batch.schedule import Schedule
from agent_eval.cluster.arrival import accept_run, expected_files
from agent_eval.digests import regular_files, sha256_bytes
from agent_eval.errors import EvidenceError
from agent_eval.models import NodeRunResult, ShippedFile, SolutionFile
from tests.batch.test_schedule import FakeRunner, FakeVerifier, plan, writes


def node_result(tmp_path: Path, run_id: str = "forms-1") -> NodeRunResult:
    (tmp_path / "node").mkdir()
    node_plan = plan(tmp_path / "node")
    schedule = Schedule(
        node_plan, clock=lambda: node_plan.receipt.createdAt, monotonic=lambda: 0.0,
        deadline=3600.0,
    )  # fmt: skip
    record = Attempts(schedule, FakeRunner(writes("GOOD")), FakeVerifier()).run(run_id)
    run_dir = node_plan.batch_dir / "runs" / run_id
    files = [ShippedFile(path=p, data=(run_dir / p).read_bytes()) for p in regular_files(run_dir)]
    return NodeRunResult(node="node-1", record=record, files=files)


def test_a_run_whose_files_match_is_written_and_names_its_node(tmp_path: Path) -> None:
    result = node_result(tmp_path)
    assert {f.path for f in result.files} == set(expected_files(result.record))
    batch = tmp_path / "driver"
    record = accept_run(result, "forms-1", batch)
    assert [a.node for a in record.attempts] == ["node-1"]
    solution = batch / "runs" / "forms-1" / "attempt-1" / "solution" / "solution.py"
    assert solution.read_text() == "GOOD"
    written = regular_files(batch / "runs" / "forms-1")
    assert written == sorted(f.path for f in result.files)


def _changed(result: NodeRunResult) -> NodeRunResult:
    first, *rest = result.files
    return result.model_copy(
        update={"files": [ShippedFile(path=first.path, data=first.data + b"x"), *rest]}
    )


def _missing(result: NodeRunResult) -> NodeRunResult:
    return result.model_copy(update={"files": result.files[1:]})


def _added(result: NodeRunResult) -> NodeRunResult:
    extra = ShippedFile(path="attempt-1/solution/extra.py", data=b"import os\n")
    return result.model_copy(update={"files": [*result.files, extra]})


def _twice(result: NodeRunResult) -> NodeRunResult:
    return result.model_copy(update={"files": [*result.files, result.files[0]]})


def _listed_too(result: NodeRunResult) -> NodeRunResult:
    # The file is sent and listed, but the attempt's solution digest no longer covers it.
    extra = ShippedFile(path="attempt-1/solution/extra.py", data=b"x")
    (attempt,) = result.record.attempts
    listed = SolutionFile(path="extra.py", sha256=sha256_bytes(b"x"), size=1)
    attempts = [attempt.model_copy(update={"solutionFiles": [*attempt.solutionFiles, listed]})]
    record = result.record.model_copy(update={"attempts": attempts})
    return result.model_copy(update={"record": record, "files": [*result.files, extra]})


def _another_run(result: NodeRunResult) -> NodeRunResult:
    return result.model_copy(update={"record": result.record.model_copy(update={"runId": "x-1"})})


@pytest.mark.parametrize(
    "tamper, said",
    [
        (_changed, "has digest"),
        (_missing, "is missing"),
        (_added, "is not in the record"),
        (_twice, "twice"),
        (_listed_too, "solution digest does not match"),
        (_another_run, "sent run x-1 for forms-1"),
    ],
)
def test_a_run_that_does_not_match_its_record_is_refused_and_nothing_written(
    tmp_path: Path, tamper: Callable[[NodeRunResult], NodeRunResult], said: str
) -> None:
    result = tamper(node_result(tmp_path))
    with pytest.raises(EvidenceError, match=said) as refused:
        accept_run(result, "forms-1", tmp_path / "driver")
    assert "node node-1" in str(refused.value)
    assert not (tmp_path / "driver").exists()


@pytest.mark.parametrize("path", ["../receipt.json", "/etc/passwd", "a/../../b", "a//b", ""])
def test_a_file_outside_the_run_cannot_even_be_read_from_the_wire(path: str) -> None:
    with pytest.raises(ValidationError):
        ShippedFile.model_validate_json(f'{{"path": "{path}", "data": ""}}')
