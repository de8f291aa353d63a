"""A run directory and a human table as the rows :func:`judge_engine.estimate` and
:func:`judge_engine.label_plan` take, and the estimate as a report section.

One prediction per item per judge: the item's score averaged over its scored requests (repeats,
temperatures, variants), or a cascade's decision (its outcome line's score). A judge that writes
``<judge>:item`` decision lines (annotators, repeats decided together) is read from those lines.
The uncertainty :func:`judge_engine.label_plan` spends labels on is the verdicts' measured
confidence where the run has it, else the spread of the item's repeats.

The human table (CSV, TSV or JSONL) holds the labels; one made by ``judge-engine label-plan`` also
holds every item's ``sampling_probability`` (and ``selected``), which makes the estimate the
active one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_engine.errors import CalibrationError, DatasetError, RunDirError, TableError
from judge_engine.rundir.records import DEMO_NOTE, OutcomeRecord
from judge_engine.rundir.store import judge_order, latest_outcome_lines, read_manifest
from judge_engine.stats.sections import Section
from judge_engine.trust.estimates import SAMPLING_PROBABILITY, missing
from judge_engine.trust.row_tables import read_rows, repeated_note

ITEM_SUFFIX = ":item"


@dataclass
class JudgedItems:
    """What a run says about each item, per judge."""

    judges: list[str]
    predictions: dict[str, dict[str, float | None]]
    """judge -> item -> the mean score over scored requests (None: unscored)."""
    repeats: dict[str, dict[str, list[float]]]
    confidence: dict[str, dict[str, float]]
    """judge -> item -> the mean measured confidence (where measured)."""
    groups: dict[str, str] = field(default_factory=dict)
    """item -> its ``by`` value."""
    notes: list[str] = field(default_factory=list)


def judged_items(run_dir: str | Path, *, judges: Sequence[str] | None = None, by: str | None = None,
                 items_path: Path | None = None) -> JudgedItems:
    """The run's judges' predictions per item, with the dataset's ``by`` column.

    Raises:
        TableError: not a run directory, no outcomes, an unknown judge, a ``by`` the items lack.
    """
    run_dir = Path(run_dir)
    notes: list[str] = []
    try:
        manifest = read_manifest(run_dir)
    except RunDirError as exc:
        raise TableError(str(exc)) from None
    if manifest.demo:
        notes.append(DEMO_NOTE)
    try:  # in dataset order: the groups, judges and sums never follow the order tasks finished in
        latest = list(latest_outcome_lines(run_dir, notes=notes, judges=judge_order(manifest)))
    except RunDirError as exc:
        raise TableError(str(exc)) from None
    if not latest:
        raise TableError(f"{run_dir / 'outcomes.jsonl'}: no outcomes")
    by_judge: dict[str, list[OutcomeRecord]] = defaultdict(list)
    for record in latest:
        by_judge[record.judge].append(record)
    decided = {j[: -len(ITEM_SUFFIX)] for j in by_judge if j.endswith(ITEM_SUFFIX)}
    available = [j for j in by_judge if j not in decided]
    if judges:
        unknown = [j for j in judges if j not in by_judge]
        if unknown:
            raise TableError(f"--judge: the run has no judge named {', '.join(unknown)} (it has "
                             f"{', '.join(available)})")
        chosen = [f"{j}{ITEM_SUFFIX}" if j in decided else j for j in judges]
    else:
        chosen = available
    out = JudgedItems([], {}, {}, {}, notes=notes)
    for judge in chosen:
        records = by_judge[judge]
        if not any(r.scored and r.score is not None for r in records):
            notes.append(f"{judge}: no outcome has a numeric score (its verdicts are categorical, or nothing was "
                         "scored): no estimate")
            continue
        out.judges.append(judge)
        scores: dict[str, list[float]] = defaultdict(list)
        confidence: dict[str, list[float]] = defaultdict(list)
        for r in records:
            scores[r.item_id]  # noqa: B018 - an item unscored in every request still has a row
            if r.scored and r.score is not None and math.isfinite(r.score):
                scores[r.item_id].append(float(r.score))
            value = (r.confidence or {}).get("value")
            if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
                confidence[r.item_id].append(float(value))
        out.predictions[judge] = {i: (sum(v) / len(v) if v else None) for i, v in scores.items()}
        out.repeats[judge] = dict(scores)
        out.confidence[judge] = {i: sum(v) / len(v) for i, v in confidence.items()}
    if not out.judges:
        raise TableError(f"{run_dir}: no judge with numeric scores to estimate from")
    if by:
        out.groups = _by_values(run_dir, manifest, by, items_path, {i for p in out.predictions.values() for i in p})
    return out


def _by_values(run_dir: Path, manifest: Any, by: str, items_path: Path | None, wanted: set[str]) -> dict[str, str]:
    from judge_engine.rundir.export import run_items
    from judge_engine.util.jsonio import loads

    try:
        table = run_items(run_dir, manifest, path=items_path)
    except (DatasetError, RunDirError) as exc:
        raise TableError(f"--by {by}: the run's items cannot be read ({exc}); give --items PATH") from None
    values = {}
    for item_id, encoded in table.encoded.items():
        if item_id in wanted:
            item = loads(encoded)
            if by not in item or missing(item[by]):
                raise TableError(f"--by {by}: item {item_id!r} has no {by!r} (its fields: {', '.join(item)})")
            values[item_id] = str(item[by])
    if absent := wanted - set(values):
        raise TableError(f"--by {by}: {len(absent):,} judged items are not in the run's dataset (e.g. "
                         f"{sorted(absent)[0]!r}); give --items PATH")
    return values


@dataclass
class HumanLabels:
    """A human table's labels, and a plan's probabilities when it holds them."""

    labels: dict[str, float]
    probabilities: dict[str, float] | None
    selected: set[str]
    notes: list[str]


def human_labels(path: str | Path, *, key: str, column: str, positive: str | None = None) -> HumanLabels:
    """Labels from a CSV, TSV or JSONL human table: numbers (or true/false), or with ``positive``
    1 where the label is that value and 0 otherwise (a preference, a pass/fail).

    Raises:
        CalibrationError: the table cannot be read, lacks a column, a label is not a number
            (the line named), an item labelled twice differently (both lines named). An item
            labelled again the same is counted once, with a note.
    """
    path = Path(path)
    rows, where = read_rows(path)
    if not rows:
        raise CalibrationError(f"{path}: no rows")
    absent = [c for c in (key, column) if c not in rows[0]]
    if absent:
        raise CalibrationError(f"{path}: no column {', '.join(map(repr, absent))} (columns: {', '.join(rows[0])}); "
                               "--key names the item id column, --human the label's")
    planned = SAMPLING_PROBABILITY in rows[0]
    labels: dict[str, float] = {}
    first: dict[str, tuple[int, Any]] = {}  # item -> the row that labelled it first, and its label as written
    repeats: list[tuple[str, str, str]] = []
    probabilities: dict[str, float] | None = {} if planned else None
    selected: set[str] = set()
    for i, row in enumerate(rows):
        item = row.get(key)
        if missing(item):
            raise CalibrationError(f"{where(i)}: no item id in column {key!r}")
        item = str(item).strip()
        if probabilities is not None:
            probabilities[item] = _probability(row.get(SAMPLING_PROBABILITY), where(i))
            if str(row.get("selected", "")).strip().lower() in ("1", "true", "yes"):
                selected.add(item)
        value = row.get(column)
        if missing(value):
            continue
        label = _label(value, positive, f"{where(i)}: column {column!r}")
        if item in labels:
            at, written = first[item]
            if labels[item] != label:
                raise CalibrationError(f"{where(i)}: item {item!r} labelled {value!r}, but {where(at)} labelled it "
                                       f"{written!r}")
            repeats.append((item, where(i), where(at)))
            continue
        labels[item], first[item] = label, (i, value)
    notes = repeated_note(str(path), repeats)
    if probabilities is not None and (extra := set(labels) - selected) and selected:
        notes.append(f"{len(extra):,} labelled items were not drawn by the plan (e.g. {sorted(extra)[0]!r}): they are "
                     "counted as drawn, which the plan's probabilities do not account for; leave them out, or "
                     "label a fresh plan")
    if probabilities is not None and (unlabelled := selected - set(labels)):
        notes.append(f"{len(unlabelled):,} items the plan drew for labelling have no label (e.g. {sorted(unlabelled)[0]!r}):"
                     " the active estimate assumes every drawn item is labelled; label them, or the estimate may be "
                     "biased by which were left out")
    return HumanLabels(labels, probabilities, selected, notes)


def _probability(value: Any, where: str) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise CalibrationError(f"{where}: column {SAMPLING_PROBABILITY!r}: expected a probability, got {value!r}") from None
    if not 0 < p <= 1:
        raise CalibrationError(f"{where}: column {SAMPLING_PROBABILITY!r}: expected a probability in (0, 1], got {p!r}")
    return p


def _label(value: Any, positive: str | None, where: str) -> float:
    if positive is not None:
        return 1.0 if str(value).strip() == positive else 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        out = float(value)
    else:
        text = str(value).strip()
        if text.lower() in ("true", "false"):
            return float(text.lower() == "true")
        try:
            out = float(text)
        except ValueError:
            raise CalibrationError(f"{where}: {value!r} is not a number; for labels such as a preference (A/B) or a "
                                   "pass/fail, --positive VALUE estimates the share of that value") from None
    if not math.isfinite(out):
        raise CalibrationError(f"{where}: {value!r} is not a finite number")
    return out


def estimate_rows(judged: JudgedItems, human: HumanLabels) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per item per judge, and notes. ``group`` is the judge, with ``by`` the by-value (one
    judge) or ``judge / by-value`` (several); each row also carries ``judge`` and ``by``."""
    notes = list(human.notes)
    rows = []
    seen: set[str] = set()
    for judge in judged.judges:
        for item, prediction in judged.predictions[judge].items():
            seen.add(item)
            row: dict[str, Any] = {"item": item, "prediction": prediction, "label": human.labels.get(item),
                                   "judge": judge, "group": judge}
            if judged.groups:
                row["by"] = judged.groups[item]
                row["group"] = row["by"] if len(judged.judges) == 1 else f"{judge} / {row['by']}"
            if human.probabilities is not None:
                if item not in human.probabilities:
                    raise CalibrationError(f"the human table has {SAMPLING_PROBABILITY!r} (a label plan's) but no row for "
                                           f"item {item!r}: the active estimate needs every judged item's probability")
                row[SAMPLING_PROBABILITY] = human.probabilities[item]
            rows.append(row)
    if stray := set(human.labels) - seen:
        notes.append(f"{len(stray):,} labelled items are not in the run (e.g. {sorted(stray)[0]!r}): not used")
    return rows, notes


