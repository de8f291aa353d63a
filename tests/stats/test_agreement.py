"""Agreement statistics: published and hand-derived values, edge cases, properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings, strategies as st

from judge_engine.stats import (
    category_counts,
    cohen_kappa,
    fleiss_kappa,
    icc,
    krippendorff_alpha,
    percent_agreement,
    randolph_kappa,
)

# Shrout & Fleiss (1979), Table 2: 6 targets x 4 judges. Published: ICC(1,1)=.17, ICC(2,1)=.29,
# ICC(3,1)=.71, ICC(1,4)=.44, ICC(2,4)=.62, ICC(3,4)=.91 (BMS 11.24, WMS 6.26, JMS 32.49,
# EMS 1.02).
SHROUT_FLEISS = [
    [9, 2, 5, 8],
    [6, 1, 3, 2],
    [8, 4, 6, 8],
    [7, 1, 2, 6],
    [10, 5, 6, 9],
    [6, 2, 4, 7],
]

# Fleiss (1971) as reproduced on Wikipedia: 10 items, 14 raters, 5 categories.
# P-bar = 0.378, P_e = 0.213 -> kappa = 0.210.
FLEISS_TABLE = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]  # fmt: skip

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 4 observers x 12 units,
# here items x raters. Published: nominal .743, ordinal .815, interval .849, ratio .797.
N = None
KRIPPENDORFF = [
    [1, 1, N, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [N, 5, 5, 5], [N, N, 1, 1], [N, 3, N, N],
]  # fmt: skip


@pytest.mark.parametrize(
    ("form", "published"),
    [("ICC(1,1)", 0.17), ("ICC(2,1)", 0.29), ("ICC(3,1)", 0.71),
     ("ICC(1,k)", 0.44), ("ICC(2,k)", 0.62), ("ICC(3,k)", 0.91)],
)  # fmt: skip
def test_icc_shrout_fleiss(form: str, published: float) -> None:
    assert icc(SHROUT_FLEISS, form=form) == pytest.approx(published, abs=0.005)  # type: ignore[arg-type]


def test_icc_edge_cases() -> None:
    assert math.isnan(icc([[1, 2]]))  # one item
    assert math.isnan(icc([[1], [2], [3]]))  # one rater
    assert math.isnan(icc([[3, 3], [3, 3]]))  # constant: 0 / 0
    # a row with a missing rating is dropped: same as the complete rows alone
    assert icc([*SHROUT_FLEISS, [1, None, 2, 3]]) == icc(SHROUT_FLEISS)
    with pytest.raises(ValueError, match="form"):
        icc(SHROUT_FLEISS, form="ICC(4,1)")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        icc([1, 2, 3])


def test_fleiss_and_randolph_published() -> None:
    assert fleiss_kappa(FLEISS_TABLE) == pytest.approx(0.210, abs=0.0005)
    # Randolph: (P-bar - 1/5) / (1 - 1/5) = (0.37802 - 0.2) / 0.8 = 0.2225
    assert randolph_kappa(FLEISS_TABLE) == pytest.approx(0.2225, abs=0.0001)


def test_fleiss_hand_derived() -> None:
    # 2 items, 2 raters: item 1 both "a", item 2 one "a" one "b".
    # P_1 = 1, P_2 = 0 -> P-bar 0.5; p_a = 3/4, p_b = 1/4 -> P_e = 10/16; kappa = -1/3.
    assert fleiss_kappa([[2, 0], [1, 1]]) == pytest.approx(-1 / 3)
    # free marginal, k = 2: (0.5 - 0.5) / 0.5 = 0; with k = 4: (0.5 - .25) / .75 = 1/3
    assert randolph_kappa([[2, 0], [1, 1]]) == pytest.approx(0.0)
    assert randolph_kappa([[2, 0], [1, 1]], n_categories=4) == pytest.approx(1 / 3)


def test_multirater_edge_cases() -> None:
    assert math.isnan(fleiss_kappa([]))
    assert math.isnan(fleiss_kappa([[3, 0], [3, 0]]))  # one category used: P_e = 1
    assert randolph_kappa([[3, 0], [3, 0]]) == 1.0  # free marginal: full agreement is 1
    assert math.isnan(fleiss_kappa([[1, 0], [0, 1]]))  # a single rater per item
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 0], [1, 2]])


def test_category_counts() -> None:
    table, cats = category_counts([["a", "b"], ["a", None]])
    assert cats == ["a", "b"]
    assert table.tolist() == [[1, 1], [1, 0]]


def test_cohen_kappa_hand_derived() -> None:
    # a = [1,1,2,2], b = [1,2,2,2]: p_o = 3/4; marginals a (1/2, 1/2), b (1/4, 3/4)
    # p_e = 1/8 + 3/8 = 1/2 -> kappa = (3/4 - 1/2) / (1/2) = 0.5
    assert cohen_kappa([1, 1, 2, 2], [1, 2, 2, 2]) == pytest.approx(0.5)
    # Weighted, a = [1,2,3], b = [1,2,3] shifted: b = [2,3,1]. Categories 1..3, linear w = |i-j|.
    # observed disagreement: (1 + 1 + 2) / 3 = 4/3; expected (uniform marginals):
    # mean |i-j| over 9 cells = (0+1+2+1+0+1+2+1+0)/9 = 8/9 -> kappa = 1 - (4/3)/(8/9) = -0.5
    assert cohen_kappa([1, 2, 3], [2, 3, 1], weights="linear") == pytest.approx(-0.5)
    # quadratic: observed (1+1+4)/3 = 2; expected (0+1+4+1+0+1+4+1+0)/9 = 12/9 -> 1 - 1.5 = -0.5
    assert cohen_kappa([1, 2, 3], [2, 3, 1], weights="quadratic") == pytest.approx(-0.5)
    assert cohen_kappa([1, 2, 3], [1, 2, 3], weights="quadratic") == 1.0


def test_cohen_kappa_edge_cases() -> None:
    assert math.isnan(cohen_kappa([], []))
    assert math.isnan(cohen_kappa(["a", "a"], ["a", "a"]))  # constant: p_e = 1
    assert cohen_kappa(["a", None, "b"], ["a", "b", "b"]) == 1.0  # missing pair dropped
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa([1], [1, 2])
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([1], [1], weights="cubic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="categories"):
        cohen_kappa([1, 3], [1, 2], categories=[1, 2])


@pytest.mark.parametrize(
    ("level", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_krippendorff_published(level: str, published: float) -> None:
    assert krippendorff_alpha(KRIPPENDORFF, level=level) == pytest.approx(published, abs=0.0005)  # type: ignore[arg-type]


def test_krippendorff_hand_derived_and_edges() -> None:
    # 2 raters, 4 items: (a,a), (a,b), (b,b), (b,b). n = 8 values, n_a = 3, n_b = 5,
    # disagreeing coincidences o_ab + o_ba = 2 -> alpha = 1 - (n-1) * 2 / (2 * n_a * n_b)
    # = 1 - 7 * 2 / 30 = 0.5333
    assert krippendorff_alpha([["a", "a"], ["a", "b"], ["b", "b"], ["b", "b"]]) == pytest.approx(
        8 / 15
    )
    assert math.isnan(krippendorff_alpha([]))
    assert math.isnan(krippendorff_alpha([[1], [2], [3]]))  # a single rater
    assert math.isnan(krippendorff_alpha([[2, 2], [2, 2]]))  # one value only
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha([[1, 2]], level="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rectangular"):
        krippendorff_alpha([[1, 2], [1]])


def test_percent_agreement() -> None:
    # item 1: 3 raters agree (1); item 2: a, a, b -> 1 agreeing pair of 3 (1/3); mean 2/3
    assert percent_agreement([["a", "a", "a"], ["a", "a", "b"]]) == pytest.approx(2 / 3)
    assert percent_agreement([[1, 1], [1, 2]]) == 0.5
    assert math.isnan(percent_agreement([]))
    assert math.isnan(percent_agreement([[1, None]]))


labels = st.sampled_from(["a", "b", "c", "d"])
matrices = st.integers(2, 4).flatmap(
    lambda raters: st.lists(
        st.lists(labels, min_size=raters, max_size=raters), min_size=2, max_size=12
    )
)
RELABEL = {"a": "x", "b": "w", "c": "z", "d": "y"}


@settings(max_examples=60, deadline=None)
@given(matrices)
def test_kappas_and_alpha_bounded(m: list[list[str]]) -> None:
    table, _ = category_counts(m)
    a, b = [r[0] for r in m], [r[1] for r in m]
    for value in (
        cohen_kappa(a, b),
        cohen_kappa(a, b, weights="quadratic"),
        fleiss_kappa(table),
        randolph_kappa(table),
        krippendorff_alpha(m),
        krippendorff_alpha(m, level="ordinal"),
    ):
        assert math.isnan(value) or -1 - 1e-9 <= value <= 1 + 1e-9


@settings(max_examples=60, deadline=None)
@given(matrices)
def test_relabelling_and_rater_order_invariance(m: list[list[str]]) -> None:
    relabelled = [[RELABEL[v] for v in r] for r in m]
    reversed_raters = [list(reversed(r)) for r in m]
    a, b = [r[0] for r in m], [r[1] for r in m]
    ra, rb = [RELABEL[v] for v in a], [RELABEL[v] for v in b]
    assert _same(cohen_kappa(a, b), cohen_kappa(ra, rb))
    assert _same(cohen_kappa(a, b), cohen_kappa(b, a))
    assert _same(fleiss_kappa(category_counts(m)[0]), fleiss_kappa(category_counts(relabelled)[0]))
    assert _same(krippendorff_alpha(m), krippendorff_alpha(relabelled))
    assert _same(krippendorff_alpha(m), krippendorff_alpha(reversed_raters))
    assert _same(
        fleiss_kappa(category_counts(m)[0]), fleiss_kappa(category_counts(reversed_raters)[0])
    )
    assert _same(percent_agreement(m), percent_agreement(reversed_raters))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(1, 5), min_size=3, max_size=3), min_size=3, max_size=10))
@example(m=[[1, 2, 4], [2, 2, 1], [2, 4, 1]])  # ICC(2,k)'s denominator is 0 up to rounding here
def test_icc_rater_order_invariance(m: list[list[int]]) -> None:
    swapped = [[r[2], r[0], r[1]] for r in m]
    for form in ("ICC(2,1)", "ICC(3,1)", "ICC(2,k)", "ICC(3,k)"):
        assert _same(icc(m, form=form), icc(swapped, form=form))  # type: ignore[arg-type]
        value = icc(m, form=form)  # type: ignore[arg-type]
        assert math.isnan(value) or value <= 1 + 1e-9


def _same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, abs_tol=1e-9)
