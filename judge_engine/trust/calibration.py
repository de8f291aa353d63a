"""``calibrate``: judged rows with human labels -> each cascade stage's confidence threshold with
a guarantee of agreement with humans (the document).

**Rows.** One row per item and stage: ``item``, ``stage``, ``prediction``, ``confidence`` (in
[0, 1]; None or NaN when the stage has no judgment for the item), ``label`` (the human's). Extra
keys are ignored; item ids are compared as text. A prediction agrees with the label when they are equal, numbers compared as
numbers (``"1"``, ``1`` and ``1.0`` agree; CSV cells are text). An item has the same label in
each of its rows, or none in all of them: an item without a label is an item to be judged, read
apart (``calibration.unlabelled``); the cascade guarantee orders its tests by their confidences,
the stage guarantee does not use them (and says so). An item with no row for a stage, or no
confidence there, cannot be answered by that stage and goes on to the next. :class:`~judge_engine.errors.CalibrationError`
(a ``ValueError``) names the row and the field of any bad input.

**The document** :func:`calibrate` returns (and ``judge-engine calibrate --json`` prints)::

    {"risk", "delta", "delta_rule", "guarantee", "statement", "min_items", "items", "coverage",
     "answered", "errors", "agreement", "bound",
     "stages": [{"stage", "threshold", "answered", "errors", "bound", "delta", "offered",
                 "judged", "start", "escalated", "escalation_rate", "stopped_at", "needed",
                 "cost_per_item"}, ...],
     "cost", "calibration": {"items", "rows", "digest", "duplicates", "unlabelled",
                             "unlabelled_digest"}, "nothing_answered", "notes"}

``guarantee`` is ``"stage"`` here (this module's rule: each stage tested on its own) and
``statement`` says it in words; ``bound`` is the largest answering stage's bound (each stage's
error rate is under its own, so the cascade's, their mix, is under the largest). Under
``guarantee="cascade"`` the document has the same fields, read as
:mod:`judge_engine.trust.whole_calibration` says, plus ``test``, ``folds``, ``ordering`` and
``more_data``.

``threshold`` is null when the stage answers nothing (an item is answered by a stage when its
confidence is >= the threshold); ``bound`` is the Clopper-Pearson bound of the error rate at it;
``offered`` the items that reached the stage (every earlier stage left them), ``judged`` those
of them it has a confidence for; ``start`` the fewest items at or above a threshold before it
is tested (``min_items``, and ln(delta) / ln(1 - risk)); ``escalation_rate`` = (offered - answered) / offered;
``stopped_at`` the test that ended its sequence (``{"threshold", "items", "errors", "bound"}``;
for a stage that answers nothing, its highest threshold's); ``needed`` for a stage that answers
nothing: ``{"confidence", "error_rate", "items", "calibration_items"}``, the items at that
confidence and error rate with which the bound would pass (``items`` null: none can, the error
rate is at or above risk). ``coverage`` is the share of the items some stage answered and
``agreement`` the observed agreement on them. With per-item ``costs``: each stage's, and
``cost`` = ``{"per_item", "last_stage_alone", "ratio"}`` (a stage that answers nothing is not
asked, so costs nothing; when no stage answers, ``ratio`` is null: nothing answered is no
saving). ``calibration.digest`` hashes the rows used. ``nothing_answered`` is null when some stage
answers (and always under the cascade guarantee, whose advice is ``more_data``); else ``{"least_min_items", "answered_with_least"}``: the least ``min_items`` that
changes anything at this risk and delta (a threshold needs that many items even with no error)
and how many items the cascade would answer with it (null when ``min_items`` is already that
low); :func:`answering_advice` says it in words.

``calibration.rows`` counts the rows used: a row identical to an earlier one (the same item,
stage, prediction, confidence and label) is counted once, in ``calibration.duplicates``, and
``notes`` says so (the first one's position named); a second row for an item and stage that
differs is an error naming both.

``calibrate(..., output=PATH)`` writes the document as a thresholds file
(:mod:`judge_engine.trust.thresholds`). The statistics are :mod:`judge_engine.stats.risk_control`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from judge_engine.errors import CalibrationError
from judge_engine.rundir.frames import frame_rows, is_frame
from judge_engine.stats.risk_control import (
    DELTA_RULES,
    GUARANTEES,
    CascadeFit,
    CascadeStage,
    DeltaRule,
    Test,
    agreement_key,
    calibrate_cascade,
    cascade_cost,
    guarantee,
    stage_delta,
    start_size,
)
from judge_engine.trust.row_tables import repeated_note
from judge_engine.trust.thresholds import write_thresholds
from judge_engine.trust.whole_calibration import whole_advice, whole_document
from judge_engine.util import jsonio

FIELDS = ("item", "stage", "prediction", "confidence", "label")
Guarantee = Literal["stage", "cascade"]


def calibrate(rows: Iterable[Mapping[str, Any]] | Any, *, stages: Sequence[str], risk: float, delta: float,
              min_items: int = 30, delta_rule: DeltaRule = "bonferroni",
              costs: Mapping[str, float] | Sequence[float] | None = None,
              output: str | Path | None = None, guarantee: Guarantee = "stage",
              max_cost: float | None = 0.5) -> dict[str, Any]:
    """Calibrate a cascade's confidence thresholds on human-labelled items.

    Args:
        rows: dicts of ``item, stage, prediction, confidence, label``, or a pandas DataFrame
            with those columns (module docstring). Rows whose ``label`` is None are the items
            to be judged: under ``guarantee="cascade"`` their confidences shape the order of
            the tests; they are never calibrated on.
        stages: the stages' names, cheapest first.
        risk: alpha: agreement with humans on the answered items is guaranteed >= 1 - risk.
        delta: the guarantee holds with probability >= 1 - delta.
        min_items: the fewest items at or above a threshold before it is tested.
        delta_rule: ``bonferroni`` (each stage at delta / stages: the guarantee covers the whole
            cascade) or ``per_stage`` (each at delta, as the reference code does: each stage on
            its own only, the weaker statement).
        costs: per-item cost of each stage (by name, or in stage order): adds the cascade's
            expected cost per item against the last stage alone.
        output: write the thresholds file here (:func:`judge_engine.trust.thresholds.write_thresholds`).
        guarantee: ``stage`` (each stage's threshold tested on its own, at delta / stages with
            ``bonferroni``) or ``cascade`` (the thresholds tested together at the full delta:
            one guarantee for the error rate among everything the cascade answers,
            :mod:`judge_engine.stats.whole_cascade`; it usually answers far more).
        max_cost: under ``guarantee="cascade"``, the highest expected cost per item the
            thresholds may reach, as a share of asking the last stage about every item (None:
            no limit); with no ``costs``, each stage is taken to cost ten times the one before.

    Returns:
        The document (module docstring): ``{"risk", "delta", "coverage", "stages": [{"stage",
        "threshold", "answered", "errors", "bound", ...}], ...}``.

    Raises:
        CalibrationError: a bad row (its position and field named), stage list, risk, delta,
            ``min_items`` or cost.
    """
    return calibrate_rows(frame_rows(rows) if is_frame(rows) else rows, stages=stages, risk=risk, delta=delta,
                          min_items=min_items, delta_rule=delta_rule, costs=costs, output=output, guarantee=guarantee,
                          max_cost=max_cost)


def calibrate_rows(rows: Iterable[Mapping[str, Any]], *, stages: Sequence[str], risk: float, delta: float,
                   min_items: int = 30, delta_rule: DeltaRule = "bonferroni",
                   costs: Mapping[str, float] | Sequence[float] | None = None, output: str | Path | None = None,
                   where: Callable[[int], str] = lambda i: f"rows[{i}]", guarantee: Guarantee = "stage",
                   max_cost: float | None = 0.5) -> dict[str, Any]:
    """:func:`calibrate` over rows of dicts; ``where(i)`` names the i-th row (0-based) in
    messages (the command line names file lines)."""
    names = _check_settings(stages, risk, delta, min_items, delta_rule)
    _check_guarantee(guarantee, delta_rule, max_cost)
    stage_costs = _check_costs(costs, names)
    start = start_size(risk, stage_delta(delta, len(names), delta_rule), min_items)
    table = _Table.read(rows, names, where, start=start)
    if guarantee == "cascade":
        document = whole_document(table.confidence, table.error, table.keys, table.unlabelled, names, risk=risk,
                                  delta=delta, min_items=min_items, costs=stage_costs, max_cost=max_cost,
                                  calibration=calibration_section(table), notes=table_notes(table, "cascade"))
    else:
        fit = calibrate_cascade(table.confidence, table.error, risk=risk, delta=delta, min_items=min_items,
                                rule=delta_rule)
        document = _document(fit, names, stage_costs, table)
        if not fit.answered:
            document["nothing_answered"] = _with_least_min_items(table, fit)
    if output is not None:
        write_thresholds(document, output)
    return document


def _check_settings(stages: Sequence[str], risk: float, delta: float, min_items: int, rule: str) -> list[str]:
    if isinstance(stages, str) or not stages:
        raise CalibrationError(f"stages must be a non-empty list of names, cheapest first (got {stages!r})")
    names = [str(s) for s in stages]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CalibrationError(f"stages: {', '.join(twice)} named more than once")
    for name, value in (("risk", risk), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise CalibrationError(f"{name} must be a number strictly between 0 and 1 (got {value!r})")
    if isinstance(min_items, bool) or not isinstance(min_items, int) or min_items < 1:
        raise CalibrationError(f"min_items must be a whole number >= 1 (got {min_items!r})")
    if rule not in DELTA_RULES:
        raise CalibrationError(f"delta_rule must be one of {', '.join(DELTA_RULES)} (got {rule!r})")
    return names


def _check_guarantee(kind: Any, rule: str, max_cost: Any) -> None:
    if kind not in GUARANTEES:
        raise CalibrationError(f"guarantee must be one of {', '.join(GUARANTEES)} (got {kind!r})")
    if kind == "cascade" and rule != "bonferroni":
        raise CalibrationError("delta_rule shares delta among the stages of a stage guarantee; a cascade guarantee "
                               "tests the thresholds together at the full delta (leave delta_rule out)")
    if max_cost is not None and (isinstance(max_cost, bool) or not isinstance(max_cost, int | float)
                                 or not 0 < max_cost < math.inf):
        raise CalibrationError(f"max_cost must be a share of the last stage's cost above 0 (e.g. 0.5), or None "
                               f"(got {max_cost!r})")


def _check_costs(costs: Mapping[str, float] | Sequence[float] | None, names: list[str]) -> list[float] | None:
    if costs is None:
        return None
    if isinstance(costs, Mapping):
        unknown = sorted(str(k) for k in costs if k not in names)
        missing = [n for n in names if n not in costs]
        if unknown or missing:
            raise CalibrationError(f"costs: {'no stage ' + ', '.join(unknown) if unknown else ''}"
                                   f"{'; ' if unknown and missing else ''}"
                                   f"{'no cost for ' + ', '.join(missing) if missing else ''}")
        values = [costs[n] for n in names]
    else:
        values = list(costs)
        if len(values) != len(names):
            raise CalibrationError(f"costs: {len(values)} values for {len(names)} stages")
    for name, value in zip(names, values, strict=True):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
            raise CalibrationError(f"costs: stage {name!r}: {value!r} is not a cost per item (a number >= 0)")
    return [float(v) for v in values]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and value.strip() == "")


@dataclass
class _Table:
    """The rows as items x stages matrices, checked: the labelled items' (calibrated on) and the
    unlabelled items' confidences (the items to be judged)."""

    confidence: np.ndarray[Any, np.dtype[np.float64]]
    error: np.ndarray[Any, np.dtype[np.bool_]]
    rows: int
    """Labelled rows used (a repeat counted once)."""
    digest: str
    """A hash of the labelled rows used."""
    repeats: list[tuple[str, str, str]]
    """Rows identical to an earlier one (item, where, where the first is): counted once."""
    keys: list[str]
    """The labelled items' ids, in the matrices' order."""
    unlabelled: np.ndarray[Any, np.dtype[np.float64]]
    """The unlabelled items' confidences, items x stages (NaN: no judgment)."""
    unlabelled_digest: str
    """A hash of the unlabelled rows (they order a cascade guarantee's tests)."""

    @classmethod
    def read(cls, rows: Iterable[Mapping[str, Any]], names: list[str], where: Callable[[int], str], *,
             start: int) -> _Table:
        """``start``: the fewest items a threshold is tested with (the vocabulary check's)."""
        column = {name: s for s, name in enumerate(names)}
        items: dict[str, int] = {}
        labels: list[tuple[Any, int]] = []  # per item: its label key (None: unlabelled) and the row that gave it
        cells: dict[tuple[int, int], tuple[float, Any, int]] = {}  # (item, stage) -> confidence, prediction, row
        canonical: list[list[Any]] = []
        waiting: list[list[Any]] = []  # the unlabelled rows
        repeats: list[tuple[str, str, str]] = []
        count = 0
        for i, row in enumerate(rows):
            count += 1
            item, stage, prediction, confidence, label = _read_row(row, where(i), column)
            at = items.setdefault(item, len(items))
            if at == len(labels):
                labels.append((label, i))
            elif labels[at][0] != label:
                raise CalibrationError(_label_mismatch(row.get("label"), label, item, labels[at], where(i), where))
            key = (at, column[stage])
            if key in cells and _same(cells[key], confidence, prediction):
                repeats.append((item, where(i), where(cells[key][2])))
                continue
            if key in cells:
                raise CalibrationError(f"{where(i)}: a second row for item {item!r} at stage {stage!r} "
                                       f"(the first is {where(cells[key][2])})")
            cells[key] = (confidence, prediction, i)
            (canonical if label is not None else waiting).append(
                [item, stage, prediction, None if math.isnan(confidence) else confidence, label])
        if not count:
            raise CalibrationError("no rows to calibrate on")
        labelled = [at for at, (label, _) in enumerate(labels) if label is not None]
        if not labelled:
            raise CalibrationError(f"no row has a human label: {len(labels):,} items, none labelled, nothing to "
                                   "calibrate on (field 'label')")
        row_of = {at: r for r, at in enumerate(labelled)}
        unlabelled_of = {at: r for r, at in enumerate(a for a in range(len(labels)) if labels[a][0] is None)}
        confidence_m = np.full((len(labelled), len(names)), np.nan)
        error_m = np.zeros((len(labelled), len(names)), dtype=bool)
        unlabelled_m = np.full((len(unlabelled_of), len(names)), np.nan)
        for (at, s), (c, prediction, _) in cells.items():
            if at in unlabelled_of:
                unlabelled_m[unlabelled_of[at], s] = c
                continue
            confidence_m[row_of[at], s] = c
            error_m[row_of[at], s] = not math.isnan(c) and prediction != labels[at][0]
        _check_vocabularies({k: v for k, v in cells.items() if k[0] in row_of}, labels, names, start)
        canonical.sort(key=lambda r: (r[0], r[1]))
        waiting.sort(key=lambda r: (r[0], r[1]))
        keys = list(items)
        return cls(confidence_m, error_m, len(canonical), jsonio.content_hash(canonical), repeats,
                   [keys[at] for at in labelled], unlabelled_m, jsonio.content_hash(waiting))


