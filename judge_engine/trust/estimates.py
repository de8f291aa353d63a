"""A system's human-scale score with a valid interval: every judge verdict plus a few human labels
(prediction-powered inference), per group, with differences, ranks and the labels a target width
needs.

:func:`estimate` takes rows, one per item::

    {"item": "seg-17", "prediction": 71.0, "label": -4.0, "group": "gpt-4o",
     "sampling_probability": 0.12}

``prediction`` is the judge's score (a number, or 0/1 / true/false), ``label`` the human's (None
where nobody labelled the item), ``group`` optional (``by="group"`` estimates per group) and
``sampling_probability`` optional: the probability the item had of being drawn for labelling
(:func:`judge_engine.label_plan`'s); when the rows carry it, the active-inference estimator is used,
else the labelled items are taken for a uniform random sample (PPI++). The estimand is the mean
human label over the group's items. An item the judge left unscored (``prediction`` None) enters
with the group's mean prediction: the labels correct for it as for any poor prediction, the
estimand stays every item's mean, and the count is reported as ``n_unscored``.

The formulas are :mod:`judge_engine.stats.ppi`'s; a run directory's rows are
:mod:`judge_engine.trust.estimate_rows`'.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judge_engine.stats import ppi

METHODS = ("ppi++", "ppi", "classical")
"""``ppi++``: λ tuned for power (the default); ``ppi``: λ = 1; ``classical``: the labels alone."""

CORRECTION = "bonferroni"
SAMPLING_PROBABILITY = "sampling_probability"


def as_rows(rows: Any) -> list[Mapping[str, Any]]:
    """Rows as a list of mappings: a list of dicts, or a pandas DataFrame (``to_dict("records")``)."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):
        rows = rows.to_dict("records")
    if isinstance(rows, Mapping) or isinstance(rows, str | bytes) or not isinstance(rows, Iterable):
        raise ValueError("rows: expected a list of dicts (one per item) or a DataFrame")
    out = list(rows)
    for i, row in enumerate(out):
        if not isinstance(row, Mapping):
            raise ValueError(f"rows[{i}]: expected a dict, got {type(row).__name__}")
    return out


def missing(value: Any) -> bool:
    """None, NaN (pandas' missing) or a blank string."""
    if value is None:
        return True
    if isinstance(value, float | np.floating) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def number(value: Any, where: str) -> float:
    """A row's number: an int, float, bool (1/0) or numpy scalar, finite."""
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, int | float | np.integer | np.floating):
        out = float(value)
        if math.isfinite(out):
            return out
    raise ValueError(f"{where}: expected a number or true/false, got {value!r}")


def group_key(row: Mapping[str, Any], by: str | None, where: str) -> str:
    if by is None:
        return "all"
    if by not in row or missing(row[by]):
        raise ValueError(f"{where}: no {by!r} (by={by!r} names the column that groups the rows)")
    return str(row[by])


@dataclass
class Group:
    """One group's items, read and checked."""

    name: str
    items: list[str]
    predictions: list[float | None]
    labels: list[float | None]
    probabilities: list[float] | None

    def filled_predictions(self) -> tuple[np.ndarray, int]:
        """Predictions with the unscored ones at the group's mean prediction, and their count."""
        known = [p for p in self.predictions if p is not None]
        fill = float(np.mean(known)) if known else 0.0
        out = np.array([fill if p is None else p for p in self.predictions], dtype=float)
        return out, len(self.predictions) - len(known)


