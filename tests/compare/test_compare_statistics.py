"""The comparison's statistics, pinned to values computed by hand and to published ones."""

from __future__ import annotations

import math

import pytest
import scipy.stats as scipy_stats
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent_eval.compare.statistics import (
    BeyondPlanning,
    Stratum,
    detectable_difference,
    difference_interval,
    fisher_exact,
    power,
    runs_needed,
    stratified_difference,
    stratified_exact,
    stratified_power,
)


def test_fisher_exact_matches_the_tea_tasting_and_the_textbook_table() -> None:
    # Lady tasting tea: 3 of 4 right each way; the hypergeometric gives 1+16+36+16+1 = 70.
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(34 / 70)
    # Men 1 of 12 dieting, women 9 of 12: the two-sided p of the textbook example.
    assert fisher_exact(1, 12, 9, 12) == pytest.approx(0.002759456, rel=1e-6)
    assert fisher_exact(3, 3, 0, 3) == pytest.approx(0.1)  # 2 * 1/20
    assert fisher_exact(5, 5, 5, 5) == 1.0


def test_the_stratified_test_of_one_task_is_fisher_s_and_of_many_is_their_convolution() -> None:
    assert stratified_exact([Stratum(3, 4, 1, 4)]) == pytest.approx(fisher_exact(3, 4, 1, 4))
    # Six tasks, 3/3 against 0/3 each: the baseline's total is 18 of the 18 possible only
    # when every task is 3/3, probability (1/20)^6; as unlikely: 0 of 18. Two-sided:
    assert stratified_exact([Stratum(3, 3, 0, 3)] * 6) == pytest.approx(2 * (1 / 20) ** 6)
    # Tasks where both sides agree add nothing to the evidence of a difference.
    assert stratified_exact([Stratum(3, 3, 0, 3), Stratum(3, 3, 3, 3)]) == pytest.approx(0.1)


def test_newcombe_s_interval_matches_his_published_example() -> None:
    # Newcombe (1998), method 10, 56/70 against 48/80: 0.2000 (0.0524, 0.3339).
    d = difference_interval(48, 80, 56, 70)
    assert d is not None
    assert (round(d.estimate, 4), round(d.low, 4), round(d.high, 4)) == (0.2, 0.0524, 0.3339)
    assert difference_interval(0, 0, 1, 1) is None


def test_exact_power_is_summed_over_every_outcome() -> None:
    # One run a side can never be significant.
    assert power(1, 1, 0.0, 1.0) == 0.0
    # Three a side: only 3/3 against 0/3 (p = 0.1) comes close, and it is not below 0.05.
    assert power(3, 3, 1.0, 0.0) == 0.0
    # Four a side: only 4/4 against 0/4 (p = 2/70) is rejected; at rates 1 and 0 it is certain.
    assert power(4, 4, 1.0, 0.0) == pytest.approx(1.0)
    assert power(4, 4, 0.9, 0.1) == pytest.approx(0.9**8)


def test_what_a_batch_can_detect_and_how_many_runs_a_change_needs() -> None:
    assert detectable_difference(18, 18, 1.0) == pytest.approx(0.35)
    assert detectable_difference(3, 3, 1.0) is None  # three runs can show nothing
    # Published sample sizes for Fisher's test at 5 %, 80 % power: about 103 per side for
    # 0.5 against 0.7 and about 219 for 0.8 against 0.9 (normal approximation with
    # continuity correction); the exact test's counts are within a few runs of them.
    assert runs_needed(0.5, 0.2) == 102
    assert runs_needed(0.8, 0.1) == 214
    with pytest.raises(ValueError, match="non-zero"):
        runs_needed(0.5, 0.0)
    with pytest.raises(BeyondPlanning) as beyond:
        runs_needed(0.5, 1e-9)
    # 400 a side detect 11 points from one half (normal approximation: about 10).
    assert beyond.value.smallest == pytest.approx(0.11)


