"""The batches of a repository's evidence directory: named, listed and shown.

A batch is its run directory, ``<evidence>/<timestamp>-<uuid>/``; a command may name
it by that path, by a unique prefix of its id (the whole directory name, or its uuid
part, as people copy it), or as ``latest``. Run directories are found by their name
and never through a link; what a receipt says is read bounded and validated, and a
batch whose receipt cannot be read is listed with the reason, never skipped.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

from agent_eval.errors import AgentEvalError, EvidenceError
from agent_eval.evidence_io import read_model
from agent_eval.layout import RunDirectory
from agent_eval.models import QualificationResult, Receipt
from agent_eval.models.listing import BatchList, ListedBatch
from agent_eval.report.summary import attempt_outcome
from agent_eval.verdict.chain import counted_receipt
from agent_eval.verdict.junit import lead_finding
from agent_eval.verdict.qualification import Anchors, decide_files
from agent_eval.verdict.words import decision_lines, expected_self_test, plain

__all__ = [
    "LATEST",
    "UnknownBatch",
    "find_batch",
    "list_batches",
    "listing_lines",
    "names_a_path",
    "run_dirs",
    "short_id",
    "show_lines",
]

LATEST = "latest"
_RUN_DIR = re.compile(r"\d{8}T\d{6}Z-([0-9a-f-]{36})")


class UnknownBatch(EvidenceError):
    """A batch name that names no batch, or more than one."""


def run_dirs(evidence: Path) -> list[Path]:
    """The run directories in *evidence*, newest first (names start with the UTC start time).

    Only real directories named like a batch count: a link, a file or a directory of the
    harness's own (``.work``, the caches) is never a batch.
    """
    try:
        with os.scandir(evidence) as entries:
            found = [
                Path(e.path)
                for e in entries
                if _RUN_DIR.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
            ]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise EvidenceError(f"evidence directory {evidence}: cannot list: {exc.strerror}") from exc
    return sorted(found, key=lambda p: p.name, reverse=True)


def names_a_path(spec: str) -> bool:
    """Whether *spec* is a path (it has a separator, or a directory of that name is here)
    rather than an id prefix or ``latest``; a path needs no repository to be found."""
    return os.sep in spec or spec in (".", "..") or Path(spec).is_dir()


def find_batch(spec: str, evidence: Path) -> Path:
    """The run directory *spec* names: a path to it, ``latest``, or a unique id prefix.

    Raises:
        UnknownBatch: *spec* names no batch, or several (the message lists them).
    """
    if spec == LATEST:
        dirs = run_dirs(evidence)
        if not dirs:
            raise UnknownBatch(f"no batch in {evidence} yet: run eval-agent first")
        return dirs[0]
    if names_a_path(spec):
        return Path(spec)
    if not spec:
        raise UnknownBatch("an empty batch name: give a run directory, an id prefix or latest")
    matches = []
    for run_dir in run_dirs(evidence):
        match = _RUN_DIR.fullmatch(run_dir.name)
        uuid_part = match.group(1) if match else ""
        if run_dir.name.startswith(spec) or uuid_part.startswith(spec):
            matches.append(run_dir)
    if not matches:
        raise UnknownBatch(
            f"no batch in {evidence} matches {plain(spec)!r}: give a run directory, a "
            "prefix of a batch id, or latest (agent-eval list shows them)"
        )
    if len(matches) > 1:
        shown = ", ".join(m.name for m in matches[:5]) + (", …" if len(matches) > 5 else "")
        raise UnknownBatch(
            f"{plain(spec)!r} matches {len(matches)} batches ({shown}): give more of the id"
        )
    return matches[0]


def _decision_word(result: QualificationResult) -> str:
    if result.qualified:
        return "qualified"
    return "expected-self-test" if expected_self_test(result) else "rejected"


def _listed(run_dir: Path, anchors: Anchors | None) -> ListedBatch:
    run = RunDirectory(run_dir)
    try:
        own = read_model(run.receipt, Receipt, what="receipt", follow_symlinks=False)
    except AgentEvalError as exc:
        return ListedBatch(
            batchId=run_dir.name, runDir=str(run_dir), status=None, decision="unknown",
            problem=str(exc),
        )  # fmt: skip
    # A resumed batch: the runs decided on, its chain's union.
    receipt, decision, reasons = own, "unknown", []
    if anchors is None:
        receipt = counted_receipt(run_dir, own)
    else:
        try:
            decided = decide_files(run.receipt, run.archives_manifest, anchors)
        except AgentEvalError as exc:
            reasons = [f"not decided: {exc}"]
        else:
            receipt = decided.counted or own
            decision, reasons = _decision_word(decided.result), list(decided.result.reasons)
    return ListedBatch(
        batchId=run_dir.name,
        runDir=str(run_dir),
        status=receipt.status,
        partial=receipt.selection is not None,
        selfTest=receipt.selfTest,
        runner=receipt.runner,
        model=receipt.model,
        firstSuccesses=receipt.firstSuccesses,
        finalSuccesses=receipt.finalSuccesses,
        scheduledRuns=receipt.scheduledRuns,
        createdAt=receipt.createdAt,
        updatedAt=receipt.updatedAt,
        decision=decision,
        reasons=reasons,
    )


def list_batches(evidence: Path, anchors: Anchors | None, limit: int | None = None) -> BatchList:
    """Every batch in *evidence*, newest first, each decided against *anchors* (None: not
    decided, which reads no repository and rebuilds nothing)."""
    dirs = run_dirs(evidence)
    if limit is not None:
        dirs = dirs[:limit]
    return BatchList(
        schemaVersion=1, evidence=str(evidence), batches=[_listed(d, anchors) for d in dirs]
    )


def short_id(batch_id: str) -> str:
    """The id as a list shows it: the start time and the uuid's first eight characters,
    a prefix every command takes (the full id is in ``--json``)."""
    match = _RUN_DIR.fullmatch(batch_id)
    return batch_id[: len(batch_id) - len(match.group(1)) + 8] if match else batch_id


def _age(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "?"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


_DECISION_WORDS = {
    "qualified": "QUALIFIED",
    "rejected": "rejected",
    "expected-self-test": "self-test",
    "unknown": "-",
}


def listing_lines(listing: BatchList, now: datetime) -> list[str]:
    """``agent-eval list`` for a terminal: one batch a line, newest first."""
    if not listing.batches:
        return [f"no batches in {listing.evidence}"]
    rows = [("BATCH", "STATUS", "RUNNER / MODEL", "FIRST", "FINAL", "DECISION", "AGE")]
    for b in listing.batches:
        if b.problem is not None:
            rows.append((short_id(b.batchId), "unreadable", plain(b.problem, 60), "", "", "-", ""))
            continue
        who = plain(b.runner.name, 30) if b.runner else "?"
        who += f" / {plain(b.model.id, 30)}" if b.model else ""
        status = (b.status or "?") + (" (partial)" if b.partial else "")
        rows.append(
            (
                short_id(b.batchId),
                status,
                who,
                f"{b.firstSuccesses}/{b.scheduledRuns}",
                f"{b.finalSuccesses}/{b.scheduledRuns}",
                _DECISION_WORDS[b.decision],
                _age(b.createdAt, now),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def show_lines(run_dir: Path, anchors: Anchors) -> tuple[list[str], bool]:
    """``agent-eval show``: one screen of a batch: its decision and the reasons, each run
    that did not pass with its lead assertion or finding, and where its report is; and
    whether it qualifies.

    Raises:
        EvidenceError: the receipt cannot be read (the message names the file).
    """
    run = RunDirectory(run_dir)
    own = read_model(run.receipt, Receipt, what="receipt", follow_symlinks=False)
    decided = decide_files(run.receipt, run.archives_manifest, anchors)
    result = decided.result
    receipt = decided.counted or own  # a resumed batch: the runs decided on
    lines = decision_lines(result, receipt)
    accepted = {(d.run, d.attempt) for d in receipt.reviewDecisions if d.decision == "accept"}
    failed = []
    for record in receipt.runs:
        if not record.attempts:
            failed.append(f"  {record.runId}: not run")
            continue
        cells = []
        for att in record.attempts:
            outcome = attempt_outcome(att, (record.runId, att.attempt) in accepted)
            cells.append(f"attempt {att.attempt} {outcome}")
        last = record.attempts[-1]
        if record.finalSuccess and not record.unsafe:
            continue
        culprit = next((a for a in record.attempts if a.unsafe), last)
        failed.append(f"  {record.runId}: {', '.join(cells)}: {plain(lead_finding(culprit), 160)}")
    if failed:
        lines += ["", f"runs that did not pass ({len(failed)}):", *failed]
    report = run.root / "report.html"
    lines.append("")
    if report.is_file() and not report.is_symlink():
        lines.append(f"report: {report}")
    else:
        lines.append(f"report: not written yet (agent-eval report {run.root.name} writes it)")
    return lines, result.qualified
