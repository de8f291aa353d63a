"""Which items to send to humans: a probability per item that grows with the judge's uncertainty,
and a draw (active statistical inference; Zrnic & Candès, ICML 2024).

:func:`label_plan` takes the rows :func:`judge_engine.estimate` takes (``item``, ``prediction``,
optionally the ``by`` column) with, where the run measured it, the judge's uncertainty about each
item, read from the first of:

- ``uncertainty``: the judge's expected error on the item (a standard deviation, >= 0);
- ``confidence``: the probability that the judge's verdict is right (issue 25's per-verdict
  confidence): its expected squared error as a 0/1 verdict is 1 - confidence, so the uncertainty
  is √(1 - confidence);
- ``predictions``: the scores of the item's repeats: their spread (standard deviation);

else every item is equally uncertain, and the plan is uniform. The probabilities are proportional
to the uncertainty, scaled to the budget with none above 1, and mixed with a uniform share (at
least ``floor``, more if an uninformative uncertainty would cost more than ``max_cost``) so that
no inverse-probability weight explodes (:func:`judge_engine.stats.ppi.inclusion_probabilities`).
Items are then drawn independently, each with its probability (Poisson sampling, the design the
active estimator's interval assumes): the number drawn varies around the budget.

With ``target_width`` the budget of each group is the label count a pilot says that width needs
(:func:`judge_engine.stats.ppi.labels_needed`); the rows' labels are the pilot, taken as a uniform
draw with probability n₀/N (or drawn with the rows' own ``sampling_probability``, an earlier plan's),
and each item's probability is that of being labelled in either phase: 1 - (1 - π₀)(1 - π₁). The
second phase's size depends on the pilot's labels (its variance), so its probabilities are not
fixed before every label is seen: a two-phase design whose small dependence the interval ignores,
as sample-size re-estimation usually does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from judge_engine.stats import ppi
from judge_engine.trust.estimates import SAMPLING_PROBABILITY, as_rows, group_key, missing, number

DEFAULT_FLOOR = 0.2
"""The least uniform share of every probability (Zrnic & Candès suggest 0.2-0.5)."""
DEFAULT_MAX_COST = 1.05
"""The uniform share is raised until the plan would cost at most 5% more variance than uniform
labelling (about 2.5% width) if the judge's uncertainty turned out to say nothing
(:func:`judge_engine.stats.ppi.inclusion_probabilities`). A judge's uncertainty is a proxy: where
it says nothing, unequal weights 1/π only widen the interval and, with a few dozen heavy-tailed
labels, cost coverage. tests/stats/test_ppi.py measures both sides: an informative uncertainty
still narrows the interval by 7-8% at this cost (29% uncapped, on binary labels), a pure-noise
one widens it by about 3% (24% uncapped)."""

SOURCES = ("uncertainty", "confidence", "predictions")


class LabelPlan(list):  # type: ignore[type-arg]
    """The plan's rows (the input rows with ``uncertainty``, ``sampling_probability`` and
    ``selected`` added), and what was planned: ``budget`` (per group in ``budgets``),
    ``expected`` (Σ π), ``drawn``, ``seed``, ``source`` of the uncertainty and ``notes``."""

    budget: float
    budgets: dict[str, float]
    drawn: int
    seed: int
    source: str
    notes: list[str]

    @property
    def expected(self) -> float:
        return float(sum(r[SAMPLING_PROBABILITY] for r in self))


def uncertainty_of(row: Mapping[str, Any], where: str) -> tuple[float | None, str]:
    """The row's uncertainty and where it came from (None, "" when the row has none)."""
    if "uncertainty" in row and not missing(row["uncertainty"]):
        u = number(row["uncertainty"], f"{where}.uncertainty")
        if u < 0:
            raise ValueError(f"{where}.uncertainty: expected a number >= 0, got {u!r}")
        return u, "uncertainty"
    if "confidence" in row and not missing(row["confidence"]):
        c = number(row["confidence"], f"{where}.confidence")
        if not 0 <= c <= 1:
            raise ValueError(f"{where}.confidence: expected a probability in [0, 1], got {c!r}")
        return math.sqrt(1 - c), "confidence"
    repeats = row.get("predictions")
    if repeats is not None and not missing(repeats):
        if isinstance(repeats, str | bytes | Mapping) or not isinstance(repeats, Iterable):
            raise ValueError(f"{where}.predictions: expected the scores of the item's repeats (a list), got "
                             f"{type(repeats).__name__}")
        values = [number(v, f"{where}.predictions[{j}]") for j, v in enumerate(repeats) if not missing(v)]
        if len(values) >= 2:
            return float(np.std(values)), "predictions"
    return None, ""


