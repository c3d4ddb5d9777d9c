"""No receipt, archives file or number makes compare, summary or plan crash or hang.

Each side of ``compare`` (two batches, or two matrix records: the record itself or
a batch it names) and the batch of ``summary`` is fed the receipts, archives files and
matrix records the reader properties use (arbitrary bytes and JSON, documents
nested far too deep, the valid document with one value replaced, dropped or
its key repeated); ``plan`` is fed any pair of numbers and any text. Each must
answer or refuse with the harness's own error in one line; a traceback or a
hang past the per-example deadline fails the property.
"""

from __future__ import annotations

import math
import tempfile
import uuid
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.cli import main
from agent_eval.compare.compare import compare_batches
from agent_eval.compare.matrix import matrix_of_batches
from agent_eval.compare.matrix_compare import as_text, compare_matrices
from agent_eval.compare.share import as_markdown, share_summary
from agent_eval.errors import AgentEvalError
from tests.compare.test_matrix_compare import FORMS, agent_batch, record
from tests.compare.test_symbols import AFTER
from tests.evidence_builders import CURRENT, archives_manifest, receipt, write_batch
from tests.fuzz.test_readers import FUZZ, inputs_for

COMPARE = settings(FUZZ, max_examples=min(FUZZ.max_examples, 120))
compared: list[int] = []
"""Examples that compared (not refused): the property must reach the statistics too."""


def one_line_error(exc: AgentEvalError) -> None:
    message = str(exc)
    assert message and "\n" not in message and len(message) < 2500, message


@COMPARE
@given(
    data=inputs_for(receipt()) | inputs_for(archives_manifest(b"wheel")),
    which=st.sampled_from(["receipt", "archives", "nothing"]),
    side=st.sampled_from(["baseline", "candidate"]),
)
def test_compare_answers_or_refuses_in_one_line_whatever_a_side_holds(
    tmp_path: Path, data: bytes, which: str, side: str
) -> None:
    # Two batches of their own ids: the intact pair compares (one batch named twice is refused).
    good = write_batch(tmp_path / uuid.uuid4().hex, receipt(batchId="batch-2"))
    damaged = write_batch(tmp_path / uuid.uuid4().hex)
    if which != "nothing":  # else the intact pair: the statistics are reached too
        (damaged.receipt if which == "receipt" else damaged.archives).write_bytes(data)
    sides = ([good.root], [damaged.root])
    baseline, candidate = sides if side == "candidate" else sides[::-1]
    try:
        comparison = compare_batches(baseline, candidate, CURRENT)
    except AgentEvalError as exc:
        one_line_error(exc)
        return
    compared.append(1)
    for rate in (comparison.first, comparison.final):
        assert rate.pValue is None or 0.0 <= rate.pValue <= 1.0


def _matrix_document() -> dict[str, Any]:
    """A valid matrix record, as JSON, for the mutations to start from."""
    with tempfile.TemporaryDirectory() as root:
        made = agent_batch(Path(root), "a", "a", runs=FORMS)
        return matrix_of_batches([made], CURRENT).model_dump(mode="json")


matrices_compared: list[int] = []
"""Matrix records that compared: the property must reach the per-agent statistics too."""


@COMPARE
@given(
    data=inputs_for(_matrix_document())
    | inputs_for(receipt())
    | inputs_for(archives_manifest(b"wheel")),
    which=st.sampled_from(["record", "receipt", "archives", "nothing"]),
    side=st.sampled_from(["baseline", "candidate"]),
)
def test_compare_of_matrices_answers_or_refuses_in_one_line_whatever_a_side_holds(
    tmp_path: Path, data: bytes, which: str, side: str
) -> None:
    root = tmp_path / uuid.uuid4().hex
    evidence = root / "evidence"
    evidence.mkdir(parents=True)
    before = agent_batch(evidence, "a-0", "a", runs=FORMS)
    after = agent_batch(evidence, "a-1", "a", catalog=AFTER, runs=FORMS)
    records = [record(root / "before.json", [before]), record(root / "after.json", [after])]
    damaged = 0 if side == "baseline" else 1
    batch = [before, after][damaged]
    if which == "record":
        records[damaged].write_bytes(data)
    elif which != "nothing":  # else the intact pair: the statistics are reached too
        (batch / ("receipt.json" if which == "receipt" else "archives.json")).write_bytes(data)
    try:
        compared = compare_matrices(records[0], records[1], evidence, CURRENT)
    except AgentEvalError as exc:
        one_line_error(exc)
        return
    matrices_compared.append(1)
    assert as_text(compared).strip()
    for agent in compared.agents:
        for rate in (agent.first, agent.final):
            assert rate.adjustedP is None or 0.0 <= rate.adjustedP <= 1.0


@COMPARE
@given(
    data=inputs_for(receipt()) | inputs_for(archives_manifest(b"wheel")),
    which=st.sampled_from(["receipt", "archives"]),
)
def test_summary_answers_or_refuses_in_one_line_whatever_the_batch_holds(
    tmp_path: Path, data: bytes, which: str
) -> None:
    batch = write_batch(tmp_path / uuid.uuid4().hex)
    (batch.receipt if which == "receipt" else batch.archives).write_bytes(data)
    try:
        shared = share_summary(batch.root, CURRENT)
    except AgentEvalError as exc:
        one_line_error(exc)
        return
    assert as_markdown(shared).strip()


numbers = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.floats(min_value=-1.0, max_value=1.0)
    | st.sampled_from([0.0, 1.0, -1.0, 1e-300, 1 - 1e-16, 5e-324])
).map(repr) | st.text(max_size=12)


@settings(FUZZ, max_examples=min(FUZZ.max_examples, 200))
@given(rate=numbers, detect=numbers)
def test_plan_answers_or_refuses_with_a_usage_error_for_any_numbers(rate: str, detect: str) -> None:
    result = CliRunner().invoke(main, ["plan", "--baseline-rate", rate, "--detect", detect])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert "Error:" in result.output and "Traceback" not in result.output
    else:
        assert any(ch.isdigit() for ch in result.output), result.output
        assert not math.isnan(float(rate)) and not math.isnan(float(detect))


def test_the_compare_property_reached_the_statistics() -> None:
    # Runs after the property in this module (pytest keeps a module's order).
    assert compared, "no generated side was ever compared: the property tested only refusals"
    assert matrices_compared, "no pair of matrix records was ever compared: only refusals"