def _label_mismatch(given: Any, label: Any, item: str, first: tuple[Any, int], here: str,
                    where: Callable[[int], str]) -> str:
    if label is None or first[0] is None:
        return (f"{here}: {'no label' if label is None else f'label {given!r}'} for item {item!r}, but "
                f"{where(first[1])} gave it {'none' if first[0] is None else repr(first[0])}: an item is labelled in "
                "all its rows or in none (none: an item to be judged)")
    return f"{here}: label {given!r} for item {item!r}, but {where(first[1])} gave it {first[0]!r}"


def _same(cell: tuple[float, Any, int], confidence: float, prediction: Any) -> bool:
    """A row's judgment is the cell's (confidences equal, or both missing)."""
    known, said, _ = cell
    return said == prediction and (known == confidence or (math.isnan(known) and math.isnan(confidence)))


def _read_row(row: Any, where: str, column: Mapping[str, int]) -> tuple[str, str, Any, float, Any]:
    if not isinstance(row, Mapping):
        raise CalibrationError(f"{where}: not a row of fields (got {type(row).__name__})")
    absent = [f for f in FIELDS if f not in row]
    if absent:
        raise CalibrationError(f"{where}: no field {', '.join(map(repr, absent))} "
                               f"(a row holds {', '.join(FIELDS)})")
    if _missing(row["item"]):
        raise CalibrationError(f"{where}: item is empty")
    stage = str(row["stage"]).strip() if not _missing(row["stage"]) else ""
    if stage not in column:
        raise CalibrationError(f"{where}: stage {row['stage']!r} is not one of the stages ({', '.join(column)})")
    confidence = _confidence(row["confidence"], where)
    prediction = row["prediction"]
    if not math.isnan(confidence) and _missing(prediction):
        raise CalibrationError(f"{where}: a confidence ({confidence}) without a prediction")
    key = None if _missing(prediction) else agreement_key(prediction)
    label = None if _missing(row["label"]) else agreement_key(row["label"])
    return str(row["item"]), stage, key, confidence, label


