"""The run directory's index: random access to a run of millions of tasks without reading it all.

``index.sqlite`` beside the JSONL files holds, per task, its latest outcome's fields (item, judge,
temperature, repeat, variant, status, reason code, score) with the byte offset of that outcome
line, and the byte offsets of every transcript line of the task. ``show``, ``export``, ``stats``
and the viewer ask it which lines to read, then read just those.

It is derived data: deleting it loses nothing. It records how far into each JSONL file it has
read (in the same transaction as the rows), so :meth:`RunIndex.open` catches up from there:
after a crash, after a run written without it, or after ``index.sqlite`` was deleted (a full
rebuild). While a run writes, the run store feeds it in batches (:class:`IndexWriter`), so a
finished run's index is already current; a reader never writes into a run another process holds
(it reads what the writer has flushed, every couple of seconds).

SQLite (the standard library's ``sqlite3``) in WAL mode: one writer and any number of readers at
once, no server, one file.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_engine.errors import RunDirError
from judge_engine.jsonio import JSONDecodeError, loads
from judge_engine.records import OUTCOMES, TRANSCRIPTS, OutcomeRecord

INDEX = "index.sqlite"
INDEX_VERSION = 2
FLUSH_ROWS = 2000
FLUSH_S = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL UNIQUE,
    item_id TEXT NOT NULL,
    judge TEXT NOT NULL,
    temperature REAL,
    repeat INTEGER,
    variant TEXT,
    status TEXT,
    reason_code TEXT,
    score REAL,
    outcome_offset INTEGER,
    outcome_length INTEGER,
    row INTEGER,
    row_tasks INTEGER
);
CREATE TABLE IF NOT EXISTS attempts (
    task INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (task, offset)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tasks_item ON tasks (item_id);
CREATE INDEX IF NOT EXISTS tasks_judge_status ON tasks (judge, status, reason_code);
CREATE INDEX IF NOT EXISTS tasks_score ON tasks (score);
CREATE INDEX IF NOT EXISTS tasks_judge_row ON tasks (judge, row);
"""


@dataclass(frozen=True, slots=True)
class TaskRow:
    """What the index knows of one task (its latest outcome, if any)."""

    task_id: str
    item_id: str
    judge: str
    temperature: float | None
    repeat: int | None
    variant: str | None
    status: str | None
    """None: the task has attempts but no outcome yet (undone)."""
    reason_code: str | None
    score: float | None
    outcome_offset: int | None
    outcome_length: int | None


@dataclass(frozen=True, slots=True)
class Query:
    """Which tasks to list, in which order (every field optional)."""

    judge: str | None = None
    status: str | None = None
    """``scored``, ``unscored`` or ``undone``."""
    reason_code: str | None = None
    temperature: float | None = None
    repeat: int | None = None
    item_id: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    sort: str = "item"
    """``item``, ``score`` (lowest first), ``score-desc`` or ``judge``."""
    limit: int | None = None
    offset: int = 0


_ORDER = {"item": "item_id, judge, temperature, repeat, variant", "score": "score IS NULL, score, item_id",
          "score-desc": "score IS NULL, score DESC, item_id", "judge": "judge, item_id, temperature, repeat, variant"}


class IndexWriter:
    """Feeds the index while a run store writes (batched: one SQLite transaction per
    :data:`FLUSH_ROWS` lines or :data:`FLUSH_S` seconds, and at close)."""

    def __init__(self, index: RunIndex, outcomes_end: int, transcripts_end: int) -> None:
        self._index = index
        self._outcomes_end = outcomes_end
        self._transcripts_end = transcripts_end
        self._outcomes: list[tuple[Any, ...]] = []
        self._attempts: list[tuple[str, str, str, int, int]] = []
        self._last_flush = time.monotonic()

    def outcome(self, record: OutcomeRecord, length: int) -> None:
        offset = self._outcomes_end
        self._outcomes_end += length
        scored = record.status == "scored"
        self._outcomes.append((record.task_id, record.item_id, record.judge, record.temperature, record.repeat,
                               record.variant, record.status, None if scored else record.reason_code,
                               record.score if scored else None, offset, length, record.row, record.row_tasks))
        self._maybe_flush()

    def attempt(self, task_id: str, item_id: str, judge: str, length: int) -> None:
        offset = self._transcripts_end
        self._transcripts_end += length
        self._attempts.append((task_id, item_id, judge, offset, length))
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if len(self._outcomes) + len(self._attempts) >= FLUSH_ROWS or time.monotonic() - self._last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        self._index.add(self._outcomes, self._attempts, self._outcomes_end, self._transcripts_end)
        self._outcomes.clear()
        self._attempts.clear()
        self._last_flush = time.monotonic()


