"""Percentile bootstrap intervals over items for kappa, alpha and ICC, vectorised.

Each statistic here is prepared once from the data (:class:`Kappa`, :class:`Alpha`,
:class:`Icc`, :class:`Fleiss`, :class:`Randolph`) and then evaluated for many resamples at
once. A resample is a row of item *weights*: how many times each item was drawn (a row of ones
is the data itself). Every statistic is a ratio of sums over items, so a batch of resamples is a
few matrix products instead of a Python loop: 1,000 resamples of 2,000 items take well under a
second (:func:`judge_engine.stats.correlation.bootstrap_ci` loops, which suits correlations).

Items are those the statistic counts: pairs with both labels (kappa), units with two or more
ratings (alpha), complete rows (ICC), rows of the count table (Fleiss, Randolph), or with
``groups`` the items those rows belong to (a row per item, variant and repeat). Resamples whose
statistic is undefined (one category left, a zero denominator) are left out of the percentiles.
Weighted kappa keeps the full sample's category scale in every resample.

References: Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13 (percentile
interval); Krippendorff (2011), "Computing Krippendorff's alpha-reliability" (the coincidence
form used for alpha); Shrout & Fleiss (1979) for the ICC forms.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Protocol

import numpy as np

from judge_engine.stats._arrays import (
    FloatArray,
    as_float_array,
    is_missing,
    paired_labels,
    ratings_matrix as _rows,
)
from judge_engine.stats._coefficients import (
    AlphaLevel,
    IccForm,
    Weights,
    category_counts,
    check_icc_form,
    complete_rows,
    icc_from_mean_squares,
    mean_squares,
)

CHUNK_CELLS = 4_000_000
"""Resamples are drawn in batches of at most this many item weights (32 MB of float64)."""


class ItemStatistic(Protocol):
    """A statistic over items that can be evaluated under item weights."""

    n_items: int

    def values(self, weights: FloatArray) -> FloatArray:
        """The statistic for each row of ``weights`` (resamples x items, rows summing to
        ``n_items``); NaN where it is undefined."""
        ...


def point(statistic: ItemStatistic) -> float:
    """The statistic on the data itself (every item weighted once)."""
    if statistic.n_items == 0:
        return math.nan
    return float(statistic.values(np.ones((1, statistic.n_items)))[0])


def resample_weights(n: int, n_resamples: int, rng: np.random.Generator) -> FloatArray:
    """``n_resamples`` x ``n`` counts: how often each of n items is drawn, n draws per row."""
    idx = rng.integers(0, n, size=(n_resamples, n))
    flat = (idx + (np.arange(n_resamples) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=n_resamples * n).reshape(n_resamples, n).astype(float)


def bootstrap_values(
    statistic: ItemStatistic, *, n_resamples: int = 1000, seed: int = 0
) -> FloatArray:
    """The statistic on ``n_resamples`` resamples of the items (NaN ones included)."""
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    n = statistic.n_items
    if n == 0:
        return np.full(n_resamples, math.nan)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, CHUNK_CELLS // n))
    parts = []
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        parts.append(statistic.values(resample_weights(n, size, rng)))
    return np.concatenate(parts)


def percentile_interval(values: Any, *, confidence: float = 0.95) -> tuple[float, float]:
    """The central ``confidence`` interval of the finite values; ``(nan, nan)`` if none."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(v, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_interval(
    statistic: ItemStatistic,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic``, resampling its items (seeded).

    Example: ``bootstrap_interval(Icc(matrix, form="ICC(3,1)"), n_resamples=2000)``.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with no items or when every resample is undefined.
    """
    values = bootstrap_values(statistic, n_resamples=n_resamples, seed=seed)
    return percentile_interval(values, confidence=confidence)


def _ratio(num: FloatArray, den: FloatArray, scale: Any = 0.0) -> FloatArray:
    """num / den, NaN where den is not positive beyond rounding (1e-12 of ``scale``, the size of
    the terms whose difference ``den`` is)."""
    out: FloatArray = np.full(np.shape(num), math.nan)
    np.divide(num, den, out=out, where=den > 1e-12 * np.asarray(scale))
    return out


class Kappa:
    """Cohen's kappa (plain, linear or quadratic), as :func:`~.agreement.cohen_kappa`."""

    def __init__(
        self,
        a: Sequence[Hashable],
        b: Sequence[Hashable],
        *,
        weights: Weights = None,
        categories: Sequence[Hashable] | None = None,
    ) -> None:
        if weights not in (None, "linear", "quadratic"):
            raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
        pairs = paired_labels(a, b)
        cats = list(categories) if categories is not None else sorted({v for p in pairs for v in p})  # type: ignore[type-var]
        index = {c: i for i, c in enumerate(cats)}
        for x, y in pairs:
            if x not in index or y not in index:
                raise ValueError(f"label {x if x not in index else y!r} is not in categories")
        k = len(cats)
        diff = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)
        self._d = (
            (diff > 0).astype(float)
            if weights is None
            else diff
            if weights == "linear"
            else diff**2
        )
        ia = np.array([index[x] for x, _ in pairs], dtype=int)
        ib = np.array([index[y] for _, y in pairs], dtype=int)
        self.n_items = len(pairs)
        self._disagreement = self._d[ia, ib] if pairs else np.zeros(0)
        self._a = np.eye(k)[ia] if pairs else np.zeros((0, k))
        self._b = np.eye(k)[ib] if pairs else np.zeros((0, k))

    def values(self, weights: FloatArray) -> FloatArray:
        n = self.n_items
        observed = weights @ self._disagreement / n
        pa, pb = weights @ self._a / n, weights @ self._b / n
        expected = ((pa @ self._d) * pb).sum(axis=1)
        return 1.0 - _ratio(observed, expected)


