"""Agreement between raters: kappas, Krippendorff's alpha, ICC, percent agreement (exact, or within
a tolerance).

Conventions shared by every function here:

* A *ratings matrix* is items x raters (one row per item, one column per rater); ``None`` or NaN
  marks a missing rating.
* A statistic that is undefined for the data (no items, a single rater, no variation so the
  chance term is degenerate) is returned as NaN. Malformed input (ragged rows, unequal lengths,
  unknown options) raises ``ValueError``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal, SupportsFloat, cast

import numpy as np

from judge_engine.stats._arrays import (
    FloatArray,
    as_float_array,
    is_missing,
    paired_labels,
    ratings_matrix,
)

Weights = Literal["linear", "quadratic"] | None
AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
IccForm = Literal["ICC(1,1)", "ICC(2,1)", "ICC(3,1)", "ICC(1,k)", "ICC(2,k)", "ICC(3,k)"]


def percent_agreement(ratings: Sequence[Sequence[Hashable]]) -> float:
    """Observed agreement: the mean, over items, of the share of rater pairs that agree.

    With two raters this is the share of items on which they give the same label. Items with
    fewer than two ratings are skipped.

    Args:
        ratings: items x raters labels (``None``/NaN = missing).

    Returns:
        A value in [0, 1], or NaN when no item has two ratings.
    """
    shares = []
    for row in ratings_matrix(ratings):
        labels = [v for v in row if not is_missing(v)]
        m = len(labels)
        if m < 2:
            continue
        counts = np.array([labels.count(v) for v in set(labels)], dtype=float)
        shares.append(float((counts * (counts - 1)).sum() / (m * (m - 1))))
    return float(np.mean(shares)) if shares else math.nan


def agreement_within(ratings: Sequence[Sequence[float | None]], tolerance: float = 1.0) -> float:
    """Agreement within ``tolerance``: the mean, over items, of the share of rater pairs whose
    numbers differ by at most ``tolerance`` (on a 1-10 grade, 8 and 9 agree within one point,
    where :func:`percent_agreement` counts them apart). Items with fewer than two ratings are
    skipped.

    Returns:
        A value in [0, 1], or NaN when no item has two ratings.
    """
    shares = []
    for row in ratings_matrix(ratings):
        values = [float(cast(SupportsFloat, v)) for v in row if not is_missing(v)]
        if len(values) < 2:
            continue
        pairs = list(itertools.combinations(values, 2))
        shares.append(sum(abs(x - y) <= tolerance + 1e-9 for x, y in pairs) / len(pairs))
    return float(np.mean(shares)) if shares else math.nan


def cohen_kappa(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    *,
    weights: Weights = None,
    categories: Sequence[Hashable] | None = None,
) -> float:
    """Cohen's kappa between two raters, unweighted or weighted.

    Weighted kappa uses the categories' positions in ``categories`` (default: the sorted union
    of observed labels) as the ordinal scale, like scikit-learn: linear weights |i-j|, quadratic
    weights (i-j)^2. Pairs with a missing label are dropped.

    Args:
        a: labels from rater A.
        b: labels from rater B, same items in the same order.
        weights: None, "linear" or "quadratic".
        categories: the ordered category list; needed when labels do not sort meaningfully.

    Returns:
        Kappa in [-1, 1]; NaN when there are no pairs or chance agreement is 1 (one category).

    Raises:
        ValueError: unequal lengths, unknown weights, or a label missing from ``categories``.
    """
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
    pairs = paired_labels(a, b)
    if not pairs:
        return math.nan
    cats = list(categories) if categories is not None else sorted({v for p in pairs for v in p})  # type: ignore[type-var]
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    observed = np.zeros((k, k))
    for x, y in pairs:
        if x not in index or y not in index:
            raise ValueError(f"label {x if x not in index else y!r} is not in categories")
        observed[index[x], index[y]] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    diff = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)
    w = (diff > 0).astype(float) if weights is None else diff if weights == "linear" else diff**2
    denominator = float((w * expected).sum())
    if denominator == 0:
        return math.nan
    return 1.0 - float((w * observed).sum()) / denominator


def category_counts(
    ratings: Sequence[Sequence[Hashable]], categories: Sequence[Hashable] | None = None
) -> tuple[FloatArray, list[Hashable]]:
    """Turn an items x raters label matrix into the items x categories count table.

    Returns:
        ``(table, categories)``; missing ratings are not counted.
    """
    rows = ratings_matrix(ratings)
    cats = (
        list(categories)
        if categories is not None
        else sorted({v for row in rows for v in row if not is_missing(v)}, key=repr)
    )
    index = {c: i for i, c in enumerate(cats)}
    table = np.zeros((len(rows), len(cats)))
    for i, row in enumerate(rows):
        for v in row:
            if not is_missing(v):
                if v not in index:
                    raise ValueError(f"label {v!r} is not in categories")
                table[i, index[v]] += 1
    return table, cats


def _multirater(table: Any) -> tuple[float, FloatArray, float]:
    """(mean observed agreement P-bar, category shares p_j, raters per item n) of a count table."""
    t = as_float_array(table, name="table")
    if t.size == 0:
        return math.nan, np.zeros(0), 0.0
    if t.ndim != 2:
        raise ValueError("table must be items x categories counts")
    if t.shape[0] == 0 or t.sum() == 0:
        return math.nan, np.zeros(t.shape[1]), 0.0
    per_item = t.sum(axis=1)
    if np.any(per_item != per_item[0]):
        raise ValueError("every item must have the same number of ratings (Fleiss' design)")
    n = float(per_item[0])
    if n < 2:
        return math.nan, t.sum(axis=0) / t.sum(), n
    p_bar = float(((t * (t - 1)).sum(axis=1) / (n * (n - 1))).mean())
    return p_bar, t.sum(axis=0) / t.sum(), n


def fleiss_kappa(table: Any) -> float:
    """Fleiss' kappa from an items x categories count table (each row sums to the rater count).

    Returns:
        Kappa (at most 1); NaN with no items, fewer than two raters per item, or when every
        rating falls in one category (chance agreement 1).

    Raises:
        ValueError: the table is not 2-D or rows have different totals.
    """
    p_bar, p_j, _ = _multirater(table)
    p_e = float((p_j**2).sum())
    if math.isnan(p_bar) or p_e >= 1.0:
        return math.nan
    return (p_bar - p_e) / (1.0 - p_e)


def randolph_kappa(table: Any, *, n_categories: int | None = None) -> float:
    """Randolph's free-marginal multirater kappa (2005): chance agreement fixed at 1/k.

    Suits rare, prevalence-biased labels (the close-reading paper's choice).

    Args:
        table: items x categories counts, each row summing to the rater count.
        n_categories: k, the number of categories raters could choose from (default: the
            table's column count; pass it when some categories were never used).

    Returns:
        Kappa in [-1/(k-1), 1]; NaN with no items, fewer than two raters, or k < 2.
    """
    p_bar, p_j, _ = _multirater(table)
    k = n_categories if n_categories is not None else len(p_j)
    if math.isnan(p_bar) or k < 2:
        return math.nan
    return (p_bar - 1.0 / k) / (1.0 - 1.0 / k)


def krippendorff_alpha(
    ratings: Sequence[Sequence[Any]],
    *,
    level: AlphaLevel = "nominal",
    categories: Sequence[Hashable] | None = None,
) -> float:
    """Krippendorff's alpha over an items x raters matrix.

    Nominal labels may be any hashable values; ordinal labels are ordered by ``categories``
    (default: sorted values); interval and ratio need numbers. Nominal, ordinal and interval
    alpha are computed in coincidence form by :class:`judge_engine.stats.bootstrap.Alpha`
    (the same numbers as the ``krippendorff`` package, which is the tests' oracle, in
    milliseconds where the package's ordinal metric takes seconds over hundreds of distinct
    scores); ratio alpha by the ``krippendorff`` package.

    Returns:
        Alpha (at most 1); NaN when no item has two ratings or only one value occurs.

    Raises:
        ValueError: unknown level, ragged rows, non-numeric interval/ratio data.
    """
    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(f"level must be nominal, ordinal, interval or ratio, not {level!r}")
    rows = ratings_matrix(ratings)
    if not rows or not rows[0]:
        return math.nan
    if level != "ratio":
        # Imported here: bootstrap builds on this module's helpers.
        from judge_engine.stats.bootstrap import Alpha, point

        return point(Alpha(rows, level=level, categories=categories))
    import krippendorff

    data = as_float_array(rows, name="ratings")
    try:
        return float(krippendorff.alpha(reliability_data=data.T, level_of_measurement=level))
    except ValueError:  # fewer than two pairable values, or a single value in the domain
        return math.nan


ICC_FORMS: tuple[IccForm, ...] = (
    "ICC(1,1)", "ICC(2,1)", "ICC(3,1)", "ICC(1,k)", "ICC(2,k)", "ICC(3,k)",
)  # fmt: skip
"""Shrout & Fleiss' six forms, in their order."""


def _anova(x: FloatArray) -> tuple[float, float, float, float]:
    """Mean squares (between targets, within targets, between judges, residual)."""
    n, k = x.shape
    grand = x.mean()
    ss_total = ((x - grand) ** 2).sum()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    bms, wms, jms, ems = mean_squares(ss_total, ss_rows, ss_cols, n, k)
    return float(bms), float(wms), float(jms), float(ems)


def mean_squares(
    ss_total: Any, ss_rows: Any, ss_cols: Any, n: int, k: int
) -> tuple[Any, Any, Any, Any]:
    """(BMS, WMS, JMS, EMS) of the two-way ANOVA from its sums of squares (scalars or arrays)."""
    bms = ss_rows / (n - 1)
    wms = (ss_total - ss_rows) / (n * (k - 1))
    jms = ss_cols / (k - 1)
    ems = (ss_total - ss_rows - ss_cols) / ((n - 1) * (k - 1))
    return bms, wms, jms, ems


def icc_from_mean_squares(
    bms: Any, wms: Any, jms: Any, ems: Any, n: int, k: int, form: IccForm, *, floor: float = 0.0
) -> FloatArray:
    """One ICC form from the ANOVA mean squares (arrays: one value per resample).

    A denominator that is zero up to rounding (mean squares cancelling) gives NaN: dividing by its
    1e-16 residue would report an ICC of -1e16 for one rater order and NaN for another. ``floor``
    is a variance the rounding is measured against when the mean squares are all rounding
    residue themselves (a bootstrap resample of constant rows).
    """
    bms, wms, jms, ems = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (bms, wms, jms, ems))
    num, den = {
        "ICC(1,1)": (bms - wms, bms + (k - 1) * wms),
        "ICC(2,1)": (bms - ems, bms + (k - 1) * ems + k * (jms - ems) / n),
        "ICC(3,1)": (bms - ems, bms + (k - 1) * ems),
        "ICC(1,k)": (bms - wms, bms),
        "ICC(2,k)": (bms - ems, bms + (jms - ems) / n),
        "ICC(3,k)": (bms - ems, bms),
    }[form]
    scale = np.abs(bms) + np.abs(wms) + np.abs(jms) + np.abs(ems)
    ok = den > 1e-12 * np.maximum(scale, floor)
    out: FloatArray = np.full(num.shape, math.nan)
    np.divide(num, den, out=out, where=ok)
    return out


def check_icc_form(form: str) -> None:
    """Raise ``ValueError`` unless ``form`` is one of :data:`ICC_FORMS`."""
    if form not in ICC_FORMS:
        raise ValueError(f"form must be one of {', '.join(ICC_FORMS)}, not {form!r}")


def icc(ratings: Any, *, form: IccForm = "ICC(2,1)") -> float:
    """Intraclass correlation (Shrout & Fleiss 1979) over an items x raters numeric matrix.

    Forms: ICC(1,1) one-way random; ICC(2,1) two-way random, absolute agreement; ICC(3,1)
    two-way mixed, consistency; the ``k`` forms give the reliability of the mean of the k
    raters. Items with any missing rating are dropped (the ANOVA needs a complete design).

    Returns:
        The coefficient (at most 1, unbounded below); NaN with fewer than two complete items or
        fewer than two raters, or when the denominator is 0 (e.g. constant ratings).

    Raises:
        ValueError: unknown form or a matrix that is not 2-D.
    """
    check_icc_form(form)
    x = complete_rows(ratings)
    n, k = x.shape
    if n < 2 or k < 2:
        return math.nan
    return float(icc_from_mean_squares(*_anova(x), n, k, form)[0])


def complete_rows(ratings: Any) -> FloatArray:
    """The items x raters matrix as floats, items with a missing rating dropped.

    Raises:
        ValueError: a matrix that is not 2-D, or non-numeric ratings.
    """
    x = as_float_array(ratings, name="ratings")
    if x.size == 0:
        return np.zeros((0, 0))
    if x.ndim != 2:
        raise ValueError("ratings must be an items x raters matrix")
    return x[np.isfinite(x).all(axis=1)]
