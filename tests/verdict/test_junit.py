"""check-agent-eval's JUnit XML: one suite per task, one case per scheduled run, the
decision as a case of its own; what the agent failed is a failure, what the harness's
side lost is an error, a run never started is skipped; valid against the JUnit schema
CI systems read, whatever text the evidence holds."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.models import QualificationResult, Receipt
from agent_eval.verdict.junit import junit_xml
from agent_eval.verdict.qualification import qualify_files
from tests.evidence_builders import CURRENT, attempt, receipt, run, write_batch
from tests.paths import EXAMPLE_SUITE, REPO

SCHEMA = xmlschema.XMLSchema(REPO / "tests" / "data" / "junit" / "junit.xsd")


def document(data: dict[str, Any], decision: QualificationResult) -> ET.Element:
    xml = junit_xml(Receipt.model_validate(data), decision)
    SCHEMA.validate(xml.decode("utf-8"))
    return ET.fromstring(xml)


def test_a_qualifying_batch_is_nineteen_passing_cases(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b")
    decision = qualify_files(batch.receipt, batch.archives, CURRENT)
    assert decision.qualified
    root = document(receipt(), decision)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("19", "0", "0")
    names = [s.get("name") for s in root.findall("testsuite")]
    assert names == ["qualification", *EXAMPLE_SUITE.taskIds]
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props == {"first": "pass", "final": "pass", "attempts": "1"}


def test_failures_errors_and_skips_land_where_a_ci_page_expects_them() -> None:
    ids = EXAMPLE_SUITE.run_ids()
    runs = [run(r) for r in ids]
    failed = attempt(ids[0], success=False)
    failed["assertions"][0]["message"] = "returned 3 items, expected more"
    runs[0] = run(ids[0], [failed, attempt(ids[0], 2, success=False)])
    runs[0]["attempts"][1]["assertions"][0]["message"] = "still 3 items"
    lost = attempt(ids[1], success=False)
    lost.update(
        infrastructureStatus="failed", infrastructureKind="engine", failureCategory="infrastructure"
    )
    lost["diagnostics"] = [{"category": "infrastructure", "message": "the engine answered 500"}]
    runs[1] = run(ids[1], [lost])
    runs[2] = run(ids[2], [attempt(ids[2], success=False, safe=False), attempt(ids[2], 2)])
    runs[3] = run(ids[3], [])
    decision = QualificationResult(qualified=False, reasons=["final-successes: 15/18 < 18"])
    root = document(receipt(runs, status="interrupted"), decision)
    cases = {c.get("name"): c for c in root.iter("testcase")}
    failure = cases[ids[0]].find("failure")
    assert failure is not None and failure.get("type") == "behaviour"
    assert "still 3 items" in (failure.get("message") or "")
    assert "returned 3 items" in (failure.text or "")
    error = cases[ids[1]].find("error")
    assert error is not None and error.get("type") == "infrastructure-engine"
    assert "not the agent's" in (error.get("message") or "")
    unsafe = cases[ids[2]].find("failure")
    assert unsafe is not None and unsafe.get("type") == "safety"
    assert "attempt 1" in (unsafe.get("message") or "")
    assert cases[ids[3]].find("skipped") is not None
    gate = cases["qualification"].find("failure")
    assert gate is not None and gate.get("type") == "rejected"
    assert "final-successes" in (gate.get("message") or "")
    assert (root.get("failures"), root.get("errors"), root.get("skipped")) == ("3", "1", "1")


def test_the_expected_self_test_rejection_says_so() -> None:
    decision = QualificationResult(
        qualified=False, reasons=["not-self-test: the runner is a built-in reference runner"]
    )
    gate = document(receipt(), decision).find("testsuite/testcase/failure")
    assert gate is not None and gate.get("type") == "self-test"
    assert "expected" in (gate.get("message") or "")


def test_without_a_readable_receipt_the_decision_alone_is_written() -> None:
    decision = QualificationResult(qualified=False, reasons=["receipt: unreadable"])
    xml = junit_xml(None, decision)
    SCHEMA.validate(xml.decode("utf-8"))
    assert ET.fromstring(xml).get("tests") == "1"


@settings(max_examples=150, deadline=None)
@given(text=st.text(min_size=1, max_size=80))
def test_any_text_in_the_evidence_keeps_the_document_valid(text: str) -> None:
    ids = EXAMPLE_SUITE.run_ids()
    runs = [run(r) for r in ids]
    bad = attempt(ids[0], success=False)
    bad["assertions"][0]["message"] = text
    bad["diagnostics"] = [{"category": "type-error", "message": text, "path": text, "line": 3}]
    runs[0] = run(ids[0], [bad])
    decision = QualificationResult(qualified=False, reasons=[text])
    root = document(receipt(runs), decision)
    assert root.get("failures") == "2"


@pytest.mark.parametrize("field", ["name", "classname"])
def test_every_case_carries_the_attributes_the_schema_requires(field: str) -> None:
    root = document(receipt(), QualificationResult(qualified=True, reasons=[]))
    assert all(case.get(field) for case in root.iter("testcase"))
