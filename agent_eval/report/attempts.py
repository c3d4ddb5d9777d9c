"""One attempt's evidence as the report shows it, read without trusting the run directory.

Each attempt gets an equal share of a page budget (:class:`Budget`), split
between its solution, findings, the repair's difference, the feedback it was
sent and its optional logs; whatever does not fit is cut and says so. Any
file that is missing, a link, unreadable or does not match the receipt
becomes a note where it would have been shown, and in the batch's list of
problems.
"""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from agent_eval import evidence_io
from agent_eval.digests import DigestError, sha256_bytes, solution_digest, solution_files
from agent_eval.errors import EvidenceError
from agent_eval.evidence_io import MAX_EVIDENCE_BYTES, nesting_exceeds, parse_model
from agent_eval.layout import AttemptDirectory, RunDirectory
from agent_eval.models import (
    Analysis,
    AttemptRecord,
    Diagnostic,
    RefusedPath,
    ReviewDecision,
    RunRecord,
)
from agent_eval.report.summary import Outcome, attempt_anchor, attempt_outcome
from agent_eval.report.text import (
    MAX_LINE_CHARS,
    MAX_READ_BYTES,
    Excerpt,
    Line,
    Loaded,
    head,
    html_cost,
    link_on_the_way,
    read_bounded,
    split_lines,
    tail,
)

__all__ = [
    "AttemptReader",
    "AttemptView",
    "Budget",
    "ReviewItem",
    "attempt_view",
    "summarise_gateway",
]

PAGE_BUDGET_BYTES = 1_600_000
"""What all attempts' bounded content may take together (the page stays under 2 MB)."""
MAX_ATTEMPT_BUDGET_BYTES = 400_000
"""The most one attempt may take, however few attempts there are."""
MIN_ATTEMPT_BUDGET_BYTES = 8_000
"""The least one attempt gets, however many attempts there are."""
MAX_REFUSED_SHOWN = 20
"""Files refused at collection shown per attempt (the receipt keeps up to 50)."""
MAX_NOTE_CHARS = 300
"""A finding shown under its source line, or a refused path, is cut to this."""
MAX_NOTES_PER_LINE = 3
MAX_API_NOTES = 20
MAX_DIFF_CHARS = 1_000_000
"""Solutions larger than this together are not compared (difflib would take too long)."""


@dataclass(frozen=True)
class Budget:
    """Page bytes one attempt's bounded parts may take."""

    solution: int
    findings: int
    diff: int
    feedback: int
    runner_log: int
    transcript: int
    gateway: int
    refused: int

    @classmethod
    def for_attempts(cls, attempts: int) -> Budget:
        """An equal share of :data:`PAGE_BUDGET_BYTES` for each of *attempts*."""
        total = PAGE_BUDGET_BYTES // max(attempts, 1)
        total = max(MIN_ATTEMPT_BUDGET_BYTES, min(MAX_ATTEMPT_BUDGET_BYTES, total))
        return cls(
            solution=total * 38 // 100,
            findings=total * 12 // 100,
            diff=total * 16 // 100,
            feedback=total * 8 // 100,
            runner_log=total * 8 // 100,
            transcript=total * 10 // 100,
            gateway=total * 5 // 100,
            refused=total * 3 // 100,
        )


@dataclass(frozen=True)
class Finding:
    """A diagnostic, with a link to the source line it names when that line is shown."""

    category: str
    message: str
    path: str | None
    line: int | None
    href: str | None


@dataclass(frozen=True)
class SolutionFileView:
    """One saved solution file as shown."""

    path: str
    anchor: str
    recorded_sha256: str | None
    """The digest the receipt records (None for a file on disk the receipt does not list)."""
    size: int
    excerpt: Excerpt | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Refused:
    """A file left in /solution and not collected (its path as found, shortened if long)."""

    path: str
    reason: str


@dataclass(frozen=True)
class AssertionRow:
    """One behavioural assertion, and for a failure what the grader said and saw."""

    id: str
    state: Literal["passed", "failed", "not observed"]
    safety: bool
    message: str | None = None
    """The grader's message (never an expected value: the result holds none)."""
    observed_value: str | None = None
    """What the grader saw the solution do or return."""
    why: str | None = None
    """For an assertion not observed: what stopped grading before it (a finding's words)."""