@given(st.integers(0, 12), st.integers(1, 12), st.integers(0, 12), st.integers(1, 12))
def test_p_values_are_probabilities_and_the_interval_holds_the_estimate(
    k1: int, n1: int, k2: int, n2: int
) -> None:
    k1, k2 = min(k1, n1), min(k2, n2)
    p = fisher_exact(k1, n1, k2, n2)
    assert 0.0 < p <= 1.0
    assert stratified_exact([Stratum(k1, n1, k2, n2)]) == pytest.approx(p)
    d = difference_interval(k1, n1, k2, n2)
    assert d is not None and -1.0 <= d.low <= d.estimate <= d.high <= 1.0
    assert math.isclose(fisher_exact(k2, n2, k1, n1), p)  # symmetric in the sides


def test_a_hundred_thousand_runs_a_side_do_not_overflow() -> None:
    p = fisher_exact(30_000, 100_000, 31_000, 100_000)
    assert 0.0 < p < 1e-4
    assert stratified_exact([Stratum(30_000, 100_000, 31_000, 100_000)]) == pytest.approx(p)
    assert stratified_exact([Stratum(500, 1_500, 500, 1_500)]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no exact power"):
        detectable_difference(100_000, 100_000, 0.5)


def test_the_stratified_estimate_speaks_for_the_stratified_test() -> None:
    # A task both sides find easy on one side only would turn the crude pooled difference
    # around; the Mantel-Haenszel difference keeps the tested task's direction.
    assert stratified_difference([Stratum(0, 10, 7, 10)]) == pytest.approx(0.7)
    assert stratified_difference([Stratum(9, 10, 1, 2), Stratum(0, 2, 0, 10)]) == pytest.approx(
        (10 / 6 * (0.5 - 0.9)) / (10 / 6 + 10 / 6)
    )
    assert stratified_difference([Stratum(3, 3, 0, 0)]) is None


def test_what_the_stratified_test_can_detect_is_its_own_power() -> None:
    # 18 against 18 in six tasks of three runs, from 100 %: Fisher's test on the pooled
    # counts would detect 35 points; the stratified test actually run needs 40.
    assert detectable_difference(18, 18, 1.0) == pytest.approx(0.35)
    assert detectable_difference(18, 18, 1.0, sizes=[(3, 3)] * 6) == pytest.approx(0.40)
    assert stratified_power([(4, 4)], 1.0, 0.0) == pytest.approx(power(4, 4, 1.0, 0.0))
    # Two tasks of four: 8/8 against 0/8 at rates 1 and 0 is certain and rejected.
    assert stratified_power([(4, 4), (4, 4)], 1.0, 0.0) == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=3),
    st.floats(0, 1),
    st.floats(0, 1),
)
# Outcomes whose p-value is the level itself: summed in another order, the test and its
# power put them on different sides of it.
@example([(1, 3), (3, 4), (2, 3)], 0.5, 0.5)
def test_stratified_power_is_a_probability_summed_over_every_outcome(
    sizes: list[tuple[int, int]], p1: float, p2: float
) -> None:
    found = stratified_power(sizes, p1, p2)
    assert found is not None and 0.0 <= found <= 1.0
    # Brute force over every outcome of every task.
    import itertools

    outcomes = [itertools.product(range(a + 1), range(b + 1)) for a, b in sizes]
    total = 0.0
    for combo in itertools.product(*outcomes):
        chance = 1.0
        for (k1, k2), (a, b) in zip(combo, sizes, strict=True):
            chance *= math.comb(a, k1) * p1**k1 * (1 - p1) ** (a - k1)
            chance *= math.comb(b, k2) * p2**k2 * (1 - p2) ** (b - k2)
        strata = [Stratum(k1, a, k2, b) for (k1, k2), (a, b) in zip(combo, sizes, strict=True)]
        if stratified_exact(strata) < 0.05:
            total += chance
    assert found == pytest.approx(total, abs=1e-12)


@given(st.integers(0, 40), st.integers(1, 40), st.integers(0, 40), st.integers(1, 40))
def test_fisher_s_test_equals_scipy_s(k1: int, n1: int, k2: int, n2: int) -> None:
    k1, k2 = min(k1, n1), min(k2, n2)
    expected = scipy_stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
    assert fisher_exact(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-12, abs=4e-16)