def _outcome_row(raw: Mapping[str, Any], offset: int, length: int) -> tuple[Any, ...]:
    status = "scored" if raw.get("status") == "scored" else "unscored"
    code = None if status == "scored" else str(raw.get("reason_code") or "unrecorded")
    score = raw.get("score")
    return (str(raw["task_id"]), str(raw.get("item_id", "")), str(raw.get("judge", "")),
            float(raw.get("temperature") or 0.0), int(raw.get("repeat") or 0), str(raw.get("variant") or ""),
            status, code, None if score is None or status != "scored" else float(score), offset, length,
            raw.get("row"), raw.get("row_tasks"))


class RunIndex:
    """The index of one run directory. Use :meth:`open` (brings it up to date) and :meth:`close`."""

    def __init__(self, run_dir: Path, connection: sqlite3.Connection) -> None:
        self.run_dir = run_dir
        self._db = connection

    @classmethod
    def open(cls, run_dir: Path, *, catch_up: bool = True) -> RunIndex:
        """Open (or create) the index and read whatever the JSONL files hold beyond what it
        covers. ``catch_up=False`` for a reader of a run another process is writing.

        Raises:
            RunDirError: ``run_dir`` has no outcomes or transcript file.
        """
        if not (run_dir / OUTCOMES).exists() and not (run_dir / TRANSCRIPTS).exists():
            raise RunDirError(f"{run_dir}: not a judge-engine run directory (no {OUTCOMES})")
        path = run_dir / INDEX
        try:
            index = cls(run_dir, _connect(path))
            if index._meta("version") not in (None, str(INDEX_VERSION)):
                raise sqlite3.DatabaseError("another index version")
        except sqlite3.DatabaseError:  # corrupt or foreign: it is derived, so rebuild it
            path.unlink(missing_ok=True)
            index = cls(run_dir, _connect(path))
        if catch_up:
            index.catch_up()
        return index

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RunIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ------------------------------------------------------------------------------

    def writer(self) -> IndexWriter:
        """A writer for a run store appending to this run (after :meth:`catch_up`)."""
        return IndexWriter(self, self.covered(OUTCOMES), self.covered(TRANSCRIPTS))

    def covered(self, name: str) -> int:
        return int(self._meta(f"covered:{name}") or 0)

    def catch_up(self) -> int:
        """Index the JSONL lines written since the index last looked; the number of lines read."""
        read = 0
        for name in (TRANSCRIPTS, OUTCOMES):
            path = self.run_dir / name
            start = self.covered(name)
            if not path.exists() or path.stat().st_size <= start:
                continue
            outcomes: list[tuple[Any, ...]] = []
            attempts: list[tuple[str, str, str, int, int]] = []
            end = start
            for offset, length, raw in _complete_lines(path, start):
                end = offset + length
                read += 1
                if name == OUTCOMES:
                    outcomes.append(_outcome_row(raw, offset, length))
                else:
                    attempts.append((str(raw.get("task_id", "")), str(raw.get("item_id", "")),
                                     str(raw.get("judge", "")), offset, length))
                if len(outcomes) + len(attempts) >= 50_000:
                    self._add_covering(name, outcomes, attempts, end)
                    outcomes, attempts = [], []
            self._add_covering(name, outcomes, attempts, end)
        return read

    def _add_covering(self, name: str, outcomes: list[tuple[Any, ...]],
                      attempts: list[tuple[str, str, str, int, int]], end: int) -> None:
        self.add(outcomes, attempts, end if name == OUTCOMES else self.covered(OUTCOMES),
                 end if name == TRANSCRIPTS else self.covered(TRANSCRIPTS))

    def add(self, outcomes: Sequence[tuple[Any, ...]], attempts: Sequence[tuple[str, str, str, int, int]],
            outcomes_covered: int, transcripts_covered: int) -> None:
        """Index outcome and attempt rows and record the offsets they bring the index up to, in
        one transaction (a crash leaves the index consistent with what it says it covers)."""
        with self._db:
            db = self._db
            if attempts:
                db.executemany("INSERT OR IGNORE INTO tasks (task_id, item_id, judge) VALUES (?, ?, ?)",
                               [(a[0], a[1], a[2]) for a in attempts])
                db.executemany("INSERT OR IGNORE INTO attempts (task, offset, length) "
                               "SELECT id, ?, ? FROM tasks WHERE task_id = ?",
                               [(a[3], a[4], a[0]) for a in attempts])
            if outcomes:
                db.executemany(
                    "INSERT INTO tasks (task_id, item_id, judge, temperature, repeat, variant, status, reason_code, "
                    "score, outcome_offset, outcome_length, row, row_tasks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(task_id) DO UPDATE SET item_id = excluded.item_id, judge = excluded.judge, "
                    "temperature = excluded.temperature, repeat = excluded.repeat, variant = excluded.variant, "
                    "status = excluded.status, reason_code = excluded.reason_code, score = excluded.score, "
                    "outcome_offset = excluded.outcome_offset, outcome_length = excluded.outcome_length, "
                    "row = excluded.row, row_tasks = excluded.row_tasks "
                    "WHERE excluded.outcome_offset > coalesce(tasks.outcome_offset, -1)",
                    outcomes)
            db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                           [(f"covered:{OUTCOMES}", str(outcomes_covered)),
                            (f"covered:{TRANSCRIPTS}", str(transcripts_covered)),
                            ("version", str(INDEX_VERSION))])

    # --- reading ------------------------------------------------------------------------------

    def tasks(self, query: Query = Query()) -> list[TaskRow]:
        """The tasks matching ``query``, sorted and paged in SQLite."""
        where, args = _where(query)
        sql = f"SELECT {_COLUMNS} FROM tasks{where} ORDER BY {_ORDER.get(query.sort, _ORDER['item'])}"
        if query.limit is not None:
            sql += " LIMIT ? OFFSET ?"
            args += [query.limit, query.offset]
        return [TaskRow(*row) for row in self._db.execute(sql, args)]

    def finished(self, judges: Sequence[str]) -> Iterator[TaskRow]:
        """The tasks of ``judges`` that have an outcome, streamed in coordinate order (item,
        variant, temperature, repeat): a jury's jurors at one coordinate come together."""
        marks = ",".join("?" * len(judges))
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM tasks WHERE judge IN ({marks}) AND status IS NOT NULL "
                                "ORDER BY item_id, variant, temperature, repeat, judge", list(judges))
        return (TaskRow(*row) for row in rows)

    def count(self, query: Query = Query()) -> int:
        where, args = _where(query)
        return int(self._db.execute(f"SELECT count(*) FROM tasks{where}", args).fetchone()[0])

    def counts(self) -> dict[tuple[str, str, str | None], int]:
        """(judge, status, reason code) -> tasks; undone tasks have status ``undone``."""
        rows = self._db.execute("SELECT judge, coalesce(status, 'undone'), reason_code, count(*) FROM tasks "
                                "GROUP BY 1, 2, 3")
        return {(judge, status, code): n for judge, status, code, n in rows}

    def attempt_offsets(self, task_ids: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
        """Task id -> ``(offset, length)`` of each of its transcript lines, in file order."""
        found: dict[str, list[tuple[int, int]]] = {}
        for chunk in _chunks(task_ids, 500):
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT t.task_id, a.offset, a.length FROM attempts a JOIN tasks t ON t.id = a.task "
                                    f"WHERE t.task_id IN ({marks}) ORDER BY a.offset", list(chunk))
            for task_id, offset, length in rows:
                found.setdefault(task_id, []).append((offset, length))
        return found

    def finished_prefix(self, judge: str) -> tuple[int, int]:
        """(rows, tasks): how many leading dataset items have every task of ``judge`` finished,
        and how many tasks those are. A resumed run skips them without reading them."""
        rows = tasks = 0
        cursor = self._db.execute("SELECT row, max(row_tasks), count(*) FROM tasks WHERE judge = ? AND "
                                  "status IS NOT NULL AND row IS NOT NULL GROUP BY row ORDER BY row", (judge,))
        for row, expected, done in cursor:
            if row != rows or expected is None or done < expected:
                break
            rows, tasks = rows + 1, tasks + done
        return rows, tasks

    def finished_tasks(self, judge: str, *, from_row: int = 0) -> set[str]:
        """Task ids of ``judge`` with an outcome, beyond the first ``from_row`` items (and any
        whose item position is unknown: outcomes written before positions were recorded)."""
        rows = self._db.execute("SELECT task_id FROM tasks WHERE judge = ? AND status IS NOT NULL AND "
                                "(row IS NULL OR row >= ?)", (judge, from_row))
        return {task_id for (task_id,) in rows}

    def finished_before(self, judge: str, rows: int) -> int:
        """Finished tasks of ``judge`` in its first ``rows`` items."""
        (count,) = self._db.execute("SELECT count(*) FROM tasks WHERE judge = ? AND status IS NOT NULL AND row < ?",
                                    (judge, rows)).fetchone()
        return int(count)

    def first_row(self, task_ids: Sequence[str]) -> int | None:
        """The smallest item position among ``task_ids`` (None: none known)."""
        found: int | None = None
        for chunk in _chunks(task_ids, 500):
            marks = ",".join("?" * len(chunk))
            (low,) = self._db.execute(f"SELECT min(row) FROM tasks WHERE task_id IN ({marks})", list(chunk)).fetchone()
            if low is not None:
                found = low if found is None else min(found, low)
        return found

    def differences(self, other: Path) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...] | None, tuple[Any, ...]]]:
        """Tasks whose status, score or reason code differ from the same task (same judge, item,
        variant, temperature, repeat) in the run at ``other`` (its index must exist): yields
        ``(coordinates, (status, score, code) there or None, (status, score, code) here)``."""
        self._db.execute("ATTACH DATABASE ? AS other", (str(other / INDEX),))
        try:
            rows = self._db.execute(
                "SELECT t.judge, t.item_id, t.variant, t.temperature, t.repeat, o.status, o.score, o.reason_code, "
                "t.status, t.score, t.reason_code FROM tasks t LEFT JOIN other.tasks o ON o.item_id = t.item_id AND "
                "o.judge = t.judge AND o.variant IS t.variant AND o.temperature IS t.temperature AND o.repeat IS t.repeat "
                "WHERE t.status IS NOT NULL AND (o.task_id IS NULL OR o.status IS NOT t.status OR "
                "o.score IS NOT t.score OR o.reason_code IS NOT t.reason_code) ORDER BY t.judge, t.item_id, "
                "t.temperature, t.repeat, t.variant")
            for row in rows:
                before = None if row[5] is None else tuple(row[5:8])
                yield tuple(row[:5]), before, tuple(row[8:11])
        finally:
            self._db.execute("DETACH DATABASE other")

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])


