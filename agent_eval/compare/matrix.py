"""Many runners' batches over one library, side by side: which agents can use it.

The same stage as a comparison, with more than two sides: each batch is loaded and held
to the checker's evidence rules by compare's loader, batches of one runner identity
(runner, version and model) pool into one row under compare's pooling rule, and every
row must share the library, suite, verifier, gateway and harness, so that rows differ
only in the agent. Each pair of rows is put to compare's stratified exact test; with
many pairs some would pass p < 0.05 by chance alone, so a pair is called better or worse
only when its p-value survives Holm's correction for the number of pairs tested.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_eval.compare.compare import (
    ALLOWABLE,
    COMPARED,
    Batch,
    graded_counts,
    load_batch,
    pooled_identity,
    rate_comparison,
    refuse_repeats,
)
from agent_eval.compare.statistics import ALPHA
from agent_eval.errors import AgentEvalError, ConfigError, EvidenceError
from agent_eval.models import RunRecord
from agent_eval.models.compare import RateComparison
from agent_eval.models.matrix import (
    Matrix,
    MatrixRate,
    MatrixRow,
    MatrixTask,
    PairRate,
    PairVerdict,
    RowPair,
)
from agent_eval.report.statistics import wilson_interval
from agent_eval.report.text import one_line
from agent_eval.verdict.qualification import Anchors, gateway_records

__all__ = [
    "METHOD",
    "SHARED",
    "as_text",
    "corrected_rate",
    "corrected_sentence",
    "cost",
    "holm",
    "matrix_of_batches",
    "pair_sentence",
]

SHARED = tuple(k for k in COMPARED if k not in ALLOWABLE["runner"] | ALLOWABLE["model"])
"""What every batch of a matrix shares: all compare holds two sides to but the agent
(runner, its image, the model and what served it)."""
WHEN_USED = frozenset({"gatewayImage"})
"""What only the batches that have one share: a runner without a model (a reference
runner, say) has no gateway, and sits beside agents that reach theirs through one."""

METHOD = (
    "Rates count graded runs only, with the Wilson score 95 % interval. Rows are one "
    "runner identity (runner, version, model) each, its batches pooled, ranked by final "
    "rate then first rate. Each pair of rows is compared as agent-eval compare does (the "
    "higher-ranked row's rate minus the lower's, the exact conditional test stratified by "
    "task, Fisher's with one task); the p-values of all pairs measured are adjusted by "
    "Holm's step-down method, and a pair is called better or worse only at an adjusted "
    "p < 0.05, in the direction of the stratified estimate."
)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of *p_values* (None: not tested, left out of the count).

    The i-th smallest of m is multiplied by m - i + 1, kept no smaller than the one before
    it and capped at 1; rejecting where the result is below alpha holds the chance of any
    false call among the m at alpha."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


MAX_LABEL_CHARS = 200
"""A row's label at most: a page's row header, and twice over in a pair's sentence (whose
model holds 1,000 characters)."""


def _label(batch: Batch) -> str:
    runner, model = batch.receipt.runner, batch.receipt.model
    who = f"{runner.name} {runner.version}" if runner else "unknown runner"
    what = model.id if model else "unknown model"
    if model and model.settings:
        what += " " + json.dumps(model.settings, sort_keys=True, separators=(",", ":"))
    label = f"{who} / {what}"
    if len(label) <= MAX_LABEL_CHARS:
        return label
    # Names and settings each within their own bounds can make a label past that: it
    # is cut, and the digest of the whole keeps two agents that differ only at the end
    # two rows.
    digest = hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{label[: MAX_LABEL_CHARS - 30]}… (sha256 {digest})"


def _key(batch: Batch) -> str:
    receipt = batch.receipt
    return json.dumps(
        [
            receipt.runner.model_dump(mode="json") if receipt.runner else None,
            receipt.model.model_dump(mode="json") if receipt.model else None,
        ],
        sort_keys=True,
    )


def _rate(successes: int, runs: int) -> MatrixRate:
    interval = wilson_interval(successes, runs)
    return MatrixRate(
        successes=successes,
        runs=runs,
        rate=successes / runs if runs else None,
        low=interval.low if interval else None,
        high=interval.high if interval else None,
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class _Unpriced(Exception):
    """A request with tokens went to an upstream without a price, or prices disagree in
    currency: no cost is shown rather than a part of one."""


def _run_cost(batch: Batch, run: RunRecord, currencies: set[str]) -> float:
    """What *run*'s requests cost at the prices its batch recorded, from its gateway records
    (each held to its digest by the evidence rules), adding each currency used."""
    run_dir, archives = batch.home(run.runId)
    prices = archives.gateway.prices if archives.gateway else {}
    cost = 0.0
    for attempt in run.attempts:
        try:
            records = gateway_records(run_dir, run.runId, attempt)
        except AgentEvalError as exc:
            where = f"{run_dir}: {run.runId} attempt {attempt.attempt}"
            raise EvidenceError(f"{where}: {exc}") from None
        for record in records:
            tokens = (record.inputTokens or 0, record.outputTokens or 0)
            if tokens == (0, 0):
                continue
            price = prices.get(record.upstream or "")
            if price is None:
                raise _Unpriced
            currencies.add(price.currency)
            cost += price.cost(*tokens)
    if len(currencies) > 1:
        raise _Unpriced
    return cost


def _costs(batches: list[Batch]) -> tuple[str, list[float]] | None:
    """The currency and each metered run's cost; None when a cost cannot be given whole,
    or no request was priced (no currency to give it in)."""
    currencies: set[str] = set()
    try:
        costs = [
            _run_cost(b, r, currencies)
            for b in batches
            for r in b.receipt.runs
            if any(a.gateway for a in r.attempts)
        ]
    except _Unpriced:
        return None
    return (currencies.pop(), costs) if currencies else None


def _row(label: str, batches: list[Batch], task_ids: list[str]) -> MatrixRow:
    runs = [r for b in batches for r in b.receipt.runs]
    metered = [r for r in runs if any(a.gateway for a in r.attempts)]
    tokens = [
        float(sum(a.gateway.inputTokens + a.gateway.outputTokens for a in r.attempts if a.gateway))
        for r in metered
    ]
    seconds = [sum(a.durationMs for a in r.attempts) / 1000 for r in runs if r.attempts]
    calls = sum(a.gateway.requests for r in runs for a in r.attempts if a.gateway)
    final = graded_counts(runs, final=True)
    priced = _costs(batches)

    def of(task_id: str) -> list[RunRecord]:
        return [r for r in runs if r.taskId == task_id]

    return MatrixRow(
        rank=1,  # set once the rows are ranked
        label=label,
        runner=batches[0].receipt.runner,
        model=batches[0].receipt.model,
        batchIds=[b.receipt.batchId for b in batches],
        first=_rate(*graded_counts(runs, final=False)),
        final=_rate(*final),
        tasks=[
            MatrixTask(
                taskId=t,
                first=_rate(*graded_counts(of(t), final=False)),
                final=_rate(*graded_counts(of(t), final=True)),
            )
            for t in task_ids
        ],
        unsafeAttempts=sum(r.unsafe_attempts for r in runs),
        unsafeRuns=sum(r.unsafe for r in runs),
        meanTokensPerRun=_mean(tokens),
        meanSecondsPerRun=_mean(seconds),
        modelCallsPerSuccess=calls / final[0] if metered and final[0] else None,
        currency=priced[0] if priced else None,
        meanCostPerRun=_mean(priced[1]) if priced else None,
        costPerSuccess=sum(priced[1]) / final[0] if priced and final[0] else None,
    )


def _order(rate: MatrixRate) -> float:
    return rate.rate if rate.rate is not None else -1.0  # nothing graded ranks last


def _pair_rates(rows: list[MatrixRow], final: bool) -> list[tuple[int, int, RateComparison]]:
    out = []
    for i, higher in enumerate(rows):
        for j in range(i + 1, len(rows)):
            lower = rows[j]
            counts = []
            for h, lo in zip(higher.tasks, lower.tasks, strict=True):
                a, b = (h.final, lo.final) if final else (h.first, lo.first)
                counts.append((b.successes, b.runs, a.successes, a.runs))
            what = f"{higher.label} vs {lower.label}, {'final' if final else 'first attempt'}"
            out.append((i, j, rate_comparison(counts, what)))
    return out


def corrected_rate(comparison: RateComparison, adjusted: float | None) -> PairRate:
    """*comparison* with its verdict after correction: better or worse only at an
    *adjusted* p below alpha, in the direction of the stratified estimate."""
    verdict: PairVerdict
    if adjusted is None or comparison.difference is None:
        verdict = "not-measured"
    elif adjusted < ALPHA and comparison.difference != 0:
        verdict = "better" if comparison.difference > 0 else "worse"
    else:
        verdict = "no-detectable-difference"
    return PairRate(comparison=comparison, adjustedP=adjusted, verdict=verdict)


def matrix_of_batches(run_dirs: Sequence[Path], current: Anchors) -> Matrix:
    """Set the batches in *run_dirs* side by side, one row per runner identity.

    Raises:
        EvidenceError: A batch fails the checker's evidence rules, or ran nothing.
        ConfigError: A batch is named twice; batches of one runner identity differ;
            or batches differ in the library, suite, verifier, gateway or harness
            (the message names the fields).
    """
    if not run_dirs:
        raise ConfigError("a matrix needs at least one batch")
    batches = [load_batch(d, current) for d in run_dirs]
    refuse_repeats([("matrix", b) for b in batches])
    groups: dict[str, list[Batch]] = {}
    for b in batches:
        groups.setdefault(_key(b), []).append(b)
    identities: list[tuple[Batch, dict[str, Any]]] = [
        (group[0], pooled_identity(group, f"{_label(group[0])!r}")) for group in groups.values()
    ]
    shared = identities[0][1]

    def held_to(key: str) -> tuple[Batch, dict[str, Any]]:
        """The batch whose *key* the others must share: the first, or for a gateway the
        first that ran one (a batch whose runner reaches no model has none to differ in)."""
        if key in WHEN_USED:
            return next(((b, i) for b, i in identities if i[key] is not None), identities[0])
        return identities[0]

    for batch, identity in identities[1:]:
        differing = [
            k
            for k in SHARED
            if not (k in WHEN_USED and identity[k] is None) and identity[k] != held_to(k)[1][k]
        ]
        if differing:
            raise ConfigError(
                f"{batch.root} differs from {held_to(differing[0])[0].root} in "
                f"{', '.join(differing)}: the batches of a matrix must share the library, "
                "suite, verifier, gateway and harness, so that its rows differ only in the agent"
            )
    task_ids = list(dict.fromkeys(r.taskId for b in batches for r in b.receipt.runs))
    rows = [_row(_label(g[0]), g, task_ids) for g in groups.values()]
    rows.sort(key=lambda r: (-_order(r.final), -_order(r.first), r.label))
    rows = [r.model_copy(update={"rank": n}) for n, r in enumerate(rows, 1)]
    firsts, finals = _pair_rates(rows, final=False), _pair_rates(rows, final=True)
    first_adjusted = holm([c.pValue for _, _, c in firsts])
    final_adjusted = holm([c.pValue for _, _, c in finals])
    pairs = [
        RowPair(
            higher=rows[i].label,
            lower=rows[j].label,
            first=corrected_rate(fc, fp),
            final=corrected_rate(gc, gp),
        )
        for (i, j, fc), (_, _, gc), fp, gp in zip(
            firsts, finals, first_adjusted, final_adjusted, strict=True
        )
    ]
    return Matrix(
        schemaVersion=1,
        suiteDigest=shared["suiteDigest"],
        taskIds=task_ids,
        archives=shared["archives"],
        apiCatalogDigest=shared["apiCatalogDigest"],
        sourceCommit=shared["sourceCommit"],
        verifierImage=shared["verifierImage"],
        evaluatorDigest=shared["evaluatorDigest"],
        method=METHOD,
        rows=rows,
        pairs=pairs,
    )


def _count(rate: MatrixRate) -> str:
    if rate.rate is None or rate.low is None or rate.high is None:
        return f"{rate.successes}/{rate.runs} -"
    return (
        f"{rate.successes}/{rate.runs} {rate.rate * 100:.0f}% "
        f"[{rate.low * 100:.0f}-{rate.high * 100:.0f}]"
    )


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


_WORDS = {
    "better": "better",
    "worse": "worse",
    "no-detectable-difference": "no detectable difference",
    "not-measured": "not measured",
}


def corrected_sentence(head: str, rate: PairRate, counts: str) -> str:
    """*rate*'s corrected verdict in words after *head*, with *counts* (the two sides'
    successes over graded runs, as the caller orders them), the difference, its interval
    and both p-values."""
    c = rate.comparison
    head = f"{head}: {_WORDS[rate.verdict]}"
    if c.difference is None or c.low is None or c.high is None or c.pValue is None:
        return head
    said = (
        f"{head} ({counts}, {c.difference * 100:+.0f} points, 95 % interval "
        f"{c.low * 100:+.0f} to {c.high * 100:+.0f}; p={c.pValue:.3g}, Holm-adjusted "
        f"{_number(rate.adjustedP, '.3g')})"
    )
    if c.detectable is not None:
        said += f"; these runs could detect only about {c.detectable * 100:.0f} points"
    return said


def pair_sentence(pair: RowPair, final: bool) -> str:
    """One pair's verdict on one rate, in words."""
    rate = pair.final if final else pair.first
    c = rate.comparison
    what = "final" if final else "first attempt"
    counts = f"{c.candidateSuccesses}/{c.candidateRuns} vs {c.baselineSuccesses}/{c.baselineRuns}"
    return corrected_sentence(f"{pair.higher} vs {pair.lower}, {what}", rate, counts)


