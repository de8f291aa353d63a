"""Correlation with human scores (segment and system level), bootstrap and Wilson intervals.

Pairs with a missing value (None/NaN) on either side are dropped. A correlation is NaN when
fewer than two pairs remain or either side is constant; malformed input raises ``ValueError``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from judge_engine.stats._arrays import as_float_array, paired_finite
from judge_engine.stats.bootstrap import percentile_interval

Method = Literal["kendall", "spearman", "pearson"]
METHODS: tuple[Method, ...] = ("kendall", "spearman", "pearson")


def _scipy_corr(x: Any, y: Any, method: Method) -> float:
    from scipy import stats

    xs, ys = paired_finite(x, y)
    if xs.size < 2 or np.all(xs == xs[0]) or np.all(ys == ys[0]):
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "kendall":
            return float(stats.kendalltau(xs, ys, variant="b").statistic)
        if method == "spearman":
            return float(stats.spearmanr(xs, ys).statistic)
        return float(stats.pearsonr(xs, ys).statistic)


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> float:
    """Kendall's tau-b (ties corrected on both sides), via scipy.

    Example: x = [1, 2, 3], y = [1, 3, 2]: 2 concordant, 1 discordant pair, no ties,
    tau = (2 - 1) / 3 = 0.333.
    """
    return _scipy_corr(x, y, "kendall")


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rank correlation (average ranks for ties), via scipy."""
    return _scipy_corr(x, y, "spearman")


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson's linear correlation, via scipy."""
    return _scipy_corr(x, y, "pearson")


def correlation(x: ArrayLike, y: ArrayLike, *, method: Method = "kendall") -> float:
    """Dispatch to :func:`kendall_tau_b`, :func:`spearman` or :func:`pearson` by name.

    Raises:
        ValueError: unknown method.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    return _scipy_corr(x, y, method)


def grouped_correlation(
    x: ArrayLike,
    y: ArrayLike,
    groups: Sequence[Hashable],
    *,
    method: Method = "kendall",
) -> dict[Hashable, tuple[float, int]]:
    """Segment-level correlation within each group (e.g. language pair or source item).

    Returns:
        ``{group: (correlation, n_pairs)}`` in first-seen group order.
    """
    xa, ya = as_float_array(x, name="x").ravel(), as_float_array(y, name="y").ravel()
    if not (len(xa) == len(ya) == len(groups)):
        raise ValueError("x, y and groups must have the same length")
    out: dict[Hashable, tuple[float, int]] = {}
    for g in dict.fromkeys(groups):
        mask = np.array([gi == g for gi in groups])
        xs, ys = paired_finite(xa[mask], ya[mask])
        out[g] = (correlation(xs, ys, method=method), int(xs.size))
    return out


def system_means(values: ArrayLike, systems: Sequence[Hashable]) -> dict[Hashable, float]:
    """Mean of the non-missing values per system, in first-seen order (NaN if none)."""
    va = as_float_array(values).ravel()
    if len(va) != len(systems):
        raise ValueError("values and systems must have the same length")
    out = {}
    for s in dict.fromkeys(systems):
        v = va[np.array([si == s for si in systems]) & np.isfinite(va)]
        out[s] = float(v.mean()) if v.size else math.nan
    return out


def system_level_correlation(
    x: ArrayLike,
    y: ArrayLike,
    systems: Sequence[Hashable],
    *,
    method: Method = "kendall",
) -> tuple[float, int]:
    """Correlation between per-system mean scores (segments with a missing side dropped first).

    Returns:
        ``(correlation, n_systems)``.
    """
    xa, ya = as_float_array(x, name="x").ravel(), as_float_array(y, name="y").ravel()
    if not (len(xa) == len(ya) == len(systems)):
        raise ValueError("x, y and systems must have the same length")
    keep = np.isfinite(xa) & np.isfinite(ya)
    kept = [s for s, k in zip(systems, keep, strict=True) if k]
    mx, my = system_means(xa[keep], kept), system_means(ya[keep], kept)
    return correlation(list(mx.values()), list(my.values()), method=method), len(mx)


def bootstrap_ci(
    statistic: Callable[..., float],
    *arrays: Sequence[Any],
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval, resampling rows of the arrays jointly (paired data).

    Resamples where the statistic is NaN are ignored.

    Args:
        statistic: ``f(*resampled_arrays) -> float``, e.g. :func:`kendall_tau_b`.
        *arrays: equal-length sequences.
        n_resamples: number of bootstrap resamples.
        confidence: interval coverage, in (0, 1).
        seed: seed for the generator, so intervals are reproducible.

    Returns:
        ``(low, high)``; ``(nan, nan)`` for empty input or when every resample is NaN.

    Raises:
        ValueError: no arrays, unequal lengths, bad confidence or n_resamples.
    """
    if not arrays:
        raise ValueError("bootstrap_ci needs at least one array")
    if not 0 < confidence < 1 or n_resamples < 1:
        raise ValueError("confidence must be in (0, 1) and n_resamples >= 1")
    data = [np.asarray(a) for a in arrays]
    n = len(data[0])
    if any(len(a) != n for a in data):
        raise ValueError("all arrays must have the same length")
    if n == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    values = np.array(
        [statistic(*(a[idx] for a in data)) for idx in rng.integers(0, n, size=(n_resamples, n))]
    )
    return percentile_interval(values, confidence=confidence)


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial rate ``successes / n``.

    Example: 50 of 100, z = 1.95996: centre 0.5, half-width
    z * sqrt(0.25/100 + z^2/40000) / (1 + z^2/100) = 0.0962, so (0.4038, 0.5962).

    Returns:
        ``(low, high)`` within [0, 1]; ``(nan, nan)`` when n == 0.

    Raises:
        ValueError: negative counts, successes > n, or confidence outside (0, 1).
    """
    from scipy.stats import norm

    if n < 0 or successes < 0 or successes > n or not 0 < confidence < 1:
        raise ValueError(f"need 0 <= successes <= n and 0 < confidence < 1, got {successes}/{n}")
    if n == 0:
        return math.nan, math.nan
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
