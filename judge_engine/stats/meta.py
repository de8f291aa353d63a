"""Report sections for ``judge-engine meta``: a judge's scores against human judgments.

All functions take one joined :class:`~judge_engine.stats.tables.Table` (or two, for spans)
and return a :class:`~judge_engine.stats.sections.Section`. Results are given per group
(e.g. language pair) and pooled over all rows (group ``"all"``).
"""

from __future__ import annotations

import json
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
from judge_engine.stats.literalness import OverlapMetric
from judge_engine.stats.reliability import (
    COLUMNS,
    ICC_COLUMNS,
    MULTIRATER,
    PAIRWISE,
    coefficients,
    long_rows,
)
from judge_engine.stats.runs import Outcome, Run
from judge_engine.stats.sections import Section
from judge_engine.stats.spans import mqm_span_agreement, span_prf
from judge_engine.stats.tables import Table, TableError, parse_list

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


MqmErrors = dict[tuple[str, ...], list[dict[str, Any]]]
"""MQM annotations by segment key: each error ``{"span", "severity", "category"}``."""


def mqm_errors(cell: Any) -> list[dict[str, Any]]:
    """The MQM errors of one cell: a list of error objects (``span``, ``severity``,
    ``category``, as a GEMBA-MQM verdict holds them), or a verdict ``{"errors": [...]}``, as a
    real list or JSON text; an empty list for "no error"."""
    if isinstance(cell, str) and cell.strip().startswith("{"):
        try:
            cell = json.loads(cell)
        except json.JSONDecodeError:
            raise TableError(
                f"not an MQM annotation (JSON object expected): {cell[:60]!r}"
            ) from None
    if isinstance(cell, dict):
        cell = cell.get("errors", [])
    return [e for e in parse_list(cell) if isinstance(e, dict)]


def _label(error: dict[str, Any], field: str) -> str:
    value = str(error.get(field) or "").strip().lower()
    return value.split("/")[0].strip() if field == "category" else value


def mqm_span_section(
    reference: MqmErrors,
    judge: MqmErrors,
    *,
    names: tuple[str, str],
    groups: dict[tuple[str, ...], str] | None = None,
) -> Section:
    """MQM span agreement between two annotations of the same segments, per group and pooled.

    Segments annotated on both sides are compared (an empty list is an annotation with no
    error); errors are paired one-to-one by span text (:func:`~.spans.mqm_span_agreement`, the
    close-reading matcher). Precision is the share of the judge's spans the reference also
    marked, recall the share of the reference's spans the judge found, F1 = span match =
    2 matched / (n_reference + n_judge); label match is the share of matched pairs with the same
    severity, and with the same top-level category (``accuracy/mistranslation`` -> accuracy).
    """
    keys = [k for k in reference if k in judge]
    no_span = sum(
        1 for k in keys for e in [*reference[k], *judge[k]] if not str(e.get("span") or "").strip()
    )

    def spans(errors: MqmErrors, key: tuple[str, ...], field: str) -> list[tuple[Any, Any]]:
        return [
            (str(e["span"]), _label(e, field))
            for e in errors[key]
            if str(e.get("span") or "").strip()
        ]

    labels = [groups.get(k, "") for k in keys] if groups else []
    rows = []
    for g in [*dict.fromkeys(labels), POOLED] if groups else [POOLED]:
        chosen = [k for k, lab in zip(keys, labels or [POOLED] * len(keys), strict=True)
                  if g in (lab, POOLED)]  # fmt: skip
        by = {f: mqm_span_agreement({k: spans(reference, k, f) for k in chosen},
                                    {k: spans(judge, k, f) for k in chosen})
              for f in ("severity", "category")}  # fmt: skip
        r = by["severity"]
        rows.append({
            "group": g, "reference": names[0], "judge": names[1], "segments": len(chosen),
            "n_reference": r.n_a, "n_judge": r.n_b, "matched": r.matched, "precision": r.precision,
            "recall": r.recall, "f1": r.f1, "severity_match": r.label_match,
            "category_match": by["category"].label_match,
        })  # fmt: skip
    cols = ["group", "reference", "judge", "segments", "n_reference", "n_judge", "matched",
            "precision", "recall", "f1", "severity_match", "category_match"]  # fmt: skip
    section = Section(
        "mqm_spans", "MQM span agreement (span match = F1; label match among matched)", cols, rows
    )
    if not keys:
        section.rows, section.absent = [], f"no segment annotated in both {names[0]} and {names[1]}"
    elif no_span:
        section.notes.append(
            f"{no_span} errors without a span text are left out (nothing to match)"
        )
    return section


def run_mqm_errors(run: Run, judge: str, *, temperature: float | None = None) -> MqmErrors:
    """A judge's MQM errors per item from a run's verdicts (``verdict["errors"]``): for each item
    its first scored answer (lowest temperature, then repeat), at ``temperature`` if given."""
    chosen: dict[str, Outcome] = {}
    for o in run.outcomes:
        if o.judge != judge or o.status != "scored" or not isinstance(o.verdict, dict):
            continue
        if temperature is not None and o.temperature != temperature:
            continue
        best = chosen.get(o.item_id)
        if best is None or (o.temperature, o.repeat) < (best.temperature, best.repeat):
            chosen[o.item_id] = o
    return {(item,): mqm_errors(o.verdict) for item, o in chosen.items()}


def table_mqm_errors(table: Table, column: str, key: Sequence[str]) -> MqmErrors:
    """MQM errors per key from a table column (rows with the same key are pooled)."""
    table.require(column, *key)
    out: MqmErrors = {}
    for row in table.rows:
        out.setdefault(tuple(str(row.get(k)) for k in key), []).extend(mqm_errors(row.get(column)))
    return out


def literalness_section(
    table: Table,
    *,
    item: str,
    system: str,
    text: str,
    human: Collection[str],
    group: str | None = None,
    metric: OverlapMetric = "chrf",
    tokenize: str | None = None,
) -> Section:
    """LitEval's literalness table (:mod:`~judge_engine.stats.literalness`) per group: each
    system's outputs against each system's outputs for the same source (``item``).

    Without ``group`` the rows are pooled; with it, per group only (pooling target languages
    would compare character n-grams across languages).
    """
    from judge_engine.stats.literalness import literalness_rows

    table.require(item, system, text)
    values = [str(v) for v in table.values(group)] if group else [POOLED] * len(table.rows)
    rows: list[dict[str, Any]] = []
    columns: dict[str, None] = {}
    for g in dict.fromkeys(values):
        outputs: dict[str, dict[str, list[str]]] = {}
        for row, v in zip(table.rows, values, strict=True):
            out = row.get(text)
            if v == g and isinstance(out, str) and out.strip():
                by_system = outputs.setdefault(str(row.get(item)), {})
                by_system.setdefault(str(row.get(system)), []).append(out)
        systems, found = literalness_rows(
            outputs, human=set(human), metric=metric, tokenize=tokenize
        )
        columns.update(dict.fromkeys(systems))
        rows += [{"group": g, **r} for r in found]
    name = "chrF" if metric == "chrf" else "BLEU"
    title = (f"Literalness: {name} of each system's outputs (row) against each system's (column) "
             "for the same source")  # fmt: skip
    cols = ["group", "system", "sources", *columns, "vs_machine", "vs_human"]
    section = Section("literalness", title, cols, rows)
    if not rows:
        section.absent = f"no text in column {text!r}"
    return section
