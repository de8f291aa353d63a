"""Read a run directory (``run.json`` + ``outcomes.jsonl``) into plain records.

Read-only and engine-free: the format is the engine's on-disk contract, version 1.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_engine.errors import TableError
from judge_engine.stats.tables import Table, read_jsonl

DEMO_NOTE = (
    "DEMO RUN: answers come from judge-engine's built-in fake server; they are synthetic, "
    "not a model's judgments."
)


@dataclass(frozen=True)
class Outcome:
    """One task's outcome, as recorded in ``outcomes.jsonl``."""

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


@dataclass
class Run:
    """A run directory's manifest and its outcomes (the last line per task id wins)."""

    path: Path
    manifest: dict[str, Any]
    outcomes: list[Outcome]
    notes: list[str] = field(default_factory=list)

    @property
    def judges(self) -> list[str]:
        """Judge names in first-seen order."""
        return list(dict.fromkeys(o.judge for o in self.outcomes))


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def _outcome(obj: dict[str, Any], where: str) -> Outcome:
    try:
        return Outcome(
            task_id=str(obj["task_id"]),
            item_id=str(obj["item_id"]),
            judge=str(obj["judge"]),
            protocol=str(obj.get("protocol", "")),
            model=str(obj.get("model", "")),
            temperature=float(obj.get("temperature") or 0.0),
            repeat=int(obj.get("repeat") or 0),
            variant=str(obj.get("variant") or ""),
            status=str(obj.get("status", "")),
            score=_num(obj.get("score")) if obj.get("status") == "scored" else math.nan,
            scores={k: _num(v) for k, v in (obj.get("scores") or {}).items()},
            verdict=obj.get("verdict"),
            reason=str(obj.get("reason") or ""),
        )
    except KeyError as exc:
        raise TableError(f"{where}: outcome without {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise TableError(f"{where}: malformed outcome ({exc})") from None


def read_run(path: str | Path) -> Run:
    """Read ``RUN_DIR/run.json`` and ``RUN_DIR/outcomes.jsonl``.

    A torn (unparseable) last line of ``outcomes.jsonl`` is skipped with a note; a missing
    ``run.json`` is tolerated (empty manifest, with a note), a missing outcomes file is not.

    Raises:
        TableError: no outcomes file, or a malformed line before the last.
    """
    root = Path(path)
    notes: list[str] = []
    manifest: dict[str, Any] = {}
    try:
        manifest = json.loads((root / "run.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        notes.append(f"{root / 'run.json'}: missing; reading outcomes only")
    except (OSError, json.JSONDecodeError) as exc:
        notes.append(f"{root / 'run.json'}: unreadable ({exc}); reading outcomes only")
    if manifest.get("demo"):
        # Said first, whatever the command prints after it: these numbers describe no model.
        notes.insert(0, DEMO_NOTE)
    outcomes_path = root / "outcomes.jsonl"
    if not outcomes_path.is_file():
        raise TableError(f"{outcomes_path}: not found (is {root} a run directory?)")
    records, more = read_jsonl(outcomes_path)
    latest: dict[str, Outcome] = {}
    for i, obj in enumerate(records):
        o = _outcome(obj, f"{outcomes_path}: record {i + 1}")
        latest.pop(o.task_id, None)  # re-insert so order follows the winning line
        latest[o.task_id] = o
    return Run(root, manifest, list(latest.values()), notes + more)


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