def _confidence(value: Any, where: str) -> float:
    if _missing(value):
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise CalibrationError(f"{where}: confidence {value!r} is not a number") from None
    if isinstance(value, bool) or not 0.0 <= number <= 1.0:
        raise CalibrationError(f"{where}: confidence {value!r} is outside [0, 1]")
    return number


def _check_vocabularies(cells: Mapping[tuple[int, int], tuple[float, Any, int]], labels: Sequence[tuple[Any, int]],
                        names: Sequence[str], start: int) -> None:
    """A stage whose predictions never take a value any label takes (``A``/``B`` against the
    reference's 1/2) would count every item an error: say so rather than calibrate on it. A
    stage judging fewer items than a threshold is tested with answers nothing whatever its
    errors, and on so few (one item: one wrong answer) a mismatch is no evidence of two
    vocabularies: the report says how many items are needed instead (:func:`too_few_items`)."""
    seen = {label for label, _ in labels if label is not None}
    for s, name in enumerate(names):
        judged = [p for (_, stage), (c, p, _) in cells.items() if stage == s and not math.isnan(c)]
        predicted = set(judged)
        if len(judged) >= start and not predicted & seen:
            raise CalibrationError(f"stage {name!r}: its predictions ({_few(predicted)}) never take a value the "
                                   f"labels take ({_few(seen)}): write both with the same values")


