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
from math import comb, sqrt

from agent_eval.report.statistics import wilson_interval

__all__ = [
    "ALPHA",
    "Difference",
    "Stratum",
    "detectable_difference",
    "difference_interval",
    "fisher_exact",
    "power",
    "runs_needed",
    "stratified_exact",
]

ALPHA = 0.05
"""The level of every test: a difference is called only when p < 0.05."""
POWER = 0.8
"""The power a detectable difference is quoted at."""
_TIES = 1 + 1e-7
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
    total = comb(n1 + n2, t)
    return low, tuple(comb(n1, x) * comb(n2, t - x) / total for x in range(low, high + 1))


def _two_sided(pmf: Sequence[float], observed: float) -> float:
    return min(1.0, sum(p for p in pmf if p <= observed * _TIES))


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
    for s in strata:
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
    return [comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(n + 1)]


@lru_cache(maxsize=256)
def _rejected(n1: int, n2: int, alpha: float) -> tuple[tuple[int, int], ...]:
    """Every outcome (k1, k2) Fisher's test rejects at *alpha*."""
    out = []
    for t in range(n1 + n2 + 1):
        low, pmf = _hypergeometric(n1, n2, t)
        ordered = sorted(pmf)
        below = list(accumulate(ordered, initial=0.0))
        for i, p in enumerate(pmf):
            if below[bisect_right(ordered, p * _TIES)] < alpha:
                out.append((low + i, t - low - i))
    return tuple(out)


def power(n1: int, n2: int, p1: float, p2: float, alpha: float = ALPHA) -> float:
    """The chance Fisher's test at *alpha* finds a difference between true rates p1 and p2
    with n1 and n2 runs (exact: summed over every outcome)."""
    if n1 < 1 or n2 < 1:
        return 0.0
    b1, b2 = _binomial(n1, p1), _binomial(n2, p2)
    return min(1.0, sum(b1[k1] * b2[k2] for k1, k2 in _rejected(n1, n2, alpha)))


def detectable_difference(
    n1: int, n2: int, baseline: float, alpha: float = ALPHA, target: float = POWER
) -> float | None:
    """The smallest difference from *baseline* (toward the side with more room, in steps
    of 0.01) Fisher's test finds with *target* power; None when none up to the bound is."""
    direction = -1.0 if baseline >= 0.5 else 1.0
    room = baseline if direction < 0 else 1.0 - baseline
    steps = round(room * 100)
    for step in range(1, steps + 1):
        d = step / 100
        if power(n1, n2, baseline, baseline + direction * d, alpha) >= target:
            return d
    return None


def runs_needed(
    baseline: float,
    difference: float,
    alpha: float = ALPHA,
    target: float = POWER,
    limit: int = 400,
) -> int | None:
    """The fewest runs per side (equal sides) for Fisher's test to find a change of
    *difference* from *baseline* with *target* power; None when more than *limit* are."""
    other = baseline + difference
    if not 0 <= baseline <= 1 or not 0 <= other <= 1 or difference == 0:
        raise ValueError(
            f"need rates in [0, 1] and a non-zero difference, got {baseline} and {other}"
        )
    # The exact power is not monotone in n (a saw-tooth): find the first n that reaches the
    # target and stays there for the next few, by doubling then a linear scan.
    high = 2
    while high <= limit and power(high, high, baseline, other, alpha) < target:
        high *= 2
    start = max(1, high // 2)
    for n in range(start, min(high, limit) + 1):
        if all(power(m, m, baseline, other, alpha) >= target for m in (n, n + 1, n + 2)):
            return n
    return None
