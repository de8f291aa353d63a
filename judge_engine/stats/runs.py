"""A run directory as the statistics read it: its manifest and the last outcome of every task.

Read-only and engine-free: the files are read through :mod:`judge_engine.rundir.store`, whose formats
:mod:`judge_engine.rundir.records` defines (every past version included).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_engine.errors import RunDirError, TableError
from judge_engine.rundir.records import DEMO_NOTE, OUTCOMES, Manifest, OutcomeRecord
from judge_engine.rundir.store import latest_outcome_records, read_manifest
from judge_engine.stats.tables import Table


@dataclass(frozen=True)
class Outcome:
    """One task's last outcome, with numbers ready for statistics (NaN for missing scores)."""

    task_id: str
    item_id: str
    judge: str
    protocol: str
    model: str
    temperature: float
    repeat: int
    variant: str
    status: str
    """"scored" or "unscored"."""
    score: float
    """NaN when unscored."""
    scores: dict[str, float] = field(default_factory=dict)
    verdict: Any = None
    reason: str = ""
    reason_code: str | None = None

    @classmethod
    def of(cls, record: OutcomeRecord) -> Outcome:
        scored = record.scored and record.score is not None
        return cls(
            task_id=record.task_id, item_id=record.item_id, judge=record.judge, protocol=record.protocol,
            model=record.model, temperature=record.temperature, repeat=record.repeat, variant=record.variant,
            status=record.status, score=float(record.score) if scored else math.nan,  # type: ignore[arg-type]
            scores={k: float(v) for k, v in record.scores.items()}, verdict=record.verdict,
            reason=record.reason or "", reason_code=record.reason_code,
        )  # fmt: skip


@dataclass
class Run:
    """A run directory's manifest and its outcomes (the last line per task id wins)."""

    path: Path
    manifest: Manifest | None
    """None when ``run.json`` is missing or unreadable (the outcomes are read anyway)."""
    outcomes: list[Outcome]
    notes: list[str] = field(default_factory=list)

    @property
    def judges(self) -> list[str]:
        """Judge names in first-seen order."""
        return list(dict.fromkeys(o.judge for o in self.outcomes))


def read_run(path: str | Path) -> Run:
    """Read ``RUN_DIR/run.json`` and ``RUN_DIR/outcomes.jsonl``.

    A torn (unparseable) last line of ``outcomes.jsonl`` is skipped with a note; a missing or
    unreadable ``run.json`` is tolerated (no manifest, with a note), a missing outcomes file is not.

    Raises:
        TableError: no outcomes file, or a malformed line before the last.
    """
    root = Path(path)
    notes: list[str] = []
    manifest: Manifest | None = None
    try:
        manifest = read_manifest(root)
    except RunDirError as exc:
        notes.append(f"{exc}; reading outcomes only")
    if manifest is not None and manifest.demo:
        # Said first, whatever the command prints after it: these numbers describe no model.
        notes.insert(0, DEMO_NOTE)
    outcomes_path = root / OUTCOMES
    if not outcomes_path.is_file():
        raise TableError(f"{outcomes_path}: not found (is {root} a run directory?)")
    try:
        records = latest_outcome_records(root, notes=notes)
    except RunDirError as exc:
        raise TableError(str(exc)) from None
    return Run(root, manifest, [Outcome.of(r) for r in records.values()], notes)


def score_matrices(
    outcomes: Iterable[Outcome], *, field_name: str = "score"
) -> dict[tuple[str, float, str], tuple[list[str], list[list[float]]]]:
    """Items x repeats score matrices per (judge, temperature, variant).

    Args:
        field_name: "score", or the name of a sub-score in ``scores``.

    Returns:
        ``{(judge, temperature, variant): (item_ids, matrix)}``; unscored repeats are NaN.
    """
    cells: dict[tuple[str, float, str], dict[str, dict[int, float]]] = defaultdict(dict)
    for o in outcomes:
        value = o.score if field_name == "score" else o.scores.get(field_name, math.nan)
        cells[(o.judge, o.temperature, o.variant)].setdefault(o.item_id, {})[o.repeat] = value
    out = {}
    for key, by_item in cells.items():
        repeats = sorted({r for reps in by_item.values() for r in reps})
        items = list(by_item)
        out[key] = (items, [[by_item[i].get(r, math.nan) for r in repeats] for i in items])
    return out


def run_table(run: Run, *, temperature: float | None = None) -> Table:
    """One row per item: each judge's mean score over repeats and variants, and sub-scores.

    Columns are ``item_id``, ``<judge>`` and ``<judge>.<sub-score>``; an item a judge never
    scored is NaN. ``temperature`` restricts to one temperature (default: all pooled).
    """
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    columns: dict[str, None] = {"item_id": None}
    for o in run.outcomes:
        if temperature is not None and o.temperature != temperature:
            continue
        values = {o.judge: o.score, **{f"{o.judge}.{k}": v for k, v in o.scores.items()}}
        for col, v in values.items():
            columns[col] = None
            if not math.isnan(v) and o.status == "scored":
                sums[o.item_id][col].append(v)
        sums[o.item_id]  # noqa: B018 - make sure fully unscored items still get a row
    rows = []
    for item, by_col in sums.items():
        row: dict[str, Any] = {"item_id": item}
        for col in list(columns)[1:]:
            vals = by_col.get(col, [])
            row[col] = sum(vals) / len(vals) if vals else math.nan
        rows.append(row)
    return Table(str(run.path), list(columns), rows, list(run.notes))