def estimate_run(run_dir: str | Path, human: HumanLabels, *, judges: Sequence[str] | None = None,
                 by: str | None = None, items_path: Path | None = None, **options: Any) -> dict[str, Any]:
    """:func:`judge_engine.estimate` over a run's judges (one group per judge, and per ``by`` value),
    each group with its ``judge`` (and ``by`` value); ``options`` are the estimate's (alpha,
    method, differences, target_width). The notes say what the run and the table lack.

    Raises:
        TableError: not a run, an unknown judge, a ``by`` the items lack (a CalibrationError: a
            plan's table without a judged item).
        ValueError: a bad option.
    """
    from judge_engine.trust.estimates import estimate

    judged = judged_items(run_dir, judges=judges, by=by, items_path=items_path)
    rows, notes = estimate_rows(judged, human)
    differences = bool(options.pop("differences", False))
    result = estimate(rows, by="group", **options)
    of_group = {r["group"]: r for r in rows}
    for group in result["groups"]:
        group["judge"] = of_group[group["group"]]["judge"]
        if by:
            group[by] = of_group[group["group"]]["by"]
    if differences:
        # Judge by judge: two judges' estimates of the same items share their labels, so they are
        # not the independent estimates the differences' intervals are for.
        result.update(differences=[], ranking=[])
        for judge in judged.judges:
            part = estimate([r for r in rows if r["judge"] == judge], by="group", differences=True, **options)
            for entry in (*part["differences"], *part["ranking"]):
                entry["judge"] = judge
            result["differences"] += part["differences"]
            result["ranking"] += part["ranking"]
            result["correction"] = part["correction"]
        if len(judged.judges) > 1:
            notes.append("differences and ranks compare each judge's groups with each other, one judge at a time "
                         "(Bonferroni within a judge): two judges' estimates of the same items are not independent")
    result["notes"] = judged.notes + notes + result["notes"]
    return result