def read_groups(rows: Any, by: str | None) -> list[Group]:
    """The rows split by ``by``, each value checked (the row and field named)."""
    rows = as_rows(rows)
    if not rows:
        raise ValueError("rows: empty (one row per item expected)")
    active = [SAMPLING_PROBABILITY in r and not missing(r[SAMPLING_PROBABILITY]) for r in rows]
    if any(active) and not all(active):
        i = active.index(False)
        raise ValueError(f"rows[{i}]: no {SAMPLING_PROBABILITY} (other rows have one: every item's probability "
                         "of being drawn for labelling is needed, labelled or not)")
    if not any("label" in r for r in rows):
        raise ValueError(f"rows: no 'label' in any row (the human's score of the item, None where unlabelled; the "
                         f"rows have {', '.join(map(repr, rows[0]))})")
    groups: dict[str, Group] = {}
    seen: dict[tuple[str, str], int] = {}
    for i, row in enumerate(rows):
        where = f"rows[{i}]"
        if "prediction" not in row:
            raise ValueError(f"{where}: no 'prediction' (the judge's score of the item; None if unscored)")
        name = group_key(row, by, where)
        group = groups.setdefault(name, Group(name, [], [], [], [] if active[0] else None))
        item = str(row["item"]) if "item" in row and not missing(row["item"]) else f"#{i}"
        if (name, item) in seen:
            raise ValueError(f"{where}: item {item!r} again (first at rows[{seen[(name, item)]}]); one row per item")
        seen[(name, item)] = i
        prediction = row["prediction"]
        label = row.get("label")
        group.items.append(item)
        group.predictions.append(None if missing(prediction) else number(prediction, f"{where}.prediction"))
        group.labels.append(None if missing(label) else number(label, f"{where}.label"))
        if group.probabilities is not None:
            p = number(row[SAMPLING_PROBABILITY], f"{where}.{SAMPLING_PROBABILITY}")
            if not 0 < p <= 1:
                raise ValueError(f"{where}.{SAMPLING_PROBABILITY}: expected a probability in (0, 1], got {p!r}")
            group.probabilities.append(p)
    return list(groups.values())


def estimate(rows: Any, *, alpha: float = 0.05, by: str | None = None, method: str = "ppi++",
             differences: bool = False, target_width: float | None = None) -> dict[str, Any]:
    """The mean human score of each group's items, from the judge's prediction of every item and
    the human labels of some, with a 1 - ``alpha`` confidence interval.

    Args:
        rows: one per item (a list of dicts or a DataFrame): ``item``, ``prediction``, ``label``
            (None: unlabelled), optionally the ``by`` column and ``sampling_probability``.
        alpha: 1 - the intervals' coverage.
        by: the column whose values are the groups (e.g. ``"group"``); None: one group, ``all``.
        method: ``"ppi++"`` (power-tuned λ), ``"ppi"`` (λ = 1) or ``"classical"`` (labels alone).
        differences: add every pair's difference and a ranking with simultaneous intervals
            (Bonferroni), for groups with disjoint items.
        target_width: add, per group, how many uniformly drawn labels an interval of this width
            (hi - lo) needs, from the labels there are (a pilot).

    Returns:
        ``{"alpha", "method", "estimator", "groups": [{"group", "estimate", "ci", "se",
        "n_labelled", "n_unlabelled", "n_unscored", "lambda", "judge_mean", "classical":
        {"estimate", "ci"}, "effective_labels"}], "notes"}``, with ``differences``, ``ranking``
        and ``correction`` when asked, and ``labels_needed`` per group with ``target_width``. A
        group with fewer than 2 labels has ``estimate`` None and a ``reason``.

    Raises:
        ValueError: a bad row (its index and field named), alpha, method or target width.
    """
    ppi.check_alpha(alpha)
    if method not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    groups = read_groups(rows, by)
    active = groups[0].probabilities is not None
    notes: list[str] = []
    results, fitted = [], []
    for group in groups:
        result, fit = _group(group, alpha, method, target_width)
        results.append(result)
        if fit is not None:
            fitted.append((group.name, fit))
        elif "reason" in result:
            notes.append(f"{group.name}: {result['reason']}")
    out: dict[str, Any] = {
        "alpha": float(alpha), "method": method,
        "estimator": "active" if active else "uniform",
        "groups": results,
    }  # fmt: skip
    if differences:
        out.update(compare(fitted, alpha=alpha))
    if unscored := sum(r["n_unscored"] for r in results):
        notes.append(f"{unscored:,} items have no prediction (the judge left them unscored): each enters with its "
                     "group's mean prediction, and the labels correct for it")
    out["notes"] = notes
    return out


