"""Report sections for ``judge-engine meta``: a judge's scores against human judgments.

All functions take one joined :class:`~judge_engine.stats.tables.Table` (or two, for spans)
and return a :class:`~judge_engine.stats.sections.Section`. Results are given per group
(e.g. language pair) and pooled over all rows (group ``"all"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from judge_engine.stats.adequacy import adequacy
from judge_engine.stats.agreement import percent_agreement
from judge_engine.stats.correlation import (
    METHODS,
    Method,
    bootstrap_ci,
    correlation,
    system_level_correlation,
)
from judge_engine.stats.reliability import (
    COLUMNS,
    ICC_COLUMNS,
    MULTIRATER,
    PAIRWISE,
    coefficients,
    long_rows,
)
from judge_engine.stats.sections import Section
from judge_engine.stats.spans import span_prf
from judge_engine.stats.tables import Table, parse_list

POOLED = "all"


def _groups(table: Table, group: str | None) -> list[tuple[str, np.ndarray]]:
    """``[(group value, row mask)]``: each group in first-seen order, then the pooled rows."""
    n = len(table.rows)
    if group is None:
        return [(POOLED, np.ones(n, dtype=bool))]
    values = [str(v) for v in table.values(group)]
    out = [(g, np.array([v == g for v in values])) for g in dict.fromkeys(values)]
    return out + [(POOLED, np.ones(n, dtype=bool))]


def correlation_section(
    table: Table,
    comparisons: Sequence[tuple[str, str]],
    *,
    group: str | None = None,
    system: str | None = None,
    methods: Sequence[Method] = METHODS,
    bootstrap: int = 0,
    seed: int = 0,
) -> Section:
    """Segment-level (and, with ``system``, system-level) correlations per group.

    Args:
        comparisons: ``(human column, judge column)`` pairs.
        group: column to split by (e.g. ``pair``); pooled rows are always added.
        system: column naming the system of each row, for system-level correlation.
        methods: any of "kendall" (tau-b), "spearman", "pearson".
        bootstrap: resamples for a percentile interval on the first method (0 = none).
    """
    table.require(*(c for pair in comparisons for c in pair))
    rows = []
    for g, mask in _groups(table, group):
        for h, p in comparisons:
            x, y = table.floats(h)[mask], table.floats(p)[mask]
            keep = np.isfinite(x) & np.isfinite(y)
            row: dict[str, Any] = {"group": g, "level": "segment", "human": h, "judge": p}
            row["n"] = int(keep.sum())
            row |= {m: correlation(x, y, method=m) for m in methods}
            if bootstrap:
                stat = _stat(methods[0])
                row["ci_low"], row["ci_high"] = bootstrap_ci(
                    stat, x[keep], y[keep], n_resamples=bootstrap, seed=seed
                )
            rows.append(row)
            if system:
                sys_names = [str(s) for s, k in zip(table.values(system), mask, strict=True) if k]
                level: dict[str, Any] = {"group": g, "level": "system", "human": h, "judge": p}
                for m in methods:
                    level[m], level["n"] = system_level_correlation(x, y, sys_names, method=m)
                rows.append(level)
    cols = ["group", "level", "human", "judge", "n", *methods]
    cols += ["ci_low", "ci_high"] if bootstrap else []
    section = Section("correlation", "Correlation with human scores", cols, rows)
    return _absent_without_pairs(section, "n", comparisons)


def _absent_without_pairs(
    section: Section, count: str, comparisons: Sequence[tuple[str, str]]
) -> Section:
    """Mark ``section`` absent when no row has a single (human, judge) pair to compare: a table
    of n = 0 rows would look like a result (e.g. a run of BWS judges, which score candidates)."""
    if not any(r.get(count) for r in section.rows):
        judges = ", ".join(dict.fromkeys(p for _, p in comparisons))
        section.absent = f"no row has both a human score and a score in {judges}"
        section.rows = []
    return section


def _stat(method: Method) -> Callable[[Any, Any], float]:
    return lambda a, b: correlation(a, b, method=method)


def agreement_coefficients(*, icc_forms: bool = False, multirater: bool = False) -> list[str]:
    """The coefficients ``meta --agreement`` reports (:mod:`judge_engine.stats.reliability`
    names): kappa plain and quadratic, alpha ordinal and interval, ICC(2,1); every ICC form with
    ``icc_forms``; Fleiss' and Randolph's kappa with ``multirater``."""
    iccs = list(ICC_COLUMNS) if icc_forms else ["icc_2_1"]
    return [*PAIRWISE, "alpha_ordinal", "alpha_interval", *iccs,
            *(MULTIRATER if multirater else ())]  # fmt: skip


def agreement_sections(
    table: Table,
    comparisons: Sequence[tuple[str, str]],
    *,
    group: str | None = None,
    icc_forms: bool = False,
    multirater: bool = False,
    n_categories: int | None = None,
    bootstrap: int = 0,
    seed: int = 0,
) -> list[Section]:
    """Agreement per comparison (exact agreement and :func:`agreement_coefficients`) and, with
    ``bootstrap`` > 0, a second section with each coefficient's bootstrap interval over items.

    Values are compared as given: use it for scores on a shared discrete scale (e.g. 1-5).
    """
    names = agreement_coefficients(icc_forms=icc_forms, multirater=multirater)
    rows: list[dict[str, Any]] = []
    intervals: list[dict[str, Any]] = []
    for g, mask in _groups(table, group):
        for h, p in comparisons:
            x, y = table.floats(h)[mask], table.floats(p)[mask]
            keep = np.isfinite(x) & np.isfinite(y)
            pairs = np.column_stack([x[keep], y[keep]])
            results = coefficients(pairs, names, bootstrap=bootstrap, seed=seed,
                                   n_categories=n_categories)  # fmt: skip
            at: dict[str, Any] = {"group": g, "human": h, "judge": p}
            rows.append({
                **at, "n": int(keep.sum()),
                "exact_agreement": percent_agreement(pairs.tolist()) if len(pairs) else math.nan,
                **{name: r["value"] for name, r in results.items()},
            })  # fmt: skip
            intervals += long_rows(at, results)
    cols = ["group", "human", "judge", "n", "exact_agreement", *names]
    section = _absent_without_pairs(
        Section("agreement", "Agreement with human scores", cols, rows), "n", comparisons
    )
    if not bootstrap:
        return [section]
    title = (
        f"Agreement with human scores: 95% bootstrap intervals over items ({bootstrap} resamples)"
    )
    ci = Section("agreement_ci", title, ["group", "human", "judge", *COLUMNS], intervals)
    if section.absent:
        ci.rows, ci.absent = [], section.absent
    return [section, ci]


def adequacy_section(
    table: Table,
    metrics: Sequence[str],
    *,
    item: str,
    system: str,
    human: Collection[str],
    top: Collection[str],
    other: Collection[str] | None = None,
    group: str | None = None,
) -> Section:
    """LitEval adequacy per metric, against the top systems and against the other systems.

    Items are grouped by ``(group, item)``. Besides each group and the pooled rows, a
    ``"mean"`` row averages the per-group rates (LitEval's average over language pairs).

    Args:
        metrics: score columns, higher = better (negate penalties beforehand).
        item: column identifying the source item of each translation.
        system: column naming the system (human translators included).
        human: system names of human translations.
        top: the top systems; ``other`` defaults to every remaining non-human system.
    """
    table.require(item, system, *metrics)
    systems = [str(s) for s in table.values(system)]
    others = set(other) if other is not None else set(systems) - set(human) - set(top)
    group_values = [str(v) for v in table.values(group)] if group else [POOLED] * len(systems)
    items = [(gv, str(i)) for gv, i in zip(group_values, table.values(item), strict=True)]
    rows = []
    for metric in metrics:
        scores = table.floats(metric)
        for label, against in (("top", set(top)), ("other", others)):
            per_group = []
            for g, mask in _groups(table, group):
                idx = np.flatnonzero(mask)
                res = adequacy(
                    [items[i] for i in idx], [systems[i] for i in idx], scores[idx],
                    human=set(human), against=against,
                )  # fmt: skip
                rows.append({"group": g, "metric": metric, "versus": label, **vars(res)})
                if g != POOLED:
                    per_group.append(res.rate)
            if group:
                finite = [r for r in per_group if not math.isnan(r)]
                mean = float(np.mean(finite)) if finite else math.nan
                rows.append({"group": "mean", "metric": metric, "versus": label, "rate": mean})
    cols = ["group", "metric", "versus", "preferred", "n_items", "rate", "ci_low", "ci_high"]
    section = Section("adequacy", "Adequacy: human translation preferred", cols, rows)
    if not any(r.get("n_items") for r in rows):
        section.rows = []
        section.absent = (f"no item has a human translation ({', '.join(human)}) and a "
                          "compared system, both scored")  # fmt: skip
    return section


def _expressions(cell: Any) -> list[str]:
    out = []
    for e in parse_list(cell):
        if isinstance(e, dict):
            e = e.get("expression")
        if isinstance(e, str) and e.strip():
            out.append(e)
    return out


def span_section(
    predicted: Table,
    reference: Table,
    *,
    pred_key: Sequence[str],
    ref_key: Sequence[str],
    pred_col: str,
    ref_col: str,
    group: str | None = None,
) -> Section:
    """Close-reading span P/R/F1, pooled over passages, per group of the predicted table.

    A cell may hold one expression, a list, or a list of ``{"expression": ...}`` objects (JSON
    or Python literal); reference rows with the same key are pooled (several annotators).
    """
    predicted.require(*pred_key, pred_col)
    reference.require(*ref_key, ref_col)
    refs: dict[tuple[str, ...], list[str]] = {}
    for row in reference.rows:
        refs.setdefault(tuple(str(row.get(k)) for k in ref_key), []).extend(
            _expressions(row.get(ref_col))
        )
    rows = []
    expressions = 0
    for g, mask in _groups(predicted, group):
        preds: dict[tuple[str, ...], list[str]] = {}
        for row, keep in zip(predicted.rows, mask, strict=True):
            if keep:
                key = tuple(str(row.get(k)) for k in pred_key)
                preds.setdefault(key, []).extend(_expressions(row.get(pred_col)))
        s = span_prf(preds, refs)
        expressions += s.tp + s.fp + s.fn
        rows.append({
            "group": g, "reference": ref_col, "judge": pred_col, "passages": len(preds),
            "tp": s.tp, "fp": s.fp, "fn": s.fn, "precision": s.precision, "recall": s.recall,
            "f1": s.f1, "p_ci_low": s.precision_ci[0], "p_ci_high": s.precision_ci[1],
            "r_ci_low": s.recall_ci[0], "r_ci_high": s.recall_ci[1],
        })  # fmt: skip
    cols = ["group", "reference", "judge", "passages", "tp", "fp", "fn", "precision", "recall",
            "f1", "p_ci_low", "p_ci_high", "r_ci_low", "r_ci_high"]  # fmt: skip
    section = Section("spans", "Span agreement (close-reading matcher)", cols, rows)
    if not expressions:
        section.rows = []
        section.absent = f"no expression in {pred_col} or {ref_col}"
    return section
