"""A run's tables: the column layout, and the row streams behind ``judge-engine export``
(:mod:`judge_engine.rundir.export`) and :func:`judge_engine.load_run` (:mod:`judge_engine.rundir.frames`).

Rows are the *last* outcome line of every task (a task judged again by ``resume --retry``
counts once, with its new outcome), in dataset order (the item's row, then the judge as the
config lists them, temperature, repeat, variant), whatever order the tasks finished in, read
through :func:`judge_engine.rundir.store.latest_outcome_lines`. Nothing holds the run: one pass
over the outcomes finds the latest lines and their places (offsets and sort keys, ~50 bytes a
line), the next finds the columns (:class:`Layout`), the last reads the lines by offset in
order and builds rows :data:`BATCH_ROWS` at a time for the writer.

Long form, one row per task (the names are stable; types as Parquet and ``load_run`` give them):

==========================  =====  ==============================================================
column                      type   what
==========================  =====  ==============================================================
``task_id`` ... ``at``      \\-    the outcome line's own fields, in :data:`OUTCOME_COLUMNS` order
``scores.<name>``           float  each score breakdown (aspect, dimension, candidate), sorted
``verdict.<field>``         \\-    each field of the verdict, in the order the fields first
                                   appear; lists and objects as JSON text; null when unscored
``verdict.<list>.count``    int    the list's length (MQM errors, expressions, words...)
``verdict.<list>.<sev>``    int    ``critical``, ``major``, ``minor``: for a list of objects
                                   with a ``severity`` (MQM errors), how many of each
``confidence``              float  when some outcome has one: how sure the judge is (0..1;
                                   :mod:`judge_engine.protocols.confidence`)
``confidence.method``       str    ``logprobs``, ``agreement`` or ``jury``
``confidence.p.<value>``    float  each value's probability (or share of votes), sorted
``item.<field>``            \\-    ``--with-items`` (``load_run(with_items=True)``): the item's
                                   fields after the config's field mapping (as the prompts saw
                                   them), ``id`` left out
==========================  =====  ==============================================================

Wide form (``--wide``), one row per item: ``item_id`` (and ``item.<field>``), then per task key
``K = <judge>|<temperature>|<repeat>[|<variant>]`` (the variant only for protocols that have
one; the temperature as Python writes it, ``0.0``): ``K`` the score, ``K.status``
(``scored``/``unscored``, null when the item has no outcome for K) and ``K.scores.<name>`` per
breakdown. Keys come judge by judge (as the config lists them), then by temperature, repeat and variant. The
wide table is a pivot, so it is built in memory: 8 bytes a score cell, 1 a status, plus the ids.

Transcripts (:func:`transcript_batches`, for ``load_run(transcripts=True)``): one row per
transcript line, :data:`TRANSCRIPT_COLUMNS`; the request messages are not in it (read them with
``judge-engine show`` or :func:`judge_engine.rundir.store.iter_transcript`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_engine.errors import RunDirError
from judge_engine.rundir.records import OUTCOMES, AttemptRecord, OutcomeRecord, TranscriptRecord
from judge_engine.rundir.store import (
    LatestOutcomeLines,
    iter_transcript,
    judge_order,
    latest_outcome_lines,
    read_manifest,
)
from judge_engine.util.jsonio import dumps, loads
from judge_engine.util.parquet import Kind

Row = list[Any]
Columns = list[tuple[str, Kind]]

BATCH_ROWS = 8192
"""Rows built as Python values before they are written (or become Arrow)."""

OUTCOME_COLUMNS: tuple[tuple[str, Kind], ...] = (
    ("task_id", "str"), ("item_id", "str"), ("judge", "str"), ("protocol", "str"), ("protocol_version", "str"),
    ("model", "str"), ("temperature", "float"), ("repeat", "int"), ("variant", "str"), ("status", "str"),
    ("score", "float"), ("reason", "str"), ("reason_code", "str"), ("attempts", "int"), ("reasks", "int"),
    ("cache_hits", "int"), ("cost", "float"), ("latency_s", "float"), ("at", "str"),
)  # fmt: skip
"""An outcome line's own fields (:class:`~judge_engine.rundir.records.OutcomeRecord`), first in every
long-form table."""

SEVERITIES = ("critical", "major", "minor")
"""MQM severities, counted per verdict list whose objects carry a ``severity``."""

TRANSCRIPT_COLUMNS: tuple[tuple[str, Kind], ...] = (
    ("task_id", "str"), ("item_id", "str"), ("judge", "str"), ("event", "str"), ("attempt", "int"),
    ("reask", "int"), ("at", "str"), ("cache_hit", "bool"), ("latency_s", "float"),
    ("usage.prompt_tokens", "int"), ("usage.completion_tokens", "int"), ("cost", "float"),
    ("finish_reason", "str"), ("content", "str"), ("error.kind", "str"), ("error.status", "int"),
    ("error.message", "str"), ("stage", "str"), ("traceback", "str"),
)  # fmt: skip
"""One transcript line: ``event`` is ``attempt`` (a provider attempt or cache hit: its answer's
``content`` and ``finish_reason``, or the ``error.*``) or ``protocol_error`` (the protocol's
code raised at ``stage``: ``error.message`` and ``traceback``)."""

_INT64 = range(-(2**63), 2**63)


# --- values and their kinds -------------------------------------------------------------------


def kind_of(value: Any) -> Kind | None:
    """The column kind a value needs (None for null; text for lists, objects and integers
    beyond 64 bits, such as a 64-bit unsigned seed)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if value in _INT64 else "str"
    if isinstance(value, float):
        return "float"
    return "str"