def _group(group: Group, alpha: float, method: str, target_width: float | None
           ) -> tuple[dict[str, Any], ppi.MeanEstimate | None]:
    f, unscored = group.filled_predictions()
    labelled = np.array([y is not None for y in group.labels])
    y = np.array([np.nan if v is None else v for v in group.labels], dtype=float)
    n = int(labelled.sum())
    base: dict[str, Any] = {
        "group": group.name, "n_labelled": n, "n_unlabelled": len(f) - n, "n_unscored": unscored,
        "judge_mean": _num(float(np.mean([p for p in group.predictions if p is not None])))
        if len(group.predictions) > unscored else None,
    }  # fmt: skip
    if n < 2:
        return {**base, "estimate": None, "ci": None, "se": None, "lambda": None, "classical": None,
                "effective_labels": None, "reason": f"2 or more human labels are needed, it has {n}"}, None
    if group.probabilities is not None:
        pi = np.array(group.probabilities)
        lam, shift = {"ppi++": (None, None), "ppi": (1.0, 0.0), "classical": (0.0, None)}[method]
        fit = ppi.active_mean(f, y, pi, alpha=alpha, lam=lam, shift=shift)
        classical = ppi.active_mean(f, y, pi, alpha=alpha, lam=0.0)
    else:
        lam = {"ppi++": None, "ppi": 1.0, "classical": 0.0}[method]
        fit = ppi.ppi_mean(y[labelled], f[labelled], f[~labelled], alpha=alpha, lam=lam)
        classical = ppi.classical_mean(y[labelled], alpha=alpha)
    result = {
        **base, "estimate": fit.estimate, "ci": list(fit.ci), "se": fit.se, "lambda": fit.lam,
        "classical": {"estimate": classical.estimate, "ci": list(classical.ci), "se": classical.se},
        "effective_labels": _num(fit.effective_labels),
    }  # fmt: skip
    if target_width is not None:
        result["labels_needed"] = _needed(group, f, y, labelled, alpha, target_width)
    return result, fit


def _needed(group: Group, f: np.ndarray, y: np.ndarray, labelled: np.ndarray, alpha: float,
            width: float) -> dict[str, Any]:
    need = ppi.labels_needed(y[labelled], f[labelled], f[~labelled], alpha=alpha, width=width)
    out: dict[str, Any] = {"width": need.width, "ppi": need.ppi, "classical": need.classical,
                           "have": int(labelled.sum()), "items": len(f)}
    if need.ppi is None:
        out["reason"] = f"no count of {group.name}'s {len(f):,} items reaches that width"
    if group.probabilities is not None:
        out["note"] = "counts for labels drawn uniformly at random, from these labels' variances"
    return out


def compare(fitted: Sequence[tuple[str, ppi.MeanEstimate]], *, alpha: float) -> dict[str, Any]:
    """Pairwise differences, ranks and simultaneous intervals of the groups with an estimate."""
    k = len(fitted)
    pairs = ppi.differences(fitted, alpha=alpha)
    ranges = ppi.rank_ranges(fitted, alpha=alpha) if k > 1 else {name: (1, 1) for name, _ in fitted}
    order = sorted(fitted, key=lambda item: -item[1].estimate)
    simultaneous = alpha / k if k else alpha
    ranking = [{
        "group": name, "rank": i + 1, "rank_range": list(ranges[name]), "estimate": fit.estimate,
        "simultaneous_ci": list(fit.interval(simultaneous)),
    } for i, (name, fit) in enumerate(order)]  # fmt: skip
    return {
        "differences": [{
            "a": d.a, "b": d.b, "difference": d.difference, "se": d.se, "ci": list(d.ci),
            "simultaneous_ci": list(d.simultaneous_ci), "p_value": d.p_value,
        } for d in pairs],  # fmt: skip
        "ranking": ranking,
        "correction": {
            "method": CORRECTION,
            "groups": f"each group's simultaneous_ci at alpha/{k} (all {k} hold together with probability >= "
                      f"{1 - alpha:g})",
            "pairs": f"each difference's simultaneous_ci and the rank ranges at alpha/{len(pairs)} (the pairs)",
            "independence": "groups are taken to have disjoint items with labels drawn separately",
        },
    }  # fmt: skip


def _num(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
