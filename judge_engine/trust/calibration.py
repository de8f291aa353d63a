"""``calibrate``: judged rows with human labels -> each cascade stage's confidence threshold with
a guarantee of agreement with humans (the document).

**Rows.** One row per item and stage: ``item``, ``stage``, ``prediction``, ``confidence`` (in
[0, 1]; None or NaN when the stage has no judgment for the item), ``label`` (the human's). Extra
keys are ignored; item ids are compared as text. A prediction agrees with the label when they are equal, numbers compared as
numbers (``"1"``, ``1`` and ``1.0`` agree; CSV cells are text). Every item needs a label, the
same in each of its rows; an item with no row for a stage, or no confidence there, cannot be
answered by that stage and goes on to the next. :class:`~judge_engine.errors.CalibrationError`
(a ``ValueError``) names the row and the field of any bad input.

**The document** :func:`calibrate` returns (and ``judge-engine calibrate --json`` prints)::

    {"risk", "delta", "delta_rule", "guarantee", "min_items", "items", "coverage", "answered",
     "errors", "agreement",
     "stages": [{"stage", "threshold", "answered", "errors", "bound", "delta", "offered",
                 "judged", "start", "escalated", "escalation_rate", "stopped_at", "needed",
                 "cost_per_item"}, ...],
     "cost", "calibration": {"items", "rows", "digest", "duplicates"}, "nothing_answered", "notes"}

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
answers; else ``{"least_min_items", "answered_with_least"}``: the least ``min_items`` that
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

import csv
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from judge_engine.errors import CalibrationError
from judge_engine.rundir.frames import frame_rows, is_frame
from judge_engine.stats.risk_control import (
    DELTA_RULES,
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
from judge_engine.trust.thresholds import write_thresholds
from judge_engine.util import jsonio

FIELDS = ("item", "stage", "prediction", "confidence", "label")


def calibrate(rows: Iterable[Mapping[str, Any]] | Any, *, stages: Sequence[str], risk: float, delta: float,
              min_items: int = 30, delta_rule: DeltaRule = "bonferroni",
              costs: Mapping[str, float] | Sequence[float] | None = None,
              output: str | Path | None = None) -> dict[str, Any]:
    """Calibrate a cascade's confidence thresholds on human-labelled items.

    Args:
        rows: dicts of ``item, stage, prediction, confidence, label``, or a pandas DataFrame
            with those columns (module docstring).
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

    Returns:
        The document (module docstring): ``{"risk", "delta", "coverage", "stages": [{"stage",
        "threshold", "answered", "errors", "bound", ...}], ...}``.

    Raises:
        CalibrationError: a bad row (its position and field named), stage list, risk, delta,
            ``min_items`` or cost.
    """
    return calibrate_rows(frame_rows(rows) if is_frame(rows) else rows, stages=stages, risk=risk, delta=delta,
                          min_items=min_items, delta_rule=delta_rule, costs=costs, output=output)


def calibrate_rows(rows: Iterable[Mapping[str, Any]], *, stages: Sequence[str], risk: float, delta: float,
                   min_items: int = 30, delta_rule: DeltaRule = "bonferroni",
                   costs: Mapping[str, float] | Sequence[float] | None = None, output: str | Path | None = None,
                   where: Callable[[int], str] = lambda i: f"rows[{i}]") -> dict[str, Any]:
    """:func:`calibrate` over rows of dicts; ``where(i)`` names the i-th row (0-based) in
    messages (the command line names file lines)."""
    names = _check_settings(stages, risk, delta, min_items, delta_rule)
    stage_costs = _check_costs(costs, names)
    start = start_size(risk, stage_delta(delta, len(names), delta_rule), min_items)
    table = _Table.read(rows, names, where, start=start)
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
    """The rows as items x stages matrices, checked."""

    confidence: np.ndarray[Any, np.dtype[np.float64]]
    error: np.ndarray[Any, np.dtype[np.bool_]]
    rows: int
    digest: str
    repeats: list[tuple[str, str, str]]
    """Rows identical to an earlier one (item, where, where the first is): counted once."""

    @classmethod
    def read(cls, rows: Iterable[Mapping[str, Any]], names: list[str], where: Callable[[int], str], *,
             start: int) -> _Table:
        """``start``: the fewest items a threshold is tested with (the vocabulary check's)."""
        column = {name: s for s, name in enumerate(names)}
        items: dict[str, int] = {}
        labels: list[tuple[Any, int]] = []  # per item: its label key and the row that gave it
        cells: dict[tuple[int, int], tuple[float, Any, int]] = {}  # (item, stage) -> confidence, prediction, row
        canonical = []
        repeats: list[tuple[str, str, str]] = []
        count = 0
        for i, row in enumerate(rows):
            count += 1
            item, stage, prediction, confidence, label = _read_row(row, where(i), column)
            at = items.setdefault(item, len(items))
            if at == len(labels):
                labels.append((label, i))
            elif labels[at][0] != label:
                raise CalibrationError(f"{where(i)}: label {row.get('label')!r} for item {item!r}, but "
                                       f"{where(labels[at][1])} gave it {labels[at][0]!r}")
            key = (at, column[stage])
            if key in cells and _same(cells[key], confidence, prediction):
                repeats.append((item, where(i), where(cells[key][2])))
                continue
            if key in cells:
                raise CalibrationError(f"{where(i)}: a second row for item {item!r} at stage {stage!r} "
                                       f"(the first is {where(cells[key][2])})")
            cells[key] = (confidence, prediction, i)
            canonical.append([item, stage, prediction, None if math.isnan(confidence) else confidence, label])
        if not count:
            raise CalibrationError("no rows to calibrate on")
        confidence_m = np.full((len(items), len(names)), np.nan)
        error_m = np.zeros((len(items), len(names)), dtype=bool)
        for (at, s), (c, prediction, _) in cells.items():
            confidence_m[at, s] = c
            error_m[at, s] = not math.isnan(c) and prediction != labels[at][0]
        _check_vocabularies(cells, labels, names, start)
        canonical.sort(key=lambda r: (r[0], r[1]))
        return cls(confidence_m, error_m, len(canonical), jsonio.content_hash(canonical), repeats)


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
    if _missing(row["label"]):
        raise CalibrationError(f"{where}: no human label (field 'label' is empty)")
    prediction = row["prediction"]
    if not math.isnan(confidence) and _missing(prediction):
        raise CalibrationError(f"{where}: a confidence ({confidence}) without a prediction")
    key = None if _missing(prediction) else agreement_key(prediction)
    return str(row["item"]), stage, key, confidence, agreement_key(row["label"])


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
    seen = {label for label, _ in labels}
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
    document: dict[str, Any] = {
        "risk": fit.risk, "delta": fit.delta, "delta_rule": fit.rule,
        "guarantee": guarantee(fit.risk, fit.delta, fit.rule, len(names)), "min_items": fit.min_items,
        "items": fit.items, "coverage": fit.coverage, "answered": fit.answered, "errors": fit.errors,
        "agreement": 1 - fit.errors / fit.answered if fit.answered else None, "stages": stages, "cost": None,
        "calibration": {"items": fit.items, "rows": table.rows, "digest": table.digest,
                        "duplicates": len(table.repeats)},
        "nothing_answered": None,
        "notes": repeated_note(None, table.repeats, what="the same item, stage, prediction, confidence and label as an "
                                                         "earlier row"),
    }
    if costs is not None:
        cost = cascade_cost(fit, costs)
        for entry, value in zip(stages, costs, strict=True):
            entry["cost_per_item"] = value
        # A cascade that answers nothing asks no stage: $0 against the last stage is no saving.
        document["cost"] = {"per_item": cost.per_item, "last_stage_alone": cost.last_stage_alone,
                            "ratio": None if math.isnan(cost.ratio) or not fit.answered else cost.ratio}
    return document


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


# --- reading a table of rows (a rows file, a human table) ------------------------------------


def read_rows(path: Path) -> tuple[list[dict[str, Any]], Callable[[int], str]]:
    """A CSV, TSV or JSONL file's rows (a rows file, a human table), and how to name the i-th
    one in a message (``FILE: line N``).

    Raises:
        CalibrationError: the file cannot be read, or a line is not a row.
    """
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".tsv", ".jsonl"):
        raise CalibrationError(f"{path}: rows are read from .csv, .tsv or .jsonl (got {suffix or 'no suffix'})")
    lines: list[int] = []
    rows: list[dict[str, Any]] = []
    try:
        for line, row in (_jsonl(path) if suffix == ".jsonl" else _csv(path, "\t" if suffix == ".tsv" else ",")):
            lines.append(line)
            rows.append(row)
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise CalibrationError(f"{path}: cannot parse ({exc})") from None
    return rows, lambda i: f"{path}: line {lines[i]}"


