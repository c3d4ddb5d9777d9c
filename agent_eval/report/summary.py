"""The numbers at the top of the report and the grid: counts, rates and one colour per attempt.

Rates are over what was graded: an attempt that failed for infrastructure
says nothing about the agent, so it is counted apart and left out of the
agent's first-try and final rates. The gate's chance is computed for the
suite's own threshold and denominator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agent_eval.models import AttemptRecord, FailureCategory, Receipt, SuiteSpec
from agent_eval.report import statistics
from agent_eval.report.statistics import Interval

__all__ = [
    "GridRow",
    "ModelUse",
    "Outcome",
    "Reason",
    "Statistics",
    "attempt_anchor",
    "attempt_outcome",
    "batch_statistics",
    "grid",
    "model_use",
]

Outcome = Literal["pass", "fail", "unsafe", "infrastructure", "needs-review", "not-run"]

Reason = Literal[
    "timeout", "assertion", "no submission", "unsafe", "infrastructure", "analysis", "review"
]
"""Why an attempt did not pass, in the grid's words (the record's failureCategory is finer)."""

_REASONS: dict[FailureCategory, Reason] = {
    "syntax": "analysis",
    "type-check": "analysis",
    "contract-mismatch": "analysis",
    "missing-dependency": "analysis",
    "unsupported-api": "analysis",
    "integration": "analysis",
    "behaviour": "assertion",
    "safety": "unsafe",
    "timeout": "timeout",
    "infrastructure": "infrastructure",
    # The runner ended without a gradable solution, whatever it said of itself.
    "no-submission": "no submission",
    "refused": "no submission",
    "invalid-response": "no submission",
    "identity-mismatch": "no submission",
    "runner-error": "no submission",
    "tampering": "no submission",
    "collection": "no submission",
    "budget-exhausted": "no submission",
}

GATE_TABLE = (0.70, 0.80, 0.85, 0.90, 0.95)
"""True first-try rates at which the report shows the chance of clearing the gate."""


@dataclass(frozen=True)
class Rate:
    """k of n, with its Wilson 95 % interval (None when n is 0)."""

    k: int
    n: int
    interval: Interval | None

    @classmethod
    def of(cls, k: int, n: int) -> Rate:
        return cls(k=k, n=n, interval=statistics.wilson_interval(k, n))

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None


@dataclass(frozen=True)
class TaskStatistics:
    """One task's three runs."""

    task_id: str
    first: Rate
    final: Rate
    pass3_first: float | None
    """Unbiased pass^3 of first submissions (with three runs: all three passed)."""
    pass3_final: float | None


@dataclass(frozen=True)
class GateChance:
    """The chance of clearing the first-try gate at a true rate p."""

    p: float
    chance: float
    label: str


@dataclass(frozen=True)
class Statistics:
    """What the counts can and cannot say."""

    first: Rate
    """First-submission successes over runs whose first attempt was graded (not infrastructure)."""
    final: Rate
    """Final successes over runs whose last attempt was graded."""
    infrastructure: Rate
    """Attempts with an infrastructure failure over all attempts made."""
    infrastructure_runs: int
    tasks: tuple[TaskStatistics, ...]
    gate_threshold: int
    gate_runs: int
    gate_at_observed: tuple[GateChance, ...]
    """The gate's chance at the observed first-try rate and at the ends of its interval."""
    gate_table: tuple[GateChance, ...]
    gate_examples: tuple[GateChance, GateChance]
    """The gate's chance for an agent at 0.80 and at 0.90: how little one batch says."""
    final_gate_at_observed: GateChance | None
    """The chance of every final success at the observed final rate."""


def _graded(attempt: AttemptRecord | None) -> bool:
    return attempt is not None and attempt.infrastructureStatus == "ok"