def label_plan(rows: Any, budget: float | None = None, by: str | None = None, *, target_width: float | None = None,
               alpha: float = 0.05, seed: int = 0, floor: float = DEFAULT_FLOOR,
               max_cost: float | None = DEFAULT_MAX_COST) -> Any:
    """Each item's probability of being sent to humans, and a draw.

    Args:
        rows: one per item (a list of dicts or a DataFrame): ``item``, ``prediction``, optionally
            the ``by`` column, ``uncertainty``/``confidence``/``predictions`` (see the module) and,
            with ``target_width``, the pilot's ``label``.
        budget: the expected number of labels (split across groups in proportion to their items).
        by: the column whose values are the groups.
        target_width: instead of a budget: the interval width (hi - lo) each group should reach,
            at level ``alpha``, judged from the pilot labels in the rows (2 or more per group).
        seed: the draw's seed.
        floor: the least uniform share of each probability, in [0, 1].
        max_cost: the most variance (a factor of uniform labelling's) the plan may cost if the
            uncertainty says nothing; the uniform share is raised to keep it (None: no limit).

    Returns:
        A :class:`LabelPlan` (a list of the rows, each with ``uncertainty``,
        ``sampling_probability`` and ``selected``), or a DataFrame with those columns (and the
        plan's figures in ``.attrs``) when ``rows`` is one.

    Raises:
        ValueError: a bad row (its index and field named), budget, floor or target width.
    """
    frame = rows if hasattr(rows, "to_dict") and hasattr(rows, "columns") else None
    records = [dict(r) for r in as_rows(rows)]
    if not records:
        raise ValueError("rows: empty (one row per item expected)")
    if (budget is None) == (target_width is None):
        raise ValueError("label_plan: give a budget (labels) or a target_width, one of them")
    if budget is not None and not (ppi.is_real(budget) and budget > 0):
        raise ValueError(f"budget: expected a positive number of labels, got {budget!r}")
    ppi.check_alpha(alpha)
    if not (ppi.is_real(floor) and 0 <= floor <= 1):
        raise ValueError(f"floor: expected a share in [0, 1], got {floor!r}")
    groups: dict[str, list[int]] = {}
    sources: set[str] = set()
    uncertain: list[float | None] = []
    for i, row in enumerate(records):
        groups.setdefault(group_key(row, by, f"rows[{i}]"), []).append(i)
        u, source = uncertainty_of(row, f"rows[{i}]")
        uncertain.append(u)
        sources.add(source)
    sources.discard("")
    notes: list[str] = []
    known = [u for u in uncertain if u is not None]
    if known and len(known) < len(uncertain):
        fill = float(np.mean(known))
        notes.append(f"{len(uncertain) - len(known):,} items have no uncertainty: each gets the mean of the others "
                     f"({fill:.3g})")
        uncertain = [fill if u is None else u for u in uncertain]
    u_all = np.array([0.0 if u is None else u for u in uncertain])
    total = float(sum(len(ix) for ix in groups.values()))
    if budget is not None and budget > total:
        raise ValueError(f"budget: {budget:g} labels asked for {int(total):,} items")
    pi = np.zeros(len(records))
    draw = pi  # the probability each item is drawn with now (a pilot's second phase: its own)
    budgets: dict[str, float] = {}
    for name, index in groups.items():
        shape = u_all[index]
        if target_width is None:
            assert budget is not None
            budgets[name] = budget * len(index) / total
            pi[index] = ppi.inclusion_probabilities(shape, budgets[name], floor=floor, max_cost=max_cost)
        else:
            if draw is pi:
                draw = np.zeros(len(records))
            pi[index], draw[index], budgets[name], note = _from_pilot(records, index, name, shape, target_width, alpha,
                                                                      floor, max_cost)
            notes += [note] if note else []
    rng = np.random.default_rng(seed)
    drawn = rng.random(len(records)) < draw
    for i, row in enumerate(records):
        if target_width is not None and not missing(row.get("label")):
            drawn[i] = True  # the pilot's items are labelled already
        row["uncertainty"] = float(u_all[i]) if sources else None
        row[SAMPLING_PROBABILITY] = float(pi[i])
        row["selected"] = bool(drawn[i])
    if target_width is None and any(not missing(r.get("label")) for r in records):
        notes.append("the rows' labels are not used by a plan with a budget (with target_width they are its pilot)")
    plan = LabelPlan(records)
    plan.budget, plan.budgets, plan.drawn, plan.seed = float(sum(budgets.values())), budgets, int(drawn.sum()), seed
    plan.source = "+".join(s for s in SOURCES if s in sources) or "uniform"
    plan.notes = notes
    if frame is None:
        return plan
    out = type(frame).from_records(records, index=frame.index)  # the caller's class and index; no pandas import
    out.attrs.update(budget=plan.budget, budgets=budgets, expected=plan.expected, drawn=plan.drawn, seed=seed,
                     source=plan.source, notes=notes)
    return out


