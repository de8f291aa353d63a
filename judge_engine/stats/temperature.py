"""Consistency across temperatures: LitEval's consistency table (Table 12) for pairs of
temperatures instead of pairs of repeats at one temperature.

LitEval re-queries the judge three times per temperature and compares the queries of one
temperature pairwise. Across two temperatures T1 and T2 the comparison is the same, between a
query at T1 and a query at T2: every such pair of queries (r1 x r2 of them) is compared on the
items both scored, and the figures are averaged over the pairs of queries (the score
differences are pooled). With T1 = T2 the pairs are the distinct repeats of one temperature, so
the diagonal is the within-temperature baseline that a change of temperature is read against.

Per pair of queries: Spearman's correlation of the items' scores; every |difference| in three
buckets (<= small, <= large, > large; LitEval: 1 and 5 MQM points, a minor and a major error);
Krippendorff's alpha (ordinal and interval) of the two queries; the flip rate, the share of
items whose verdict differs between the two queries; and the mean signed difference T2 - T1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from judge_engine.stats._arrays import FloatArray, is_missing
from judge_engine.stats.agreement import krippendorff_alpha
from judge_engine.stats.correlation import spearman
from judge_engine.stats.runs import Run
from judge_engine.stats.sections import Section, left_out


@dataclass(frozen=True)
class TemperaturePair:
    """One row of the table: queries at ``t1`` against queries at ``t2``."""

    t1: float
    t2: float
    n_items: int
    """Items compared (score or verdict) in at least one pair of queries."""
    n_pairs: int
    """Pairs of queries compared: r1 x r2 across temperatures, r (r - 1) / 2 on the diagonal."""
    mean_spearman: float
    share_small: float
    share_medium: float
    share_large: float
    alpha_ordinal: float
    alpha_interval: float
    flip_rate: float
    mean_diff: float
    """Mean of (score at t2 - score at t1) over every compared item and pair of queries (NaN
    on the diagonal, where the order of two repeats means nothing)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict, for tables and JSON."""
        return asdict(self)


Queries = Mapping[Any, Sequence[Any]]
"""One temperature: ``{item: [value of repeat 0, repeat 1, ...]}`` (None/NaN = not scored)."""


def _column(queries: Queries, items: Sequence[Hashable], repeat: int) -> list[Any]:
    return [queries[i][repeat] if repeat < len(queries[i]) else None for i in items]


def _float(v: Any) -> float:
    return math.nan if is_missing(v) else float(v)


def query_pairs(r1: int, r2: int, *, same: bool) -> list[tuple[int, int]]:
    """The pairs of queries compared: all r1 x r2 across temperatures, i < j within one."""
    if same:
        return list(itertools.combinations(range(r1), 2))
    return list(itertools.product(range(r1), range(r2)))


def compare_temperatures(
    t1: float,
    first: Queries,
    t2: float,
    second: Queries,
    *,
    small: float = 1.0,
    large: float = 5.0,
    labels: tuple[Queries, Queries] | None = None,
) -> TemperaturePair:
    """One row of :func:`temperature_table`: the queries of ``first`` (at ``t1``) against those
    of ``second`` (at ``t2``; the same mapping for the diagonal), on the items both hold.

    Args:
        labels: the verdicts to count flips on, shaped like the scores (default: the scores).

    Example: one item, T1 scores [0, 0], T2 scores [-1, -6]: the four pairs of queries give
    |delta| 1, 6, 1, 6 -> shares (0.5, 0, 0.5); flips 4 of 4; mean difference -3.5.
    """
    same = first is second
    items = [i for i in first if i in second]
    r1 = max((len(first[i]) for i in items), default=0)
    r2 = max((len(second[i]) for i in items), default=0)
    flips_first, flips_second = labels if labels is not None else (first, second)
    spearmans, alphas_o, alphas_i, flips = [], [], [], []
    deltas: list[FloatArray] = []
    compared: set[Hashable] = set()
    n_pairs = 0
    for a, b in query_pairs(r1, r2, same=same):
        x = np.array([_float(v) for v in _column(first, items, a)])
        y = np.array([_float(v) for v in _column(second, items, b)])
        both = np.isfinite(x) & np.isfinite(y)
        la, lb = _column(flips_first, items, a), _column(flips_second, items, b)
        labelled = [(i, u, v) for i, u, v in zip(items, la, lb, strict=True)
                    if not (is_missing(u) or is_missing(v))]  # fmt: skip
        if not both.any() and not labelled:
            continue
        n_pairs += 1
        compared.update(i for i, k in zip(items, both, strict=True) if k)
        compared.update(i for i, _, _ in labelled)
        if labelled:
            flips.append(float(np.mean([u != v for _, u, v in labelled])))
        if both.any():
            deltas.append(y[both] - x[both])
            spearmans.append(spearman(x, y))
            pairs = [[u, v] for u, v in zip(x[both], y[both], strict=True)]
            alphas_o.append(krippendorff_alpha(pairs, level="ordinal"))
            alphas_i.append(krippendorff_alpha(pairs, level="interval"))
    d = np.concatenate(deltas) if deltas else np.zeros(0)
    size = np.abs(d)
    return TemperaturePair(
        t1=t1, t2=t2, n_items=len(compared), n_pairs=n_pairs,
        mean_spearman=_mean(spearmans),
        share_small=float(np.mean(size <= small)) if d.size else math.nan,
        share_medium=float(np.mean((size > small) & (size <= large))) if d.size else math.nan,
        share_large=float(np.mean(size > large)) if d.size else math.nan,
        alpha_ordinal=_mean(alphas_o), alpha_interval=_mean(alphas_i),
        flip_rate=_mean(flips), mean_diff=float(d.mean()) if d.size and not same else math.nan,
    )  # fmt: skip


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


def temperature_table(
    by_temperature: Mapping[float, Queries],
    *,
    small: float = 1.0,
    large: float = 5.0,
    labels: Mapping[float, Queries] | None = None,
) -> list[TemperaturePair]:
    """Every pair of temperatures t1 <= t2 (the diagonal included), in order.

    Args:
        by_temperature: ``{temperature: {item: [repeat scores]}}``.
        labels: verdicts for the flip rate, shaped like ``by_temperature`` (default: scores).
    """
    temps = sorted(by_temperature)
    out = []
    for t1, t2 in itertools.combinations_with_replacement(temps, 2):
        pair_labels = (labels[t1], labels[t2]) if labels is not None else None
        out.append(compare_temperatures(
            t1, by_temperature[t1], t2, by_temperature[t2], small=small, large=large,
            labels=pair_labels,
        ))  # fmt: skip
    return out


def _queries(
    run: Run, verdict_field: str | None
) -> dict[tuple[str, str], dict[float, tuple[dict[str, list[Any]], dict[str, list[Any]]]]]:
    """``{(judge, variant): {temperature: (scores, labels)}}``, each ``{item: [by repeat]}``."""
    cells: dict[tuple[str, str, float], dict[str, dict[int, tuple[float, Any]]]] = {}
    for o in run.outcomes:
        scored = o.status == "scored"
        label = (
            (o.verdict.get(verdict_field) if isinstance(o.verdict, dict) else None)
            if verdict_field
            else o.score
        )
        value = (o.score if scored else math.nan, label if scored else None)
        cells.setdefault((o.judge, o.variant, o.temperature), {}).setdefault(o.item_id, {})[
            o.repeat
        ] = value
    out: dict[tuple[str, str], dict[float, tuple[dict[str, list[Any]], dict[str, list[Any]]]]] = {}
    for (judge, variant, temp), items in cells.items():
        repeats = sorted({r for reps in items.values() for r in reps})
        missing = (math.nan, None)
        scores = {i: [reps.get(r, missing)[0] for r in repeats] for i, reps in items.items()}
        labels = {i: [reps.get(r, missing)[1] for r in repeats] for i, reps in items.items()}
        out.setdefault((judge, variant), {})[temp] = (scores, labels)
    return out


def temperature_section(
    run: Run, *, small: float = 1.0, large: float = 5.0, verdict_field: str | None = None
) -> Section:
    """:func:`temperature_table` per judge and variant of a run (judges with 2+ temperatures)."""
    rows: list[dict[str, Any]] = []
    skipped: dict[str, list[str]] = {}
    for (judge, variant), temps in sorted(_queries(run, verdict_field).items()):
        name = judge + (f" [{variant}]" if variant else "")
        if len(temps) < 2:
            skipped.setdefault("1 temperature", []).append(name)
            continue
        table = temperature_table({t: s for t, (s, _) in temps.items()}, small=small, large=large,
                                  labels={t: lab for t, (_, lab) in temps.items()})  # fmt: skip
        for pair in table:
            if pair.n_pairs == 0:  # one repeat (diagonal), or no item scored at both
                if pair.t1 != pair.t2:
                    skipped.setdefault("no item compared", []).append(
                        f"{name} T={pair.t1:g}~{pair.t2:g}"
                    )
                continue
            rows.append({"judge": judge, "variant": variant, **pair.as_dict()})
    cols = ["judge", "variant", "t1", "t2", "n_items", "n_pairs", "mean_spearman", "share_small",
            "share_medium", "share_large", "alpha_ordinal", "alpha_interval", "flip_rate",
            "mean_diff"]  # fmt: skip
    title = (f"Consistency across temperatures (pairs of queries; |delta| <= {small:g}, "
             f"<= {large:g}, > {large:g}; t1 = t2: between repeats)")  # fmt: skip
    absent, notes = left_out(skipped, rows, "needs 2+ temperatures of one judge: ")
    if not rows and set(skipped) == {"1 temperature"}:
        absent = (
            "needs 2+ temperatures of one judge (each judge ran 1; set temperatures: [0.0, 1.0])"
        )
    return Section("temperatures", title, cols, rows, absent, notes)