def batch_statistics(receipt: Receipt, suite: SuiteSpec) -> Statistics:
    """Rates, intervals, pass^3 per task and the gate's chance, from the receipt and the
    suite's schedule and thresholds."""
    runs = receipt.runs
    first_graded = [r for r in runs if r.attempts and _graded(r.attempts[0])]
    final_graded = [r for r in runs if r.attempts and _graded(r.attempts[-1])]
    attempts = [a for r in runs for a in r.attempts]
    infra = [a for a in attempts if a.infrastructureStatus == "failed"]
    first = Rate.of(sum(r.firstSuccess for r in first_graded), len(first_graded))
    final = Rate.of(sum(r.finalSuccess for r in final_graded), len(final_graded))
    task_ids = list(suite.taskIds) + sorted({r.taskId for r in runs} - set(suite.taskIds))
    tasks = []
    for task_id in task_ids:
        f1 = [r for r in first_graded if r.taskId == task_id]
        f2 = [r for r in final_graded if r.taskId == task_id]
        k1, k2 = sum(r.firstSuccess for r in f1), sum(r.finalSuccess for r in f2)
        tasks.append(
            TaskStatistics(
                task_id=task_id,
                first=Rate.of(k1, len(f1)),
                final=Rate.of(k2, len(f2)),
                pass3_first=statistics.pass_hat_k(k1, len(f1), 3),
                pass3_final=statistics.pass_hat_k(k2, len(f2), 3),
            )
        )
    n, threshold = suite.scheduledRuns, suite.minFirstSuccesses

    def chance(p: float, label: str, gate: int = threshold) -> GateChance:
        return GateChance(p=p, chance=statistics.binomial_tail(p, n, gate), label=label)

    observed: list[GateChance] = []
    if first.value is not None and first.interval is not None:
        observed = [
            chance(first.interval.low, "interval low end"),
            chance(first.value, f"observed {first.k}/{first.n}"),
            chance(first.interval.high, "interval high end"),
        ]
    final_gate = None
    if final.value is not None:
        final_gate = chance(final.value, f"observed {final.k}/{final.n}", gate=n)
    return Statistics(
        first=first,
        final=final,
        infrastructure=Rate.of(len(infra), len(attempts)),
        infrastructure_runs=sum(
            any(a.infrastructureStatus == "failed" for a in r.attempts) for r in runs
        ),
        tasks=tuple(tasks),
        gate_threshold=threshold,
        gate_runs=n,
        gate_at_observed=tuple(observed),
        gate_table=tuple(chance(p, f"{p:.2f}") for p in GATE_TABLE),
        gate_examples=(chance(0.8, "0.80"), chance(0.9, "0.90")),
        final_gate_at_observed=final_gate,
    )


# --- The grid ----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelUse:
    """What the batch's attempts used of their model, totalled."""

    attempts: int
    through_gateway: int
    """Attempts with a gateway record (the count below is the gateway's)."""
    requests: int
    input_tokens: int
    output_tokens: int
    reported: int
    """Attempts whose CLI reported its own usage."""
    reported_cost_usd: float | None
    """The sum of the costs the CLIs reported (their own price lists), if any did."""


def model_use(receipt: Receipt) -> ModelUse:
    """Totals of the gateway's counts and of what the CLIs reported, over every attempt."""
    attempts = [a for run in receipt.runs for a in run.attempts]
    seen = [a.gateway for a in attempts if a.gateway is not None]
    reported = [a.reportedUsage for a in attempts if a.reportedUsage is not None]
    costs = [u.costUsd for u in reported if u.costUsd is not None]
    return ModelUse(
        attempts=len(attempts),
        through_gateway=len(seen),
        requests=sum(g.requests for g in seen),
        input_tokens=sum(g.inputTokens for g in seen),
        output_tokens=sum(g.outputTokens for g in seen),
        reported=len(reported),
        reported_cost_usd=round(sum(costs), 6) if costs else None,
    )


def attempt_anchor(run_id: str, attempt: int) -> str:
    """The id of an attempt's section (run ids are lowercase letters, digits and dashes)."""
    return f"att-{run_id}-{attempt}"


