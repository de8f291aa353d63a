"""The cascade guarantee's document: :func:`judge_engine.calibrate` with ``guarantee="cascade"``
(the thresholds tested together at the full delta, :mod:`judge_engine.stats.whole_cascade`).

It keeps the stage guarantee's shape (:mod:`judge_engine.trust.calibration`), so that every
reader (the thresholds file, ``calibrate``'s table, a cascade's plan) reads both, with:

- ``guarantee``: ``"cascade"``; ``statement``: the guarantee in words; ``delta_rule``: null
  (delta is not shared among the stages);
- ``answered``, ``errors``, ``agreement``, ``coverage`` and each stage's ``threshold``,
  ``offered``, ``answered``, ``errors``: the configuration used, on every labelled item;
- ``bound``: the bound of the cascade's error rate that passed, on its test folds (null when
  nothing passed); each stage's ``bound`` is null (no stage is tested on its own) and its
  ``delta`` the test's level, delta / folds;
- ``test``: the test the guarantee rests on, ``{"fold", "folds", "level", "pilot_items",
  "test_items", "answered", "errors", "bound", "coverage"}`` (``fold`` counted from 1;
  ``answered`` and ``errors`` on its test items; ``coverage``: the share of the pooled items,
  the items to be judged and the labelled ones, its thresholds answer), or null;
- ``folds``: each fold as the pilot (``{"fold", "pilot_items", "test_items", "configurations",
  "skipped", "tested", "passed", "stopped_at"}``: the configurations on its path, how many came
  before where its test started, how many were tested; the last two ``{"thresholds",
  "coverage", "answered", "errors", "bound"}`` or null);
- ``ordering``: what ordered the tests, ``{"unlabelled", "costs", "costs_given", "max_cost"}``
  (the items to be judged; the costs per item used, assumed when not given; the cost limit);
- ``more_data``: what a larger calibration set would buy, ``[{"coverage", "error_rate",
  "calibration_items", "more"}]`` for each share of the pooled items above the one answered
  (:func:`judge_engine.stats.whole_cascade.more_data`; ``calibration_items`` null: no number of
  items, the error rate there is at or above the risk).

``coverage``, ``answered`` and ``errors`` at the top are the labelled items' under the
thresholds used (as for the stage guarantee); ``test.coverage`` is the share of every item.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from judge_engine.stats.risk_control import guarantee
from judge_engine.stats.whole_cascade import (
    FoldFit,
    PathTest,
    answered_by,
    calibrate_whole,
    cost_per_item,
    more_data,
)


def whole_document(confidence: NDArray[np.float64], error: NDArray[np.bool_], keys: Sequence[str],
                   unlabelled: NDArray[np.float64], names: Sequence[str], *, risk: float, delta: float,
                   min_items: int, costs: Sequence[float] | None, max_cost: float | None,
                   calibration: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """The document of a cascade guarantee (module docstring) for the labelled items' matrices,
    their ids and the unlabelled items' confidences; ``calibration`` and ``notes`` are the rows'
    (:func:`judge_engine.trust.calibration.calibration_section`)."""
    fit = calibrate_whole(confidence, error, keys, risk=risk, delta=delta, min_items=min_items, unlabelled=unlabelled,
                          costs=costs, max_cost=max_cost)
    thresholds = np.array([np.nan if t is None else t for t in fit.thresholds], dtype=float)
    who = answered_by(thresholds, confidence)
    items = len(keys)
    stages: list[dict[str, Any]] = []
    for s, name in enumerate(names):
        reached = (who < 0) | (who >= s)  # no earlier stage answered them
        offered = int(reached.sum())
        answered = int(np.sum(who == s))
        stages.append({
            "stage": name, "threshold": fit.thresholds[s], "answered": answered,
            "errors": int(error[who == s, s].sum()), "bound": None, "delta": fit.level, "offered": offered,
            "judged": int(np.sum(reached & np.isfinite(confidence[:, s]))), "start": fit.start,
            "escalated": offered - answered, "escalation_rate": (offered - answered) / offered if offered else None,
            "stopped_at": None, "needed": None})
    answered = sum(s["answered"] for s in stages)
    errors = sum(s["errors"] for s in stages)
    test = fit.test
    extra = more_data(fit, confidence, error, keys, unlabelled=unlabelled, min_items=min_items)
    document: dict[str, Any] = {
        "risk": risk, "delta": delta, "delta_rule": None, "guarantee": "cascade",
        "statement": guarantee(risk, delta, "bonferroni", len(names), "cascade"), "min_items": min_items,
        "items": items, "coverage": answered / items if items else 0.0, "answered": answered, "errors": errors,
        "agreement": 1 - errors / answered if answered else None, "bound": None if test is None else test.bound,
        "stages": stages, "cost": None, "calibration": dict(calibration), "nothing_answered": None, "notes": notes,
        "test": None if test is None or fit.chosen is None else {
            "fold": fit.chosen + 1, "folds": len(fit.folds), "level": fit.level,
            "pilot_items": fit.folds[fit.chosen].pilot_items, "test_items": fit.folds[fit.chosen].test_items,
            "answered": test.answered, "errors": test.errors, "bound": test.bound, "coverage": test.coverage},
        "folds": [_fold(f) for f in fit.folds],
        "ordering": {"unlabelled": fit.unlabelled, "costs": list(fit.costs), "costs_given": fit.costs_given,
                     "max_cost": fit.max_cost},
        "more_data": [{"coverage": m.coverage, "error_rate": m.error_rate, "calibration_items": m.calibration_items,
                       "more": None if m.calibration_items is None else max(0, m.calibration_items - items)}
                      for m in extra],
    }
    if costs is not None:
        for entry, value in zip(stages, costs, strict=True):
            entry["cost_per_item"] = value
        per_item = cost_per_item(thresholds, who, np.asarray(costs, dtype=float))
        last = float(costs[-1])
        document["cost"] = {"per_item": per_item, "last_stage_alone": last,
                            "ratio": per_item / last if last and answered else None}
    return document


def _test(test: PathTest | None) -> dict[str, Any] | None:
    if test is None:
        return None
    return {"thresholds": list(test.thresholds), "coverage": test.coverage, "answered": test.answered,
            "errors": test.errors, "bound": test.bound}


def _fold(fold: FoldFit) -> dict[str, Any]:
    return {"fold": fold.fold + 1, "pilot_items": fold.pilot_items, "test_items": fold.test_items,
            "configurations": fold.configurations,
            "skipped": fold.skipped, "tested": fold.tested, "passed": _test(fold.passed),
            "stopped_at": _test(fold.stopped_at)}


def whole_advice(document: Mapping[str, Any], *, below: float = 0.5) -> list[str]:
    """What more calibration items would let a cascade guarantee answer, when it answers less
    than ``below`` of the items: one sentence per number of items, fewest first, with the
    largest share it would let the cascade answer (at most three); the shares these items could
    already reach (the tests fell short by chance); and the shares no number of items reaches.
    Empty otherwise."""
    if document.get("coverage", 0.0) >= below:
        return []
    items, risk = document["items"], document["risk"]
    best: dict[int, Mapping[str, Any]] = {}
    beyond, enough = [], []
    for entry in document.get("more_data") or []:
        count = entry["calibration_items"]
        if count is None:
            beyond.append(entry)
        elif count <= items:
            enough.append(entry)
        elif count not in best or entry["coverage"] > best[count]["coverage"]:
            best[count] = entry
    lines = []
    if enough:
        top = max(enough, key=lambda e: e["coverage"])
        lines.append(f"at the error rates measured, these {items:,} labelled items could let it answer about "
                     f"{100 * top['coverage']:.0f}% of the items ({100 * top['error_rate']:.1f}% wrong there): its "
                     "tests fell short where they started, by chance; more items make that rarer")
    lines += [f"about {count:,} labelled items ({entry['more']:,} more than these {items:,}) would let it answer about "
              f"{100 * entry['coverage']:.0f}% of the items, at the error rate measured there "
              f"({100 * entry['error_rate']:.1f}%)" for count, entry in sorted(best.items())[:3]]
    if beyond:
        first = min(beyond, key=lambda e: e["coverage"])
        lines.append(f"no number of labelled items lets it answer {100 * first['coverage']:.0f}% of the items or more: "
                     f"the error rate measured there ({100 * first['error_rate']:.1f}%) is at or above the risk {risk:g}")
    return lines


def tested_line(document: Mapping[str, Any]) -> str:
    """The cascade guarantee's test in one sentence: what passed (the bound) or what stopped
    every fold (a cost limit no configuration keeps to, too few test items, a failed test)."""
    test = document.get("test")
    folds = document.get("folds") or []
    level = document["delta"] / max(len(folds), 1)
    if test is not None:
        return (f"tested as a whole on {test['test_items']:,} labelled items (fold {test['fold']} of {test['folds']} "
                f"ordered the tests): {test['errors']} errors in {test['answered']:,} answered, bound "
                f"{test['bound']:.3f} <= {document['risk']:g} at delta {level:.3g}; its thresholds answer about "
                f"{100 * test['coverage']:.0f}% of all the items")
    ordering = document.get("ordering") or {}
    if folds and not any(f.get("configurations") for f in folds) and ordering.get("max_cost") is not None:
        costs = ordering.get("costs") or [1.0]
        first = costs[0] / costs[-1] if costs[-1] else math.inf
        return (f"tested as a whole: no configuration keeps the expected cost within max_cost "
                f"{ordering['max_cost']:g} of the last stage alone (asking the first stage about every item costs "
                f"{first:.3g} of it): raise --max-cost, or none")
    stops = [f["stopped_at"] for f in folds if f.get("stopped_at")]
    if not stops:
        return "tested as a whole: no configuration was expected to answer enough test items to be tested"
    worst = min(stops, key=lambda t: t["bound"])
    return (f"tested as a whole: no fold passed; the closest, {worst['errors']} errors in {worst['answered']:,} "
            f"answered, bound {worst['bound']:.3f} > {document['risk']:g} at delta {level:.3g}")


def ordering_line(document: Mapping[str, Any]) -> str:
    """What ordered the cascade guarantee's tests, in one sentence: the items to be judged, the
    cost limit and the costs it was read with (assumed ones said)."""
    ordering = document.get("ordering") or {}
    count = ordering.get("unlabelled") or 0
    items = (f"{count:,} items to be judged and each pilot fold's" if count else
             "each pilot fold's own (no items to be judged were given: rows with an empty label)")
    line = f"tests ordered on the confidences of {items}"
    if ordering.get("max_cost") is None:
        return f"{line}; no cost limit"
    costs = ", ".join(f"{c:g}" for c in ordering.get("costs") or [])
    given = "" if ordering.get("costs_given") else f" (costs assumed {costs}: give --costs)"
    return f"{line}; expected cost at most {ordering['max_cost']:g} of the last stage alone{given}"