_COLUMNS = ("task_id, item_id, judge, temperature, repeat, variant, status, reason_code, score, "
            "outcome_offset, outcome_length")


def _where(query: Query) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (("judge", query.judge), ("reason_code", query.reason_code), ("item_id", query.item_id),
                          ("temperature", query.temperature), ("repeat", query.repeat)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if query.status == "undone":
        clauses.append("status IS NULL")
    elif query.status is not None:
        clauses.append("status = ?")
        args.append(query.status)
    if query.min_score is not None:
        clauses.append("score >= ?")
        args.append(query.min_score)
    if query.max_score is not None:
        clauses.append("score <= ?")
        args.append(query.max_score)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(_SCHEMA)
    return db


def _complete_lines(path: Path, start: int) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(offset, length, record)`` of every complete, parseable line from ``start`` (a torn
    last line is left for later: the writer may not have finished it)."""
    with path.open("rb") as handle:
        handle.seek(start)
        offset = start
        for line in handle:
            if not line.endswith(b"\n"):
                return
            try:
                record = loads(line)
            except JSONDecodeError:
                raise RunDirError(f"{path}: corrupt line at byte {offset}") from None
            yield offset, len(line), record
            offset += len(line)


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def read_line(path: Path, offset: int, length: int) -> dict[str, Any]:
    """The JSON record at ``offset`` of a JSONL file."""
    with path.open("rb") as handle:
        handle.seek(offset)
        record: dict[str, Any] = loads(handle.read(length))
    return record
