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

A reader never needs to write a run to read it. Where the run cannot be written (an archive, a
colleague's run, a read-only mount), a current index is opened read-only, and a missing or stale
one is built in a temporary directory, removed when the index is closed. Only a corrupt or
foreign file is deleted and rebuilt (SQLite says ``SQLITE_CORRUPT`` or ``SQLITE_NOTADB``, or it is
another index version), by the run's writer or by a reader holding the run's lock shared (no
process writes the run meanwhile); a reader of a run being written builds its own in a temporary
directory instead. A busy or locked index is never taken for a corrupt one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_engine.errors import DiskError, RunDirError
from judge_engine.rundir.disk import disk_error, writing
from judge_engine.rundir.records import LOCK, OUTCOMES, TRANSCRIPTS, OutcomeRecord
from judge_engine.util.jsonio import JSONDecodeError, loads

INDEX = "index.sqlite"
INDEX_VERSION = 2
FLUSH_ROWS = 2000
FLUSH_S = 2.0
BUSY_S = 30.0
"""How long a connection waits for another's lock before the index counts as busy."""

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

    def __init__(self, run_dir: Path, connection: sqlite3.Connection, *, database: Path | str | None = None,
                 scratch: tempfile.TemporaryDirectory[str] | None = None) -> None:
        self.run_dir = run_dir
        self._db = connection
        self.database = str(database if database is not None else run_dir / INDEX)
        """What ``ATTACH DATABASE`` takes to read this index: the run's ``index.sqlite``, a
        read-only URI of it, or the temporary file built instead (on a ``uri=True`` connection)."""
        self._scratch = scratch

    @property
    def in_place(self) -> bool:
        """Whether this is the run's own ``index.sqlite``, open for writing."""
        return self.database == str(self.run_dir / INDEX)

    @classmethod
    def open(cls, run_dir: Path, *, catch_up: bool = True, holds_lock: bool = False) -> RunIndex:
        """Open (or create) the index and read whatever the JSONL files hold beyond what it
        covers (see the module docstring for a run that cannot be written, and a corrupt index).

        Args:
            catch_up: False for a reader of a run another process is writing (as that process
                last flushed it).
            holds_lock: the caller writes the run (it holds the run's lock): the index is
                written in place, whatever it takes.

        Raises:
            RunDirError: ``run_dir`` has no outcomes or transcript file, or its index is busy.
            DiskError: (``holds_lock``) the index cannot be written.
        """
        if not (run_dir / OUTCOMES).exists() and not (run_dir / TRANSCRIPTS).exists():
            raise RunDirError(f"{run_dir}: not a judge-engine run directory (no {OUTCOMES})")
        if holds_lock:
            return cls._in_place(run_dir, catch_up=catch_up, holds_lock=True)
        if _writable(run_dir):
            try:
                return cls._in_place(run_dir, catch_up=catch_up, holds_lock=False)
            except (sqlite3.Error, DiskError) as exc:  # the run's disk refused after all: read it without writing
                if disk_error(exc, run_dir / INDEX) is None:
                    raise
        return cls._read_only(run_dir, catch_up=catch_up)

    @classmethod
    def _in_place(cls, run_dir: Path, *, catch_up: bool, holds_lock: bool) -> RunIndex:
        """The run's own index, opened for writing (created, or rebuilt when corrupt)."""
        path = run_dir / INDEX
        db = None
        try:
            db = _connect(path)
            ours = _version(db) in (None, str(INDEX_VERSION))  # else another index version: foreign
        except sqlite3.DatabaseError as exc:
            if db is not None:
                db.close()
            if not _corrupt(exc):
                busy = _busy(exc, path)
                if busy is None:
                    raise
                raise busy from exc
            db, ours = None, False
        if db is not None and ours:
            return cls(run_dir, db)._caught_up(catch_up)
        if db is not None:
            db.close()
        with _run_unwritten(run_dir, holds_lock) as free:
            if not free:  # another process writes the run: its index is left to it
                return cls._in_temp(run_dir, None)
            for leftover in (path, *_sidecars(path)):
                leftover.unlink(missing_ok=True)
            return cls(run_dir, _connect(path))._caught_up(catch_up)

    def _caught_up(self, catch_up: bool) -> RunIndex:
        """This index, caught up with the run's files when asked (closed if that fails)."""
        if catch_up:
            try:
                self.catch_up()
            except BaseException:
                self.close()
                raise
        return self

    @classmethod
    def _read_only(cls, run_dir: Path, *, catch_up: bool) -> RunIndex:
        """The index of a run this process may not write: the run's own, read-only, when it is
        current (or ``catch_up`` is False); else one built in a temporary directory, from the
        run's index as far as it goes."""
        found = _open_read_only(run_dir / INDEX)
        if found is not None:
            index = cls(run_dir, found[0], database=found[1])
            if not catch_up or index.current():
                return index
            return cls._in_temp(run_dir, index)
        return cls._in_temp(run_dir, None)

    @classmethod
    def _in_temp(cls, run_dir: Path, start: RunIndex | None) -> RunIndex:
        """An index built in a temporary directory (removed at :meth:`close`), from a copy of
        ``start`` (then closed) when there is one, caught up with the run's files."""
        scratch = tempfile.TemporaryDirectory(prefix="judge-engine-index-")
        path = Path(scratch.name) / INDEX
        try:
            db = _connect(path)
            if start is not None:
                start._db.backup(db)
            index = cls(run_dir, db, database=path, scratch=scratch)
            index.catch_up()
        except BaseException:
            scratch.cleanup()
            raise
        finally:
            if start is not None:
                start.close()
        return index

    def current(self) -> bool:
        """Whether the index covers every complete line of the run's outcomes and transcript."""
        return not any(_line_after(self.run_dir / name, self.covered(name)) for name in (OUTCOMES, TRANSCRIPTS))

    def close(self) -> None:
        self._db.close()
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

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
        one transaction (a crash leaves the index consistent with what it says it covers).

        Raises:
            DiskError: the index's disk refused the write (nothing of it was written).
        """
        with writing(self.database), self._db:
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
        return _meta(self._db, key)


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
    db = sqlite3.connect(path, timeout=BUSY_S)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
    except BaseException:
        db.close()
        raise
    return db


def _meta(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _version(db: sqlite3.Connection) -> str | None:
    return _meta(db, "version")


_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_CORRUPT, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 5, 6, 11, 14, 26


def _code(exc: sqlite3.Error) -> int:
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def _corrupt(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite says the file is damaged or not a database (nothing transient)."""
    return _code(exc) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


def _busy(exc: sqlite3.Error, path: Path) -> RunDirError | None:
    if _code(exc) not in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return None
    return RunDirError(f"{path}: busy (another process has held a lock on it for {BUSY_S:g} s: {exc}); try again")


def _sidecars(path: Path) -> tuple[Path, Path]:
    """The WAL files SQLite keeps beside a database."""
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def _writable(run_dir: Path) -> bool:
    """Whether this process may write the run's index in place (the directory and whichever of
    the index's files exist)."""
    path = run_dir / INDEX
    return all(os.access(p, os.W_OK) for p in (run_dir, path, *_sidecars(path)) if p == run_dir or p.exists())


@contextlib.contextmanager
def _run_unwritten(run_dir: Path, holds_lock: bool) -> Iterator[bool]:
    """Whether no other process writes the run, held true for the block: the run's lock is
    held shared meanwhile, so no writer can start (``holds_lock``: the caller is the writer)."""
    if holds_lock:
        yield True
        return
    try:
        fd = os.open(run_dir / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        yield True  # a run written before locks: no writer to wait for
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing releases the lock


def _open_read_only(path: Path) -> tuple[sqlite3.Connection, str] | None:
    """The run's index opened read-only, with the URI that opened it, or None when it is
    missing, unreadable, corrupt, foreign or busy (a temporary one is built instead: nothing of
    the run is touched). A WAL database needs its ``-shm`` file: where SQLite cannot create it
    (no process has the run open), the file is read as it is (``immutable``)."""
    if not path.exists():
        return None
    for query in ("mode=ro", "immutable=1"):
        uri = f"{path.absolute().as_uri()}?{query}"
        db = None
        try:
            db = sqlite3.connect(uri, uri=True, timeout=BUSY_S)
            version = _version(db)
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            if _code(exc) == _SQLITE_CANTOPEN:
                continue
            return None
        if version != str(INDEX_VERSION):
            db.close()
            return None
        return db, uri
    return None


def _line_after(path: Path, offset: int) -> bool:
    """Whether ``path`` has a complete line beyond byte ``offset`` (a torn last line is not one)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            while chunk := handle.read(1 << 16):
                if b"\n" in chunk:
                    return True
    except FileNotFoundError:
        pass
    return False


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
