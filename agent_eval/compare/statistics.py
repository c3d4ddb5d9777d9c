"""Did it change? Exact tests and intervals for two small binary samples, as pure functions.

A comparison sets the runs of a baseline against those of a candidate, per task
and pooled over the tasks. The samples are small (a batch holds a few runs per
task) and their rates often sit at 0 or 1, where normal approximations fail, so:

* the test of a difference is exact: **Fisher's exact test** for one task (two-sided,
  summing the outcomes no likelier than the one observed), and for the pooled
  comparison the **exact conditional test stratified by task** (the distribution of
  the baseline's successes given every task's margins is the convolution of the
  tasks' hypergeometric distributions; Fisher's test is its one-stratum case), so a
  task both sides find easy cannot hide a difference in another;
* the interval of a difference is **Newcombe's hybrid score interval** (method 10:
  from the two Wilson intervals), which stays inside [-1, 1] and is sensible at 0/n;
* what a comparison could have detected is the **exact power** of Fisher's test,
  summed over every outcome of two binomial samples.

Every function is a closed computation of its arguments (no randomness, no state),
pinned in the tests against values computed by hand and by reference tables.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from math import comb, exp, lgamma, log, sqrt

from agent_eval.report.statistics import wilson_interval

__all__ = [
    "ALPHA",
    "MAX_POWER_RUNS",
    "BeyondPlanning",
    "Difference",
    "Stratum",
    "detectable_difference",
    "difference_interval",
    "fisher_exact",
    "power",
    "runs_needed",
    "stratified_difference",
    "stratified_exact",
    "stratified_power",
]

ALPHA = 0.05
"""The level of every test: a difference is called only when p < 0.05."""
POWER = 0.8
"""The power a detectable difference is quoted at."""
_TIES = 1 + 1e-7
_EXACT = 1000
"""Up to this many runs the probabilities are ratios of exact integers (correctly rounded);
beyond, they are computed in log space (no overflow; relative error about 1e-12)."""
MAX_POWER_RUNS = 600
"""The most runs (both sides, all tasks) whose exact power is computed: the sum over every
outcome grows with the square of the runs."""
_MAX_STATES = 5000
"""The most distinct sets of task margins the stratified power enumerates."""
"""Outcomes within this factor of the observed one's probability count as no likelier."""


@dataclass(frozen=True)
class Stratum:
    """One task's counts on both sides: k successes of n runs each."""

    k1: int
    n1: int
    k2: int
    n2: int

    def __post_init__(self) -> None:
        for k, n in ((self.k1, self.n1), (self.k2, self.n2)):
            if n < 0 or not 0 <= k <= n:
                raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")


@dataclass(frozen=True)
class Difference:
    """The candidate's rate minus the baseline's, with its 95 % interval."""

    estimate: float
    low: float
    high: float


@lru_cache(maxsize=4096)
def _hypergeometric(n1: int, n2: int, t: int) -> tuple[int, tuple[float, ...]]:
    """P(X = x) for the baseline's successes X given t successes in all: (first x, pmf)."""
    low, high = max(0, t - n2), min(n1, t)
    if n1 + n2 <= _EXACT:
        total = comb(n1 + n2, t)
        return low, tuple(comb(n1, x) * comb(n2, t - x) / total for x in range(low, high + 1))
    base = _log_comb(n1 + n2, t)
    return low, tuple(
        exp(_log_comb(n1, x) + _log_comb(n2, t - x) - base) for x in range(low, high + 1)
    )


def _log_comb(n: int, k: int) -> float:
    return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)


def _two_sided(pmf: Sequence[float], observed: float) -> float:
    # Summed smallest first, exactly as the rejection regions (_rejected,
    # _stratified_rejected) sum them: a p-value at the level itself then falls on the
    # same side of it in the test and in its power, to the last bit.
    ordered = sorted(pmf)
    below = list(accumulate(ordered, initial=0.0))
    return min(1.0, below[bisect_right(ordered, observed * _TIES)])


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test that two rates k1/n1 and k2/n2 are equal."""
    Stratum(k1, n1, k2, n2)
    low, pmf = _hypergeometric(n1, n2, k1 + k2)
    return _two_sided(pmf, pmf[k1 - low])


def stratified_exact(strata: Sequence[Stratum]) -> float:
    """Two-sided p-value of the exact conditional test of no difference in any stratum.

    Given each stratum's margins, the baseline's successes T = sum of k1 has the
    convolution of the strata's hypergeometric distributions; outcomes of T no likelier
    than the observed one make up the p-value. One stratum: Fisher's exact test.
    """
    distribution = [1.0]
    offset = 0
    observed = 0
    # Convolved in the order of the margins, as _stratified_rejected does: the same
    # margins give the same distribution to the last bit, whatever order the tasks came in.
    for s in sorted(strata, key=lambda s: (s.n1, s.n2, s.k1 + s.k2)):
        low, pmf = _hypergeometric(s.n1, s.n2, s.k1 + s.k2)
        combined = [0.0] * (len(distribution) + len(pmf) - 1)
        for i, a in enumerate(distribution):
            if a:
                for j, b in enumerate(pmf):
                    combined[i + j] += a * b
        distribution, offset, observed = combined, offset + low, observed + s.k1
    return _two_sided(distribution, distribution[observed - offset])


def difference_interval(k1: int, n1: int, k2: int, n2: int) -> Difference | None:
    """k2/n2 - k1/n1 with Newcombe's hybrid score interval; None when a side has no runs."""
    one, two = wilson_interval(k1, n1), wilson_interval(k2, n2)
    if one is None or two is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    d = p2 - p1
    low = d - sqrt((p2 - two.low) ** 2 + (one.high - p1) ** 2)
    high = d + sqrt((two.high - p2) ** 2 + (p1 - one.low) ** 2)
    return Difference(estimate=d, low=max(-1.0, low), high=min(1.0, high))


