"""Adequacy (LitEval): does a metric prefer the human translation over machine translations?

For each source item that has a human translation, rank all its translations by the metric
(higher is better, ties averaged). The human translation "is preferred" when its best rank is
strictly better than the best rank among the comparison systems. With average ranks this is the
same as: the best human score is strictly greater than the best comparison score, which is how
it is computed here. The rate is the share of such items.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from judge_engine.stats._arrays import as_float_array
from judge_engine.stats.correlation import wilson_interval


@dataclass(frozen=True)
class AdequacyResult:
    """The adequacy rate with its counts and Wilson interval."""

    preferred: int
    """Items where the human translation beats every comparison system strictly."""
    n_items: int
    """Items with at least one scored human and one scored comparison translation."""
    rate: float
    """preferred / n_items (NaN when n_items is 0)."""
    ci_low: float
    """Lower end of the 95% Wilson interval."""
    ci_high: float
    """Upper end of the 95% Wilson interval."""


def human_preferred(
    items: Sequence[Hashable],
    systems: Sequence[Hashable],
    scores: ArrayLike,
    *,
    human: Collection[Hashable],
    against: Collection[Hashable],
) -> dict[Hashable, bool]:
    """Per item: is the best human translation scored strictly above every ``against`` system?

    Rows with a missing score are ignored. Items lacking a scored human translation or any
    scored comparison system are left out (LitEval's script counts the latter as "not
    preferred"; that only matters if a system is missing for an item).

    Args:
        items: the source item of each row (e.g. the source text or its id).
        systems: the system of each row (e.g. "translator", "gpt4o").
        scores: the metric score of each row, higher = better.
        human: system names that denote human translations.
        against: the comparison systems (e.g. the top systems).

    Returns:
        ``{item: preferred}`` in first-seen order.
    """
    values = as_float_array(scores, name="scores").ravel()
    if not (len(items) == len(systems) == len(values)):
        raise ValueError("items, systems and scores must have the same length")
    best_h: dict[Hashable, float] = {}
    best_o: dict[Hashable, float] = {}
    for item, system, v in zip(items, systems, values, strict=True):
        if not np.isfinite(v):
            continue
        target = best_h if system in human else best_o if system in against else None
        if target is not None:
            target[item] = max(target.get(item, -math.inf), float(v))
    return {
        item: best_h[item] > best_o[item]
        for item in dict.fromkeys(items)
        if item in best_h and item in best_o
    }


def adequacy(
    items: Sequence[Hashable],
    systems: Sequence[Hashable],
    scores: ArrayLike,
    *,
    human: Collection[Hashable],
    against: Collection[Hashable],
) -> AdequacyResult:
    """The adequacy rate: share of items where the human translation is preferred.

    Example: item 1 human 3 vs best system 2 (preferred), item 2 human 2 vs 2 (a tie: not
    preferred) -> 1/2 = 0.5. Arguments as in :func:`human_preferred`.
    """
    per_item = human_preferred(items, systems, scores, human=human, against=against)
    n = len(per_item)
    k = sum(per_item.values())
    low, high = wilson_interval(k, n)
    return AdequacyResult(k, n, k / n if n else math.nan, low, high)
