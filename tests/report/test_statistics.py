"""Each statistic the report prints is a closed formula, pinned here against hand-computed values.

Wilson 95 % intervals (15/18 is 0.608-0.942), the unbiased pass^k estimate
(with three runs of a task: 1 when all three passed, else 0), and the binomial
chance that an agent with true first-try rate p clears the >= 15/18 gate
(0.501 at p = 0.8, 0.902 at p = 0.9).
"""

from __future__ import annotations

import pytest

from agent_eval.report.statistics import Interval, binomial_tail, pass_hat_k, wilson_interval


def rounded(interval: Interval | None, places: int = 3) -> tuple[float, float]:
    assert interval is not None
    return round(interval.low, places), round(interval.high, places)


def test_the_wilson_interval_of_15_of_18_is_0_608_to_0_942() -> None:
    assert rounded(wilson_interval(15, 18)) == (0.608, 0.942)


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        (18, 18, (0.824, 1.0)),
        (0, 18, (0.0, 0.176)),
        (9, 18, (0.290, 0.710)),
        (3, 3, (0.439, 1.0)),
        (0, 10, (0.0, 0.278)),
        (1, 1, (0.207, 1.0)),
    ],
)
def test_the_wilson_interval_matches_known_values(
    k: int, n: int, expected: tuple[float, float]
) -> None:
    assert rounded(wilson_interval(k, n)) == expected


def test_the_wilson_interval_is_symmetric_and_contains_the_observed_rate() -> None:
    for n in range(1, 40):
        for k in range(n + 1):
            interval = wilson_interval(k, n)
            mirror = wilson_interval(n - k, n)
            assert interval is not None and mirror is not None
            assert 0.0 <= interval.low <= k / n <= interval.high <= 1.0
            assert interval.low == pytest.approx(1 - mirror.high)


def test_no_observation_has_no_interval() -> None:
    assert wilson_interval(0, 0) is None


@pytest.mark.parametrize(("k", "n"), [(-1, 3), (4, 3), (0, -1)])
def test_counts_outside_zero_to_n_are_refused(k: int, n: int) -> None:
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson_interval(k, n)


@pytest.mark.parametrize(("c", "expected"), [(3, 1.0), (2, 0.0), (1, 0.0), (0, 0.0)])
def test_pass_hat_3_of_three_runs_is_whether_all_three_passed(c: int, expected: float) -> None:
    assert pass_hat_k(c, 3, 3) == expected


def test_pass_hat_k_is_the_unbiased_estimate_over_more_runs() -> None:
    # C(4,3)/C(5,3) = 4/10; C(5,2)/C(6,2) = 10/15; pass^1 is the plain rate.
    assert pass_hat_k(4, 5, 3) == pytest.approx(0.4)
    assert pass_hat_k(5, 6, 2) == pytest.approx(2 / 3)
    assert pass_hat_k(2, 3, 1) == pytest.approx(2 / 3)


def test_pass_hat_k_needs_at_least_k_runs() -> None:
    assert pass_hat_k(2, 2, 3) is None
    with pytest.raises(ValueError, match="k must be at least 1"):
        pass_hat_k(1, 3, 0)


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.8, 0.5010),
        (0.9, 0.9018),
        (15 / 18, 0.6479),
        (0.7, 0.1646),
        (0.95, 0.9891),
        (0.5, 0.0038),
        (0.0, 0.0),
        (1.0, 1.0),
    ],
)
def test_the_chance_of_clearing_15_of_18_at_a_true_rate(p: float, expected: float) -> None:
    assert round(binomial_tail(p, 18, 15), 4) == expected


def test_a_gate_of_every_run_is_p_to_the_n_and_no_gate_is_certain() -> None:
    assert binomial_tail(0.9, 18, 18) == pytest.approx(0.9**18)
    assert binomial_tail(0.3, 18, 0) == 1.0
    assert binomial_tail(0.99, 18, 19) == 0.0


@pytest.mark.parametrize("p", [-0.1, 1.1])
def test_a_rate_outside_zero_to_one_is_refused(p: float) -> None:
    with pytest.raises(ValueError, match="p must be in"):
        binomial_tail(p, 18, 15)