def merge_kinds(a: Kind | None, b: Kind | None) -> Kind | None:
    """The kind of a column holding values of kinds ``a`` and ``b``: integers and floats make
    float, any other mix text."""
    if a is None or a == b:
        return b if a is None else a
    if b is None:
        return a
    return "float" if {a, b} == {"int", "float"} else "str"


def cast(kind: Kind | None, value: Any) -> Any:
    """``value`` as a column of ``kind`` holds it (text columns: JSON text for non-text)."""
    if value is None:
        return None
    if kind == "str":
        return value if isinstance(value, str) else dumps(value).decode()
    if kind == "float":
        return float(value)
    return value


# --- the long form ----------------------------------------------------------------------------


@dataclass
class ItemTable:
    """A dataset's items by id, each kept as its JSON bytes (about the file's size, plus ~100
    bytes an item), for ``--with-items``."""

    kinds: dict[str, Kind | None] = field(default_factory=dict)
    """Item field (``id`` left out) -> its kind, in the order the fields first appear."""
    encoded: dict[str, bytes] = field(default_factory=dict)
    missing: int = 0
    """Rows asked for whose item is not in the dataset."""

    @classmethod
    def read(cls, items: Iterable[Mapping[str, Any]]) -> ItemTable:
        table = cls()
        for item in items:
            for name, value in item.items():
                if name != "id":
                    table.kinds[name] = merge_kinds(table.kinds.get(name), kind_of(value))
            # Copied to its exact size: orjson's bytes keep ~4 KB of spare room each (200 MB a
            # 50,000 items otherwise).
            table.encoded[str(item["id"])] = bytes(memoryview(dumps(item)))
        return table

    @property
    def columns(self) -> Columns:
        return [(f"item.{name}", kind or "str") for name, kind in self.kinds.items()]

    def values(self, item_id: str) -> Row:
        encoded = self.encoded.get(item_id)
        if encoded is None:
            self.missing += 1
            return [None] * len(self.kinds)
        item = loads(encoded)
        return [cast(kind, item.get(name)) for name, kind in self.kinds.items()]


