"""The verifier's timing record is a bounded profile that is off unless asked for.

Invariants: a record that is not enabled notes nothing (the verifications of
a batch write no profile); an enabled one notes each span with its start on
the machine-wide clock, its length and the CPU time used meanwhile; spans another process wrote are
taken bounded and prefixed, and anything malformed there is skipped, never
an error; the record written is one JSON list.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent_eval.verification.runtime import timing
from agent_eval.verification.runtime.timing import MAX_TIMINGS_BYTES, Timings


def test_a_record_that_is_not_enabled_notes_nothing() -> None:
    record = Timings()
    with record.span("analysis"):
        pass
    record.add("scenario", 1.0, 2.0)
    assert record.spans == []


def test_an_enabled_record_notes_each_span_on_the_shared_clock() -> None:
    record = Timings()
    record.enabled = True
    before = timing.now()
    with record.span("analysis"):
        pass
    record.add("scenario", before, before + 0.5)
    (analysis, scenario) = record.spans
    assert analysis["name"] == "analysis" and before <= analysis["start"] <= timing.now()
    assert 0 <= analysis["seconds"] < 5 and 0 <= analysis["cpu"] < 5
    assert scenario == {"name": "scenario", "start": round(before, 6), "seconds": 0.5}


def test_this_process_started_before_now_on_the_same_clock() -> None:
    started = timing.process_started(os.getpid())
    assert started is not None and started <= timing.now()
    assert timing.process_started(2**22 + 1) is None


def test_spans_of_another_process_are_prefixed_and_malformed_ones_skipped(tmp_path: Path) -> None:
    record = Timings()
    record.enabled = True
    other = tmp_path / "timings.json"
    spans = [
        {"name": "mypy", "start": 10.0, "seconds": 0.25},
        {"name": 3, "start": 1, "seconds": 1},
        {"name": "no start", "seconds": 1},
        "text",
    ]
    other.write_text(json.dumps(spans), encoding="utf-8")
    record.extend(other, "analysis: ")
    assert record.spans == [{"name": "analysis: mypy", "start": 10.0, "seconds": 0.25}]
    other.write_text("not json", encoding="utf-8")
    record.extend(other, "analysis: ")
    other.write_bytes(b"[" + b" " * MAX_TIMINGS_BYTES + b"]")
    record.extend(other, "analysis: ")
    record.extend(tmp_path / "absent.json", "analysis: ")
    assert len(record.spans) == 1


def test_the_record_is_written_as_one_json_list(tmp_path: Path) -> None:
    record = Timings()
    record.enabled = True
    record.add("writing result.json", 5.0, 5.125)
    target = tmp_path / "timings.json"
    record.write(target)
    assert json.loads(target.read_text(encoding="utf-8")) == record.spans
    assert target.stat().st_mode & 0o777 == 0o600
