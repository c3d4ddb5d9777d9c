"""The report shows a batch as saved, decides it as check-agent-eval does, loads and runs nothing.

Invariants, each tested from a batch built on disk:

* the decision and its reasons are exactly ``qualify_files`` on the same files;
* the page carries its Content Security Policy, has one script (the filter,
  allowed by its hash, never ``unsafe-inline``), no form, and refers to
  nothing outside itself (every link is a fragment of the page);
* whatever an agent wrote (solution, logs, messages) is text in the page;
* every scheduled run is in the grid with the outcome its attempts had;
* any receipt status renders, a damaged run directory yields notes (only an
  unreadable receipt is an error, naming the file), and nothing but
  ``report.html`` is written;
* a 36-attempt batch of worst-case files stays under 2 MB and says it was cut.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import shlex
import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.errors import EvidenceError
from agent_eval.grading.web import Document, Element, parse_html
from agent_eval.models import AttemptRecord, BatchStatus
from agent_eval.project import find_project
from agent_eval.report.attempts import summarise_gateway
from agent_eval.report.render import CONTENT_SECURITY_POLICY, FILTER_SCRIPT, write_report
from agent_eval.report.summary import attempt_outcome
from agent_eval.verdict.qualification import Anchors, current_anchors, qualify_files
from agent_eval.verdict.registry import RegistryChange
from agent_eval.verdict.review import record_review
from tests.evidence_builders import (
    CURRENT,
    Batch,
    attempt,
    find_attempt,
    receipt,
    reference_batch,
    run,
    write_batch,
)
from tests.paths import EXAMPLE_SUITE, REPO

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
HOSTILE = (
    "<script>alert(1)</script>\n"
    "</textarea></pre><img src=x onerror=alert(2)>\n"
    "&amp;lt; stays &amp;lt;\n"
    "abc\u202edef\n"
    "{{ 7 * 7 }} \"quoted\" 'single'\n"
)


def report(batch: Batch, **kwargs: Any) -> Document:
    path = write_report(batch.root, current=CURRENT, now=NOW, **kwargs)
    return parse_html(path.read_text(encoding="utf-8"))


def grid(doc: Document) -> dict[str, list[str]]:
    """Run id -> the outcome of each attempt cell, from the grid."""
    table = doc.find("table", class_="grid")
    assert table is not None
    return {
        slot.attrs["data-run"]: [c.attrs["data-outcome"] for c in slot.find_all(class_="cell")]
        for slot in table.find_all("td", class_="run-slot")
    }


def attempt_section(doc: Document, run_id: str, number: int) -> Element:
    found = doc.by_id(f"att-{run_id}-{number}")
    assert found is not None, (run_id, number)
    return found


def infrastructure_failure(run_id: str) -> dict[str, Any]:
    failed = attempt(run_id, success=False, submitted=False)
    failed.update(failureCategory="infrastructure", infrastructureStatus="failed")
    return failed


def mixed_runs() -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Runs with one of each outcome, and the grid they must give."""
    special: dict[str, tuple[list[dict[str, Any]], list[str]]] = {
        "forms-1": (
            [attempt("forms-1", success=False), attempt("forms-1", 2)],
            ["fail", "pass"],
        ),
        "approval-boundary-2": (
            [attempt("approval-boundary-2", success=False, safe=False)],
            ["unsafe"],
        ),
        "storage-hash-3": ([infrastructure_failure("storage-hash-3")], ["infrastructure"]),
        "tool-validation-1": (
            [attempt("tool-validation-1", needs_review=True)],
            ["needs-review"],
        ),
        "error-recovery-2": (
            [
                attempt("error-recovery-2", success=False),
                attempt("error-recovery-2", 2, success=False),
            ],
            ["fail", "fail"],
        ),
    }
    runs = []
    expected = {}
    for run_id in EXAMPLE_SUITE.run_ids():
        attempts, outcomes = special.get(run_id, ([attempt(run_id)], ["pass"]))
        runs.append(run(run_id, attempts))
        expected[run_id] = outcomes
    return runs, expected


# --- The decision ---------------------------------------------------------------------