def _few(values: Iterable[Any]) -> str:
    shown = sorted(map(str, values))
    return ", ".join(shown[:5]) + (", ..." if len(shown) > 5 else "")


# --- the document -----------------------------------------------------------------------------


def _test(test: Test | None) -> dict[str, Any] | None:
    if test is None:
        return None
    return {"threshold": test.threshold, "items": test.items, "errors": test.errors, "bound": test.bound}


def _stage(name: str, stage: CascadeStage) -> dict[str, Any]:
    fit = stage.fit
    needed = None if stage.needed is None else {
        "confidence": stage.needed.confidence, "error_rate": stage.needed.error_rate, "items": stage.needed.items,
        "calibration_items": stage.needed.calibration_items}
    return {"stage": name, "threshold": fit.threshold, "answered": fit.answered, "errors": fit.errors,
            "bound": fit.bound, "delta": fit.delta, "offered": stage.offered, "judged": fit.judged,
            "start": fit.start, "escalated": stage.escalated,
            "escalation_rate": stage.escalated / stage.offered if stage.offered else None,
            "stopped_at": _test(fit.stopped_at), "needed": needed}


def _document(fit: CascadeFit, names: list[str], costs: list[float] | None, table: _Table) -> dict[str, Any]:
    stages = [_stage(name, stage) for name, stage in zip(names, fit.stages, strict=True)]
    bounds = [s["bound"] for s in stages if s["bound"] is not None]
    document: dict[str, Any] = {
        "risk": fit.risk, "delta": fit.delta, "delta_rule": fit.rule, "guarantee": "stage",
        "statement": guarantee(fit.risk, fit.delta, fit.rule, len(names)), "min_items": fit.min_items,
        "items": fit.items, "coverage": fit.coverage, "answered": fit.answered, "errors": fit.errors,
        "agreement": 1 - fit.errors / fit.answered if fit.answered else None,
        # Each answering stage's error rate is under its bound, so the cascade's (their mix) is under the largest.
        "bound": max(bounds) if bounds else None, "stages": stages, "cost": None,
        "calibration": calibration_section(table), "nothing_answered": None, "notes": table_notes(table, "stage"),
    }
    if costs is not None:
        cost = cascade_cost(fit, costs)
        for entry, value in zip(stages, costs, strict=True):
            entry["cost_per_item"] = value
        # A cascade that answers nothing asks no stage: $0 against the last stage is no saving.
        document["cost"] = {"per_item": cost.per_item, "last_stage_alone": cost.last_stage_alone,
                            "ratio": None if math.isnan(cost.ratio) or not fit.answered else cost.ratio}
    return document