@dataclass(frozen=True)
class HumanTable:
    """Where a viewer (or any reader of several runs) finds human labels, and how to read them."""

    path: Path
    key: str = "id"
    column: str = "label"
    positive: str | None = None
    by: str | None = None

    def read(self) -> HumanLabels:
        """The labels (raises CalibrationError as :func:`human_labels` does)."""
        return human_labels(self.path, key=self.key, column=self.column, positive=self.positive)


def judge_estimates(run_dir: Path, human: HumanLabels, *, by: str | None = None) -> dict[str, Any]:
    """Each judge's estimate (its groups, level and method) by judge name, or ``{"absent": why}``
    when the run gives none (no numeric scores, a ``by`` the items lack)."""
    try:
        result = estimate_run(run_dir, human, by=by)
    except ValueError as exc:
        return {"absent": str(exc)}
    out: dict[str, Any] = {}
    for group in result["groups"]:
        entry = out.setdefault(group["judge"], {k: result[k] for k in ("alpha", "method", "estimator")} | {
            "groups": [], "notes": [n for n in result["notes"] if n != DEMO_NOTE]})
        entry["groups"].append(group)
    return out


def plan_rows(judged: JudgedItems) -> list[dict[str, Any]]:
    """One row per item of the one judge in ``judged``, with its uncertainty's sources."""
    (judge,) = judged.judges
    rows = []
    for item, prediction in judged.predictions[judge].items():
        row: dict[str, Any] = {"item": item, "prediction": prediction}
        if judged.groups:
            row["group"] = judged.groups[item]
        if item in judged.confidence[judge]:
            row["confidence"] = judged.confidence[judge][item]
        elif len(judged.repeats[judge].get(item, [])) >= 2:
            row["predictions"] = judged.repeats[judge][item]
        rows.append(row)
    return rows