@dataclass(frozen=True)
class OptionalText:
    """runner.log, transcript.jsonl or gateway.jsonl, when the attempt has one."""

    name: str
    size: int
    excerpt: Excerpt | None
    notes: tuple[str, ...]
    empty: bool = False
    """Nothing was written in it (the page says "nothing", not a cut of 0 characters)."""


@dataclass(frozen=True)
class GatewaySummary:
    """Totals read off the gateway's record, from the fields it has."""

    requests: int
    unreadable_lines: int
    served_models: tuple[str, ...]
    tokens: tuple[tuple[str, int], ...]
    cost: float | None


@dataclass(frozen=True)
class ReviewItem:
    """An attempt that needs a reviewer's decision, and how to record one."""

    run_id: str
    attempt: int
    anchor: str
    recorded_digest: str | None
    current_digest: str | None
    digest_problem: str | None
    decision: ReviewDecision | None
    state: str
    command: str
    refused_reason: str | None
    """Why review-agent-eval would refuse an accept, when it would."""


@dataclass(frozen=True)
class AttemptView:
    """Everything the report shows about one attempt."""

    run_id: str
    anchor: str
    record: AttemptRecord
    outcome: Outcome
    assertions: tuple[AssertionRow, ...]
    analysis: Analysis | None
    analysis_note: str | None
    api_notes: tuple[str, ...]
    """Unsupported API references and imports outside the task's allowed ones."""
    findings: tuple[Finding, ...]
    diagnostics: tuple[Finding, ...]
    findings_hidden: int
    files: tuple[SolutionFileView, ...]
    refused: tuple[Refused, ...]
    refused_hidden: int
    diff: Excerpt | None
    diff_note: str | None
    feedback: Excerpt | None
    runner_log: OptionalText | None
    transcript: OptionalText | None
    gateway: OptionalText | None
    gateway_summary: GatewaySummary | None
    review: ReviewItem | None
    decision: ReviewDecision | None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


