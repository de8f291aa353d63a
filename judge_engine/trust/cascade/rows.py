"""A run's judgments as calibration rows: each stage's decision per item (``decisions.py``'s,
read from the run's lines), joined to a human table, with each stage's cost per item from the
run's own spend.

The run is an ordinary one of the cascade's config with the cascade switched off (``run CONFIG
--no-cascade``, or ``cascade: {enabled: false}``), so every stage judged every item: the
calibration items. A stage's decision is the line that decides it in a cascade (the judge's
outcome, its ``<judge>:item`` line, the jury's line) and the prediction and confidence
:func:`~judge_engine.trust.cascade.stages.decide` reads from it; a stage with no decision for an item
(unreadable, a tie, an outage) gives a row without a confidence, which calibration sends on.

A stage's cost per item is what its judges spent over the run (the transcript's costs, every
attempt and re-ask) divided by the items they judged; a jury's is its jurors' sum.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_engine.errors import CalibrationError, ConfigError, ReasonCode
from judge_engine.inputs.config import CascadeConfig, JobConfig, recorded_config
from judge_engine.planning.plan import build_protocol
from judge_engine.rundir.records import Manifest, OutcomeRecord, Spend
from judge_engine.rundir.store import iter_transcript, latest_outcome_records, read_manifest
from judge_engine.trust.cascade.stages import Stage, check_stages, decide, stage_shape
from judge_engine.trust.row_tables import read_rows, repeated_note


@dataclass(frozen=True, slots=True)
class RunRows:
    """What :func:`calibration_rows` found: the rows :func:`judge_engine.calibrate` takes, the
    stages, their costs per item, and what a person should know."""

    rows: list[dict[str, Any]]
    """``item, stage, prediction, confidence, label`` per labelled item and stage."""
    stages: list[str]
    costs: dict[str, float] | None
    """Each stage's cost per item (None when a stage judged nothing, or a price is unknown)."""
    notes: list[str] = field(default_factory=list)


