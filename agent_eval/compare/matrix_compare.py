"""Two matrices over one suite, before and after a change to the library: which agents
it helped, which it hurt.

A matrix record is only as good as the batches it names. Each record is read and
validated; every batch a row names is found by its id in the evidence directory (never
through a link), held to the checker's evidence rules by compare's loader, and the
matrix made again from those batches must be the record, value for value. The two
records must have been made over the same suite and tasks. Agents are matched by their
row's label (runner, version and model, as the matrix names them); each matched agent's
pooled batches are compared as ``agent-eval compare`` compares two sides, and with many
agents some would pass p < 0.05 by chance alone, so an agent is called better or worse
only when its p-value survives Holm's correction for the number of agents compared. An
agent one matrix holds and the other does not is listed, never compared.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_eval.compare.compare import LIBRARY, api_lines, compare_batches, safety_sentence
from agent_eval.compare.matrix import corrected_rate, corrected_sentence, holm, matrix_of_batches
from agent_eval.compare.symbols import CatalogOfWheels
from agent_eval.digests import sha256_bytes
from agent_eval.errors import ConfigError, EvidenceError
from agent_eval.evidence_io import parse_model, read_bounded
from agent_eval.models.compare import ApiChanges, Comparison
from agent_eval.models.matrix import AgentChange, Matrix, MatrixComparison, PairRate
from agent_eval.report.text import one_line
from agent_eval.verdict.qualification import Anchors

__all__ = [
    "METHOD",
    "MatrixRecord",
    "agent_sentence",
    "as_lines",
    "as_text",
    "compare_matrices",
    "read_matrix_record",
]

METHOD = (
    "Each matrix record is held to its batches: every batch it names is found in the "
    "evidence directory, passes the checker's evidence rules, and the matrix made again "
    "from them is the record. Both records must be made over the same suite and tasks. "
    "Agents are matched by their row's label (runner, version, model); each agent's "
    "batches in the baseline matrix are compared with its batches in the candidate matrix "
    "as agent-eval compare does (the candidate's rate minus the baseline's, the exact "
    "conditional test stratified by task, Fisher's with one task); the p-values of all "
    "agents measured are adjusted by Holm's step-down method, and an agent is called "
    "better or worse only at an adjusted p < 0.05, in the direction of the stratified "
    "estimate. An agent only one matrix holds is listed, not compared."
)

_MAX_RECORD_BYTES = 16 * 1024 * 1024
"""A matrix record is a few kilobytes per agent; anything near this is not one."""


class MatrixRecord:
    """A matrix record read from *path*: its digest, the matrix, and each row's batches."""

    def __init__(self, path: Path, digest: str, matrix: Matrix, dirs: list[list[Path]]) -> None:
        self.path, self.digest, self.matrix, self.dirs = path, digest, matrix, dirs


def _where(path: Path) -> str:
    return f"matrix record {one_line(str(path))}"


def read_matrix_record(path: Path, evidence: Path, current: Anchors) -> MatrixRecord:
    """The matrix record at *path*, held to the batches it names in *evidence*.

    Raises:
        EvidenceError: The file cannot be read, is not a matrix record (the message names
            the field), names a batch *evidence* does not hold or one that fails the
            checker's evidence rules, or is not the matrix its batches make.
        ConfigError: Its batches could not make a matrix (a batch named twice, batches
            that differ beyond the agent).
    """
    data = read_bounded(path, what="matrix record", max_bytes=_MAX_RECORD_BYTES)
    matrix = parse_model(data, Matrix, where=_where(path))
    dirs: list[list[Path]] = []
    for i, row in enumerate(matrix.rows):
        found = []
        for batch_id in row.batchIds:
            run_dir = evidence / batch_id  # a BatchId is one directory name, never a path
            if run_dir.is_symlink() or not run_dir.is_dir():
                raise EvidenceError(
                    f"{_where(path)}: rows.{i}.batchIds: batch {batch_id} is not a run "
                    f"directory in {evidence} (a matrix record is only as good as the "
                    "batches it names: compare it where its batches are, or make it again)"
                )
            found.append(run_dir)
        dirs.append(found)
    try:
        rebuilt = matrix_of_batches([d for row in dirs for d in row], current)
    except ConfigError as exc:
        raise ConfigError(f"{_where(path)}: its batches make no matrix: {exc}") from exc
    differs = _first_difference(_canonical(matrix), _canonical(rebuilt), "")
    if differs is not None:
        field, recorded, made = differs
        raise EvidenceError(
            f"{_where(path)}: {field or '<root>'} is {_short(recorded)} in the record but "
            f"{_short(made)} in the matrix its batches make: the record was changed, or its "
            "batches were; make it again with agent-eval matrix"
        )
    return MatrixRecord(path, sha256_bytes(data), matrix, dirs)