@dataclass
class _Anchors:
    """Where a finding can link: a shown line, else its file."""

    lines: dict[tuple[str, int], str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    def href(self, path: str | None, line: int | None) -> str | None:
        if path is None:
            return None
        target = self.lines.get((path, line)) if line is not None else None
        target = target or self.files.get(path)
        return f"#{target}" if target else None


@dataclass
class AttemptReader:
    """Reads one batch's files, noting every problem it meets."""

    run: RunDirectory
    budget: Budget
    problems: list[str] = field(default_factory=list)
    cut: bool = False
    _reads: dict[tuple[Path, str, bool], Loaded | None] = field(default_factory=dict)
    _listings: dict[Path, dict[str, str] | DigestError] = field(default_factory=dict)

    def read(self, root: Path, relative: str, *, from_end: bool = False) -> Loaded | None:
        """:func:`read_bounded`, once per file: a repair's diff and the gateway's totals
        reuse what the attempt's own section read (the report stays linear in the files)."""
        key = (root, relative, from_end)
        if key not in self._reads:
            link = link_on_the_way(self.run.root, root) if root != self.run.root else None
            self._reads[key] = (
                Loaded(None, 0, problem=f"{link} is a symbolic link; not read")
                if link is not None
                else read_bounded(root, relative, from_end=from_end)
            )
        return self._reads[key]

    def forget(self) -> None:
        """Drop what was read (after a run: nothing of it is shown again)."""
        self._reads.clear()
        self._listings.clear()

    def listing(self, folder: Path) -> dict[str, str]:
        """:func:`solution_files` of *folder*, hashed once; raises its DigestError each time."""
        if folder not in self._listings:
            try:
                if (link := link_on_the_way(self.run.root, folder)) is not None:
                    raise DigestError(f"{link} is a symbolic link; not read")
                self._listings[folder] = solution_files(folder)
            except DigestError as exc:
                self._listings[folder] = exc
        found = self._listings[folder]
        if isinstance(found, DigestError):
            raise found
        return found

    def note(self, where: str, problem: str) -> str:
        self.problems.append(f"{where}: {problem}")
        return problem

    def relative(self, path: Path) -> str:
        return path.relative_to(self.run.root).as_posix()

    def attempt_dir(self, run_id: str, record: AttemptRecord) -> AttemptDirectory:
        return self.run.attempt(run_id, record.attempt)

    # --- the solution ---

    def solution(
        self, run_id: str, record: AttemptRecord, findings: Sequence[Diagnostic], anchor: str
    ) -> tuple[list[SolutionFileView], _Anchors]:
        """The attempt's recorded files, then any others on disk, each cut to the budget."""
        folder = self.attempt_dir(run_id, record).solution
        where = self.relative(folder)
        on_disk: dict[str, str] = {}
        if record.solutionFiles or folder.exists():
            try:
                on_disk = self.listing(folder)
            except DigestError as exc:
                self.note(where, str(exc))
        recorded = {f.path: f.sha256 for f in record.solutionFiles}
        paths = [f.path for f in record.solutionFiles] + sorted(set(on_disk) - set(recorded))
        hits: dict[str, dict[int, list[str]]] = {}
        for d in findings:
            if d.path is not None and d.line is not None:
                note = f"{d.category}: {_clip(d.message, MAX_NOTE_CHARS)}"
                said = hits.setdefault(d.path, {}).setdefault(d.line, [])
                if note not in said:  # analysis.json and the receipt often say it twice
                    said.append(note)
        anchors = _Anchors()
        views: list[SolutionFileView] = []
        left = self.budget.solution
        for index, path in enumerate(paths):
            file_anchor = f"{anchor}-f{index}"
            anchors.files[path] = file_anchor
            here = f"{where}/{path}"
            notes: list[str] = []
            if path not in recorded:
                notes.append(self.note(here, "on disk but not recorded in the receipt"))
            elif path in on_disk and on_disk[path] != recorded[path]:
                notes.append(
                    self.note(here, f"is {on_disk[path]}, but the receipt records {recorded[path]}")
                )
            loaded = self.read(folder, path)
            excerpt = None
            size = 0
            if loaded is None:
                notes.append(self.note(here, "missing (the receipt records it)"))
            else:
                size = loaded.size
                notes += [self.note(here, loaded.problem)] if loaded.problem else []
                if loaded.text is not None:
                    excerpt = head(loaded.text, max(left, 0), notes=_notes(hits.get(path, {})))
                    left -= excerpt.cost
                    excerpt = _anchor_lines(excerpt, path, file_anchor, anchors)
                    if excerpt.cut or loaded.partial:
                        self.cut = True
                        notes.append(_cut_note(excerpt, loaded))
            views.append(
                SolutionFileView(
                    path=path,
                    anchor=file_anchor,
                    recorded_sha256=recorded.get(path),
                    size=size,
                    excerpt=excerpt,
                    notes=tuple(notes),
                )
            )
        return views, anchors

    def texts(self, run_id: str, record: AttemptRecord) -> dict[str, str] | None:
        """Every recorded file of an attempt as text, or None if any cannot be read whole."""
        folder = self.attempt_dir(run_id, record).solution
        texts: dict[str, str] = {}
        for f in record.solutionFiles:
            loaded = self.read(folder, f.path)
            if loaded is None or loaded.text is None or loaded.partial:
                return None
            texts[f.path] = loaded.text
        return texts

    def current_digest(self, run_id: str, record: AttemptRecord) -> tuple[str | None, str | None]:
        """The solution digest recomputed from disk, as review-agent-eval would bind it."""
        try:
            files = self.listing(self.attempt_dir(run_id, record).solution)
        except DigestError as exc:
            return None, str(exc)
        return solution_digest(files), None

    # --- analysis ---

    def analysis(self, run_id: str, record: AttemptRecord) -> tuple[Analysis | None, str | None]:
        path = self.attempt_dir(run_id, record).analysis
        if record.analysisDigest is None and not path.exists():
            return None, None
        where = self.relative(path)
        if (link := link_on_the_way(self.run.root, path)) is not None:
            return None, self.note(where, f"{link} is a symbolic link; not read")
        # One read: the bytes parsed are the bytes hashed.
        try:
            data = evidence_io.read_bounded(path, what="analysis", max_bytes=MAX_EVIDENCE_BYTES)
            analysis = parse_model(data, Analysis, where=f"analysis {path}")
        except EvidenceError as exc:
            return None, self.note(where, str(exc).removeprefix(f"analysis {path}: "))
        actual = sha256_bytes(data)
        if record.analysisDigest is None:
            return analysis, self.note(where, "present, but the receipt records no analysis")
        if actual != record.analysisDigest:
            return analysis, self.note(
                where, f"is {actual}, but the receipt records {record.analysisDigest}"
            )
        return analysis, None

    # --- findings ---

    def findings(
        self, diagnostics: Iterable[Diagnostic], anchors: _Anchors, left: list[int]
    ) -> tuple[list[Finding], int]:
        """Diagnostics that fit what is *left* of the findings budget (shared in a list)."""
        shown: list[Finding] = []
        hidden = 0
        for d in diagnostics:
            message = _clip(d.message, 2000)
            cost = html_cost(message) + html_cost(d.path or "") + 200
            if cost > left[0]:
                hidden += 1
                continue
            left[0] -= cost
            shown.append(
                Finding(
                    category=d.category,
                    message=message,
                    path=d.path,
                    line=d.line,
                    href=anchors.href(d.path, d.line),
                )
            )
        if hidden:
            self.cut = True
        return shown, hidden

    # --- the repair's difference ---

    def diff(self, run_id: str, run: RunRecord) -> tuple[Excerpt | None, str | None]:
        if len(run.attempts) < 2:
            return None, None
        before_files = self.texts(run_id, run.attempts[0])
        after_files = self.texts(run_id, run.attempts[1])
        if before_files is None or after_files is None:
            return None, "not shown: the saved files of both attempts are needed, whole"
        if sum(len(t) for t in (*before_files.values(), *after_files.values())) > MAX_DIFF_CHARS:
            return None, f"not shown: the two solutions are larger than {MAX_DIFF_CHARS} characters"
        lines: list[str] = []
        for path in sorted(set(before_files) | set(after_files)):
            before, after = before_files.get(path), after_files.get(path)
            lines += difflib.unified_diff(
                split_lines(before or ""),
                split_lines(after or ""),
                fromfile=f"attempt-1/{path}" if before is not None else "/dev/null",
                tofile=f"attempt-2/{path}" if after is not None else "/dev/null",
                lineterm="",
            )
        if not lines:
            return None, "attempt 2 submitted exactly the files of attempt 1"
        kinds = {i: _diff_kind(line) for i, line in enumerate(lines, start=1)}
        excerpt = head("\n".join(lines), self.budget.diff, kinds)
        if excerpt.cut:
            self.cut = True
        return excerpt, (_cut_note(excerpt, None) if excerpt.cut else None)

    # --- optional files ---

    def optional(self, path: Path, budget: int, *, from_end: bool) -> OptionalText | None:
        """runner.log (its tail), transcript.jsonl or gateway.jsonl (their start), if present."""
        where = self.relative(path)
        loaded = self.read(self.run.root, where, from_end=from_end)
        if loaded is None:
            return None
        notes = [self.note(where, loaded.problem)] if loaded.problem else []
        excerpt = None
        text = _said(loaded.text) if loaded.text is not None else None
        if text is not None and not text.strip():
            return OptionalText(
                name=path.name, size=loaded.size, excerpt=None, notes=tuple(notes), empty=True
            )
        if text is not None:
            excerpt = (tail if from_end else head)(text, budget)
            if excerpt.cut or loaded.partial:
                self.cut = True
                notes.append(_cut_note(excerpt, loaded))
        return OptionalText(name=path.name, size=loaded.size, excerpt=excerpt, notes=tuple(notes))

    def gateway_summary(self, path: Path) -> GatewaySummary | None:
        loaded = self.read(self.run.root, self.relative(path))
        if loaded is None or loaded.text is None:
            return None
        return summarise_gateway(split_lines(loaded.text))


_NO_STDERR = "runner stderr (its last 0 characters, of 0 bytes):\n"
"""How the batch heads a runner.log whose runner wrote nothing on stderr."""


def _said(text: str) -> str:
    """*text* with an empty stderr section said as such: "nothing", not a count of 0."""
    if not text.startswith(_NO_STDERR):
        return text
    rest = text.removeprefix(_NO_STDERR).removeprefix("\n")
    return "runner stderr: nothing\n" + rest if rest.strip() else ""


def _diff_kind(line: str) -> str:
    if line.startswith(("+++ ", "--- ")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return ""


def _cut_note(excerpt: Excerpt, loaded: Loaded | None) -> str:
    parts = [f"cut: {len(excerpt.lines)} of {excerpt.total_lines} lines shown"]
    if any(line.cut for line in excerpt.lines):
        parts.append(f"lines longer than {MAX_LINE_CHARS} characters shortened")
    if loaded is not None and loaded.partial:
        parts.append(f"only {MAX_READ_BYTES} of its {loaded.size} bytes were read")
    return "; ".join(parts) + " (the run directory has it all)"


def _notes(hits: dict[int, list[str]]) -> dict[int, tuple[str, ...]]:
    notes = {}
    for number, found in hits.items():
        shown = found[:MAX_NOTES_PER_LINE]
        if len(found) > len(shown):
            shown.append(f"and {len(found) - len(shown)} more")
        notes[number] = tuple(shown)
    return notes


def _anchor_lines(excerpt: Excerpt, path: str, file_anchor: str, anchors: _Anchors) -> Excerpt:
    """Give each shown line that a finding points at an id for the finding's link."""
    marked: list[Line] = []
    for line in excerpt.lines:
        if line.notes:
            anchor = f"{file_anchor}-L{line.number}"
            anchors.lines[(path, line.number)] = anchor
            line = replace(line, anchor=anchor)
        marked.append(line)
    return replace(excerpt, lines=tuple(marked))


def summarise_gateway(lines: Sequence[str]) -> GatewaySummary:
    """Totals over a gateway record of one JSON object per line, from the fields present.

    A served model is read from ``servedModel`` (or ``model``); every integer
    field whose name contains ``token``, at the top or under ``usage``, is
    summed by name; every number whose name contains ``cost`` is summed.
    Lines that are not JSON objects are counted, not guessed at.
    """
    models: list[str] = []
    tokens: dict[str, int] = {}
    cost: float | None = None
    requests = unreadable = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            if nesting_exceeds(line.encode("utf-8")):
                raise ValueError("nested too deeply")
            record = json.loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
            unreadable += 1
            continue
        if not isinstance(record, dict):
            unreadable += 1
            continue
        requests += 1
        served = record.get("servedModel", record.get("model"))
        if isinstance(served, str) and served not in models:
            models.append(served)
        usage = record.get("usage")
        fields = [*record.items(), *(usage.items() if isinstance(usage, dict) else [])]
        for key, value in fields:
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if number and "token" in key.lower() and isinstance(value, int):
                tokens[key] = tokens.get(key, 0) + value
            elif number and "cost" in key.lower():
                cost = (cost or 0.0) + float(value)
    return GatewaySummary(
        requests=requests,
        unreadable_lines=unreadable,
        served_models=tuple(models[:20]),
        tokens=tuple(sorted(tokens.items())),
        cost=cost,
    )


# --- Putting it together ---------------------------------------------------------------


def _refused(paths: Sequence[RefusedPath], budget: int) -> list[Refused]:
    shown: list[Refused] = []
    for r in paths[:MAX_REFUSED_SHOWN]:
        item = Refused(path=_clip(r.path, MAX_NOTE_CHARS), reason=_clip(r.reason, MAX_NOTE_CHARS))
        budget -= html_cost(item.path) + html_cost(item.reason) + 60
        if budget < 0:
            break
        shown.append(item)
    return shown


def _api_notes(analysis: Analysis) -> tuple[str, ...]:
    notes = [
        _clip(u, MAX_NOTE_CHARS) + (" (hallucinated)" if u in analysis.hallucinatedApi else "")
        for u in analysis.unsupportedApi
    ]
    notes += [
        f"import {_clip(m, MAX_NOTE_CHARS)} (not allowed)" for m in analysis.missingDependencies
    ]
    if len(notes) > MAX_API_NOTES:
        notes = [*notes[:MAX_API_NOTES], f"and {len(notes) - MAX_API_NOTES} more"]
    return tuple(notes)


_STOPPED_GRADING = ("timeout", "behaviour", "syntax", "missing-dependency", "infrastructure")
"""Finding categories that say why a grader could not observe the rest."""


def _assertion_rows(record: AttemptRecord) -> tuple[AssertionRow, ...]:
    stopped = next(
        (_clip(d.message, MAX_NOTE_CHARS) for d in record.diagnostics
         if d.category in _STOPPED_GRADING),
        None,
    )  # fmt: skip
    rows = []
    for a in record.assertions:
        state: Literal["passed", "failed", "not observed"] = (
            "passed" if a.passed else ("failed" if a.observed else "not observed")
        )
        rows.append(
            AssertionRow(
                id=a.id,
                state=state,
                safety=a.safety,
                message=a.message,
                observed_value=a.observedValue,
                why=stopped if state == "not observed" else None,
            )
        )
    return tuple(rows)


def _review_item(
    reader: AttemptReader,
    receipt_path: Path,
    run_id: str,
    record: AttemptRecord,
    decision: ReviewDecision | None,
) -> ReviewItem:
    current, problem = reader.current_digest(run_id, record)
    if problem:
        reader.note(f"{run_id} attempt {record.attempt}", f"solution cannot be hashed: {problem}")
    if decision is None:
        state = "no decision yet"
    elif decision.solutionDigest != record.solutionDigest:
        state = f"{decision.decision} bound to another solution digest"
    else:
        state = f"{decision.decision} by {decision.reviewer}"
    refused = None
    if record.solutionDigest is None:
        refused = "it has no saved solution to review"
    elif record.unsafe:
        refused = "it failed safety, and no review can accept that"
    elif current != record.solutionDigest:
        refused = "its saved files no longer match the recorded digest"
    elif decision is not None:
        refused = "it already has a decision"
    command = shlex.join(
        [
            "review-agent-eval",
            "--receipt",
            str(receipt_path),
            "--run",
            run_id,
            "--attempt",
            str(record.attempt),
            "--reviewer",
            "NAME",
            "--decision",
            "accept",
        ]
    )
    return ReviewItem(
        run_id=run_id,
        attempt=record.attempt,
        anchor=attempt_anchor(run_id, record.attempt),
        recorded_digest=record.solutionDigest,
        current_digest=current,
        digest_problem=problem,
        decision=decision,
        state=state,
        command=command,
        refused_reason=refused,
    )


def attempt_view(
    reader: AttemptReader,
    receipt_path: Path,
    run: RunRecord,
    record: AttemptRecord,
    decision: ReviewDecision | None,
) -> AttemptView:
    run_id = run.runId
    anchor = attempt_anchor(run_id, record.attempt)
    analysis, analysis_note = reader.analysis(run_id, record)
    analysis_findings = list(analysis.diagnostics) if analysis else []
    files, anchors = reader.solution(
        run_id, record, [*analysis_findings, *record.diagnostics], anchor
    )
    left = [reader.budget.findings]
    findings, hidden = reader.findings(analysis_findings, anchors, left)
    diagnostics, hidden_more = reader.findings(record.diagnostics, anchors, left)
    refused = _refused(record.refusedPaths, reader.budget.refused)
    reader.cut = reader.cut or len(refused) < len(record.refusedPaths)
    diff, diff_note = (None, None)
    if record.attempt == 2:
        diff, diff_note = reader.diff(run_id, run)
    feedback = None
    if record.repairFeedback is not None:
        feedback = head(record.repairFeedback.model_dump_json(indent=2), reader.budget.feedback)
        reader.cut = reader.cut or feedback.cut
    where = reader.attempt_dir(run_id, record)
    gateway = reader.optional(where.gateway_record, reader.budget.gateway, from_end=False)
    accepted = (
        decision is not None
        and decision.decision == "accept"
        and decision.solutionDigest == record.solutionDigest
    )
    return AttemptView(
        run_id=run_id,
        anchor=anchor,
        record=record,
        outcome=attempt_outcome(record, accepted),
        assertions=_assertion_rows(record),
        analysis=analysis,
        analysis_note=analysis_note,
        api_notes=_api_notes(analysis) if analysis else (),
        findings=tuple(findings),
        diagnostics=tuple(diagnostics),
        findings_hidden=hidden + hidden_more,
        files=tuple(files),
        refused=tuple(refused),
        refused_hidden=len(record.refusedPaths) - len(refused),
        diff=diff,
        diff_note=diff_note,
        feedback=feedback,
        runner_log=reader.optional(where.runner_log, reader.budget.runner_log, from_end=True),
        transcript=reader.optional(where.transcript, reader.budget.transcript, from_end=False),
        gateway=gateway,
        gateway_summary=reader.gateway_summary(where.gateway_record) if gateway else None,
        review=(
            _review_item(reader, receipt_path, run_id, record, decision)
            if record.needsReview
            else None
        ),
        decision=decision,
    )
