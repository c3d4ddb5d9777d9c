"""How much one batch can say: intervals, pass^k and the gate's chance, as pure functions.

A batch is a few dozen runs at most, so a rate read off it is uncertain. Every number the
report prints besides the counts comes from one of these functions, each a
closed formula of its arguments (no randomness, no state), so a test can pin
it against values computed by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb, sqrt

__all__ = [
    "Interval",
    "binomial_tail",
    "pass_hat_k",
    "wilson_interval",
]

Z_95 = 1.959963984540054
"""The standard normal quantile of 0.975: a two-sided 95 % interval."""


@dataclass(frozen=True)
class Interval:
    """A confidence interval for a rate, both ends in [0, 1]."""

    low: float
    high: float


def _check_counts(k: int, n: int) -> None:
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")


def wilson_interval(k: int, n: int, z: float = Z_95) -> Interval | None:
    """The Wilson score interval of the rate k/n; None when n is 0 (nothing observed).

    Unlike the normal approximation it stays inside [0, 1] and does not
    collapse to a point at 0/n or n/n, which is where a batch of a few dozen runs lives.
    """
    _check_counts(k, n)
    if n == 0:
        return None
    p = k / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    # At 0/n and n/n one end is exactly the bound; floating point only nearly says so.
    low = 0.0 if k == 0 else centre - half
    high = 1.0 if k == n else centre + half
    return Interval(low=low, high=high)


def pass_hat_k(c: int, n: int, k: int) -> float | None:
    """The chance that k runs drawn without replacement from n all passed, c of n having passed.

    The unbiased estimate of pass^k (every one of k independent tries passes):
    C(c, k) / C(n, k). With n = k = 3 runs of a task it is 1 when all three
    passed and 0 otherwise. None when fewer than k runs were observed.
    """
    _check_counts(c, n)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if n < k:
        return None
    return comb(c, k) / comb(n, k)


def binomial_tail(p: float, n: int, threshold: int) -> float:
    """P(X >= threshold) for X ~ Binomial(n, p): the chance a true rate p clears a gate.

    For the example's first-submission gate (n = 18, threshold = 15) an agent whose true
    rate is 0.8 passes it about half the time (0.501), one at 0.9 about 90 %
    of the time (0.902).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if threshold <= 0:
        return 1.0
    if threshold > n:
        return 0.0
    return min(1.0, sum(comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(threshold, n + 1)))