class Alpha:
    """Krippendorff's alpha (nominal, ordinal or interval), as :func:`~.agreement.krippendorff_alpha`.

    In coincidence form: alpha = 1 - (N - 1) * sum_u a_u / E, with N the pairable values, a_u
    each unit's disagreement over its ordered value pairs divided by (m_u - 1), and E the
    disagreement over all ordered pairs of pairable values. Interval distance is (x - y)^2;
    ordinal distance is the interval distance between mid-ranks r_c = (count below c) + n_c / 2
    of the pooled pairable values, recomputed for each resample.
    """

    def __init__(
        self,
        ratings: Sequence[Sequence[Any]],
        *,
        level: AlphaLevel = "nominal",
        categories: Sequence[Hashable] | None = None,
    ) -> None:
        if level not in ("nominal", "ordinal", "interval"):
            raise ValueError(f"level must be nominal, ordinal or interval, not {level!r}")
        self.level = level
        rows = _rows(ratings)
        if level == "interval":
            x = as_float_array(rows, name="ratings") if rows and rows[0] else np.zeros((0, 2))
            x = x[np.isfinite(x).sum(axis=1) >= 2]
            x = x - (np.nanmean(x) if x.size else 0.0)  # alpha is shift-free; sums stay small
            self._m = np.isfinite(x).sum(axis=1).astype(float)
            self._s1 = np.nansum(x, axis=1)
            self._s2 = np.nansum(x**2, axis=1)
            self._counts = np.zeros((len(x), 0))
        else:
            kept = [r for r in rows if sum(not is_missing(v) for v in r) >= 2]
            cats = None if categories is None else list(categories)
            if level == "ordinal" and cats is None:
                try:
                    cats = sorted({v for r in kept for v in r if not is_missing(v)})  # type: ignore[type-var]
                except TypeError as exc:
                    raise ValueError("ordinal labels must sort; pass categories=") from exc
            self._counts, _ = category_counts(kept, cats) if kept else (np.zeros((0, 0)), [])
            self._m = self._counts.sum(axis=1)
            self._s1 = self._s2 = np.zeros(len(kept))
        self.n_items = len(self._m)

    def values(self, weights: FloatArray) -> FloatArray:
        m = self._m
        n_values = weights @ m
        if self.level == "nominal":
            a = (m**2 - (self._counts**2).sum(axis=1)) / (m - 1)
            marginal = weights @ self._counts
            expected = n_values**2 - (marginal**2).sum(axis=1)
            return 1.0 - _ratio((n_values - 1) * (weights @ a), expected, n_values**2)
        if self.level == "interval":
            s1, s2 = self._s1, self._s2
            a = 2 * (m * s2 - s1**2) / (m - 1)
            total1, total2 = weights @ s1, weights @ s2
            expected = 2 * (n_values * total2 - total1**2)
            return 1.0 - _ratio((n_values - 1) * (weights @ a), expected, n_values * total2)
        marginal = weights @ self._counts  # resamples x categories
        ranks = np.cumsum(marginal, axis=1) - marginal / 2
        s1 = self._counts @ ranks.T  # units x resamples
        s2 = self._counts @ (ranks**2).T
        a = 2 * (m[:, None] * s2 - s1**2) / (m[:, None] - 1)
        observed = (weights * a.T).sum(axis=1)
        total1, total2 = (marginal * ranks).sum(axis=1), (marginal * ranks**2).sum(axis=1)
        expected = 2 * (n_values * total2 - total1**2)
        return 1.0 - _ratio((n_values - 1) * observed, expected, n_values * total2)


class Icc:
    """An intraclass correlation form over complete rows, as :func:`~.agreement.icc`."""

    def __init__(self, ratings: Any, *, form: IccForm = "ICC(2,1)") -> None:
        check_icc_form(form)
        x = complete_rows(ratings)
        self.form = form
        self.n_items, self._k = x.shape if x.ndim == 2 else (0, 0)
        self._x = x - (x.mean() if x.size else 0.0)  # ICC is shift-free; sums stay small
        self._variance = float((self._x**2).mean()) if x.size else 0.0
        self._rowsum = self._x.sum(axis=1)
        self._sq = (self._x**2).sum(axis=1)

    def values(self, weights: FloatArray) -> FloatArray:
        n, k = self.n_items, self._k
        if n < 2 or k < 2:
            return np.full(len(weights), math.nan)
        grand = (weights @ self._rowsum) / (n * k)
        ss_total = weights @ self._sq - n * k * grand**2
        ss_rows = (weights @ self._rowsum**2) / k - n * k * grand**2
        columns = (weights @ self._x) / n
        ss_cols = n * ((columns - grand[:, None]) ** 2).sum(axis=1)
        mean_sq = mean_squares(ss_total, ss_rows, ss_cols, n, k)
        return icc_from_mean_squares(*mean_sq, n, k, self.form, floor=self._variance)