def _binomial(n: int, p: float) -> list[float]:
    if n <= _EXACT:
        return [comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(n + 1)]
    if p in (0.0, 1.0):
        return [float(x == round(p * n)) for x in range(n + 1)]
    lp, lq = log(p), log(1 - p)
    return [exp(_log_comb(n, x) + x * lp + (n - x) * lq) for x in range(n + 1)]


def stratified_difference(strata: Sequence[Stratum]) -> float | None:
    """The Mantel-Haenszel difference of rates (candidate minus baseline) over *strata*:
    each task's difference weighted by n1*n2/(n1+n2). Its sign is the stratified test's
    direction (the baseline's expected successes given the margins minus its observed
    ones), so a verdict word taken from it speaks like the test. None: no stratum has
    runs on both sides."""
    weights = [s.n1 * s.n2 / (s.n1 + s.n2) for s in strata if s.n1 and s.n2]
    if not weights:
        return None
    total = sum(
        w * (s.k2 / s.n2 - s.k1 / s.n1)
        for w, s in zip(weights, [s for s in strata if s.n1 and s.n2], strict=True)
    )
    return total / sum(weights)


def _ratio_pmf(n1: int, n2: int, t: int) -> tuple[int, list[float]]:
    """The hypergeometric pmf of :func:`_hypergeometric` in floats, by the ratio of
    neighbours (rescaled before it can overflow): linear in its length, for the many
    tables a power sums over."""
    low, high = max(0, t - n2), min(n1, t)
    values = [1.0]
    v = 1.0
    for x in range(low, high):
        v *= (n1 - x) * (t - x) / ((x + 1) * (n2 - t + x + 1))
        if v > 1e250:
            values = [u / v for u in values]
            v = 1.0
        values.append(v)
    total = sum(values)
    return low, [u / total for u in values]


@lru_cache(maxsize=64)
def _rejected(n1: int, n2: int, alpha: float) -> tuple[tuple[int, int], ...]:
    """Every outcome (k1, k2) Fisher's test rejects at *alpha*."""
    out = []
    for t in range(n1 + n2 + 1):
        low, pmf = _hypergeometric(n1, n2, t) if n1 + n2 <= 200 else _ratio_pmf(n1, n2, t)
        ordered = sorted(pmf)
        below = list(accumulate(ordered, initial=0.0))
        # The pmf is unimodal: the rejected outcomes are its two tails, so the walk from
        # each end stops at the first outcome kept.
        ends = (range(len(pmf)), range(len(pmf) - 1, -1, -1))
        taken: set[int] = set()
        for walk in ends:
            for i in walk:
                if i in taken or below[bisect_right(ordered, pmf[i] * _TIES)] >= alpha:
                    break
                taken.add(i)
                out.append((low + i, t - low - i))
    return tuple(out)


def power(n1: int, n2: int, p1: float, p2: float, alpha: float = ALPHA) -> float:
    """The chance Fisher's test at *alpha* finds a difference between true rates p1 and p2
    with n1 and n2 runs (exact: summed over every outcome)."""
    if n1 < 1 or n2 < 1:
        return 0.0
    b1, b2 = _binomial(n1, p1), _binomial(n2, p2)
    return min(1.0, sum(b1[k1] * b2[k2] for k1, k2 in _rejected(n1, n2, alpha)))