def calibration_section(table: _Table) -> dict[str, Any]:
    """The document's ``calibration``: the labelled items and rows used, their digest, the
    duplicates counted once (labelled or not), and the unlabelled items read with a digest of
    their rows."""
    return {"items": len(table.keys), "rows": table.rows, "digest": table.digest, "duplicates": len(table.repeats),
            "unlabelled": len(table.unlabelled), "unlabelled_digest": table.unlabelled_digest}


def table_notes(table: _Table, kind: str) -> list[str]:
    """What the document says of its rows: duplicates counted once; under a stage guarantee,
    unlabelled items not used."""
    notes = repeated_note(None, table.repeats, what="the same item, stage, prediction, confidence and label as an "
                                                    "earlier row")
    if kind == "stage" and len(table.unlabelled):
        count = len(table.unlabelled)
        notes.append(f"{count:,} item{'s' if count > 1 else ''} without a human label: not used by the stage guarantee "
                     "(the cascade guarantee reads their confidences to order its tests)")
    return notes


def _with_least_min_items(table: _Table, fit: CascadeFit) -> dict[str, Any]:
    """For a calibration that answers nothing: the least ``min_items`` that changes anything
    at this risk and delta (below it a threshold still needs that many items with no error), and
    what the cascade would answer with it (None when ``min_items`` is already that low)."""
    least = start_size(fit.risk, stage_delta(fit.delta, len(fit.stages), fit.rule), 1)
    answered = None
    if least < fit.min_items:
        answered = calibrate_cascade(table.confidence, table.error, risk=fit.risk, delta=fit.delta, min_items=least,
                                     rule=fit.rule).answered
    return {"least_min_items": least, "answered_with_least": answered}


