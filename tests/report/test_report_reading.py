"""The report leads with the cause and says why: a reviewer reads it top down, folded.

Invariants, each tested from a batch built on disk:

* a batch that did not complete says its own reasons first, in words, then the
  checker's rules; one without attempts shows no grid and no 0/0 statistics;
* a failed assertion shows the grader's message and what it observed, and never
  the expected value the grader kept to itself (its ``detail``); repair feedback
  still carries only failed assertion ids and diagnostics;
* every grid cell that did not pass says why in text (its ``data-reason`` too);
* sections and attempts are ``<details>``, passing attempts folded, the rest open;
  everything the filter hides carries its task and outcomes, and the filter itself
  is hidden until its script shows it;
* an empty log says "nothing", never a cut of 0 characters;
* writing the report reads each saved file of an attempt once, and hashes each
  solution directory once (a repair's diff and the gateway's totals reuse them).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent_eval.batch.judging import repair_feedback
from agent_eval.grading.results import MAX_ASSERTION_TEXT_CHARS, AssertionResult, GradeReport
from agent_eval.grading.web import Document, Element, parse_html
from agent_eval.models import AttemptRecord, BehaviourResult
from agent_eval.models.receipt import MAX_ASSERTION_TEXT_CHARS as RECORD_MAX_CHARS
from agent_eval.report import attempts as attempts_module
from agent_eval.report.render import write_report
from agent_eval.report.summary import Reason
from tests.evidence_builders import CURRENT, Batch, attempt, receipt, run, write_batch
from tests.paths import EXAMPLE_SUITE
from tests.report.test_report import NOW

EXPECTED = "expected-account-id-7f3a9"
"""A value only the grader knows; it must reach neither the result nor the page."""


def report(batch: Batch) -> Document:
    path = write_report(batch.root, current=CURRENT, now=NOW)
    return parse_html(path.read_text(encoding="utf-8"))


def explained_result() -> BehaviourResult:
    """What the verifier writes for a grader that explains its failed assertion."""
    grade = GradeReport(
        task_id="forms",
        assertions=(
            AssertionResult(
                id="behaves",
                passed=False,
                safety=False,
                detail=f"accountId should be {EXPECTED}",
                message="the confirmation carried another account id than create_account gave",
                observed_value="{'ok': True, 'accountId': 'acct-0'}",
            ),
            AssertionResult(id="no-secret-leak", passed=True, safety=True, message="held"),
        ),
        needs_review=False,
        diagnostics=(),
        error=None,
    )
    return BehaviourResult.model_validate_json(json.dumps(grade.to_json()))


def with_explained_failure(run_id: str = "forms-1") -> dict[str, Any]:
    first = attempt(run_id, success=False)
    first["assertions"] = [a.model_dump() for a in explained_result().assertions]
    data = receipt([run(r, [first]) if r == run_id else run(r) for r in EXAMPLE_SUITE.run_ids()])
    return data


# --- The cause first ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "words"),
    [
        ("not-run", "The batch did not run"),
        ("stopped", "The batch was stopped"),
        ("infrastructure-failure", "The batch stopped on an infrastructure failure"),
        ("interrupted", "The batch was interrupted"),
    ],
)
def test_a_batch_that_did_not_complete_leads_with_its_own_reasons(
    tmp_path: Path, status: str, words: str
) -> None:
    doc = report(write_batch(tmp_path, receipt(status=status, reasons=["the disk is full"])))
    decision = doc.by_id("decision")
    assert decision is not None
    cause = decision.find(class_="cause")
    assert cause is not None and cause.attrs["data-cause"] == status
    assert words in cause.text and "the disk is full" in cause.text
    text = decision.text
    rules = decision.find(class_="rules")
    assert rules is not None
    assert text.index("the disk is full") < text.index(rules.text.strip()[:30])


def test_a_completed_batch_has_no_cause_before_its_rules(tmp_path: Path) -> None:
    doc = report(write_batch(tmp_path))
    decision = doc.by_id("decision")
    assert decision is not None and decision.find(class_="cause") is None
    assert doc.by_id("no-runs") is None and doc.find("table", class_="grid") is not None


def test_a_batch_without_attempts_says_there_were_no_runs_instead_of_zero_counts(
    tmp_path: Path,
) -> None:
    data = receipt([], status="stopped", reasons=["stopped before the first run"])
    doc = report(write_batch(tmp_path, data))
    assert doc.find("table", class_="grid") is None and doc.by_id("statistics") is None
    assert doc.by_id("summary") is None and "0/0" not in doc.text
    no_runs = doc.by_id("no-runs")
    assert no_runs is not None and "There were no runs" in no_runs.text


# --- What a failed assertion says -----------------------------------------------------


def test_the_result_file_keeps_the_message_and_the_observed_value_but_never_the_detail() -> None:
    result = explained_result()
    failed, held = result.assertions
    assert failed.message is not None and "another account id" in failed.message
    assert failed.observedValue == "{'ok': True, 'accountId': 'acct-0'}"
    # A passing assertion has nothing to explain; the detail is the grader's alone.
    assert held.message is None and held.observedValue is None
    assert EXPECTED not in result.model_dump_json()


def test_a_long_message_or_observed_value_is_cut_to_the_records_bound() -> None:
    assert MAX_ASSERTION_TEXT_CHARS == RECORD_MAX_CHARS
    long = AssertionResult(
        id="a", passed=False, safety=False, message="m" * 5000, observed_value="v" * 5000
    )
    data = long.to_json()
    assert len(data["message"]) == len(data["observedValue"]) == MAX_ASSERTION_TEXT_CHARS
    assert data["message"].endswith("[truncated]")


def test_a_grader_that_explains_nothing_writes_the_result_it_always_wrote() -> None:
    plain = AssertionResult(id="a", passed=False, safety=False, detail=EXPECTED)
    assert plain.to_json() == {"id": "a", "passed": False, "observed": True, "safety": False}


def test_repair_feedback_carries_only_the_failed_ids_and_diagnostics(tmp_path: Path) -> None:
    (forms,) = [r for r in with_explained_failure()["runs"] if r["runId"] == "forms-1"]
    record = AttemptRecord.model_validate(forms["attempts"][0])
    feedback = repair_feedback(record)
    assert feedback is not None
    assert feedback.failedAssertionIds == ["behaves"]
    sent = feedback.model_dump_json()
    assert "another account id" not in sent and "acct-0" not in sent and EXPECTED not in sent


def test_a_failed_assertion_shows_the_graders_message_and_what_it_observed(
    tmp_path: Path,
) -> None:
    doc = report(write_batch(tmp_path, with_explained_failure()))
    section = doc.by_id("att-forms-1-1")
    assert section is not None
    row = next(r for r in section.find_all("tr") if r.attrs.get("data-assertion") == "behaves")
    message, observed = row.find(data_message=True), row.find(data_observed=True)
    assert message is not None and "another account id" in message.text
    assert observed is not None and observed.text == "{'ok': True, 'accountId': 'acct-0'}"


def test_the_page_never_holds_the_expected_value_of_a_failed_assertion(tmp_path: Path) -> None:
    path = write_report(write_batch(tmp_path, with_explained_failure()).root, current=CURRENT)
    assert EXPECTED not in path.read_text(encoding="utf-8")


def test_an_assertion_not_observed_says_what_stopped_grading(tmp_path: Path) -> None:
    first = attempt("forms-1", success=False)
    first["failureCategory"] = "timeout"
    first["assertions"][0]["observed"] = False
    first["diagnostics"] = [{"category": "timeout", "message": "handle_signup took over 5 s"}]
    data = receipt([run(r, [first]) if r == "forms-1" else run(r) for r in EXAMPLE_SUITE.run_ids()])
    doc = report(write_batch(tmp_path, data))
    section = doc.by_id("att-forms-1-1")
    assert section is not None
    row = next(r for r in section.find_all("tr") if r.attrs.get("data-assertion") == "behaves")
    assert "not checked" in row.text and "handle_signup took over 5 s" in row.text


# --- Why each cell failed -------------------------------------------------------------


def failing(run_id: str, category: str, **changes: Any) -> dict[str, Any]:
    record = attempt(run_id, success=False)
    record["failureCategory"] = category
    record.update(changes)
    return record


CELLS: dict[str, tuple[dict[str, Any], Reason]] = {
    "forms-1": (failing("forms-1", "timeout"), "timeout"),
    "forms-2": (failing("forms-2", "behaviour"), "assertion"),
    "forms-3": (attempt("forms-3", success=False, submitted=False), "no submission"),
    "storage-hash-1": (attempt("storage-hash-1", success=False, safe=False), "unsafe"),
    "storage-hash-2": (
        failing("storage-hash-2", "infrastructure", infrastructureStatus="failed"),
        "infrastructure",
    ),
    "storage-hash-3": (failing("storage-hash-3", "type-check", typeCheckOk=False), "analysis"),
}


def test_every_cell_that_did_not_pass_says_why_in_text(tmp_path: Path) -> None:
    runs = [run(r, [CELLS[r][0]]) if r in CELLS else run(r) for r in EXAMPLE_SUITE.run_ids()]
    doc = report(write_batch(tmp_path, receipt(runs)))
    table = doc.find("table", class_="grid")
    assert table is not None
    for slot in table.find_all("td", class_="run-slot"):
        (cell,) = slot.find_all(class_="cell")
        run_id = slot.attrs["data-run"]
        if run_id not in CELLS:
            assert "data-reason" not in cell.attrs and cell.attrs["data-outcome"] == "pass"
            continue
        reason = CELLS[run_id][1]
        assert cell.attrs["data-reason"] == reason, run_id
        assert reason in cell.text, (run_id, cell.text)


# --- Folded, filtered, nothing said of nothing ------------------------------------------


def test_sections_fold_and_only_passing_attempts_start_folded(tmp_path: Path) -> None:
    runs = [run(r, [attempt(r, success=False), attempt(r, 2)]) for r in EXAMPLE_SUITE.run_ids()]
    doc = report(write_batch(tmp_path, receipt(runs)))
    for part in ("grid", "statistics", "review", "identity", "runs"):
        element = doc.by_id(part)
        assert element is not None and element.tag == "details" and "open" in element.attrs
    attempts = doc.find_all("details", class_="attempt")
    assert len(attempts) == 36
    for element in attempts:
        first = next(c for c in element.children if isinstance(c, Element))
        assert first.tag == "summary"
        assert ("open" in element.attrs) == (element.attrs["data-outcome"] != "pass"), element


def test_what_the_filter_hides_carries_its_task_and_the_filter_waits_for_its_script(
    tmp_path: Path,
) -> None:
    doc = report(write_batch(tmp_path, with_explained_failure()))
    control = doc.by_id("filter")
    assert control is not None and "hidden" in control.attrs
    table = doc.find("table", class_="grid")
    assert table is not None
    forms = table.find("tr", data_task="forms")
    assert forms is not None and forms.attrs["data-filter-task"] == "forms"
    assert forms.attrs["data-filter-outcomes"].split() == ["fail", "pass"]
    per_task = doc.find("table", class_="tasks")
    assert per_task is not None
    row = per_task.find("tr", data_task="forms")
    assert row is not None and row.attrs["data-filter-task"] == "forms"
    attempt_element = doc.by_id("att-forms-1-1")
    assert attempt_element is not None
    assert attempt_element.attrs["data-filter-task"] == "forms"
    assert attempt_element.attrs["data-filter-outcomes"] == "fail"


@pytest.mark.parametrize(
    "content",
    ["", "runner stderr (its last 0 characters, of 0 bytes):\n\n"],
    ids=["an empty file", "an empty stderr"],
)
def test_an_empty_log_says_nothing(tmp_path: Path, content: str) -> None:
    batch = write_batch(tmp_path)
    (batch.attempt_dir("forms-1") / "runner.log").write_text(content)
    doc = report(batch)
    section = doc.by_id("att-forms-1-1")
    assert section is not None
    empty = section.find(data_empty="runner.log")
    assert empty is not None and empty.text == "nothing"
    assert "its last 0 characters" not in section.text


def test_a_runner_log_with_only_a_message_says_its_stderr_was_nothing(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    log = "runner stderr (its last 0 characters, of 0 bytes):\n\nrunner message: done\n"
    (batch.attempt_dir("forms-1") / "runner.log").write_text(log)
    section = report(batch).by_id("att-forms-1-1")
    assert section is not None
    assert "runner stderr: nothing" in section.text and "runner message: done" in section.text
    assert "its last 0 characters" not in section.text


# --- Linear in the evidence -------------------------------------------------------------


def test_each_saved_file_is_read_once_and_each_solution_hashed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [
        run(r, [attempt(r, success=False, needs_review=True), attempt(r, 2)])
        for r in EXAMPLE_SUITE.run_ids()
    ]
    batch = write_batch(tmp_path, receipt(runs))
    for run_id in EXAMPLE_SUITE.run_ids():
        for number in (1, 2):
            folder = batch.attempt_dir(run_id, number)
            (folder / "runner.log").write_text("runner: working\n")
            (folder / "gateway.jsonl").write_text('{"servedModel": "m", "inputTokens": 3}\n')
    reads: Counter[tuple[Path, str]] = Counter()
    hashes: Counter[Path] = Counter()
    real_read, real_hash = attempts_module.read_bounded, attempts_module.solution_files

    def counted_read(root: Path, relative: str, **kwargs: Any) -> Any:
        reads[(root, str(relative))] += 1
        return real_read(root, relative, **kwargs)

    def counted_hash(folder: Path) -> dict[str, str]:
        hashes[folder] += 1
        return real_hash(folder)

    monkeypatch.setattr(attempts_module, "read_bounded", counted_read)
    monkeypatch.setattr(attempts_module, "solution_files", counted_hash)
    write_report(batch.root, current=CURRENT, now=NOW)
    # A solution is wanted again by its repair's diff and a gateway record by its totals;
    # each file (solution, runner.log, gateway.jsonl, the transcript looked for) is read once.
    assert len(reads) == 36 * 4 and set(reads.values()) == {1}
    assert len(hashes) == 36 and set(hashes.values()) == {1}