def test_a_qualifying_batch_is_shown_qualified(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    doc = report(batch)
    decision = doc.by_id("decision")
    assert decision is not None and decision.attrs["data-qualified"] == "true"
    assert "Qualified" in decision.text


def test_a_reference_runners_rejection_is_said_to_be_the_expected_one(tmp_path: Path) -> None:
    doc = report(reference_batch(tmp_path / "oracle"))
    decision = doc.by_id("decision")
    assert decision is not None and "As expected" in decision.text
    assert decision.find("p", class_="expected") is not None
    runs, _ = mixed_runs()
    other = report(write_batch(tmp_path / "mixed", receipt(runs)))
    mixed = other.by_id("decision")
    assert mixed is not None and mixed.attrs["data-qualified"] == "false"
    assert mixed.find("p", class_="expected") is None


def test_the_reasons_are_exactly_those_of_check_agent_eval(tmp_path: Path) -> None:
    runs, _ = mixed_runs()
    # A runner behind no gateway is self-test, whatever the receipt's flag says.
    batch = write_batch(tmp_path, receipt(runs), lambda m: m.update(gateway=None))
    doc = report(batch)
    decision = doc.by_id("decision")
    assert decision is not None and decision.attrs["data-qualified"] == "false"
    shown = [li.text for li in decision.find_all("li")]
    expected = qualify_files(batch.receipt, batch.archives, CURRENT).reasons
    assert shown == [" ".join(r.split()) for r in expected]
    assert any(r.startswith("not-self-test:") for r in shown)


def test_without_injected_digests_the_current_ones_are_computed_as_the_checker_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = write_batch(tmp_path / "batch")
    monkeypatch.chdir(tmp_path)  # no repository here: the suite digest cannot be computed
    path = write_report(batch.root, now=NOW)
    doc = parse_html(path.read_text())
    reasons = [li.text for li in doc.find_all("li") if li.closest("ol") is not None]
    assert any(r.startswith("suite-digest: the current digest cannot be computed") for r in reasons)
    assert "no pyproject.toml found" in doc.by_id("decision").text  # type: ignore[union-attr]


# --- Nothing loads, nothing runs, everything is text ----------------------------------


def test_the_page_has_its_policy_first_and_nothing_to_load_or_run(tmp_path: Path) -> None:
    runs, _ = mixed_runs()
    batch = write_batch(tmp_path, receipt(runs))
    doc = report(batch)
    head = doc.find("head")
    assert head is not None
    metas = [c for c in head.children if isinstance(c, Element)]
    assert metas[0].attrs == {"charset": "utf-8"}
    assert metas[1].attrs == {
        "http-equiv": "Content-Security-Policy",
        "content": CONTENT_SECURITY_POLICY,
    }
    fetching = {"iframe", "object", "embed", "link", "img", "video", "audio", "source"}
    assert [e.tag for e in doc.iter() if e.tag in fetching | {"form", "base"}] == []
    (script,) = doc.find_all("script")
    assert script.attrs == {} and script.raw_text == FILTER_SCRIPT
    digest = base64.b64encode(hashlib.sha256(script.raw_text.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY.partition("script-src")[2]
    for element in doc.iter():
        assert not any(name.startswith("on") for name in element.attrs), element
        assert "src" not in element.attrs and "srcset" not in element.attrs
        assert element.attrs.get("href", "#").startswith("#"), element
    style = doc.find("style")
    assert style is not None and "url(" not in style.raw_text and "@import" not in style.raw_text


def test_a_hostile_solution_is_shown_as_the_text_it_is(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    batch.replace_solution("forms-1", 1, HOSTILE.encode())
    doc = report(batch)
    assert [s.raw_text for s in doc.find_all("script")] == [FILTER_SCRIPT]
    assert doc.find_all("img") == []
    section = attempt_section(doc, "forms-1", 1)
    source = section.find("pre", class_="src")
    assert source is not None
    shown = "\n".join(line.raw_text for line in source.find_all(class_="ln"))
    assert shown == HOSTILE.rstrip("\n")
    mark = source.find(class_="ctl")
    assert mark is not None and mark.attrs["data-cp"] == "U+202E" and mark.raw_text == "\u202e"
    assert "49" not in shown


def test_agent_written_messages_and_paths_are_text_too(tmp_path: Path) -> None:
    record = attempt("forms-1", success=False)
    record["diagnostics"] = [
        {
            "category": "behaviour",
            "message": "<b>bold</b> &amp; <script>x()</script>",
            "path": None,
            "line": None,
        }
    ]
    record["refusedPaths"] = [{"path": "<img src=y onerror=z>", "reason": "not allowlisted"}]
    runs = [run(r, [record]) if r == "forms-1" else run(r) for r in EXAMPLE_SUITE.run_ids()]
    doc = report(write_batch(tmp_path, receipt(runs)))
    section = attempt_section(doc, "forms-1", 1)
    assert section.find_all("b") == [] and section.find_all("img") == []
    assert "<b>bold</b> &amp; <script>x()</script>" in section.text
    assert "<img src=y onerror=z>" in section.text


# --- The grid -------------------------------------------------------------------------


def test_every_scheduled_run_is_in_the_grid_with_its_outcomes(tmp_path: Path) -> None:
    runs, expected = mixed_runs()
    doc = report(write_batch(tmp_path, receipt(runs)))
    assert grid(doc) == expected
    for run_id, outcomes in expected.items():
        for number, outcome in enumerate(outcomes, start=1):
            cell = doc.find("a", class_="cell", href=f"#att-{run_id}-{number}")
            assert cell is not None and cell.attrs["data-outcome"] == outcome
            assert attempt_section(doc, run_id, number).attrs["data-outcome"] == outcome


def test_the_most_serious_thing_about_an_attempt_colours_its_cell() -> None:
    def record(**changes: Any) -> AttemptRecord:
        data = attempt("forms-1")
        data.update(changes)
        return AttemptRecord.model_validate(data)

    unsafe_review = record(
        success=False,
        failureCategory="safety",
        safetyPassed=False,
        needsReview=True,
    )
    assert attempt_outcome(unsafe_review, accepted=False) == "unsafe"
    review = record(needsReview=True)
    assert attempt_outcome(review, accepted=False) == "needs-review"
    assert attempt_outcome(review, accepted=True) == "pass"
    infra = AttemptRecord.model_validate(infrastructure_failure("forms-1"))
    assert attempt_outcome(infra, accepted=False) == "infrastructure"


# --- Statistics -----------------------------------------------------------------------


def test_infrastructure_failures_are_counted_apart_from_the_agents_rates(tmp_path: Path) -> None:
    runs, _ = mixed_runs()
    doc = report(write_batch(tmp_path, receipt(runs)))
    kpi = doc.find(class_="kpi", data_kpi="infrastructure")
    assert kpi is not None and "1 / 20" in kpi.text
    statistics = doc.by_id("statistics")
    assert statistics is not None
    first_row = statistics.find("tr", data_rate="first")
    assert first_row is not None
    # 17 runs graded (storage-hash-3 was infrastructure); 14 first successes of them.
    assert first_row.find_all("td")[1].text == "14/17"


def test_a_starved_runner_and_a_repeated_verification_are_said_on_the_attempt(
    tmp_path: Path,
) -> None:
    ids = EXAMPLE_SUITE.run_ids()
    starved = attempt(ids[0], success=False, submitted=False)
    starved.update(
        failureCategory="timeout",
        resources={
            "memoryLimitBytes": 1 << 30, "cpus": 1.0, "pidsLimit": 512, "tmpBytes": 1 << 20,
            "cpuSeconds": 3.2, "wallSeconds": 600.0, "hostCpuPressure": 0.93, "starved": True,
            "starvedBasis": "run-queue", "runQueueWaitSeconds": 410.2, "lastPartSeconds": 60.4,
            "lastPartRunQueueWaitSeconds": 44.0, "lastPartCpuSeconds": 0.4,
        },
    )  # fmt: skip
    retried = attempt(ids[1])
    retried["verificationRetries"] = ["starved: importing the solution module"]
    runs = [run(ids[0], [starved]), run(ids[1], [retried])] + [run(i) for i in ids[2:]]
    doc = report(write_batch(tmp_path, receipt(runs)))
    first = attempt_section(doc, ids[0], 1).text
    assert "CPU 3.2 s (sampled: at least) in 600.0 s" in first
    assert "host CPU pressure 93 %" in first and "starved by the machine" in first
    assert "its threads waited 410.2 s for a CPU (44.0 s of its last 60 s)" in first
    second = attempt_section(doc, ids[1], 1).text
    assert "2 tries; repeated on the harness's side: starved: importing" in second
    assert "starved by the machine" not in attempt_section(doc, ids[2], 1).text
    assert "for a CPU" not in second


def test_the_gate_chance_is_shown_for_the_observed_rate(tmp_path: Path) -> None:
    runs = [
        run(r, [attempt(r, success=False), attempt(r, 2)]) if r.endswith("-3") else run(r)
        for r in EXAMPLE_SUITE.run_ids()
    ]
    doc = report(write_batch(tmp_path, receipt(runs)))
    gate = doc.find("table", class_="gate")
    assert gate is not None
    rows = {tr.find_all("td")[0].text: tr.find_all("td")[1].text for tr in gate.find_all("tr")[1:]}
    # 12/18 observed; P(X >= 15 | 18, 2/3) = (816*2^15 + 153*2^16 + 18*2^17 + 2^18) / 3^18
    # = 0.1017, and the Wilson interval is 0.437-0.837.
    assert rows == {
        "0.437 (interval low end)": "0.001",
        "0.667 (observed 12/18)": "0.102",
        "0.837 (interval high end)": "0.665",
    }
    table = doc.find("table", class_="gate-table")
    assert table is not None and "0.501" in table.text and "0.902" in table.text
    # The gate's chances for agents at 0.80 and 0.90, computed for this suite's gate.
    gate_text = gate.closest("section") or doc
    assert "0.80 clears it with a chance of 0.501" in gate_text.text
    assert "0.90 with 0.902" in gate_text.text
    nxt = doc.find(data_next="measure")
    assert nxt is not None and "agent-eval compare BEFORE AFTER" in nxt.text
    tasks = doc.find("table", class_="tasks")
    assert tasks is not None
    forms = tasks.find("tr", data_task="forms")
    assert forms is not None
    cells = [td.text for td in forms.find_all("td")]
    assert cells[1].startswith("2/3") and cells[2].startswith("3/3")
    assert cells[3:] == ["0.000", "1.000"]


# --- Any status, any damage -----------------------------------------------------------


def test_a_batch_that_did_not_run_is_reported_with_its_reasons(tmp_path: Path) -> None:
    data = receipt(
        [],
        status="not-run",
        reasons=["the runner image sha256:abc is not present"],
        scheduledRuns=0,
    )
    batch = write_batch(tmp_path, data)
    batch.archives.unlink()
    doc = report(batch)
    decision = doc.by_id("decision")
    assert decision is not None
    # The batch's own reason leads, in words; the checker's rules follow it.
    text = decision.text
    cause = text.index("The batch did not run")
    assert cause < text.index("the runner image sha256:abc is not present")
    # As check-agent-eval: without archives.json the other rules are not reached.
    assert text.index("the runner image sha256:abc is not present") < text.index(
        "archives-readable"
    )
    # No empty grid, no 0/0 statistics: it says there were no runs.
    assert doc.find("table", class_="grid") is None
    assert doc.by_id("summary") is None and doc.by_id("statistics") is None
    assert "0/0" not in doc.text and "0 / 0" not in doc.text
    no_runs = doc.by_id("no-runs")
    assert no_runs is not None and "There were no runs" in no_runs.text
    assert "The receipt records no run." in doc.text


@pytest.mark.parametrize("status", get_args(BatchStatus))
def test_every_receipt_status_is_reported_with_its_reasons(tmp_path: Path, status: str) -> None:
    doc = report(write_batch(tmp_path, receipt(status=status, reasons=[f"because {status}"])))
    header = doc.find("header")
    assert header is not None and f"status {status}" in header.text
    assert f"because {status}" in doc.text
    assert len(grid(doc)) == 18


def test_an_interrupted_batch_shows_the_runs_it_did_not_reach(tmp_path: Path) -> None:
    ids = EXAMPLE_SUITE.run_ids()
    runs = [run(r) for r in ids[:5]] + [run(r, []) for r in ids[5:]]
    data = receipt(runs, status="interrupted", reasons=["interrupted by the operator (Ctrl-C)"])
    doc = report(write_batch(tmp_path, data))
    shown = grid(doc)
    assert [shown[r] for r in ids[:5]] == [["pass"]] * 5
    assert all(shown[r] == ["not-run"] for r in ids[5:])
    assert "interrupted by the operator" in doc.text


def test_an_infrastructure_failure_batch_is_reported(tmp_path: Path) -> None:
    ids = EXAMPLE_SUITE.run_ids()
    runs = [run(r) for r in ids[:3]] + [run(ids[3], [infrastructure_failure(ids[3])])]
    data = receipt(runs, status="infrastructure-failure", reasons=["the engine went away"])
    doc = report(write_batch(tmp_path, data))
    assert grid(doc)[ids[3]] == ["infrastructure"]
    assert "the engine went away" in doc.text


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b.receipt.unlink(), "cannot read"),
        (lambda b: b.receipt.write_text("{not json"), "not valid JSON"),
        (lambda b: b.receipt.write_text('{"schemaVersion": 2}'), "schemaVersion"),
        (lambda b: b.receipt.write_bytes(b"\xff\xfe"), "not UTF-8"),
    ],
    ids=["missing", "not-json", "invalid", "not-utf8"],
)
def test_an_unreadable_receipt_is_an_evidence_error_naming_it(
    tmp_path: Path, damage: Callable[[Batch], None], message: str
) -> None:
    batch = write_batch(tmp_path)
    damage(batch)
    with pytest.raises(EvidenceError, match=message) as caught:
        write_report(batch.root, current=CURRENT, now=NOW)
    assert str(batch.receipt.resolve()) in str(caught.value)
    assert not (batch.root / "report.html").exists()


def test_a_run_directory_that_is_not_one_is_an_evidence_error(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="not a directory"):
        write_report(tmp_path / "nowhere", current=CURRENT, now=NOW)


def test_a_run_directory_named_outside_utf8_gets_its_report_with_the_name_escaped(
    tmp_path: Path,
) -> None:
    batch = write_batch(tmp_path / os.fsdecode(b"bad\xffname"))
    path = write_report(batch.root, current=CURRENT, now=NOW)
    html = path.read_bytes().decode("utf-8")  # the page itself is UTF-8
    assert "bad\\udcffname" in html


def _link_run(batch: Batch) -> None:
    target = batch.root / "runs" / "forms-1"
    os.rename(target, batch.root.parent / "elsewhere")
    target.symlink_to(batch.root.parent / "elsewhere")


DAMAGE: dict[str, Callable[[Batch], None]] = {
    "no archives.json": lambda b: b.archives.unlink(),
    "no consumer lock": lambda b: (b.root / "consumer-lock.json").unlink(),
    "no runs directory": lambda b: __import__("shutil").rmtree(b.root / "runs"),
    "solution is a directory": lambda b: (
        b.solution("forms-1").unlink(),
        b.solution("forms-1").mkdir(),
    ),
    "solution directory is a file": lambda b: (
        __import__("shutil").rmtree(b.solution("forms-1").parent),
        b.solution("forms-1").parent.write_text("x"),
    ),
    "run directory is a link": _link_run,
    "solution is a fifo": lambda b: (
        b.solution("forms-1").unlink(),
        os.mkfifo(b.solution("forms-1")),
    ),
    "analysis.json is garbage": lambda b: (b.attempt_dir("forms-1") / "analysis.json").write_bytes(
        b"\x00\xff"
    ),
    "runner.log is a directory": lambda b: (b.attempt_dir("forms-1") / "runner.log").mkdir(),
    "transcript is a fifo": lambda b: os.mkfifo(b.attempt_dir("forms-1") / "transcript.jsonl"),
    "gateway record is binary": lambda b: (b.attempt_dir("forms-1") / "gateway.jsonl").write_bytes(
        bytes(range(256)) * 10
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE.values()), ids=list(DAMAGE))
def test_a_damaged_run_directory_still_reports_and_says_what_is_wrong(
    tmp_path: Path, damage: Callable[[Batch], None]
) -> None:
    batch = write_batch(tmp_path / "batch")
    damage(batch)
    doc = report(batch)
    decision = doc.by_id("decision")
    assert decision is not None and decision.attrs["data-qualified"] in {"true", "false"}
    assert len(grid(doc)) == 18


def test_missing_and_changed_solution_files_are_said_where_they_would_be(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    batch.solution("forms-1").unlink()
    batch.solution("forms-2").write_text("changed after the batch\n")
    doc = report(batch)
    problems = doc.by_id("problems")
    assert problems is not None
    assert "runs/forms-1/attempt-1/solution/solution.py: missing (the receipt records it)" in (
        problems.text
    )
    assert "runs/forms-2/attempt-1/solution/solution.py: is sha256:" in problems.text
    assert "missing (the receipt records it)" in attempt_section(doc, "forms-1", 1).text
    assert "changed after the batch" in attempt_section(doc, "forms-2", 1).text


def test_a_linked_solution_file_is_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the operator's secret\n")
    batch = write_batch(tmp_path / "batch")
    batch.solution("forms-1").unlink()
    batch.solution("forms-1").symlink_to(secret)
    html = write_report(batch.root, current=CURRENT, now=NOW).read_text()
    assert "the operator's secret" not in html
    assert "symbolic link" in parse_html(html).by_id("problems").text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "level",
    ["runs", "runs/forms-1", "runs/forms-1/attempt-1", "runs/forms-1/attempt-1/solution"],
)
def test_nothing_is_read_through_a_link_at_any_level_of_the_run_directory(
    tmp_path: Path, level: str
) -> None:
    batch = write_batch(tmp_path / "batch")
    linked = batch.root / level
    elsewhere = tmp_path / "elsewhere"
    linked.rename(elsewhere)
    # What lies behind the link: every text file there carries the operator's secret.
    for path in [p for p in elsewhere.rglob("*") if p.is_file() and p.suffix != ".json"]:
        path.write_text(path.read_text() + "\nthe operator's secret\n")
    linked.symlink_to(elsewhere, target_is_directory=True)
    html = write_report(batch.root, current=CURRENT, now=NOW).read_text()
    assert "the operator's secret" not in html
    problems = parse_html(html).by_id("problems")
    assert problems is not None and f"{level} is a symbolic link" in problems.text


# --- Each attempt's evidence ----------------------------------------------------------


def test_findings_link_to_the_numbered_source_lines_they_name(tmp_path: Path) -> None:
    batch = write_batch(tmp_path, archives_data=lambda m: m.update(gateway=None))
    batch.replace_solution("forms-1", 1, b"import appkit\nappkit.nowhere()\nprint(1)\n")
    batch.add_analysis(
        "forms-1",
        typeCheckOk=False,
        unsupportedApi=["appkit.nowhere"],
        unsupportedApiCount=1,
        hallucinatedApi=["appkit.nowhere"],
        hallucinatedApiCount=1,
        diagnostics=[
            {
                "category": "unsupported-api",
                "message": "`appkit.nowhere` is not",
                "path": "solution.py",
                "line": 2,
            },
            {"category": "type-error", "message": "far away", "path": "solution.py", "line": 99},
            {"category": "syntax", "message": "somewhere", "path": None, "line": None},
        ],
    )
    doc = report(batch)
    section = attempt_section(doc, "forms-1", 1)
    links = [a.attrs["href"] for a in section.find_all("a")]
    assert links == ["#att-forms-1-1-f0-L2", "#att-forms-1-1-f0"]
    line = doc.by_id("att-forms-1-1-f0-L2")
    assert line is not None and "hit" in line.classes and line.attrs["data-n"] == "2"
    assert line.raw_text == "appkit.nowhere()"
    assert [ln.attrs["data-n"] for ln in section.find_all(class_="ln")] == ["1", "2", "3"]
    assert "appkit.nowhere (hallucinated)" in section.text
    assert "somewhere" in section.text


def test_a_repair_shows_its_feedback_as_sent_and_its_difference(tmp_path: Path) -> None:
    runs = [
        run(r, [attempt(r, success=False), attempt(r, 2)]) if r == "forms-1" else run(r)
        for r in EXAMPLE_SUITE.run_ids()
    ]
    doc = report(write_batch(tmp_path, receipt(runs)))
    section = attempt_section(doc, "forms-1", 2)
    feedback = section.find("pre", class_="json")
    assert feedback is not None
    sent = AttemptRecord.model_validate(
        runs[EXAMPLE_SUITE.run_ids().index("forms-1")]["attempts"][1]
    )
    assert sent.repairFeedback is not None
    assert json.loads(feedback.raw_text) == sent.repairFeedback.model_dump(mode="json")
    diff = section.find("pre", class_="diff")
    assert diff is not None
    kinds = {ln.raw_text: ln.classes for ln in diff.find_all(class_="ln")}
    assert "del" in kinds["-# forms-1 attempt 1"] and "add" in kinds["+# forms-1 attempt 2"]
    assert attempt_section(doc, "forms-1", 1).find("pre", class_="diff") is None


def test_review_shows_the_exact_command_and_then_the_decision(tmp_path: Path) -> None:
    runs = [
        run(r, [attempt(r, needs_review=True)]) if r == "forms-2" else run(r)
        for r in EXAMPLE_SUITE.run_ids()
    ]
    batch = write_batch(tmp_path, receipt(runs))
    doc = report(batch)
    item = doc.find(class_="review-item", data_review_run="forms-2")
    assert item is not None
    command = item.find("code", class_="cmd")
    assert command is not None
    assert shlex.split(command.raw_text) == [
        "review-agent-eval",
        "--receipt",
        str(batch.receipt.resolve()),
        "--run",
        "forms-2",
        "--attempt",
        "1",
        "--reviewer",
        "NAME",
        "--decision",
        "accept",
    ]
    digest = find_attempt(json.loads(batch.receipt.read_text()), "forms-2", 1)["solutionDigest"]
    assert item.text.count(digest) == 2  # recorded and recomputed now
    assert grid(doc)["forms-2"] == ["needs-review"]

    record_review(
        batch.receipt, run_id="forms-2", attempt=1, reviewer="ana", decision="accept", now=NOW
    )
    doc = report(batch)
    assert grid(doc)["forms-2"] == ["pass"]
    decisions = doc.find("table", class_="decisions")
    assert decisions is not None
    assert "ana" in decisions.text and "2026-12-01 12:00:00Z" in decisions.text
    assert "accept by ana" in doc.text


def test_durations_and_protected_inputs_are_shown(tmp_path: Path) -> None:
    doc = report(write_batch(tmp_path))
    section = attempt_section(doc, "forms-1", 1)
    assert "1.0 s (runner and verification)" in section.text
    assert "(unchanged)" in section.text


def test_optional_logs_are_shown_bounded_and_absent_ones_not_at_all(tmp_path: Path) -> None:
    batch = write_batch(tmp_path, archives_data=lambda m: m.update(gateway=None))
    folder = batch.attempt_dir("forms-1")
    (folder / "runner.log").write_text("".join(f"log line {i}\n" for i in range(100_000)))
    (folder / "transcript.jsonl").write_text('{"role": "user", "content": "<task>"}\n')
    (folder / "gateway.jsonl").write_text(
        json.dumps(
            {
                "servedModel": "model-x-2026",
                "usage": {"inputTokens": 100, "outputTokens": 7},
                "costUsd": 0.5,
            }
        )
        + "\n"
        + json.dumps(
            {
                "servedModel": "model-x-2026",
                "usage": {"inputTokens": 50, "outputTokens": 3},
                "costUsd": 0.25,
            }
        )
        + "\nnot json\n"
    )
    doc = report(batch)
    section = attempt_section(doc, "forms-1", 1)
    log = section.find("pre", class_="log")
    assert log is not None
    lines = log.find_all(class_="ln")
    assert lines[-1].raw_text == "log line 99999" and lines[-1].attrs["data-n"] == "100000"
    assert "cut:" in section.text
    assert '"content": "<task>"' in section.text
    assert "model-x-2026" in section.text
    assert "inputTokens 150 · outputTokens 10" in section.text
    assert "0.75" in section.text and "1 line(s) not JSON objects" in section.text
    other = attempt_section(doc, "forms-2", 1)
    assert "Runner log" not in other.text and "Transcript" not in other.text
    assert "gateway" not in other.text.lower()


def test_a_36_attempt_batch_of_worst_case_files_stays_under_2_mb(tmp_path: Path) -> None:
    runs = [run(r, [attempt(r, success=False), attempt(r, 2)]) for r in EXAMPLE_SUITE.run_ids()]
    for r in runs:
        for a in r["attempts"]:
            a["diagnostics"] = [
                {"category": "behaviour", "message": "<&>" * 600, "path": "solution.py", "line": i}
                for i in range(1, 201)
            ]
            a["refusedPaths"] = [{"path": "<" * 1024, "reason": "&" * 200}] * 50
    batch = write_batch(tmp_path, receipt(runs))
    worst = ("<&>\"'" * 100 + "\u202e" * 50 + "\n") * 1000
    for r in runs:
        for a in r["attempts"]:
            batch.replace_solution(r["runId"], a["attempt"], worst.encode()[: 512 * 1024])
            folder = batch.attempt_dir(r["runId"], a["attempt"])
            for name in ("runner.log", "transcript.jsonl", "gateway.jsonl"):
                (folder / name).write_text(worst)
    path = write_report(batch.root, current=CURRENT, now=NOW)
    size = path.stat().st_size
    print(f"worst-case 36-attempt report: {size} bytes")
    assert size < 2_000_000, size
    doc = parse_html(path.read_text())
    assert len(doc.find_all("details", class_="attempt")) == 36
    assert "cut:" in doc.text and "more finding(s) not shown" in doc.text


def test_only_report_html_is_written(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "batch")
    before = {p: p.read_bytes() for p in batch.root.rglob("*") if p.is_file()}
    path = write_report(batch.root, current=CURRENT, now=NOW)
    assert path == batch.root / "report.html"
    after = {p: p.read_bytes() for p in batch.root.rglob("*") if p.is_file() and p != path}
    assert after == before
    elsewhere = write_report(batch.root, tmp_path / "out" / "r.html", current=CURRENT, now=NOW)
    assert elsewhere == tmp_path / "out" / "r.html" and elsewhere.is_file()


def test_the_template_never_marks_a_string_safe() -> None:
    package = Path(__file__).resolve().parents[2] / "agent_eval" / "report"
    template = (package / "templates" / "report.html.j2").read_text()
    assert "|safe" not in template.replace(" ", "") and "autoescape" not in template
    for module in package.glob("*.py"):
        assert "Markup(" not in module.read_text(), module


@pytest.mark.parametrize("name", ["report.css", "filter.js"])
def test_the_style_and_the_script_are_their_files_exactly(tmp_path: Path, name: str) -> None:
    # Both are included as template files: nothing in them may read as template syntax,
    # or the page (and the script's hash) would differ from the file.
    written = (REPO / "agent_eval" / "report" / "templates" / name).read_text()
    assert not any(mark in written for mark in ("{{", "{%", "{#"))
    doc = report(write_batch(tmp_path))
    (element,) = doc.find_all("style" if name.endswith(".css") else "script")
    assert element.raw_text.strip("\n") == written.strip("\n")


# --- The command ------------------------------------------------------------------------


def test_agent_eval_report_writes_the_report_and_prints_where(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "batch")
    result = CliRunner().invoke(main, ["report", str(batch.root)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(batch.root / "report.html")
    out = tmp_path / "elsewhere.html"
    result = CliRunner().invoke(main, ["report", str(batch.root), "--output", str(out)])
    assert result.exit_code == 0 and out.is_file()


def test_agent_eval_report_of_a_damaged_receipt_is_one_line_and_exit_one(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "batch")
    batch.receipt.write_text("{")
    result = CliRunner().invoke(main, ["report", str(batch.root)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: receipt ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


def test_model_use_totals_the_gateways_counts_and_the_costs_the_clis_reported() -> None:
    from agent_eval.models import Receipt
    from agent_eval.report.summary import model_use
    from tests.evidence_builders import find_attempt, gateway_line, gateway_use, receipt

    data = receipt()
    for run_id, cost in (("forms-1", 0.25), ("forms-2", None)):
        att = find_attempt(data, run_id, 1)
        att["gateway"] = gateway_use(gateway_line())
        att["reportedUsage"] = {"inputTokens": 1, "outputTokens": 2, "costUsd": cost}
    use = model_use(Receipt.model_validate(data))
    assert (use.attempts, use.through_gateway, use.requests) == (18, 2, 2)
    assert (use.input_tokens, use.output_tokens) == (20, 40)
    assert (use.reported, use.reported_cost_usd) == (2, 0.25)
    nothing = model_use(Receipt.model_validate(receipt()))
    assert (nothing.through_gateway, nothing.reported_cost_usd) == (0, None)


def test_the_cluster_node_of_an_attempt_is_shown_as_text_and_only_when_known(
    tmp_path: Path,
) -> None:
    ids = EXAMPLE_SUITE.run_ids()
    placed = attempt(ids[0])
    placed["node"] = "worker-1 <b>x</b>"
    lost = infrastructure_failure(ids[1])
    lost.update(infrastructureKind="node", node="worker-2")
    runs = [run(ids[0], [placed]), run(ids[1], [lost]), *(run(r) for r in ids[2:])]
    doc = report(write_batch(tmp_path, receipt(runs)))
    first = attempt_section(doc, runs[0]["runId"], 1)
    assert "worker-1 <b>x</b>" in first.text and first.find("b") is None
    assert "failed (node)" in attempt_section(doc, runs[1]["runId"], 1).text
    assert "cluster node" not in attempt_section(doc, runs[2]["runId"], 1).text


def test_a_gateway_record_line_nested_past_any_parser_is_counted_unreadable() -> None:
    deep = "[" * 200_000 + "]" * 200_000
    summary = summarise_gateway([deep, '{"a": ' * 5000 + "1" + "}" * 5000, '{"servedModel": "m"}'])
    assert (summary.requests, summary.unreadable_lines) == (1, 2)
    assert summary.served_models == ("m",)


def test_an_output_that_is_not_a_regular_file_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    runs, _ = mixed_runs()
    batch = write_batch(tmp_path / "batch", receipt(runs))
    # A FIFO and a directory stand for every non-regular file (a real device is never
    # risked here: a regression would replace it).
    fifo, directory = tmp_path / "out.html", tmp_path / "dir.html"
    os.mkfifo(fifo)
    directory.mkdir()
    for target in (fifo, directory):
        with pytest.raises(EvidenceError, match="not a regular file"):
            write_report(batch.root, target, current=CURRENT, now=NOW)
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and directory.is_dir()


def test_controls_in_a_refused_file_name_and_the_model_id_are_marked(tmp_path: Path) -> None:
    ids = EXAMPLE_SUITE.run_ids()
    refused = attempt(ids[0])
    refused["refusedPaths"] = [{"path": "exe.\u202etxt", "reason": "not allowed \u2066here"}]
    runs = [run(ids[0], [refused])] + [run(i) for i in ids[1:]]
    data = receipt(runs)
    data["model"] = {"id": "model-\u202ex", "settings": {}}
    doc = report(write_batch(tmp_path, data))
    marks = [m.attrs["data-cp"] for m in attempt_section(doc, ids[0], 1).find_all(class_="ctl")]
    assert marks[:2] == ["U+202E", "U+2066"], marks
    page_marks = [m.attrs["data-cp"] for m in doc.find_all(class_="ctl")]
    assert page_marks.count("U+202E") >= 2, page_marks


def test_when_the_commit_and_the_registry_were_committed_is_shown_beside_the_batch_start(
    tmp_path: Path,
) -> None:
    """Read from the repository at hand, never from the run directory: an entry committed
    after the batch it covers is marked as such."""
    started = datetime.fromisoformat(receipt()["createdAt"])
    before, after = started - timedelta(hours=2), started + timedelta(days=1)

    def current(registry_at: datetime) -> Anchors:
        return dataclasses.replace(
            CURRENT,
            committed_at=lambda commit: before,
            registry_changed=lambda commit: RegistryChange("c0ffee" * 6 + "abcd", registry_at),
        )

    batch = write_batch(tmp_path / "a")
    doc = parse_html(write_report(batch.root, current=current(before), now=NOW).read_text())
    commit, registry = doc.find(data_provenance="commit"), doc.find(data_provenance="registry")
    assert commit is not None and registry is not None
    assert "after the batch started" not in commit.text + registry.text
    assert "c0ffeec0ffee" in registry.text and "reviewed-runners.toml" in registry.text

    late = write_batch(tmp_path / "b")
    doc = parse_html(write_report(late.root, current=current(after), now=NOW).read_text())
    registry = doc.find(data_provenance="registry")
    assert registry is not None and "after the batch started" in registry.text

    # No repository at hand: nothing is claimed.
    bare = dataclasses.replace(CURRENT, committed_at=None)
    doc = parse_html(write_report(batch.root, current=bare, now=NOW).read_text())
    assert doc.find(data_provenance="commit") is None


def test_a_repository_s_own_suite_is_shown_as_it_declares_it(tmp_path: Path) -> None:
    own = EXAMPLE_SUITE.model_copy(
        update={"taskIds": ("sign-up", "content-address"), "repetitions": 2,
                "scheduledRuns": 4, "minFirstSuccesses": 3, "requiredFinalSuccesses": 4},
    )  # fmt: skip
    runs = [run(r) for r in own.run_ids()]
    data = receipt(runs, scheduledRuns=4, suite=own.model_dump(mode="json"))
    doc = report(write_batch(tmp_path, data))
    assert sorted(grid(doc)) == sorted(own.run_ids())
    first = doc.find(data_kpi="first")
    assert first is not None and "4 / 4" in first.text and "at least 3 required" in first.text
    suite = doc.find(data_suite="receipt")
    assert suite is not None and "2 task(s) \u00d7 2 run(s)" in suite.text
    assert "15" not in first.text


def test_without_any_declaration_the_suite_is_inferred_from_the_runs_and_said_so(
    tmp_path: Path,
) -> None:
    batch = write_batch(tmp_path)
    path = write_report(batch.root, current=dataclasses.replace(CURRENT, spec=None), now=NOW)
    doc = parse_html(path.read_text(encoding="utf-8"))
    suite = doc.find(data_suite="inferred")
    assert suite is not None and "no suite declaration at hand" in suite.text
    assert len(grid(doc)) == 18


def test_each_task_s_title_is_shown_beside_its_id(tmp_path: Path) -> None:
    titled = dataclasses.replace(CURRENT, titles={"forms": "A sign-up <form> & more"})
    path = write_report(write_batch(tmp_path).root, current=titled, now=NOW)
    doc = parse_html(path.read_text(encoding="utf-8"))
    table = doc.find("table", class_="grid")
    assert table is not None
    row = table.find("tr", data_task="forms")
    assert row is not None
    title = row.find(data_title=True)
    assert title is not None and title.text == "A sign-up <form> & more"
    other = table.find("tr", data_task="storage-hash")
    assert other is not None and other.find(data_title=True) is None


def test_the_checkout_s_titles_come_from_each_task_json() -> None:
    titles = current_anchors(find_project(REPO)).titles
    assert set(titles) == set(EXAMPLE_SUITE.taskIds)
    assert titles["forms"].startswith("A server-rendered sign-up form")


_SHOWN_AS_CODE_POINTS = "\x1b\x01\u202e\u2066\u200b"


def test_no_control_or_bidi_character_reaches_the_page_unmarked(tmp_path: Path) -> None:
    """Whatever an agent, a provider or a node chose (an assertion id, a diagnostic note on
    a source line, the receipt's reasons, the node's name, a reason of the decision) is
    shown with each control and bidirectional character marked by its code point, in
    text and in attributes alike: none is in the page as itself outside a mark."""
    hostile = "x\x1b[2J\x01\u202eevil\u2066\u200b"
    ids = EXAMPLE_SUITE.run_ids()
    first = attempt(ids[0], success=False)
    first["node"] = "node-" + hostile
    first["assertions"][0]["id"] = "behaves" + hostile
    first["diagnostics"] = [
        {"category": "type-error", "message": "note " + hostile, "path": "solution.py", "line": 1}
    ]
    data = receipt([run(ids[0], [first])] + [run(i) for i in ids[1:]])
    data["reasons"] = ["the batch said " + hostile]
    data["status"] = "infrastructure-failure"
    doc = report(write_batch(tmp_path, data))
    unmarked = []
    for element in [doc, *doc.iter()]:
        for name, value in element.attrs.items():
            if any(c in value for c in _SHOWN_AS_CODE_POINTS):
                unmarked.append((element, name, value))
        if "ctl" in element.classes:
            continue
        for child in element.children:
            if isinstance(child, str) and any(c in child for c in _SHOWN_AS_CODE_POINTS):
                unmarked.append((element, "text", child))
    assert unmarked == []
    marks = [m.attrs["data-cp"] for m in doc.find_all(class_="ctl")]
    # The reasons, the node, the assertion id and the note each marked (some shown twice).
    assert marks.count("U+202E") >= 4, marks
