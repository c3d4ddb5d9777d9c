"""A comparison as one self-contained HTML page, in the manner of the reviewer's report.

The page holds its style inline and fetches nothing: its Content Security Policy is the
report's (no script, no connection, no resource but inline style and ``data:`` images).
Runner names, model ids, served models and task titles were chosen by an agent's
packager, a provider or whoever wrote the checkout, so the template is rendered with
autoescaping on, never marks a string safe, and shows each control or bidirectional
character by its code point, as the report does. The content is computed here, as a
view of plain values the template only lays out, so it is tested without a browser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment

import agent_eval
from agent_eval.compare.compare import LIBRARY
from agent_eval.errors import EvidenceError
from agent_eval.evidence_io import write_bytes_atomic
from agent_eval.models.compare import (
    ApiChanges,
    Comparison,
    RateComparison,
    SideSummary,
    TaskComparison,
)
from agent_eval.report.render import NO_SCRIPT_POLICY, html_environment

__all__ = [
    "comparison_view",
    "render_comparison",
    "write_comparison_page",
]

_VERDICT_WORDS = {
    "better": "better",
    "worse": "worse",
    "no-detectable-difference": "no detectable difference",
    "not-measured": "not measured",
}

_IDENTITIES = (
    ("sourceCommit", "source commit"),
    ("archives", "library wheels"),
    ("apiCatalogDigest", "API catalog"),
    ("suiteDigest", "suite"),
    ("taskIds", "tasks"),
    ("runner", "runner"),
    ("model", "model"),
    ("servedModels", "served models"),
    ("upstreams", "model upstreams"),
    ("runnerImage", "runner image"),
    ("verifierImage", "verifier image"),
    ("gatewayImage", "gateway image"),
    ("evaluatorDigest", "harness"),
)
"""Each identity a comparison holds the sides to, as the page names it."""


@dataclass(frozen=True)
class RateView:
    """One rate on both sides, as the page shows it."""

    baseline: str
    """``k/n (rate)`` of the baseline."""
    candidate: str
    """``k/n (rate)`` of the candidate."""
    difference: str
    """The difference in points with its 95 % interval, or a dash."""
    p_value: str
    """The exact test's p, or a dash."""
    verdict: str
    """The verdict's class: better, worse, no-detectable-difference or not-measured."""
    words: str
    """The verdict in words."""


@dataclass(frozen=True)
class TaskRow:
    """One task, or the pooled row of all of them."""

    task_id: str
    """The task (``all tasks`` for the pooled row)."""
    title: str
    """Its title in the checkout ('' when none is at hand)."""
    first: RateView
    """First-attempt success."""
    final: RateView
    """Final success."""
    baseline_cells: tuple[str, ...]
    """Each baseline run's outcome, in order (empty for the pooled row)."""
    candidate_cells: tuple[str, ...]
    """Each candidate run's outcome."""
    others: tuple[str, ...]
    """Other counts that differ (unsafe attempts, repairs, ...), in words."""


@dataclass(frozen=True)
class IdentityRow:
    """One identity of both sides."""

    label: str
    """What it is."""
    baseline: tuple[str, ...]
    """The baseline's value, one line each."""
    candidate: tuple[str, ...]
    """The candidate's value."""
    differs: bool
    """The sides do not share it."""
    beyond_library: bool
    """It differs and is not the library: the caller allowed it, and it may explain a result."""


@dataclass(frozen=True)
class PageView:
    """Everything the page shows."""

    headline: RateView
    """The pooled first-attempt verdict, said first."""
    final: RateView
    """The pooled final verdict."""
    unexpected: tuple[str, ...]
    """The identities beyond the library that differ (allowed), for the banner."""
    baseline_batches: tuple[str, ...]
    """The batches pooled as the baseline."""
    candidate_batches: tuple[str, ...]
    """The batches pooled as the candidate."""
    measurement: tuple[bool, bool]
    """Whether each side holds a measurement batch."""
    runs_per_task: tuple[int, int]
    """The most runs of one task on each side."""
    identities: tuple[IdentityRow, ...]
    """Each identity side by side."""
    api: ApiChanges
    """The library's public symbols that changed."""
    tasks: tuple[TaskRow, ...]
    """One row per task."""
    pooled: TaskRow
    """All tasks, stratified by task."""
    method: str
    """How the numbers were computed, in words."""


def _count(successes: int, runs: int) -> str:
    return f"{successes}/{runs}" + (f" ({successes / runs * 100:.0f} %)" if runs else "")


def _verdict_words(rate: RateComparison) -> str:
    words = _VERDICT_WORDS[rate.verdict]
    if rate.verdict != "no-detectable-difference":
        return words
    if rate.detectable is None:
        return f"{words} — these runs could detect no difference from this rate"
    return (
        f"{words} — these runs could detect only a difference of about "
        f"{rate.detectable * 100:.0f} points"
    )


