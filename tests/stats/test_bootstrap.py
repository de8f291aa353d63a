"""Vectorised bootstrap of kappa, alpha and ICC: the weighted forms equal the plain statistics on
every resample, hand-derived bootstrap distributions, published values, speed, edges."""

from __future__ import annotations

import math
import time

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from judge_engine.stats.agreement import (
    ICC_FORMS,
    cohen_kappa,
    fleiss_kappa,
    icc,
    krippendorff_alpha,
    randolph_kappa,
)
from judge_engine.stats.bootstrap import (
    Alpha,
    Fleiss,
    Icc,
    Kappa,
    Randolph,
    bootstrap_interval,
    bootstrap_values,
    percentile_interval,
    point,
)
from tests.stats.test_agreement import FLEISS_TABLE, KRIPPENDORFF, SHROUT_FLEISS


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def weights_of(index: list[int], n: int) -> np.ndarray:
    """The weight row of one resample: how often each of the n items was drawn."""
    return np.bincount(index, minlength=n)[None, :].astype(float)


@pytest.mark.parametrize(("level", "published"),
                         [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])  # fmt: skip
def test_alpha_published(level: str, published: float) -> None:
    # Krippendorff (2011): the 4 observers x 12 units example.
    assert round(point(Alpha(KRIPPENDORFF, level=level)), 3) == published  # type: ignore[arg-type]


def test_icc_fleiss_randolph_kappa_points_match_the_plain_functions() -> None:
    for form in ICC_FORMS:  # Shrout & Fleiss (1979): .17 .29 .71 .44 .62 .91
        assert point(Icc(SHROUT_FLEISS, form=form)) == pytest.approx(icc(SHROUT_FLEISS, form=form))
    # Fleiss (1971): P-bar 0.378, P_e 0.213 -> 0.210; Randolph (P-bar - 1/5) / (4/5) = 0.2225
    assert point(Fleiss(FLEISS_TABLE)) == pytest.approx(0.20993, abs=1e-5)
    assert point(Randolph(FLEISS_TABLE)) == pytest.approx(randolph_kappa(FLEISS_TABLE))
    # a = [1,1,2,2], b = [1,2,2,2]: p_o = 3/4, p_e = (2/4)(1/4) + (2/4)(3/4) = 1/2 -> kappa 0.5
    assert point(Kappa([1, 1, 2, 2], [1, 2, 2, 2])) == pytest.approx(0.5)


def test_randolph_bootstrap_distribution_hand_derived() -> None:
    # Two items, two raters, k = 2: item A agrees (P = 1), item B does not (P = 0).
    # kappa_free = (P-bar - 1/2) / (1/2) = 2 P-bar - 1 over a resample of two draws:
    # AA -> 1 (prob 1/4), AB or BA -> 0 (1/2), BB -> -1 (1/4).
    values = bootstrap_values(Randolph([[2, 0], [1, 1]]), n_resamples=4000, seed=1)
    assert set(np.unique(values)) == {-1.0, 0.0, 1.0}
    shares = [float(np.mean(values == v)) for v in (-1.0, 0.0, 1.0)]
    assert shares == pytest.approx([0.25, 0.5, 0.25], abs=0.03)
    assert percentile_interval(values) == (-1.0, 1.0)


def test_percentile_interval_hand_derived() -> None:
    # 0..100: numpy's linear percentiles at 2.5 and 97.5 are 2.5 and 97.5; NaN left out.
    assert percentile_interval([*range(101), math.nan]) == pytest.approx((2.5, 97.5))
    low, high = percentile_interval([math.nan])
    assert math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError):
        percentile_interval([1.0], confidence=1.0)


def test_perfect_agreement_interval_is_a_point_and_seeds_reproduce() -> None:
    a = [1, 2, 3, 1, 2, 3, 1, 2]
    # Every resample of perfectly agreeing pairs has kappa 1 (or NaN when one label is left).
    assert bootstrap_interval(Kappa(a, a), n_resamples=200) == (1.0, 1.0)
    x = [[1, 2], [2, 2], [3, 4], [4, 3], [5, 5], [2, 1]]
    one = bootstrap_interval(Icc(x, form="ICC(3,1)"), seed=7)
    assert one == bootstrap_interval(Icc(x, form="ICC(3,1)"), seed=7)
    assert one != bootstrap_interval(Icc(x, form="ICC(3,1)"), seed=8)
    low, high = one
    assert low <= point(Icc(x, form="ICC(3,1)")) <= high