def _from_pilot(records: Sequence[Mapping[str, Any]], index: list[int], name: str, u: np.ndarray, width: float,
                alpha: float, floor: float, max_cost: float | None) -> tuple[np.ndarray, np.ndarray, float, str]:
    """A group's probabilities for ``width``: the pilot's labels say how many are needed; the rest
    are planned over the group's items. Returns each item's probability of being labelled in either
    phase (the estimator's), the second phase's (the draw's), the group's budget and a note."""
    labels, predictions = [], []
    for i in index:
        row = records[i]
        p = row.get("prediction")
        predictions.append(None if missing(p) else number(p, f"rows[{i}].prediction"))
        label = row.get("label")
        labels.append(None if missing(label) else number(label, f"rows[{i}].label"))
    known = [p for p in predictions if p is not None]
    fill = float(np.mean(known)) if known else 0.0
    f = np.array([fill if p is None else p for p in predictions], dtype=float)
    has = np.array([y is not None for y in labels])
    n0, big_n = int(has.sum()), len(index)
    if n0 < 2:
        raise ValueError(f"target_width: group {name!r} has {n0} labelled rows; a pilot of 2 or more labels (more is "
                         "better: 20-30) says how many a width needs")
    y = np.array([v for v in labels if v is not None], dtype=float)
    need = ppi.labels_needed(y, f[has], f[~has], alpha=alpha, width=width).ppi
    note = ""
    if need is None:
        need = big_n
        note = f"{name}: no count of its {big_n:,} items reaches width {width:g}; every item is planned"
    # The pilot's own probabilities when it came from a plan, else a uniform draw of n0 of N.
    planned = [records[i].get(SAMPLING_PROBABILITY) for i in index]
    pilot = np.array([number(p, f"rows[{i}].{SAMPLING_PROBABILITY}") if not missing(p) else n0 / big_n
                      for i, p in zip(index, planned, strict=True)])
    more = max(need - n0, 0)
    if more == 0 or np.all(pilot >= 1):
        return (pilot, np.zeros(big_n), float(n0),
                note or f"{name}: its {n0} pilot labels already reach width {width:g}")
    # Σ (1 - π0) π1 ≈ the labels still needed, with π1 spread as the uncertainty says
    share = float(np.mean(1 - pilot))
    phase2 = ppi.inclusion_probabilities(u, min(more / share, big_n), floor=floor, max_cost=max_cost)
    return 1 - (1 - pilot) * (1 - phase2), phase2, float(max(need, n0)), note