def _rate(rate: RateComparison) -> RateView:
    if rate.difference is None or rate.low is None or rate.high is None:
        difference = "—"
    else:
        difference = (
            f"{rate.difference * 100:+.0f} points "
            f"(95 % interval {rate.low * 100:+.0f} to {rate.high * 100:+.0f})"
        )
    return RateView(
        baseline=_count(rate.baselineSuccesses, rate.baselineRuns),
        candidate=_count(rate.candidateSuccesses, rate.candidateRuns),
        difference=difference,
        p_value="—" if rate.pValue is None else f"p = {rate.pValue:.2g}",
        verdict=rate.verdict,
        words=_verdict_words(rate),
    )


def _others(task: TaskComparison) -> tuple[str, ...]:
    said = []
    for label, (before, after) in (
        ("unsafe attempts", task.unsafe),
        ("final attempts with an unsupported API", task.unsupportedApi),
        ("runs repaired", task.repairs),
    ):
        if before or after:
            said.append(f"{label}: {before} → {after}")
    tokens = task.meanTokens
    if tokens[0] is not None or tokens[1] is not None:
        said.append("tokens per attempt: " + " → ".join(_number(t) for t in tokens))
    seconds = task.meanAttemptSeconds
    if seconds[0] is not None or seconds[1] is not None:
        said.append("seconds per attempt: " + " → ".join(_number(s, ".1f") for s in seconds))
    return tuple(said)


def _number(value: float | None, spec: str = ".0f") -> str:
    return "—" if value is None else format(value, spec)


def _lines(value: Any) -> tuple[str, ...]:
    if value is None:
        return ("none",)
    if isinstance(value, list):
        return tuple(str(v) for v in value) or ("none",)
    if isinstance(value, dict):
        return (json.dumps(value, sort_keys=True, ensure_ascii=False),)
    return (str(value),)


def _who(side: SideSummary, field: str) -> Any:
    value = getattr(side, field)
    if field == "runner" and value is not None:
        return f"{value.name} {value.version}"
    if field == "model" and value is not None:
        settings = json.dumps(value.settings, sort_keys=True, ensure_ascii=False)
        return [value.id, f"settings {settings}"]
    return value


def comparison_view(comparison: Comparison, titles: Mapping[str, str]) -> PageView:
    """What the page of *comparison* shows; *titles* are the tasks' titles in the checkout."""
    differing = {d.field for d in comparison.differences}
    identities = tuple(
        IdentityRow(
            label=label,
            baseline=_lines(_who(comparison.baseline, field)),
            candidate=_lines(_who(comparison.candidate, field)),
            differs=field in differing,
            beyond_library=field in differing and field not in LIBRARY,
        )
        for field, label in _IDENTITIES
    )
    tasks = tuple(
        TaskRow(
            task_id=t.taskId,
            title=titles.get(t.taskId, ""),
            first=_rate(t.first),
            final=_rate(t.final),
            baseline_cells=tuple(t.baselineCells),
            candidate_cells=tuple(t.candidateCells),
            others=_others(t),
        )
        for t in comparison.tasks
    )
    pooled = TaskRow(
        task_id="all tasks",
        title="stratified by task",
        first=_rate(comparison.first),
        final=_rate(comparison.final),
        baseline_cells=(),
        candidate_cells=(),
        others=(),
    )
    return PageView(
        headline=pooled.first,
        final=pooled.final,
        unexpected=tuple(comparison.unexpected),
        baseline_batches=tuple(comparison.baseline.batchIds),
        candidate_batches=tuple(comparison.candidate.batchIds),
        measurement=(comparison.baseline.measurement, comparison.candidate.measurement),
        runs_per_task=(comparison.baseline.runsPerTask, comparison.candidate.runsPerTask),
        identities=identities,
        api=comparison.api,
        tasks=tasks,
        pooled=pooled,
        method=comparison.method,
    )


def _environment() -> Environment:
    return html_environment("agent_eval.compare")


def render_comparison(view: PageView) -> str:
    """The page's HTML for *view*."""
    template = _environment().get_template("compare.html.j2")
    return template.render(v=view, version=agent_eval.__version__, csp=NO_SCRIPT_POLICY)


def write_comparison_page(
    path: Path, comparison: Comparison, titles: Mapping[str, str] | None = None
) -> Path:
    """Write the page of *comparison* to *path* atomically and return *path*.

    Raises:
        EvidenceError: The page cannot be written (the message names the file).
    """
    html = render_comparison(comparison_view(comparison, titles or {}))
    try:
        write_bytes_atomic(path, html.encode("utf-8"))
    except OSError as exc:
        raise EvidenceError(f"comparison page {path}: cannot write: {exc.strerror or exc}") from exc
    return path
