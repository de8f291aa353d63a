"""What the viewer derives from a run for itself, built on a background thread, kept current.

The engine's index holds what the engine needs (:mod:`judge_engine.rundir.index`); a viewer needs more,
and only a viewer pays for it, on the run's first open, never on the engine's hot path:

* **order indexes** on ``tasks`` (:data:`TASK_INDEXES`): every list order walks one, with the
  filter columns in it (~2 s to build at 10^6 tasks);
* **the overview** (:mod:`judge_engine.viewer.summary`): counts, histograms, consistency;
* **attempt counts** per judge (calls, tokens and cost; 429s, retries, re-asks...: the command
  line's definitions, :class:`~judge_engine.viewer.summary.AttemptTally`), from one pass over
  ``transcripts.jsonl``, continued from where it stopped (the offset is kept with the counts),
  so a live run's figures are those of the lines written so far, not of its last checkpoint;
* **the items** of the run's dataset, by id, with an FTS5 index of their text, for the item
  view and the list's search (read through :func:`judge_engine.rundir.export.run_dataset` with the run's
  field mapping; when the dataset is gone, the prompt each item's first attempt sent).

Each result is kept in ``viewer_cache`` with the state it covers (the index's coverage of
``outcomes.jsonl``, a transcript offset, the dataset's size and time), so a second open reuses
it and a live run refreshes what changed. For a run another process was writing when the viewer
opened it, everything goes to a temporary file instead (:mod:`judge_engine.viewer.catalog`);
the order indexes are then left out, and the list walks the engine's own.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from judge_engine.errors import DatasetError, JudgeEngineError
from judge_engine.inputs.dataset import iter_items
from judge_engine.rundir.blocks import decode_request
from judge_engine.rundir.export import run_dataset
from judge_engine.rundir.records import OUTCOMES, TRANSCRIPTS
from judge_engine.util.jsonio import dumps, loads
from judge_engine.viewer import summary
from judge_engine.viewer.catalog import Catalog, OpenRun, declared_scales

TASK_INDEXES = {
    "viewer_tasks_by_item": "tasks (item_id, judge, temperature, repeat, variant, status, reason_code, score)",
    "viewer_tasks_by_score": "tasks (score, item_id, judge, temperature, repeat, variant, status, reason_code)",
}
_TABLES = """
CREATE TABLE IF NOT EXISTS viewer_cache (key TEXT PRIMARY KEY, covers TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS viewer_items (id INTEGER PRIMARY KEY, item_id TEXT NOT NULL UNIQUE, fields TEXT NOT NULL,
                                         origin TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS viewer_items_text USING fts5(body, content='', columnsize=0,
                                                                tokenize='unicode61 remove_diacritics 2');
"""
VERSION = 3
"""Of what the viewer derives: part of every cached entry's key, so a viewer that derives
differently never reads an older one's figures."""
REFRESH_S = 2.0
"""How often a live run's derived data is brought up to date."""
BATCH = 5_000


@dataclass
class RunState:
    """What has been derived for one run so far (read by the pages, written by the builder)."""

    indexed: bool = False
    """The order indexes exist."""
    counts: dict[str, Any] | None = None
    histograms: dict[str, Any] | None = None
    consistency: dict[str, Any] | None = None
    attempts: dict[str, dict[str, Any]] | None = None
    """Judge -> its attempt figures and spend, from the transcript (:class:`summary.AttemptTally`)."""
    attempts_share: float = 0.0
    """How much of the transcript the attempt counts cover (1.0: all of it)."""
    items: bool = False
    """The items table is complete (search and item text are available)."""
    items_done: int = 0
    items_origin: str = ""
    """``dataset`` or ``request`` (the dataset was gone)."""
    covers: int = -1
    """The outcomes coverage the counts and histograms were computed at."""
    problems: list[str] = field(default_factory=list)


class Builder:
    """The background thread that derives, then keeps refreshing what a live run changes."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.states = [RunState() for _ in catalog.runs]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="judge-engine-view-builder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _main(self) -> None:
        connections: dict[int, sqlite3.Connection] = {}
        for run in self.catalog.runs:
            try:
                connections[run.number] = _connect(run)
            except sqlite3.Error as exc:  # the overview says so; the pages work without
                self.states[run.number].problems.append(f"{run.run_id}: cannot derive: {exc}")
        runs = [run for run in self.catalog.runs if run.number in connections]
        try:
            for step in (self._indexes, self._summary, self._attempts, self._items, self._consistency):
                for run in runs:
                    if self._stop.is_set():
                        return
                    self._guarded(step, run, connections[run.number])
            while not self._stop.wait(REFRESH_S):
                for run in runs:
                    for step in (self._summary, self._attempts, self._consistency):
                        self._guarded(step, run, connections[run.number])
        finally:
            for db in connections.values():
                db.close()

    def _guarded(self, step: Any, run: OpenRun, db: sqlite3.Connection) -> None:
        """A step that fails says so on the overview; the viewer goes on without it."""
        try:
            step(run, db)
        except (sqlite3.Error, JudgeEngineError, OSError, ValueError) as exc:
            problem = f"{run.run_id}: {step.__name__.strip('_')}: {exc}"
            if problem not in self.states[run.number].problems:
                self.states[run.number].problems.append(problem)

    def _writable(self, run: OpenRun) -> bool:
        """Whether the builder may write where this run's tables live (never into a run that
        another process has started writing since the viewer opened it)."""
        return not run.in_index or not run.live()

    # --- the steps --------------------------------------------------------------------------------

    def _indexes(self, run: OpenRun, db: sqlite3.Connection) -> None:
        state = self.states[run.number]
        if run.in_index and self._writable(run):
            for name, body in TASK_INDEXES.items():
                db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {body}")
        state.indexed = run.in_index and _has_indexes(db, source(run))

    def _summary(self, run: OpenRun, db: sqlite3.Connection) -> None:
        state = self.states[run.number]
        covers = _outcomes_covered(db, source(run))
        if covers == state.covers:
            return
        cached = _cached(db, "summary", str(covers))
        if cached is None:
            scales = declared_scales(run.current_manifest())
            counted = summary.counts(db, source(run))
            cached = {"counts": counted, "histograms": {
                judge: summary.histogram(db, source(run), judge, scales.get(judge)) for judge in counted}}
            self._keep(run, db, "summary", str(covers), cached)
        state.counts, state.histograms, state.covers = cached["counts"], cached["histograms"], covers

    def _consistency(self, run: OpenRun, db: sqlite3.Connection) -> None:
        state = self.states[run.number]
        covers = str(state.covers)
        if state.consistency is not None and state.consistency.get("covers") == covers:
            return
        cached = _cached(db, "consistency", covers)
        if cached is None:
            judges = {e.name: e for e in run.current_manifest().judges}
            cached = {judge: summary.consistency(db, source(run), judge, judges.get(judge)) for judge in state.counts or {}}
            self._keep(run, db, "consistency", covers, cached)
        state.consistency = {"covers": covers, "judges": cached}

    def _attempts(self, run: OpenRun, db: sqlite3.Connection) -> None:
        state = self.states[run.number]
        path = run.run_dir / TRANSCRIPTS
        size = path.stat().st_size if path.exists() else 0
        row = db.execute("SELECT covers, value FROM viewer_cache WHERE key = 'attempts'").fetchone()
        version, _, covered = str(row[0]).partition(":") if row else ("", "", "")
        budgets = summary.transport_budgets(run.current_manifest().config)
        offset, tally = (int(covered), summary.AttemptTally(loads(row[1]), budgets=budgets)) \
            if version == f"v{VERSION}" else (0, summary.AttemptTally(budgets=budgets))
        if state.attempts is not None and offset >= size:
            return
        lines = 0
        for end, record in _lines_from(path, offset):
            tally.add(record)
            offset, lines = end, lines + 1
            if lines % 100_000 == 0:
                self._keep(run, db, "attempts", str(offset), tally.state())
                state.attempts, state.attempts_share = tally.judges(), offset / max(1, size)
                if self._stop.is_set():
                    return
        self._keep(run, db, "attempts", str(offset), tally.state())
        state.attempts, state.attempts_share = tally.judges(), 1.0

    def _items(self, run: OpenRun, db: sqlite3.Connection) -> None:
        state = self.states[run.number]
        try:
            config = run_dataset(run.run_dir, run.manifest)
            stat = config.path.stat()
            covers, origin = f"{config.path}|{stat.st_size}|{stat.st_mtime_ns}", "dataset"
        except (DatasetError, JudgeEngineError):
            config, covers, origin = None, f"request|{_outcomes_covered(db, source(run))}", "request"
        if _cached(db, "items", covers) is not None:
            state.items, state.items_origin = True, origin
            return
        if not self._writable(run):
            return
        db.executescript("DELETE FROM viewer_items; DROP TABLE IF EXISTS viewer_items_text;" + _TABLES)
        items = _dataset_items(config) if config is not None else _request_items(run, db)
        batch: list[tuple[int, str, str, str]] = []
        for number, (item_id, fields) in enumerate(items, start=1):
            batch.append((number, item_id, dumps(fields).decode(), _searchable(item_id, fields)))
            if len(batch) >= BATCH:
                self._insert_items(db, batch, origin)
                state.items_done = number
                if self._stop.is_set():
                    return
        self._insert_items(db, batch, origin)
        self._keep(run, db, "items", covers, {"origin": origin})
        state.items, state.items_origin = True, origin

    def _insert_items(self, db: sqlite3.Connection, batch: list[tuple[int, str, str, str]], origin: str) -> None:
        with db:
            db.executemany("INSERT OR IGNORE INTO viewer_items (id, item_id, fields, origin) VALUES (?, ?, ?, ?)",
                           [(n, i, f, origin) for n, i, f, _ in batch])
            db.executemany("INSERT INTO viewer_items_text (rowid, body) VALUES (?, ?)", [(n, b) for n, _, _, b in batch])
        batch.clear()

    def _keep(self, run: OpenRun, db: sqlite3.Connection, key: str, covers: str, value: Any) -> None:
        if self._writable(run):
            with db:
                db.execute("INSERT OR REPLACE INTO viewer_cache (key, covers, value) VALUES (?, ?, ?)",
                           (key, f"v{VERSION}:{covers}", dumps(value).decode()))


def source(run: OpenRun) -> str:
    """The schema the builder's connection reads the run's index from: its own main database
    when the viewer's tables live in the index, else the index attached as ``src``."""
    return "main" if run.in_index else "src"


def _connect(run: OpenRun) -> sqlite3.Connection:
    """The builder's connection for ``run``: where its derived tables go, with the index."""
    db = sqlite3.connect(run.derived_path, timeout=30, check_same_thread=False, uri=True)
    db.execute("PRAGMA journal_mode=WAL")
    if not run.in_index:
        db.execute("ATTACH DATABASE ? AS src", (run.index_database,))
    if not run.in_index or not run.live():
        db.executescript(_TABLES)
    return db


def _has_indexes(db: sqlite3.Connection, schema: str) -> bool:
    names = {n for (n,) in db.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = 'index'")}
    return set(TASK_INDEXES) <= names


def _outcomes_covered(db: sqlite3.Connection, schema: str) -> int:
    row = db.execute(f"SELECT value FROM {schema}.meta WHERE key = ?", (f"covered:{OUTCOMES}",)).fetchone()
    return int(row[0]) if row else 0


def _cached(db: sqlite3.Connection, key: str, covers: str) -> Any:
    try:
        row = db.execute("SELECT value FROM viewer_cache WHERE key = ? AND covers = ?",
                         (key, f"v{VERSION}:{covers}")).fetchone()
    except sqlite3.OperationalError:  # a live run's index, opened read-only: nothing cached there
        return None
    return None if row is None else loads(row[0])


def _lines_from(path: Any, offset: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(end offset, record)`` of each complete line from ``offset``."""
    if not path.exists():
        return
    with path.open("rb") as handle:
        handle.seek(offset)
        for line in handle:
            if not line.endswith(b"\n"):
                return
            offset += len(line)
            try:
                record = loads(line)
            except ValueError:
                continue
            yield offset, record


def _searchable(item_id: str, fields: dict[str, Any]) -> str:
    texts = [item_id]
    for value in fields.values():
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list | dict):
            texts.append(dumps(value).decode())
    return "\n".join(texts)


def _dataset_items(config: Any) -> Iterator[tuple[str, dict[str, Any]]]:

    for item in iter_items(config.model_copy(update={"limit": None})):
        yield str(item["id"]), item


def _request_items(run: OpenRun, db: sqlite3.Connection) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each item's text as its first attempt sent it (the last message of the request), for a
    run whose dataset is gone."""
    schema = source(run)
    rows = db.execute(f"SELECT t.item_id, min(a.offset), a.length FROM {schema}.attempts a JOIN {schema}.tasks t "
                      "ON t.id = a.task GROUP BY t.item_id ORDER BY t.item_id")
    blocks = None
    path = run.run_dir / TRANSCRIPTS
    with path.open("rb") as handle:
        for item_id, offset, length in rows:
            handle.seek(offset)
            raw = loads(handle.read(length))
            request = raw.get("request") or {}
            if int(raw.get("v") or 1) >= 3:
                blocks = blocks if blocks is not None else run.blocks()
                request = decode_request(request, blocks)
            messages = request.get("messages") or []
            yield str(item_id), {"prompt": str(messages[-1].get("content") or "") if messages else ""}