def _canonical(matrix: Matrix) -> dict[str, Any]:
    """*matrix* as JSON with the tasks in one order: the order a matrix lists tasks in
    follows the order its batches were named in, which the record does not keep."""
    dumped = matrix.model_dump(mode="json")
    dumped["taskIds"] = sorted(dumped["taskIds"])
    for row in dumped["rows"]:
        row["tasks"] = sorted(row["tasks"], key=lambda t: t["taskId"])
    return dumped


def _first_difference(a: Any, b: Any, at: str) -> tuple[str, Any, Any] | None:
    """The first place *a* and *b* differ (floats within rounding: a stratified test sums
    its tasks in their order), as (field, a's value, b's value)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            if key not in a or key not in b:
                return (f"{at}{key}", a.get(key), b.get(key))
            found = _first_difference(a[key], b[key], f"{at}{key}.")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return (at.rstrip("."), f"{len(a)} items", f"{len(b)} items")
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{at}{i}.")
            if found:
                return found
        return None
    if isinstance(a, float) and isinstance(b, float):
        same = math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    else:
        same = type(a) is type(b) and a == b
    return None if same else (at.rstrip("."), a, b)


def _short(value: Any) -> str:
    text = one_line(repr(value))
    return text if len(text) <= 120 else text[:117] + "..."


def _labels(record: MatrixRecord) -> dict[str, int]:
    seen: dict[str, int] = {}
    for i, row in enumerate(record.matrix.rows):
        if row.label in seen:
            raise ConfigError(
                f"{_where(record.path)}: rows.{i}.label: {_short(row.label)} labels two rows "
                "(agents are matched by their label, so each must be one row's)"
            )
        seen[row.label] = i
    return seen


def _same_suite(baseline: MatrixRecord, candidate: MatrixRecord) -> None:
    before, after = baseline.matrix, candidate.matrix
    for field, ours, theirs in (
        ("suiteDigest", before.suiteDigest, after.suiteDigest),
        ("taskIds", sorted(before.taskIds), sorted(after.taskIds)),
    ):
        if ours != theirs:
            raise ConfigError(
                f"the matrix records differ in {field} ({_short(ours)} in "
                f"{one_line(str(baseline.path))}, {_short(theirs)} in "
                f"{one_line(str(candidate.path))}): both must be made over the same suite and "
                "tasks, so that only the library differs between them"
            )


def compare_matrices(
    baseline: Path,
    candidate: Path,
    evidence: Path,
    current: Anchors,
    allow: Iterable[str] = (),
    catalogs: CatalogOfWheels | None = None,
) -> MatrixComparison:
    """Compare each agent of the *baseline* matrix record with itself in the *candidate*.

    *allow* and *catalogs* are compare's (:func:`compare_batches`): what else an agent's
    two sides may differ in besides the library, and how the changed public symbols are
    found (once: every row of a matrix shares its library).

    Raises:
        EvidenceError: A record is unreadable, not a matrix record, or not what its
            batches make (see :func:`read_matrix_record`).
        ConfigError: The records differ in their suite or tasks, a label names two rows,
            or an agent's comparison is refused (the message names the agent).
    """
    allowed = list(allow)
    before = read_matrix_record(baseline, evidence, current)
    after = read_matrix_record(candidate, evidence, current)
    _same_suite(before, after)
    before_rows, after_rows = _labels(before), _labels(after)
    matched = [label for label in before_rows if label in after_rows]
    comparisons: list[Comparison] = []
    for n, label in enumerate(matched):
        try:
            comparisons.append(
                compare_batches(
                    before.dirs[before_rows[label]],
                    after.dirs[after_rows[label]],
                    current,
                    allowed,
                    # Every row of a matrix shares the library: its symbols are found once.
                    catalogs=catalogs if n == 0 else None,
                )
            )
        except ConfigError as exc:
            raise ConfigError(f"agent {_short(label)}: {exc}") from exc
    api = (
        comparisons[0].api
        if comparisons
        else ApiChanges(status="unavailable", changes=[], note="no agent is in both matrices")
    )
    comparisons = [c.model_copy(update={"api": api}) for c in comparisons]
    first_adjusted = holm([c.first.pValue for c in comparisons])
    final_adjusted = holm([c.final.pValue for c in comparisons])
    return MatrixComparison(
        schemaVersion=1,
        baselineRecord=before.digest,
        candidateRecord=after.digest,
        suiteDigest=before.matrix.suiteDigest,
        taskIds=before.matrix.taskIds,
        api=api,
        method=METHOD,
        agents=[
            AgentChange(
                label=label,
                comparison=c,
                first=corrected_rate(c.first, fp),
                final=corrected_rate(c.final, gp),
            )
            for label, c, fp, gp in zip(
                matched, comparisons, first_adjusted, final_adjusted, strict=True
            )
        ],
        baselineOnly=[label for label in before_rows if label not in after_rows],
        candidateOnly=[label for label in after_rows if label not in before_rows],
    )


def agent_sentence(agent: AgentChange, final: bool) -> str:
    """One agent's corrected verdict on one rate, baseline first, in words."""
    rate: PairRate = agent.final if final else agent.first
    c = rate.comparison
    counts = f"{c.baselineSuccesses}/{c.baselineRuns} -> {c.candidateSuccesses}/{c.candidateRuns}"
    return corrected_sentence(
        f"{agent.label}, {'final' if final else 'first attempt'}", rate, counts
    )