@dataclass
class Layout:
    """The long form's columns for one run, found by :meth:`survey` over its latest outcomes."""

    score_names: list[str] = field(default_factory=list)
    verdict: dict[str, Kind | None] = field(default_factory=dict)
    """Verdict field -> kind, in the order the fields first appear."""
    lists: set[str] = field(default_factory=set)
    """Verdict fields that hold a list (in some outcome): they get ``.count``."""
    severity_lists: set[str] = field(default_factory=set)
    """Verdict lists of objects with a ``severity``: they get a count per severity."""
    items: ItemTable | None = None
    confidence: bool = False
    """Some outcome has a confidence: the ``confidence`` columns are there."""
    probabilities: list[str] = field(default_factory=list)
    """The values whose probabilities some confidence gives (``confidence.p.<value>``), sorted."""

    @classmethod
    def survey(cls, records: Iterable[OutcomeRecord], items: ItemTable | None = None) -> Layout:
        layout = cls(items=items)
        names: set[str] = set()
        values: set[str] = set()
        for record in records:
            names.update(record.scores)
            if record.confidence is not None:
                layout.confidence = True
                values.update(str(v) for v in record.confidence.get("probs") or {})
            for key, value in (record.verdict or {}).items():
                layout.verdict[key] = merge_kinds(layout.verdict.get(key), kind_of(value))
                if isinstance(value, list):
                    layout.lists.add(key)
                    if key not in layout.severity_lists and any(
                            isinstance(v, Mapping) and "severity" in v for v in value):
                        layout.severity_lists.add(key)
        layout.score_names = sorted(names)
        layout.probabilities = sorted(values)
        return layout

    @property
    def columns(self) -> Columns:
        columns = list(OUTCOME_COLUMNS) + [(f"scores.{name}", "float") for name in self.score_names]
        if self.confidence:
            columns += [("confidence", "float"), ("confidence.method", "str")]
            columns += [(f"confidence.p.{value}", "float") for value in self.probabilities]
        for key, kind in self.verdict.items():
            columns.append((f"verdict.{key}", kind or "str"))
            if key in self.lists:
                columns.append((f"verdict.{key}.count", "int"))
            if key in self.severity_lists:
                columns += [(f"verdict.{key}.{severity}", "int") for severity in SEVERITIES]
        return columns + (self.items.columns if self.items is not None else [])

    def row(self, record: OutcomeRecord) -> Row:
        """The record's values in :attr:`columns` order."""
        row: Row = [
            record.task_id, record.item_id, record.judge, record.protocol, record.protocol_version, record.model,
            record.temperature, record.repeat, record.variant, record.status, record.score, record.reason,
            record.reason_code, record.attempts, record.reasks, record.cache_hits, record.cost, record.latency_s,
            record.at,
        ]  # fmt: skip
        scores = record.scores
        row += [scores.get(name) for name in self.score_names]
        if self.confidence:
            confidence = record.confidence or {}
            probs = confidence.get("probs") or {}
            row += [confidence.get("value"), confidence.get("method"), *(probs.get(v) for v in self.probabilities)]
        verdict = record.verdict or {}
        for key, kind in self.verdict.items():
            value = verdict.get(key)
            row.append(cast(kind, value))
            if key in self.lists:
                row.append(len(value) if isinstance(value, list) else None)
            if key in self.severity_lists:
                row += _severity_counts(value)
        if self.items is not None:
            row += self.items.values(record.item_id)
        return row


def _severity_counts(value: Any) -> list[int | None]:
    if not isinstance(value, list):
        return [None] * len(SEVERITIES)
    found = [v.get("severity") for v in value if isinstance(v, Mapping)]
    return [found.count(severity) for severity in SEVERITIES]


def batched(rows: Iterable[Row], size: int = BATCH_ROWS) -> Iterator[list[Row]]:
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def outcome_batches(run_dir: Path, *, items: ItemTable | None = None,
                    notes: list[str] | None = None) -> tuple[Columns, Iterator[list[Row]]]:
    """The long form of a run: its columns, and its rows in batches (lazily: each batch is built
    when asked for).

    Raises:
        RunDirError: no outcomes file, or a malformed line.
    """
    latest = _latest(run_dir, notes)
    layout = Layout.survey(latest, items)
    return layout.columns, batched(layout.row(record) for record in latest)


def _latest(run_dir: Path, notes: list[str] | None) -> LatestOutcomeLines:
    """The run's latest outcome lines in dataset order (the judges as its config lists them)."""
    if not (run_dir / OUTCOMES).is_file():
        raise RunDirError(f"{run_dir / OUTCOMES}: not found (is {run_dir} a run directory?)")
    try:
        judges = judge_order(read_manifest(run_dir))
    except RunDirError:  # no manifest: the judges in the order they first appear
        judges = []
    return latest_outcome_lines(run_dir, notes=notes, judges=judges)


# --- the wide form ----------------------------------------------------------------------------

TaskKey = tuple[str, float, int, str]
"""(judge, temperature, repeat, variant)."""


def key_name(key: TaskKey) -> str:
    """``<judge>|<temperature>|<repeat>[|<variant>]``: a task key as the wide form names it."""
    judge, temperature, repeat, variant = key
    return f"{judge}|{temperature!r}|{repeat}" + (f"|{variant}" if variant else "")