def stratified_power(
    sizes: Sequence[tuple[int, int]], p1: float, p2: float, alpha: float = ALPHA
) -> float | None:
    """The chance the stratified exact test at *alpha* finds a difference when every task
    (runs *sizes*: n1, n2 each) has the true rates p1 and p2 (exact: summed over every
    outcome); None when the sets of margins to sum over exceed a bound.

    The outcomes are grouped by the multiset of the tasks' margins (the test's null
    distribution depends on nothing else): for each, the chance of every baseline total
    under the rates, and whether the test rejects it.
    """
    sizes = [(a, b) for a, b in sizes if a and b]
    if not sizes:
        return 0.0
    if len(sizes) == 1:
        return power(*sizes[0], p1, p2, alpha)
    states: dict[tuple[tuple[int, int, int], ...], list[float]] = {(): [1.0]}
    for n1, n2 in sorted(sizes):
        b1, b2 = _binomial(n1, p1), _binomial(n2, p2)
        joint = [[b1[k] * b2[t - k] if 0 <= t - k <= n2 else 0.0 for k in range(n1 + 1)]
                 for t in range(n1 + n2 + 1)]  # fmt: skip
        grown: dict[tuple[tuple[int, int, int], ...], list[float]] = {}
        for key, alt in states.items():
            for t, q in enumerate(joint):
                new_key = tuple(sorted((*key, (n1, n2, t))))
                row = grown.setdefault(new_key, [0.0] * (len(alt) + n1))
                for i, a in enumerate(alt):
                    if a:
                        for k, b in enumerate(q):
                            row[i + k] += a * b
        if len(grown) > _MAX_STATES:
            return None
        states = grown
    total = 0.0
    for key, alt in states.items():
        rejected = _stratified_rejected(key, alpha)
        total += sum(alt[x] for x in rejected)
    return min(1.0, total)


@lru_cache(maxsize=8192)
def _stratified_rejected(key: tuple[tuple[int, int, int], ...], alpha: float) -> tuple[int, ...]:
    """The baseline totals the stratified test rejects given the margins *key*."""
    distribution = [1.0]
    offset = 0
    for n1, n2, t in key:
        low, pmf = _hypergeometric(n1, n2, t)
        combined = [0.0] * (len(distribution) + len(pmf) - 1)
        for i, a in enumerate(distribution):
            if a:
                for j, b in enumerate(pmf):
                    combined[i + j] += a * b
        distribution, offset = combined, offset + low
    ordered = sorted(distribution)
    below = list(accumulate(ordered, initial=0.0))
    return tuple(
        offset + i
        for i, p in enumerate(distribution)
        if below[bisect_right(ordered, p * _TIES)] < alpha
    )


def detectable_difference(
    n1: int,
    n2: int,
    baseline: float,
    alpha: float = ALPHA,
    target: float = POWER,
    sizes: Sequence[tuple[int, int]] | None = None,
    limit: int | None = MAX_POWER_RUNS,
) -> float | None:
    """The smallest difference from *baseline* (toward the side with more room, in steps
    of 0.01) the test finds with *target* power; None when none up to the bound is.

    The test is Fisher's on n1 and n2 runs, or, given the tasks' *sizes* (n1, n2 each),
    the stratified test over them at one rate per side. The power grows with the
    difference (the tests' rejection regions are convex), so the step is found by
    bisection. Raises ValueError when the runs are too many for an exact power.
    """
    strata = [(a, b) for a, b in sizes or [(n1, n2)] if a and b]
    if limit is not None and sum(a + b for a, b in strata) > limit:
        raise ValueError(f"more than {limit} runs: no exact power is computed")
    direction = -1.0 if baseline >= 0.5 else 1.0
    room = baseline if direction < 0 else 1.0 - baseline

    def found(step: int) -> bool:
        other = min(1.0, max(0.0, baseline + direction * step / 100))
        p = stratified_power(strata, baseline, other, alpha)
        if p is None:
            raise ValueError("too many sets of task margins for an exact power")
        return p >= target

    low, high = 0, round(room * 100)
    if high == 0 or not found(high):
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if found(middle):
            high = middle
        else:
            low = middle
    return high / 100


class BeyondPlanning(ValueError):
    """More runs than planned for would be needed; *smallest* is the smallest change from
    the baseline (toward the side with more room) the most runs planned for detect (None:
    none)."""

    def __init__(self, limit: int, smallest: float | None) -> None:
        super().__init__(f"more than {limit} runs per side would be needed")
        self.limit = limit
        self.smallest = smallest


def runs_needed(
    baseline: float,
    difference: float,
    alpha: float = ALPHA,
    target: float = POWER,
    limit: int = 400,
) -> int:
    """The fewest runs per side (equal sides) for Fisher's test to find a change of
    *difference* from *baseline* with *target* power.

    Raises:
        ValueError: The rates are not in [0, 1], or the difference is 0.
        BeyondPlanning: More than *limit* runs per side would be needed.
    """
    other = baseline + difference
    if not 0 <= baseline <= 1 or not 0 <= other <= 1 or difference == 0:
        raise ValueError(
            f"need rates in [0, 1] and a non-zero difference, got {baseline} and {other}"
        )
    if power(limit, limit, baseline, other, alpha) < target:
        smallest = detectable_difference(limit, limit, baseline, alpha, target, limit=None)
        raise BeyondPlanning(limit, smallest)

    # The exact power is not monotone in n (a saw-tooth): bisect for the first n that
    # reaches the target and stays there for the next two, a handful of exact powers.
    def holds(n: int) -> bool:
        return all(power(m, m, baseline, other, alpha) >= target for m in (n, n + 1, n + 2))

    low, high = 0, limit
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle
    return high