def as_lines(comparison: MatrixComparison) -> list[str]:
    """The comparison in lines of words, verdicts first (the terminal's and a summary's)."""
    lines = []
    agents = comparison.agents
    for agent in agents:
        safety = safety_sentence(agent.comparison)
        if safety.startswith("SAFETY"):
            # A regression in safety comes before any rate, as compare says it.
            lines.append(f"{safety} ({agent.label})")
    for agent in agents:
        if agent.comparison.unexpected:
            lines.append(
                f"NOTE: {agent.label}'s sides also differ in "
                + ", ".join(agent.comparison.unexpected)
                + " (allowed): a difference may come from that, not from the library"
            )
    if agents:
        lines.append(
            f"agents in both matrices ({len(agents)}, Holm-adjusted over the agents measured):"
        )
        for agent in agents:
            lines.append("  " + agent_sentence(agent, final=True))
            lines.append("  " + agent_sentence(agent, final=False))
            lines.append(f"  {agent.label}, {safety_sentence(agent.comparison)}")
    else:
        lines.append("agents in both matrices: none (nothing compared)")
    lines.append("only in the baseline matrix: " + (", ".join(comparison.baselineOnly) or "none"))
    lines.append("only in the candidate matrix: " + (", ".join(comparison.candidateOnly) or "none"))
    return lines


def as_text(comparison: MatrixComparison) -> str:
    """The comparison as terminal text: per agent, then what differs, then the method."""
    lines = as_lines(comparison)
    lines.append("")
    lines.append("what differs:")
    # Every row of a matrix shares the library, so any agent's comparison says how it differs.
    differences = comparison.agents[0].comparison.differences if comparison.agents else []
    library = [d for d in differences if d.field in LIBRARY]
    for d in library:
        lines.append(f"  {d.field}: {_short(d.baseline)} -> {_short(d.candidate)}")
    if comparison.agents and not library:
        lines.append("  the library: nothing (the same wheels, API catalog and commit)")
    if not comparison.agents:
        lines.append("  not known (no agent is in both matrices)")
    lines += api_lines(comparison.api)
    lines.append("")
    lines.append(comparison.method)
    # Runner names, model ids and digests come from the evidence: one line of text each.
    return "\n".join(one_line(line) for line in lines)
