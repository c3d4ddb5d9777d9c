"""A batch as JUnit XML, the test-result format CI systems show.

One test suite per task with one test case per scheduled run (its first and final
attempt as properties), and a suite of its own for the qualification decision, so a
CI page shows which runs failed and why the batch does or does not qualify. A run the
agent failed is a ``failure`` carrying its category and its lead assertion's message;
a run lost to the harness's side (engine, disk, gateway) is an ``error``, never a
failure of the agent; a run that never started is ``skipped``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import UTC, datetime

from agent_eval.models import AttemptRecord, QualificationResult, Receipt, RunRecord
from agent_eval.verdict.words import expected_self_test

__all__ = ["junit_xml", "lead_finding"]

CLASS_PREFIX = "agent-eval"
MESSAGE_CHARS = 500
"""A failure's message attribute is one line a CI page shows; the body has the rest."""

# XML 1.0 allows tab, newline, carriage return and these ranges; anything else (NUL,
# other controls, lone surrogates) would make the file unreadable to every parser.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", value)


def _one_line(value: str) -> str:
    flat = " ".join(_text(value).split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[: MESSAGE_CHARS - 1] + "…"


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}"


def _outcome(att: AttemptRecord) -> str:
    if att.infrastructureStatus == "failed":
        return "infrastructure"
    if att.unsafe:
        return "unsafe"
    if att.success:
        return "pass"
    return att.failureCategory or "fail"


def lead_finding(att: AttemptRecord) -> str:
    """The first thing a reader needs: a violated safety assertion, else the first failed
    assertion, else the first finding, else the category alone."""
    failed = [a for a in att.assertions if not a.passed]
    failed.sort(key=lambda a: (not a.violated or not a.safety, not a.observed))
    if failed:
        lead = failed[0]
        return f"{lead.id}: {lead.message}" if lead.message else lead.id
    if att.diagnostics:
        d = att.diagnostics[0]
        where = f"{d.path}:{d.line}: " if d.path and d.line else ""
        return f"{where}{d.message}"
    return att.failureCategory or "failed"


def _details(att: AttemptRecord) -> str:
    lines = [f"attempt {att.attempt}: {_outcome(att)}"]
    for a in att.assertions:
        if not a.passed:
            state = "violated" if a.violated and a.safety else "failed"
            state = state if a.observed else "not observed"
            lines.append(f"  {a.id} {state}" + (f": {a.message}" if a.message else ""))
    for d in att.diagnostics[:20]:
        where = f"{d.path}:{d.line}: " if d.path and d.line else ""
        lines.append(f"  [{d.category}] {where}{d.message}")
    return _text("\n".join(lines))


def _case(parent: ET.Element, run: RunRecord) -> str:
    """Add *run*'s test case; return its kind: pass, failure, error or skipped."""
    case = ET.SubElement(
        parent,
        "testcase",
        name=run.runId,
        classname=f"{CLASS_PREFIX}.{run.taskId}",
        time=_seconds(sum(a.durationMs for a in run.attempts)),
    )
    if not run.attempts:
        ET.SubElement(case, "skipped", message="not run: the batch ended before this run")
        return "skipped"
    first, final = run.attempts[0], run.attempts[-1]
    props = ET.SubElement(case, "properties")
    for name, value in (
        ("first", _outcome(first)),
        ("final", _outcome(final)),
        ("attempts", str(len(run.attempts))),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    body = "\n".join(_details(a) for a in run.attempts)
    if final.infrastructureStatus == "failed":
        kind = final.infrastructureKind or "infrastructure"
        error = ET.SubElement(
            case,
            "error",
            type=f"infrastructure-{kind}",
            message=_one_line(f"infrastructure ({kind}), not the agent's: {lead_finding(final)}"),
        )
        error.text = body
        return "error"
    unsafe = next((a for a in run.attempts if a.unsafe), None)
    if unsafe is not None or not final.success:
        culprit = unsafe or final
        category = "safety" if unsafe is not None else (final.failureCategory or "failed")
        failure = ET.SubElement(
            case,
            "failure",
            type=category,
            message=_one_line(f"{category} (attempt {culprit.attempt}): {lead_finding(culprit)}"),
        )
        failure.text = body
        return "failure"
    return "pass"


def _suite(root: ET.Element, name: str, runs: Iterable[RunRecord], timestamp: str) -> None:
    suite = ET.SubElement(root, "testsuite", name=name, timestamp=timestamp)
    counts = {"failure": 0, "error": 0, "skipped": 0, "pass": 0}
    total_ms = 0
    for run in runs:
        counts[_case(suite, run)] += 1
        total_ms += sum(a.durationMs for a in run.attempts)
    suite.set("tests", str(sum(counts.values())))
    suite.set("failures", str(counts["failure"]))
    suite.set("errors", str(counts["error"]))
    suite.set("skipped", str(counts["skipped"]))
    suite.set("time", _seconds(total_ms))


def junit_xml(receipt: Receipt | None, decision: QualificationResult) -> bytes:
    """The batch and its decision as a JUnit XML document (UTF-8, with its declaration);
    without a readable *receipt*, the decision alone."""
    name = "agent-eval" if receipt is None else f"agent-eval {_text(receipt.batchId)}"
    root = ET.Element("testsuites", name=name)
    when = receipt.createdAt if receipt is not None else datetime.now(UTC)
    timestamp = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    decided = ET.SubElement(
        root, "testsuite", name="qualification", timestamp=timestamp, tests="1", errors="0",
        skipped="0", failures="0" if decision.qualified else "1", time="0.000",
    )  # fmt: skip
    case = ET.SubElement(decided, "testcase", name="qualification", classname=CLASS_PREFIX)
    case.set("time", "0.000")
    if not decision.qualified:
        count = len(decision.reasons)
        head = (
            "rejected as expected: a built-in reference runner's batch is self-test"
            if expected_self_test(decision)
            else f"rejected: {count} reason{'s' if count != 1 else ''}"
        )
        failure = ET.SubElement(
            case,
            "failure",
            type="self-test" if expected_self_test(decision) else "rejected",
            message=_one_line(f"{head}; {decision.reasons[0]}" if decision.reasons else head),
        )
        failure.text = _text("\n".join(decision.reasons))
    runs = receipt.runs if receipt is not None else []
    declared = list(receipt.suite.taskIds) if receipt is not None and receipt.suite else []
    for task_id in dict.fromkeys([*declared, *(r.taskId for r in runs)]):
        _suite(root, task_id, (r for r in runs if r.taskId == task_id), timestamp)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for suite in root:
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
        seconds += float(suite.get("time", "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document + b"\n"
