"""Consistency of a judge with itself across repeats (and temperatures).

Inputs are items x repeats matrices (one row per item, one column per repeat; NaN/None for a
repeat that was not scored). Undefined results are NaN; malformed input raises ``ValueError``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from judge_engine.stats._arrays import FloatArray, as_float_array, is_missing, ratings_matrix
from judge_engine.stats.agreement import krippendorff_alpha
from judge_engine.stats.correlation import spearman


@dataclass(frozen=True)
class RepeatConsistency:
    """LitEval's Table 12 row for one temperature, plus alpha and spread."""

    n_items: int
    """Items with at least two scored repeats."""
    n_repeats: int
    """Columns (repeats) in the matrix."""
    mean_spearman: float
    """Mean over repeat pairs of the Spearman correlation between the two repeats."""
    share_small: float
    """Share of within-item pairwise |delta| <= small (default 1: one minor MQM error)."""
    share_medium: float
    """Share of small < |delta| <= large (default 5: one major MQM error)."""
    share_large: float
    """Share of |delta| > large."""
    alpha_ordinal: float
    """Krippendorff's alpha (ordinal) across repeats, Prometheus 2's consistency measure."""
    alpha_interval: float
    """Krippendorff's alpha (interval) across repeats."""
    mean_sd: float
    """Mean within-item standard deviation (population, ddof=0)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict, for tables and JSON."""
        return asdict(self)


def _matrix(scores: Any) -> FloatArray:
    x = as_float_array(ratings_matrix(scores), name="scores")
    if x.size == 0:
        return np.zeros((0, 0))
    return x


def delta_shares(
    scores: Any, *, small: float = 1.0, large: float = 5.0
) -> tuple[float, float, float]:
    """Shares of absolute pairwise differences between repeats of the same item.

    Every unordered pair of scored repeats of an item contributes one |delta|. Example: one item
    scored [0, 1, 7]: deltas 1, 7, 6 -> shares (1/3, 0, 2/3).

    Returns:
        ``(share |d| <= small, share small < |d| <= large, share |d| > large)``; NaNs if no pairs.
    """
    x = _matrix(scores)
    deltas = [
        abs(row[i] - row[j])
        for row in x
        for i, j in itertools.combinations(range(x.shape[1]), 2)
        if np.isfinite(row[i]) and np.isfinite(row[j])
    ]
    if not deltas:
        return math.nan, math.nan, math.nan
    d = np.array(deltas)
    return (
        float(np.mean(d <= small)),
        float(np.mean((d > small) & (d <= large))),
        float(np.mean(d > large)),
    )


def mean_pairwise_spearman(scores: Any) -> float:
    """Mean Spearman correlation over all pairs of repeats (columns); NaN pairs are skipped."""
    x = _matrix(scores)
    values = [spearman(x[:, i], x[:, j]) for i, j in itertools.combinations(range(x.shape[1]), 2)]
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


def item_spread(scores: Any, *, ddof: int = 0) -> tuple[FloatArray, FloatArray]:
    """Per-item mean and standard deviation across repeats (missing repeats ignored).

    Returns:
        ``(means, sds)``, one entry per item; NaN where an item has no (or, for the SD, fewer
        than ddof + 1) scored repeats.
    """
    x = _matrix(scores)
    means = np.full(x.shape[0], math.nan)
    sds = np.full(x.shape[0], math.nan)
    for i, row in enumerate(x):
        v = row[np.isfinite(row)]
        if v.size:
            means[i] = v.mean()
        if v.size > ddof:
            sds[i] = v.std(ddof=ddof)
    return means, sds


def flip_rate(labels: Sequence[Sequence[Hashable]]) -> float:
    """Share of items whose categorical verdict is not the same in every repeat.

    Items with fewer than two non-missing labels are skipped. Example: [[A, A], [A, B], [B, B]]
    -> 1 of 3 items flips = 0.333.

    Returns:
        A rate in [0, 1]; NaN when no item has two labels.
    """
    flips = []
    for row in ratings_matrix(labels):
        present = [v for v in row if not is_missing(v)]
        if len(present) >= 2:
            flips.append(len(set(present)) > 1)
    return float(np.mean(flips)) if flips else math.nan