@dataclass
class WideLayout:
    """The wide form's columns and the item rows, found by :meth:`survey`."""

    keys: list[TaskKey]
    breakdowns: dict[str, list[str]]
    """Judge -> its score breakdown names, sorted."""
    item_ids: dict[str, int]
    """Item id -> its row, in the order items first appear."""
    items: ItemTable | None = None

    @classmethod
    def survey(cls, records: Iterable[OutcomeRecord], items: ItemTable | None = None) -> WideLayout:
        judges: dict[str, set[TaskKey]] = {}
        names: dict[str, set[str]] = {}
        item_ids: dict[str, int] = {}
        for record in records:
            judges.setdefault(record.judge, set()).add(
                (record.judge, record.temperature, record.repeat, record.variant))
            names.setdefault(record.judge, set()).update(record.scores)
            item_ids.setdefault(record.item_id, len(item_ids))
        keys = [key for judge_keys in judges.values() for key in sorted(judge_keys)]
        return cls(keys, {judge: sorted(n) for judge, n in names.items()}, item_ids, items)

    def _numeric(self) -> list[tuple[TaskKey, str | None]]:
        """The float columns: per key, its score (None) and its breakdowns (names)."""
        return [(key, name) for key in self.keys for name in (None, *self.breakdowns[key[0]])]

    @property
    def columns(self) -> Columns:
        columns: Columns = [("item_id", "str")]
        columns += self.items.columns if self.items is not None else []
        for key in self.keys:
            name = key_name(key)
            columns += [(name, "float"), (f"{name}.status", "str")]
            columns += [(f"{name}.scores.{b}", "float") for b in self.breakdowns[key[0]]]
        return columns

    def batches(self, records: Iterable[OutcomeRecord]) -> Iterator[list[Row]]:
        """Pivot the records into the item x column table, then yield its rows in batches."""
        import numpy as np

        numeric = {column: index for index, column in enumerate(self._numeric())}
        statuses = {key: index for index, key in enumerate(self.keys)}
        values = np.full((len(self.item_ids), len(numeric)), np.nan)
        status = np.zeros((len(self.item_ids), len(self.keys)), dtype=np.int8)  # 0 none, 1 scored, 2 unscored
        for record in records:
            line = self.item_ids[record.item_id]
            key = (record.judge, record.temperature, record.repeat, record.variant)
            status[line, statuses[key]] = 1 if record.scored else 2
            if record.score is not None:
                values[line, numeric[(key, None)]] = record.score
            for name, score in record.scores.items():
                values[line, numeric[(key, name)]] = score
        labels = (None, "scored", "unscored")
        per_key = [1 + len(self.breakdowns[key[0]]) for key in self.keys]
        ids = list(self.item_ids)
        for start in range(0, len(ids), BATCH_ROWS):
            batch = []
            for offset, (floats, codes) in enumerate(zip(values[start:start + BATCH_ROWS].tolist(),
                                                         status[start:start + BATCH_ROWS].tolist(), strict=True)):
                item_id = ids[start + offset]
                row: Row = [item_id, *(self.items.values(item_id) if self.items is not None else [])]
                position = 0
                for width, code in zip(per_key, codes, strict=True):
                    cells = [None if math.isnan(v) else v for v in floats[position:position + width]]
                    row += [cells[0], labels[code], *cells[1:]]
                    position += width
                batch.append(row)
            yield batch


def wide_batches(run_dir: Path, *, items: ItemTable | None = None,
                 notes: list[str] | None = None) -> tuple[Columns, Iterator[list[Row]]]:
    """The wide form of a run: its columns, and its rows (one per item) in batches."""
    latest = _latest(run_dir, notes)
    layout = WideLayout.survey(latest, items)
    return layout.columns, layout.batches(latest)


# --- transcripts ------------------------------------------------------------------------------


def transcript_row(record: TranscriptRecord) -> Row:
    """A transcript line in :data:`TRANSCRIPT_COLUMNS` order."""
    if not isinstance(record, AttemptRecord):
        return [record.task_id, record.item_id, record.judge, "protocol_error", None, None, record.at, False, None,
                None, None, None, None, None, "protocol_error", None, record.error, record.stage,
                record.traceback]  # fmt: skip
    response = record.response or {}
    usage = record.usage or {}
    error = record.error or {}
    status = error.get("status")
    content = response.get("content")
    return [
        record.task_id, record.item_id, record.judge, "attempt", record.attempt, record.reask, record.at,
        record.cache_hit, record.latency_s, usage.get("prompt_tokens"), usage.get("completion_tokens"),
        record.cost, response.get("finish_reason"), None if content is None else str(content),
        error.get("kind"), status if isinstance(status, int) else None, error.get("message"), None, None,
    ]  # fmt: skip


def transcript_batches(run_dir: Path) -> tuple[Columns, Iterator[list[Row]]]:
    """Every transcript line of a run (attempts, cache hits, protocol errors), in batches."""
    return list(TRANSCRIPT_COLUMNS), batched(transcript_row(r) for r in iter_transcript(run_dir))