def too_few_items(document: Mapping[str, Any]) -> str | None:
    """When the calibration has fewer items than a threshold is tested with (so no stage can
    answer, whatever its errors): how many it has and how many are needed. None otherwise."""
    items, stages = document["items"], document["stages"]
    start = max((s.get("start") or 0 for s in stages), default=0)
    if items >= start:
        return None
    settings = f"--min-items {document['min_items']}" if start == document["min_items"] else (
        f"at risk {document['risk']:g} and delta {document['delta']:g}, above --min-items {document['min_items']}")
    return (f"{items:,} labelled item{'' if items == 1 else 's'} to calibrate on: at least {start:,} labelled items are "
            f"needed, the fewest a threshold is tested with ({settings})")


def answering_advice(document: Mapping[str, Any]) -> list[str]:
    """What would let a stage of a calibration that answers nothing answer, in two sentences
    (three when it has fewer items than a threshold is tested with: :func:`too_few_items` first):
    the calibration items each stage would need at its error rate (fewest first), and what a
    lower ``--min-items`` would do (a file written before 0.2 has no word on it). Empty when some
    stage answers."""
    if document.get("guarantee") == "cascade":
        return [] if document.get("answered") else whole_advice(document)
    if document.get("answered") or any(s.get("threshold") is not None for s in document["stages"]):
        return []
    risk, delta = document["risk"], document["delta"]
    could, cannot, unjudged = [], [], []
    for stage in document["stages"]:
        needed = stage.get("needed")
        if needed is None:
            unjudged.append(stage["stage"])
        elif needed.get("calibration_items") is None:
            cannot.append(stage["stage"])
        else:
            could.append((needed["calibration_items"], stage["stage"], needed["error_rate"]))
    parts = [f"{name} would answer with about {items:,} calibration items at its error rate ({100 * rate:.1f}%)"
             for items, name, rate in sorted(could)]
    if cannot:
        parts.append(f"{', '.join(cannot)}: no number of calibration items (error rate"
                     f"{'s' if len(cannot) > 1 else ''} at or above the risk {risk:g})")
    if unjudged:
        parts.append(f"{', '.join(unjudged)}: no item reached {'them' if len(unjudged) > 1 else 'it'} with a judgment")
    few = too_few_items(document)
    head = [few] if few else []
    nothing = document.get("nothing_answered")
    if not isinstance(nothing, Mapping):
        return [*head, "; ".join(parts)]
    least, answered = nothing["least_min_items"], nothing["answered_with_least"]
    if answered is None:
        lower = (f"--min-items cannot go lower: at risk {risk:g} and delta {delta:g} a threshold needs {least} items "
                 "even with no error")
    elif answered:
        lower = (f"--min-items {least} (the least risk {risk:g} and delta {delta:g} allow; now {document['min_items']}) "
                 f"would answer {answered:,} of these {document['items']:,} items; choose it before calibrating and "
                 "calibrate on other items: a value picked to make these pass has no guarantee")
    else:
        lower = (f"a lower --min-items would not help: even at {least}, the least risk {risk:g} and delta {delta:g} "
                 "allow, no stage answers")
    return [*head, "; ".join(parts), lower]