@dataclass(frozen=True)
class RunSpread:
    """A score's mean over repeated runs and its spread across them (CPers, Table 4)."""

    n_items: int
    """Items scored in every repeat (each run's mean is over the same items)."""
    n_repeats: int
    mean: float
    """Mean of the run means (= the mean over items and runs)."""
    sd_runs: float
    """Sample standard deviation (ddof=1) of the run means: how much a reported figure moves
    from one run of the whole evaluation to the next."""
    min_run: float
    max_run: float
    mean_item_sd: float
    """Mean within-item standard deviation across runs (population, ddof=0, as ``mean_sd``)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict, for tables and JSON."""
        return asdict(self)


def run_spread(scores: Any) -> RunSpread:
    """Mean and spread across runs of an items x repeats matrix, over its complete items.

    Example: items [1, 2], [3, 3], [5, 4] -> run means 3 and 3, sd_runs 0; item SDs 0.5, 0,
    0.5 -> mean_item_sd 1/3.

    Returns:
        :class:`RunSpread`; NaN figures without a complete item (and sd_runs with one repeat).
    """
    x = _matrix(scores)
    complete = x[np.isfinite(x).all(axis=1)] if x.size else np.zeros((0, 0))
    n_items, n_repeats = complete.shape if complete.ndim == 2 else (0, 0)
    if n_items == 0:
        nan = math.nan
        return RunSpread(0, int(x.shape[1]) if x.ndim == 2 else 0, nan, nan, nan, nan, nan)
    means = complete.mean(axis=0)
    return RunSpread(
        n_items=int(n_items), n_repeats=int(n_repeats), mean=float(means.mean()),
        sd_runs=float(means.std(ddof=1)) if n_repeats > 1 else math.nan,
        min_run=float(means.min()), max_run=float(means.max()),
        mean_item_sd=float(complete.std(axis=1).mean()),
    )  # fmt: skip


def repeat_consistency(scores: Any, *, small: float = 1.0, large: float = 5.0) -> RepeatConsistency:
    """All consistency measures for one items x repeats matrix (one temperature).

    Args:
        scores: items x repeats scores.
        small: the |delta| bound of the first bucket, in the protocol's score units.
        large: the |delta| bound between the second and third buckets.
    """
    x = _matrix(scores)
    counted = int((np.isfinite(x).sum(axis=1) >= 2).sum()) if x.size else 0
    shares = delta_shares(x, small=small, large=large)
    rows = x.tolist()
    _, sds = item_spread(x)
    finite_sds = sds[np.isfinite(sds)]
    return RepeatConsistency(
        n_items=counted,
        n_repeats=int(x.shape[1]) if x.ndim == 2 else 0,
        mean_spearman=mean_pairwise_spearman(x),
        share_small=shares[0],
        share_medium=shares[1],
        share_large=shares[2],
        alpha_ordinal=krippendorff_alpha(rows, level="ordinal") if rows else math.nan,
        alpha_interval=krippendorff_alpha(rows, level="interval") if rows else math.nan,
        mean_sd=float(finite_sds.mean()) if finite_sds.size else math.nan,
    )


def consistency_table(
    scores_by_temperature: Mapping[float, Any], *, small: float = 1.0, large: float = 5.0
) -> list[dict[str, Any]]:
    """LitEval's consistency table: one row per temperature, sorted by temperature.

    Args:
        scores_by_temperature: ``{temperature: items x repeats matrix}``.
    """
    return [
        {"temperature": t, **repeat_consistency(m, small=small, large=large).as_dict()}
        for t, m in sorted(scores_by_temperature.items())
    ]