def test_edges() -> None:
    for statistic in (Kappa([], []), Alpha([[1, None]]), Icc([[1, 2]]), Fleiss([[1, 0]])):
        assert math.isnan(point(statistic))
        low, high = bootstrap_interval(statistic, n_resamples=10)
        assert math.isnan(low) and math.isnan(high)
    assert math.isnan(point(Alpha([[1, 1], [1, 1]])))  # one value: no expected disagreement
    assert math.isnan(point(Fleiss([[2, 0], [2, 0]])))  # one category: chance agreement 1
    assert math.isnan(point(Randolph([[2], [2]])))  # k = 1
    with pytest.raises(ValueError):
        bootstrap_values(Icc(SHROUT_FLEISS), n_resamples=0)
    with pytest.raises(ValueError):
        Alpha([[1, 2]], level="ratio")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Kappa([1], [4], categories=[1, 2])
    with pytest.raises(ValueError):
        Fleiss([[1, 1], [2, 1]])


def test_a_thousand_resamples_of_two_thousand_items_take_well_under_seconds() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(1, 6, size=(2000, 3)).astype(float)
    continuous = rng.normal(size=(2000, 3)).round(2)  # ~500 distinct values for ordinal alpha
    started = time.perf_counter()
    for statistic in (Alpha(x, level="ordinal"), Alpha(continuous, level="ordinal"),
                      Alpha(x, level="interval"), Icc(x, form="ICC(2,1)"),
                      Kappa(x[:, 0].tolist(), x[:, 1].tolist(), weights="quadratic")):  # fmt: skip
        low, high = bootstrap_interval(statistic, n_resamples=1000)
        assert low <= point(statistic) <= high
    assert time.perf_counter() - started < 5


labels = st.lists(st.lists(st.one_of(st.none(), st.integers(1, 4)), min_size=3, max_size=3),
                  min_size=2, max_size=12)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(labels, st.data())
def test_alpha_under_weights_equals_alpha_of_the_resample(
    m: list[list[int | None]], data: st.DataObject
) -> None:
    for level in ("nominal", "ordinal", "interval"):
        statistic = Alpha(m, level=level)  # type: ignore[arg-type]
        units = [r for r in m if sum(v is not None for v in r) >= 2]
        if not units:
            continue
        index = data.draw(st.lists(st.integers(0, len(units) - 1), min_size=len(units),
                                   max_size=len(units)))  # fmt: skip
        resample = [units[i] for i in index]
        got = float(statistic.values(weights_of(index, len(units)))[0])
        # The krippendorff package is the oracle (value_domain keeps the ordinal scale).
        values = sorted({v for r in resample for v in r if v is not None})
        try:
            want = krippendorff.alpha(
                reliability_data=np.array(resample, dtype=float).T,
                level_of_measurement=level, value_domain=values if level != "interval" else None,
            )  # fmt: skip
        except ValueError:
            want = math.nan
        assert same(got, float(want)), (level, resample)
        assert same(krippendorff_alpha(resample, level=level), float(want))  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3), min_size=2, max_size=10),
       st.data())  # fmt: skip
def test_icc_and_fleiss_under_weights_equal_the_resample(
    m: list[list[int]], data: st.DataObject
) -> None:
    index = data.draw(st.lists(st.integers(0, len(m) - 1), min_size=len(m), max_size=len(m)))
    resample = [m[i] for i in index]
    w = weights_of(index, len(m))
    for form in ICC_FORMS:
        assert same(float(Icc(m, form=form).values(w)[0]), icc(resample, form=form)), form
    table = [[row.count(c) for c in range(7)] for row in m]
    assert same(float(Fleiss(table).values(w)[0]), fleiss_kappa([table[i] for i in index]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=15),
       st.data())  # fmt: skip
def test_kappa_under_weights_equals_the_resample(
    pairs: list[tuple[int, int]], data: st.DataObject
) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    index = data.draw(st.lists(st.integers(0, len(a) - 1), min_size=len(a), max_size=len(a)))
    w = weights_of(index, len(a))
    cats = sorted({*a, *b})  # the full sample's scale, kept in every resample
    for weights in (None, "linear", "quadratic"):
        got = float(Kappa(a, b, weights=weights).values(w)[0])  # type: ignore[arg-type]
        want = cohen_kappa([a[i] for i in index], [b[i] for i in index], weights=weights,  # type: ignore[arg-type]
                           categories=cats)  # fmt: skip
        assert same(got, want)
        assert -1 - 1e-9 <= got <= 1 + 1e-9 or math.isnan(got)
