"""Correlations, bootstrap and Wilson intervals: hand-derived values, edges, properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from judge_engine.stats import (
    bootstrap_ci,
    correlation,
    grouped_correlation,
    kendall_tau_b,
    pearson,
    spearman,
    system_level_correlation,
    system_means,
    wilson_interval,
)


def test_kendall_hand_derived() -> None:
    # [1,2,3] vs [1,3,2]: pairs (1,2) C, (1,3) C, (2,3) D -> (2 - 1) / 3
    assert kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    # tau-b with a tie in x: x = [1,1,2], y = [1,2,3]: C = 2, D = 0, tied-in-x pairs 1.
    # tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2)) = 2 / sqrt((3 - 1) * 3) = 0.8165
    assert kendall_tau_b([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))


def test_spearman_and_pearson_hand_derived() -> None:
    # ranks [1,2,3] vs [1,3,2]: d = (0, 1, 1), rho = 1 - 6 * 2 / (3 * 8) = 0.5
    assert spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    # x = [1,2,3], y = [2,4,7]: deviations (-1,0,1), (-2.333,-0.333,2.667);
    # cov = 5, var_x = 2, var_y = 12.667 -> r = 5 / sqrt(25.333) = 0.9934
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 38 / 3))


def test_correlation_edges() -> None:
    for method in ("kendall", "spearman", "pearson"):
        assert math.isnan(correlation([], [], method=method))  # type: ignore[arg-type]
        assert math.isnan(correlation([1], [2], method=method))  # type: ignore[arg-type]
        assert math.isnan(correlation([1, 1, 1], [1, 2, 3], method=method))  # type: ignore[arg-type]
    # pairs with a missing side are dropped
    assert kendall_tau_b([1, None, 3, 2], [1, 5, 3, math.nan]) == 1.0
    with pytest.raises(ValueError, match="same length"):
        kendall_tau_b([1, 2], [1])
    with pytest.raises(ValueError, match="method"):
        correlation([1, 2], [1, 2], method="tau")  # type: ignore[arg-type]


def test_grouped_and_system_level() -> None:
    x = [1, 2, 3, 1, 2, 3]
    y = [1, 2, 3, 3, 2, 1]
    groups = ["a", "a", "a", "b", "b", "b"]
    assert grouped_correlation(x, y, groups) == {"a": (1.0, 3), "b": (-1.0, 3)}
    # system means: s1 = (1+2)/2, s2 = (3+1)/2 ... x: s1 1.5, s2 2, s3 2.5; y: s1 1.5, s2 3, s3 1.5
    systems = ["s1", "s1", "s2", "s2", "s3", "s3"]
    assert system_means(x, systems) == {"s1": 1.5, "s2": 2.0, "s3": 2.5}
    tau, n = system_level_correlation(x, y, systems)
    # x strictly increasing, y = (1.5, 3, 1.5): C = 1 (s1,s2), D = 1 (s2,s3), tie (s1,s3) in y
    # tau_b = 0 / sqrt(3 * 2) = 0
    assert n == 3 and tau == pytest.approx(0.0)


def test_bootstrap_ci() -> None:
    x = list(range(30))
    y = [v + (3 if v % 2 else -3) for v in x]
    low, high = bootstrap_ci(kendall_tau_b, x, y, n_resamples=200, seed=1)
    point = kendall_tau_b(x, y)
    assert low <= point <= high <= 1
    assert bootstrap_ci(kendall_tau_b, x, y, n_resamples=200, seed=1) == (low, high)  # seeded
    assert all(math.isnan(v) for v in bootstrap_ci(kendall_tau_b, [], []))
    assert all(math.isnan(v) for v in bootstrap_ci(kendall_tau_b, [1, 1], [2, 2]))  # all NaN
    with pytest.raises(ValueError):
        bootstrap_ci(kendall_tau_b, [1, 2], [1])
    with pytest.raises(ValueError):
        bootstrap_ci(kendall_tau_b, [1, 2], [1, 2], confidence=1.5)


def test_wilson_interval() -> None:
    # 50/100, z = 1.95996: centre 0.5, half-width 0.0962 (arithmetic in the docstring)
    low, high = wilson_interval(50, 100)
    assert (low, high) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    from scipy.stats import binomtest

    for k, n in ((0, 10), (3, 17), (17, 17)):
        ref = binomtest(k, n).proportion_ci(method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ref.low, ref.high))
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(5, 3)


floats = st.floats(-100, 100, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(floats, floats), min_size=0, max_size=20))
def test_correlations_symmetric_and_bounded(pairs: list[tuple[float, float]]) -> None:
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    for method in ("kendall", "spearman", "pearson"):
        a = correlation(x, y, method=method)  # type: ignore[arg-type]
        b = correlation(y, x, method=method)  # type: ignore[arg-type]
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, abs_tol=1e-9)
        assert math.isnan(a) or -1 - 1e-9 <= a <= 1 + 1e-9