def attempt_outcome(attempt: AttemptRecord, accepted: bool) -> Outcome:
    """The one colour of a grid cell: the most serious thing about the attempt.

    Infrastructure says nothing about the agent and comes first; then a safety
    violation (which no review can accept); then a review still owed; then
    pass or fail.
    """
    if attempt.infrastructureStatus == "failed":
        return "infrastructure"
    if attempt.unsafe:
        return "unsafe"
    if attempt.needsReview and not accepted:
        return "needs-review"
    return "pass" if attempt.success else "fail"


def attempt_reason(attempt: AttemptRecord, outcome: Outcome) -> Reason | None:
    """Why the attempt did not pass, in one word or two (None: it passed).

    Follows :func:`attempt_outcome`'s order, so a cell's reason never contradicts
    its colour: infrastructure first, then unsafe, then a review owed.
    """
    if outcome == "pass":
        return None
    if outcome == "infrastructure":
        return "infrastructure"
    if outcome == "unsafe":
        return "unsafe"
    if outcome == "needs-review":
        return "review"
    if attempt.failureCategory is None:
        return None
    return _REASONS[attempt.failureCategory]


@dataclass(frozen=True)
class GridCell:
    """One attempt of one run in the grid."""

    attempt: int
    outcome: Outcome
    anchor: str | None
    title: str
    reason: Reason | None = None
    """Why it did not pass, shown in the cell as text (None: passed, or not run)."""


@dataclass(frozen=True)
class GridRun:
    """One scheduled run in the grid."""

    run_id: str
    repetition: int
    in_receipt: bool
    first_success: bool
    final_success: bool
    cells: tuple[GridCell, ...]


@dataclass(frozen=True)
class GridRow:
    """One task: its runs in repetition order."""

    task_id: str
    runs: tuple[GridRun, ...]

    @property
    def outcomes(self) -> tuple[Outcome, ...]:
        """Every outcome in the row, once each (what the filter by outcome matches)."""
        return tuple(dict.fromkeys(c.outcome for r in self.runs for c in r.cells))


def grid(
    receipt: Receipt, outcomes: Mapping[tuple[str, int], Outcome], suite: SuiteSpec
) -> tuple[GridRow, ...]:
    """Every task's runs (the scheduled ones, and any other in the receipt) with their cells."""
    by_id = {r.runId: r for r in receipt.runs}
    task_ids = list(suite.taskIds) + sorted({r.taskId for r in receipt.runs} - set(suite.taskIds))
    rows = []
    for task_id in task_ids:
        repetitions = {r.repetition for r in receipt.runs if r.taskId == task_id}
        if task_id in suite.taskIds:
            repetitions |= set(range(1, suite.repetitions + 1))
        cells_by_run = []
        for n in sorted(repetitions):
            run_id = f"{task_id}-{n}"
            record = by_id.get(run_id)
            cells = [
                GridCell(
                    attempt=att.attempt,
                    outcome=outcomes[(run_id, att.attempt)],
                    anchor=attempt_anchor(run_id, att.attempt),
                    title=f"{run_id} attempt {att.attempt}: {outcomes[(run_id, att.attempt)]}"
                    + (f" ({att.failureCategory})" if att.failureCategory else ""),
                    reason=attempt_reason(att, outcomes[(run_id, att.attempt)]),
                )
                for att in (record.attempts if record else [])
            ]
            if not cells:
                cells.append(
                    GridCell(
                        attempt=1,
                        outcome="not-run",
                        anchor=None,
                        title=f"{run_id}: "
                        + ("no attempt" if record is not None else "not in the receipt"),
                    )
                )
            cells_by_run.append(
                GridRun(
                    run_id=run_id,
                    repetition=n,
                    in_receipt=record is not None,
                    first_success=bool(record and record.firstSuccess),
                    final_success=bool(record and record.finalSuccess),
                    cells=tuple(cells),
                )
            )
        rows.append(GridRow(task_id=task_id, runs=tuple(cells_by_run)))
    return tuple(rows)
