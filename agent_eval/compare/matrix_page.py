"""A matrix as one self-contained HTML page, in the manner of the comparison's page.

The same Content Security Policy (no script, no connection, inline style only) and the
same care for text the evidence chose: runner names, versions and model ids were picked
by an agent's packager or a provider, so the template autoescapes, never marks a string
safe and shows each control or bidirectional character by its code point. The strings
are made here, so the template only lays them out.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import agent_eval
from agent_eval.compare.matrix import cost, pair_sentence
from agent_eval.errors import EvidenceError
from agent_eval.evidence_io import write_bytes_atomic
from agent_eval.models.matrix import Matrix, MatrixRate, PairRate
from agent_eval.report.render import NO_SCRIPT_POLICY, html_environment

__all__ = ["MatrixView", "matrix_view", "render_matrix", "report_links", "write_matrix_page"]


@dataclass(frozen=True)
class CellView:
    """One rate: ``k/n (rate)`` and its interval."""

    count: str
    interval: str


@dataclass(frozen=True)
class RowView:
    rank: int
    label: str
    batches: tuple[tuple[str, str | None], ...]
    """Each batch id, with the link to its report (None: no report to link)."""
    report: str | None
    """The link of the row's report when it has one batch, for its cells."""
    first: CellView
    final: CellView
    tasks: tuple[tuple[CellView, CellView], ...]
    """Per task, in the matrix's task order: (first, final)."""
    unsafe: str
    tokens: str
    seconds: str
    calls: str
    cost_per_run: str
    cost_per_success: str


@dataclass(frozen=True)
class PairView:
    higher: str
    lower: str
    verdicts: tuple[str, str]
    """(final, first): the verdict's class, better, worse, ... ."""
    adjusted: tuple[str, str]
    sentences: tuple[str, str]


@dataclass(frozen=True)
class MatrixView:
    task_ids: tuple[str, ...]
    rows: tuple[RowView, ...]
    pairs: tuple[PairView, ...]
    identities: tuple[tuple[str, str], ...]
    method: str


def _cell(rate: MatrixRate) -> CellView:
    if rate.rate is None or rate.low is None or rate.high is None:
        return CellView(f"{rate.successes}/{rate.runs}", "not measured")
    return CellView(
        f"{rate.successes}/{rate.runs} ({rate.rate * 100:.0f} %)",
        f"95 % {rate.low * 100:.0f} to {rate.high * 100:.0f} %",
    )


def _number(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _adjusted(rate: PairRate) -> str:
    return _number(rate.adjustedP, ".3g")


def report_links(page: Path, reports: Mapping[str, Path]) -> dict[str, str]:
    """Each batch's report (batch id -> report.html) as a link relative to *page*, for a
    report that exists: the page and the evidence move together, offline. A run directory
    is named by its batch's id, as eval-agent writes it; the callers key *reports* so."""
    return {
        batch_id: urllib.parse.quote(Path(os.path.relpath(report, page.parent)).as_posix())
        for batch_id, report in reports.items()
        if report.is_file()
    }


def matrix_view(matrix: Matrix, links: Mapping[str, str] | None = None) -> MatrixView:
    """The plain values the page shows of *matrix*, each batch linked by *links*
    (batch id -> link of its report)."""
    links = links or {}
    rows = tuple(
        RowView(
            rank=r.rank,
            label=r.label,
            batches=tuple((b, links.get(b)) for b in r.batchIds),
            report=links.get(r.batchIds[0]) if len(r.batchIds) == 1 else None,
            first=_cell(r.first),
            final=_cell(r.final),
            tasks=tuple((_cell(t.first), _cell(t.final)) for t in r.tasks),
            unsafe=f"{r.unsafeAttempts} attempts, {r.unsafeRuns} runs",
            tokens=_number(r.meanTokensPerRun, ".0f"),
            seconds=_number(r.meanSecondsPerRun, ".1f"),
            calls=_number(r.modelCallsPerSuccess, ".1f"),
            cost_per_run=cost(r.meanCostPerRun, r),
            cost_per_success=cost(r.costPerSuccess, r),
        )
        for r in matrix.rows
    )
    pairs = tuple(
        PairView(
            higher=p.higher,
            lower=p.lower,
            verdicts=(p.final.verdict, p.first.verdict),
            adjusted=(_adjusted(p.final), _adjusted(p.first)),
            sentences=(pair_sentence(p, final=True), pair_sentence(p, final=False)),
        )
        for p in matrix.pairs
    )
    identities = (
        ("source commit", str(matrix.sourceCommit)),
        ("library wheels", ", ".join(matrix.archives)),
        ("API catalog", matrix.apiCatalogDigest),
        ("suite", str(matrix.suiteDigest)),
        ("verifier image", matrix.verifierImage),
        ("harness", str(matrix.evaluatorDigest)),
    )
    return MatrixView(tuple(matrix.taskIds), rows, pairs, identities, matrix.method)


def render_matrix(view: MatrixView) -> str:
    """The page's HTML for *view*."""
    template = html_environment("agent_eval.compare").get_template("matrix.html.j2")
    return template.render(v=view, version=agent_eval.__version__, csp=NO_SCRIPT_POLICY)


def write_matrix_page(
    path: Path, matrix: Matrix, reports: Mapping[str, Path] | None = None
) -> Path:
    """Write the page of *matrix* to *path* atomically and return *path*; each batch of
    *reports* (batch id -> its report.html) that has a report is linked to it.

    Raises:
        EvidenceError: The page cannot be written (the message names the file).
    """
    html = render_matrix(matrix_view(matrix, report_links(path, reports or {})))
    try:
        write_bytes_atomic(path, html.encode("utf-8"))
    except OSError as exc:
        raise EvidenceError(f"matrix page {path}: cannot write: {exc.strerror or exc}") from exc
    return path