def repeated_note(name: str | None, repeats: Sequence[tuple[str, str, str]],
                  what: str = "an item labelled again with the same label") -> list[str]:
    """The note for duplicate rows, harmless (each is counted once) but said, with the first
    one's lines: a human table's (an item labelled again the same), a rows file's (a row equal
    to an earlier one). ``repeats`` holds ``(item, where the repeat is, where the first is)``;
    ``name`` (the file) starts the note; empty: no note."""
    if not repeats:
        return []
    item, again, first = repeats[0]
    count = len(repeats)
    head = f"{name}: " if name else ""
    return [f"{head}{count:,} duplicate row{'s' if count > 1 else ''} ({what}, e.g. {item!r} on "
            f"{again.removeprefix(head)}, first on {first.removeprefix(head)}): each is counted once"]


def _csv(path: Path, delimiter: str) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        if reader.fieldnames is None:
            raise CalibrationError(f"{path}: empty file, expected a header row")
        for row in reader:
            if None in row:  # more cells than the header has
                raise CalibrationError(f"{path}: line {reader.line_num}: more cells than the header's "
                                       f"{len(reader.fieldnames)} columns")
            if any(v is not None and v != "" for v in row.values()):
                yield reader.line_num, row


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CalibrationError(f"{path}: line {number} is not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise CalibrationError(f"{path}: line {number} is not a JSON object")
            yield number, row