def calibration_rows(run_dir: str | Path, *, human_table: str | Path | Iterable[Mapping[str, Any]], key: str,
                     label: str, stages: Sequence[str] | None = None, unlabelled: bool = False) -> RunRows:
    """Calibration rows from a run directory whose config has the cascade's stages (judged with
    the cascade off), joined to human labels.

    Args:
        run_dir: the run.
        human_table: a CSV, TSV or JSONL file, or rows (dicts), with one row per item.
        key: the human table's column holding the item id (the dataset's ``id``).
        label: its column holding the human label (in the judges' terms, e.g. ``A``/``B``).
        stages: the stages, cheapest first (default: the config's ``cascade.stages``).
        unlabelled: also give the rows of the items the run judged and nobody labelled, with
            ``label`` None (the items a cascade guarantee orders its tests by).

    Raises:
        CalibrationError: a bad human table (the line and column named), a stage the run
            cannot decide with, no stages.
        RunDirError: not a run directory.
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    config = _config(run_dir, manifest)
    protocols = _protocols(config)
    names = list(stages) if stages else list(config.cascade.stages) if config.cascade is not None else []
    if not names:
        raise CalibrationError(f"{run_dir}: its config has no cascade; name the stages with --stages A,B,C")
    shapes = _shapes(config, protocols, names)
    labels, notes = read_labels(human_table, key, label)
    latest = latest_outcome_records(run_dir)
    by_stage = {s.name: {r.item_id: r for r in latest.values() if r.judge == s.decides} for s in shapes}
    rows, missing, outages = [], set(), {s.name: 0 for s in shapes}
    judged = set().union(*(set(lines) for lines in by_stage.values()))
    for item_id in sorted(judged):
        if item_id not in labels:
            missing.add(item_id)
            if not unlabelled:
                continue
        for shape in shapes:
            line = by_stage[shape.name].get(item_id)
            if line is None:
                continue
            decision = decide(shape, line)
            outages[shape.name] += decision.route == "hold"
            has = decision.prediction is not None and decision.confidence is not None
            rows.append({"item": item_id, "stage": shape.name, "prediction": decision.prediction if has else None,
                         "confidence": decision.confidence if has else None, "label": labels.get(item_id)})
    notes += _notes(run_dir, labels, judged, missing, outages, unlabelled)
    return RunRows(rows, names, _costs(run_dir, manifest, shapes, latest.values(), notes), notes)


def _config(run_dir: Path, manifest: Manifest) -> JobConfig:
    try:
        return recorded_config(manifest.config, where=run_dir / "run.json")
    except ConfigError as exc:
        raise CalibrationError(str(exc)) from None


def _protocols(config: JobConfig) -> dict[str, Any]:

    try:
        protocols = {judge.name: build_protocol(judge) for judge in config.judges}
    except ConfigError as exc:
        raise CalibrationError(f"the run's judges: {exc}") from None
    return protocols


def _shapes(config: JobConfig, protocols: Mapping[str, Any], names: list[str]) -> list[Stage]:
    known = {j.name for j in config.judges} | {j.name for j in config.juries}
    if unknown := [n for n in names if n not in known]:
        raise CalibrationError(f"stages: the run has no judge or jury named {', '.join(unknown)} "
                               f"(it has {', '.join(sorted(known))})")
    try:
        check_stages(config.model_copy(update={"cascade": _as_cascade(config, names)}), protocols)
    except ConfigError as exc:
        raise CalibrationError(f"stages: {exc}") from None
    return [stage_shape(config, protocols, name) for name in names]


def _as_cascade(config: JobConfig, names: list[str]) -> Any:

    base = config.cascade
    return CascadeConfig(name=base.name if base is not None else "cascade", stages=names,
                         thresholds=base.thresholds if base is not None else Path("thresholds.json"), enabled=False)


def read_labels(table: str | Path | Iterable[Mapping[str, Any]], key: str, label: str
                ) -> tuple[dict[str, Any], list[str]]:
    """A human table's labels: item id -> label, and notes (rows without a label, rows that
    label an item again with the same label: :func:`~judge_engine.trust.calibration.repeated_note`).

    Raises:
        CalibrationError: the table cannot be read, lacks a column, has a row without an id or
            an item labelled twice differently (the line named).
    """
    if isinstance(table, str | Path):
        rows, where = read_rows(Path(table))
        name = str(table)
    else:
        rows = [dict(r) for r in table]
        name = "human table"

        def where(i: int) -> str:
            return f"human table: rows[{i}]"
    if rows:
        absent = [c for c in (key, label) if c not in rows[0]]
        if absent:
            raise CalibrationError(f"{name}: no column {', '.join(map(repr, absent))} (columns: "
                                   f"{', '.join(map(str, rows[0]))}); --key names the item id column, --label the "
                                   "human label's")
    labels: dict[str, Any] = {}
    first: dict[str, int] = {}
    repeats: list[tuple[str, str, str]] = []
    unlabelled = 0
    for i, row in enumerate(rows):
        item = row.get(key)
        if _empty(item):
            raise CalibrationError(f"{where(i)}: no item id in column {key!r}")
        value = row.get(label)
        if _empty(value):
            unlabelled += 1
            continue
        item = str(item).strip()
        if item in labels:
            if str(labels[item]).strip() != str(value).strip():
                raise CalibrationError(f"{where(i)}: item {item!r} labelled {value!r}, but {where(first[item])} "
                                       f"labelled it {labels[item]!r}")
            repeats.append((item, where(i), where(first[item])))
            continue
        labels[item], first[item] = value, i
    notes = [f"{name}: {unlabelled:,} rows have no label in column {label!r}: their items are not calibrated on"] \
        if unlabelled else []
    return labels, notes + repeated_note(name, repeats)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and not value.strip())


def _notes(run_dir: Path, labels: Mapping[str, Any], judged: set[str], missing: set[str],
           outages: Mapping[str, int], unlabelled: bool = False) -> list[str]:
    notes = []
    if missing:
        use = "their confidences order the cascade guarantee's tests" if unlabelled else "not calibrated on"
        notes.append(f"{len(missing):,} items the run judged have no human label: {use}")
    if absent := len(set(labels) - judged):
        notes.append(f"{absent:,} labelled items are not in {run_dir.resolve().name} (no stage judged them)")
    for stage, n in outages.items():
        if n:
            notes.append(f"{stage}: {n:,} items have no decision for a reason outside the answers (an outage: "
                         f"{ReasonCode.ITEM_INCOMPLETE}, {ReasonCode.TRANSPORT_EXHAUSTED}...); calibration sends them "
                         "on as items it has no judgment of. resume --retry them first for the stage's true rate")
    return notes


def _costs(run_dir: Path, manifest: Manifest, shapes: Sequence[Stage], latest: Iterable[OutcomeRecord],
           notes: list[str]) -> dict[str, float] | None:
    """Each stage's cost per item: its judges' spend over the items each judged."""
    spend = run_spend(run_dir, manifest)
    judged = items_per_judge(latest, {j for s in shapes for j in s.judges})
    costs: dict[str, float] = {}
    for shape in shapes:
        total = 0.0
        for judge in shape.judges:
            items = judged.get(judge, 0)
            spent = spend.get(judge, Spend())
            if not items:
                notes.append(f"{shape.name}: {judge} judged no item; no cost per item")
                return None
            if spent.unpriced:
                notes.append(f"{shape.name}: {judge} made {spent.unpriced:,} calls at no known price; no cost per item")
                return None
            total += spent.cost / items
        costs[shape.name] = total
    return costs


def items_per_judge(records: Iterable[OutcomeRecord], judges: set[str]) -> dict[str, int]:
    """How many items each of ``judges`` has an outcome for."""
    items: dict[str, set[str]] = {judge: set() for judge in judges}
    for record in records:
        if record.judge in items:
            items[record.judge].add(record.item_id)
    return {judge: len(found) for judge, found in items.items()}


def run_spend(run_dir: Path, manifest: Manifest) -> dict[str, Spend]:
    """Each judge's spend over the whole run: the manifest's, with the transcript lines after
    its last checkpoint added (a killed run's)."""
    recorded = manifest.spend or {}
    spend = {judge: Spend.from_dict(raw) for judge, raw in (recorded.get("judges") or {}).items()}
    for record in iter_transcript(run_dir, offset=int(recorded.get("covers_bytes") or 0), requests=False):
        spend.setdefault(record.judge, Spend()).add(record)
    return spend