ESTIMATE_COLUMNS = ["group", "labelled", "items", "judge_mean", "estimate", "ci", "labels_alone", "lambda",
                    "effective_labels"]


def estimate_section(result: Mapping[str, Any], *, title: str = "Human-scale estimate per group") -> Section:
    """The estimate as a report section: per group the judge's raw mean, the human-scale estimate
    and its interval, the labels-alone interval, λ and the effective labels."""
    level = f"{1 - result['alpha']:.0%}"
    rows, skipped = [], []
    for g in result["groups"]:
        if g["estimate"] is None:
            skipped.append(f"{g['group']} ({g.get('reason', 'no estimate')})")
            continue
        rows.append({
            "group": g["group"], "labelled": g["n_labelled"], "items": g["n_labelled"] + g["n_unlabelled"],
            "judge_mean": g["judge_mean"], "estimate": g["estimate"], "ci": list(g["ci"]),
            "labels_alone": list(g["classical"]["ci"]), "lambda": g["lambda"],
            "effective_labels": None if g["effective_labels"] is None else round(g["effective_labels"], 1),
        })  # fmt: skip
    estimator = "active (labels drawn with the plan's probabilities)" if result["estimator"] == "active" else \
        "labels taken for a uniform random sample"
    notes = [f"estimate: the mean human label over the group's items, {result['method']} ({estimator}), with its "
             f"{level} interval ci; labels_alone: the interval of the human labels alone; effective_labels: "
             "how many labels alone would give the same width; judge_mean: the judge's raw mean on its own scale"]
    notes += [f"no estimate: {s}" for s in skipped]
    notes += list(result.get("notes", []))
    absent = "" if rows else "no group has 2 or more human labels"
    return Section("estimate", f"{title} ({level})", ESTIMATE_COLUMNS, rows, absent=absent,
                   notes=notes)


def differences_section(result: Mapping[str, Any]) -> Section:
    """Every pair's difference and the ranking with simultaneous intervals."""
    rows = [{"group": d["a"], "versus": d["b"], "difference": d["difference"], "ci": list(d["ci"]),
             "simultaneous_ci": list(d["simultaneous_ci"]), "p_value": d["p_value"]}
            for d in result.get("differences", [])]
    ranks = ", ".join(f"{r['group']} {r['rank_range'][0]}-{r['rank_range'][1]}" if r["rank_range"][0] !=
                      r["rank_range"][1] else f"{r['group']} {r['rank_range'][0]}" for r in result.get("ranking", []))
    notes = [f"simultaneous_ci: all pairs' intervals hold together ({CORRECTION_NOTE}); the ranks that hold "
             f"together (1 = the highest mean): {ranks}"] if rows else []
    return Section("differences", "Differences between groups", ["group", "versus", "difference", "ci",
                   "simultaneous_ci", "p_value"], rows, absent="" if rows else "needs 2 or more groups with an estimate",
                   notes=notes, small_values=("p_value",))


CORRECTION_NOTE = "Bonferroni over the pairs"


def needed_section(result: Mapping[str, Any]) -> Section:
    """Per group, the labels an interval of the target width needs, with the judge and alone."""
    rows = [{"group": g["group"], "width": need["width"], "with_judge": need["ppi"], "alone": need["classical"],
             "have": need["have"], "items": need["items"]}
            for g in result["groups"] if (need := g.get("labels_needed"))]
    level = f"{1 - result['alpha']:.0%}"
    notes = [f"with_judge: uniformly drawn labels for a {level} interval of that width (high - low) with the judge "
             "(PPI++), at the variances and judge-human covariance of the labels there are; alone: without the judge; "
             "'-': no count of the group's items reaches it"]
    notes += [f"{g['group']}: {n}" for g in result["groups"] if (n := (g.get("labels_needed") or {}).get("note"))]
    return Section("labels_needed", "Labels needed for the target width", ["group", "width", "with_judge", "alone",
                   "have", "items"], rows, absent="" if rows else "no group has 2 or more labels to plan from",
                   notes=notes)