def cost(value: float | None, row: MatrixRow) -> str:
    """A cost with its currency (``USD 0.0421``), or a dash when none is known."""
    if value is None or row.currency is None:
        return "-"
    return f"{row.currency} {value:.4g}"


def as_text(matrix: Matrix) -> str:
    """The matrix as a terminal table, one line per row, then every pair's verdicts."""
    width = max([len(one_line(r.label)) for r in matrix.rows] + [5])
    lines = [
        f"{'#':>2}  {'agent':<{width}}  {'first':<18} {'final':<18} {'unsafe':>9} "
        f"{'tokens/run':>10} {'s/run':>7} {'calls/ok':>8} {'cost/ok':>12}  batches"
    ]
    for r in matrix.rows:
        label = one_line(r.label)
        lines.append(
            f"{r.rank:>2}  {label:<{width}}  {_count(r.first):<18} {_count(r.final):<18} "
            f"{r.unsafeAttempts:>4}/{r.unsafeRuns:<4} {_number(r.meanTokensPerRun, '.0f'):>10} "
            f"{_number(r.meanSecondsPerRun, '.1f'):>7} "
            f"{_number(r.modelCallsPerSuccess, '.1f'):>8} {cost(r.costPerSuccess, r):>12}  "
            f"{len(r.batchIds)}"
        )
    lines.append("")
    if matrix.pairs:
        lines.append(f"pairs ({len(matrix.pairs)}, Holm-adjusted over the pairs measured):")
        for pair in matrix.pairs:
            lines.append("  " + pair_sentence(pair, final=True))
            lines.append("  " + pair_sentence(pair, final=False))
    else:
        lines.append("pairs: none (one runner identity)")
    lines.append("")
    lines.append(matrix.method)
    # Runner names, versions and model ids come from the evidence: one line of text each.
    return "\n".join(one_line(line) for line in lines)
