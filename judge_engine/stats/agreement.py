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
from typing import Any, SupportsFloat, cast

import numpy as np

from judge_engine.stats._arrays import (
    FloatArray,
    as_float_array,
    is_missing,
    paired_labels,
    ratings_matrix,
)

# The scales, the count table and the ICC forms are this module's API too (re-exported).
from judge_engine.stats._coefficients import (
    ICC_FORMS as ICC_FORMS,
    AlphaLevel as AlphaLevel,
    IccForm as IccForm,
    Weights as Weights,
    category_counts as category_counts,
    check_icc_form,
    complete_rows as complete_rows,
    icc_from_mean_squares,
    mean_squares,
)
from judge_engine.stats.bootstrap import Alpha, point


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
        return point(Alpha(rows, level=level, categories=categories))
    import krippendorff

    data = as_float_array(rows, name="ratings")
    try:
        return float(krippendorff.alpha(reliability_data=data.T, level_of_measurement=level))
    except ValueError:  # fewer than two pairable values, or a single value in the domain
        return math.nan


def _anova(x: FloatArray) -> tuple[float, float, float, float]:
    """Mean squares (between targets, within targets, between judges, residual)."""
    n, k = x.shape
    grand = x.mean()
    ss_total = ((x - grand) ** 2).sum()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    bms, wms, jms, ems = mean_squares(ss_total, ss_rows, ss_cols, n, k)
    return float(bms), float(wms), float(jms), float(ems)


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