class _Multirater:
    """Per-unit observed agreement and category counts of a Fleiss-design count table, summed per
    item.

    A unit is a row of the table (the ratings of one thing). With ``groups`` (each unit's item),
    the bootstrap resamples items and an item's units go together: a judge's repeats or variants
    of one item are not independent draws. Every figure is a ratio of sums over units, so the
    sums are taken per item once and a resample weighs items; without ``groups`` each unit is
    its own item.
    """

    def __init__(self, table: Any, *, groups: Sequence[Hashable] | None = None) -> None:
        t = as_float_array(table, name="table")
        if t.size and t.ndim != 2:
            raise ValueError("table must be items x categories counts")
        t = t.reshape(-1, t.shape[-1] if t.ndim == 2 else 0)
        per_unit = t.sum(axis=1)
        if per_unit.size and np.any(per_unit != per_unit[0]):
            raise ValueError("every item must have the same number of ratings (Fleiss' design)")
        if groups is not None and len(groups) != len(t):
            raise ValueError(f"groups: {len(groups)} labels for {len(t)} rows")
        self._raters = r = float(per_unit[0]) if per_unit.size else 0.0
        units = len(t) if r >= 2 else 0
        index = {g: i for i, g in enumerate(dict.fromkeys(groups))} if groups is not None else {}
        self._item = (np.array([index[g] for g in groups], dtype=int) if groups is not None
                      else np.arange(len(t)))[:units]  # fmt: skip
        self.n_items = int(self._item.max()) + 1 if units else 0
        agreement = (t * (t - 1)).sum(axis=1) / (r * (r - 1)) if units else np.zeros(0)
        self._agreement = self.per_item(agreement)
        self._units = self.per_item(np.ones(units))
        self._table = np.zeros((self.n_items, t.shape[1]))
        np.add.at(self._table, self._item, t[:units])

    def per_item(self, per_unit: FloatArray) -> FloatArray:
        """A per-unit figure summed over each item's units."""
        return np.bincount(self._item, weights=per_unit, minlength=self.n_items).astype(float)

    def units(self, weights: FloatArray) -> FloatArray:
        """How many units each resample holds."""
        result: FloatArray = weights @ self._units
        return result

    def observed(self, weights: FloatArray) -> FloatArray:
        """P-bar: the mean over units of the share of rater pairs that agree."""
        result: FloatArray = weights @ self._agreement / self.units(weights)
        return result


class Observed(_Multirater):
    """Observed agreement P-bar of a count table (the share of agreeing rater pairs, averaged over
    units): what Fleiss' and Randolph's kappa correct for chance."""

    def values(self, weights: FloatArray) -> FloatArray:
        return self.observed(weights)


class Fleiss(_Multirater):
    """Fleiss' kappa from an items x categories count table, as :func:`~.agreement.fleiss_kappa`."""

    def values(self, weights: FloatArray) -> FloatArray:
        shares = (weights @ self._table) / (self.units(weights) * self._raters)[:, None]
        chance = (shares**2).sum(axis=1)
        return _ratio(
            self.observed(weights) - chance, np.where(chance < 1 - 1e-12, 1 - chance, 0.0)
        )


class Randolph(_Multirater):
    """Randolph's free-marginal kappa, as :func:`~.agreement.randolph_kappa`.

    ``n_categories`` is k, the categories a rater could choose: one number, or one per unit when
    it varies (a pick among the candidates shown, 4 for one item and 5 for another); chance
    agreement is then the mean of 1/k over units, which is 1/k when k is the same everywhere.
    """

    def __init__(self, table: Any, *, n_categories: int | Sequence[int] | None = None,
                 groups: Sequence[Hashable] | None = None) -> None:
        super().__init__(table, groups=groups)
        k = np.asarray(self._table.shape[1] if n_categories is None else n_categories, dtype=float)
        if k.ndim and len(k) != len(self._item) and self.n_items:
            raise ValueError(f"n_categories: {len(k)} values for {len(self._item)} rows")
        self._constant = float(k) if k.ndim == 0 else None
        self._chance = self.per_item(1 / np.maximum(k, 1)) if k.ndim and self.n_items else np.zeros(self.n_items)
        self._degenerate = bool(k.size == 0 or np.any(k < 2))

    def values(self, weights: FloatArray) -> FloatArray:
        if self._degenerate:
            return np.full(len(weights), math.nan)
        chance = 1 / self._constant if self._constant is not None else weights @ self._chance / self.units(weights)
        result: FloatArray = (self.observed(weights) - chance) / (1 - chance)
        return result
