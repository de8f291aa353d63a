"""The run directory on disk: the writer (:class:`RunStore`) and every reader.

What each file holds is defined once, in :mod:`judge_engine.rundir.records`; this module only appends,
replaces and reads them. Append-only JSONL, flushed per line, safe to kill at any instant:

```
runs/<run_id>/
  run.json           manifest: resolved config (no secrets), versions, template hashes, counts, status
  outcomes.jsonl     one line per finished task (scored, or unscored with the reason)
  transcripts.jsonl  one line per provider attempt (the request as references to blocks plus the
                     item's own text, raw answer or error, usage, cost)
  blocks.jsonl       the text every request repeats (system prompt, few-shot turns, the template
                     around the item), stored once per run (see judge_engine/rundir/blocks.py)
  batches.jsonl      batch-mode judges: each chunk's intent, file and batch ids, states, and the
                     tasks carried to another round (see judge_engine/running/batch/)
  .lock              held by the process writing the run
  .reserve           room held on the run's disk while a session writes (see below)
```

Each line is written with a single ``write`` on an ``O_APPEND`` descriptor, so a crash leaves at
most one torn last line. Readers skip a torn last line; :meth:`RunStore.open` cuts it off before
appending, so it can never glue itself to the next record. ``run.json`` is replaced atomically.

A disk that fills, turns read-only or runs out of quota under a run is the machine's doing: every
write here raises it as a :class:`~judge_engine.errors.DiskError` naming the file, and a write the
disk cut short is taken back, so the file still ends with a whole line. While a session writes,
``.reserve`` holds :data:`RESERVE_BYTES` of the disk (or twice ``run.json``); the session gives it
back when a full disk stops it, so the index and ``run.json`` can still record the stop.

A task may have several outcome lines (``resume --retry`` judges it again): the last one is the
task's outcome, for every reader.

What the run spent (provider calls, tokens, cost) is summed from the transcript lines as they are
written (:class:`Spend`), so it counts every attempt, including those of tasks that were retried
or abandoned. The manifest keeps the total with the transcript offset it covers; a run killed
before its last checkpoint has the rest of its transcript summed when it is opened again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judge_engine.errors import DiskError, RunDirError
from judge_engine.rundir.blocks import BLOCKS, Encoder, block_id, block_line, read_block_line
from judge_engine.rundir.disk import append_whole, hold_room, writing
from judge_engine.rundir.index import INDEX, IndexWriter, RunIndex
from judge_engine.rundir.records import (
    BATCHES,
    LOCK,
    MANIFEST,
    OUTCOMES,
    TRANSCRIPTS,
    UNRECORDED,
    AttemptRecord,
    BatchLine,
    Counts,
    Manifest,
    OutcomeRecord,
    Spend,
    TranscriptRecord,
    batch_line,
    counts_section,
    spend_section,
    total_spend,
    transcript_record,
)
from judge_engine.util.jsonio import JSONDecodeError, dumps_line, loads, pretty

RESERVE = ".reserve"
RESERVE_BYTES = 256 * 1024
"""Room a writing session holds on the run's disk, at least (twice ``run.json`` if larger)."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def read_jsonl(path: Path, *, offset: int = 0, notes: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file (from byte ``offset``, a line start); a torn (unterminated,
    unparseable) last line is skipped (and said in ``notes``), a bad line anywhere else is an
    error naming it."""
    for _, record in read_jsonl_at(path, offset=offset, notes=notes):
        yield record


def read_jsonl_at(path: Path, *, offset: int = 0, notes: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl` with each record's byte offset in the file (where a reader may seek
    to read it again)."""
    if not path.exists():
        return
    with path.open("rb") as handle:
        handle.seek(offset)
        previous: tuple[int, int, bytes] | None = None
        for number, line in enumerate(handle, start=1):
            if previous is not None:
                yield previous[0], _parse_line(path, *previous[1:])
            previous = (offset, number, line)
            offset += len(line)
        if previous is not None:
            start, number, line = previous
            if line.endswith(b"\n"):
                yield start, _parse_line(path, number, line)
            else:
                try:
                    yield start, loads(line)
                except JSONDecodeError:  # torn by a crash mid-write
                    if notes is not None:
                        notes.append(f"{path}: skipped a torn last line (a crash mid-write)")
                    return


def _parse_line(path: Path, number: int, line: bytes) -> dict[str, Any]:
    try:
        record = loads(line)
    except JSONDecodeError:
        raise RunDirError(f"{path}:{number}: corrupt line (not JSON)") from None
    if not isinstance(record, dict):
        raise RunDirError(f"{path}:{number}: corrupt line (not an object)")
    return record


def read_manifest(run_dir: Path) -> Manifest:
    """The run's ``run.json``, of any version.

    Raises:
        RunDirError: no manifest, an unreadable one, or one from a newer judge-engine.
    """
    path = run_dir / MANIFEST
    try:
        raw = loads(path.read_bytes())
    except FileNotFoundError:
        raise RunDirError(f"{run_dir}: not a judge-engine run directory (no {MANIFEST})") from None
    except JSONDecodeError:
        raise RunDirError(f"{path}: unreadable manifest") from None
    return Manifest.from_dict(raw, where=str(path))


def iter_outcomes(run_dir: Path, *, notes: list[str] | None = None) -> Iterator[OutcomeRecord]:
    """Every outcome line in the order written (a retried task's later line comes later)."""
    path = run_dir / OUTCOMES
    for raw in read_jsonl(path, notes=notes):
        yield OutcomeRecord.from_dict(raw, where=str(path))


def latest_outcome_records(run_dir: Path, *, notes: list[str] | None = None) -> dict[str, OutcomeRecord]:
    """Task id -> its last outcome line, whole (for readers of one run's worth of outcomes in
    memory, such as ``stats``; at a million tasks, ask the index instead)."""
    latest: dict[str, OutcomeRecord] = {}
    for record in iter_outcomes(run_dir, notes=notes):
        latest.pop(record.task_id, None)  # re-inserted, so the order follows the winning lines
        latest[record.task_id] = record
    return latest


@dataclass(frozen=True, slots=True)
class LatestOutcomeLines:
    """The last outcome line of every task, found without holding the records: iterate it (as
    often as needed) to stream those records, in the order of the lines, as
    :func:`latest_outcome_records` orders them, or in dataset order when :attr:`offsets` is set
    (:func:`latest_outcome_lines` with ``judges``). Made by :func:`latest_outcome_lines`."""

    run_dir: Path
    lines: int
    """Outcome lines read; lines appended after that (a run still going) are left out."""
    superseded: Any
    """numpy bool per line: a later line of the same task exists."""
    offsets: Any = None
    """numpy int64: where each latest line starts in ``outcomes.jsonl``, in the order to read them;
    None: the lines' own order."""

    @property
    def tasks(self) -> int:
        return self.lines - int(self.superseded.sum())

    def __iter__(self) -> Iterator[OutcomeRecord]:
        if self.offsets is not None:
            yield from self._in_order()
            return
        superseded = self.superseded
        for index, record in enumerate(iter_outcomes(self.run_dir)):
            if index >= self.lines:
                return
            if not superseded[index]:
                yield record

    def _in_order(self) -> Iterator[OutcomeRecord]:
        path = self.run_dir / OUTCOMES
        with path.open("rb") as handle:
            for offset in self.offsets.tolist():
                handle.seek(offset)
                yield OutcomeRecord.from_dict(loads(handle.readline()), where=str(path))


def latest_outcome_lines(run_dir: Path, *, notes: list[str] | None = None,
                         judges: Sequence[str] | None = None) -> LatestOutcomeLines:
    """Which outcome lines are the tasks' last, for readers of a run too large to hold (export,
    ``load_run``): one pass keeps a 16-byte digest of each line's task id (16 MB for a million
    lines), and a stable sort finds the lines a later one supersedes.

    ``judges``: stream them in dataset order instead: by the item's row in the dataset, then the
    judge (:func:`dataset_judge_rank` in ``judges``' order), temperature, repeat and variant
    (``order2`` before ``order10``). The same pass keeps each line's offset and sort key too
    (about 50 bytes a line), and the records are read again by offset as they are streamed,
    never held. Lines written before rows were recorded come after, item by item as the items
    first appear."""
    import numpy as np

    digests = bytearray()
    keys = _OrderKeys() if judges is not None else None
    lines = 0
    for offset, raw in read_jsonl_at(run_dir / OUTCOMES, notes=notes):
        digests += hashlib.blake2b(str(raw.get("task_id")).encode(), digest_size=16).digest()
        if keys is not None:
            keys.add(offset, raw)
        lines += 1
    tasks = np.frombuffer(bytes(digests), dtype="S16")
    superseded = np.zeros(lines, dtype=bool)
    if lines > 1:
        order = np.argsort(tasks, kind="stable")  # a task's lines stay in file order: its last one comes last
        ordered = tasks[order]
        superseded[order[:-1][ordered[:-1] == ordered[1:]]] = True
    offsets = keys.offsets(~superseded, judges or ()) if keys is not None else None
    return LatestOutcomeLines(run_dir, lines, superseded, offsets)


class _OrderKeys:
    """Per outcome line, where it starts and what dataset order sorts it by, in compact arrays
    (a judge and a variant as small numbers, ranked once the names are all known)."""

    UNKNOWN_ROW = 1 << 62
    """Rows of lines written before rows were recorded come after the known ones, item by item."""

    def __init__(self) -> None:
        from array import array

        self.starts, self.rows, self.temperatures = array("q"), array("q"), array("d")
        self.repeats, self.judges, self.variants = array("i"), array("i"), array("i")
        self.judge_names: dict[str, int] = {}
        self.variant_names: dict[str, int] = {}
        self.unknown_items: dict[bytes, int] = {}

    def add(self, offset: int, raw: Mapping[str, Any]) -> None:
        row = raw.get("row")
        if not isinstance(row, int) or row < 0:
            item = hashlib.blake2b(str(raw.get("item_id")).encode(), digest_size=8).digest()
            row = self.UNKNOWN_ROW + self.unknown_items.setdefault(item, len(self.unknown_items))
        self.starts.append(offset)
        self.rows.append(row)
        self.temperatures.append(float(raw.get("temperature") or 0.0))
        self.repeats.append(int(raw.get("repeat") or 0))
        self.judges.append(self.judge_names.setdefault(str(raw.get("judge")), len(self.judge_names)))
        self.variants.append(self.variant_names.setdefault(str(raw.get("variant") or ""), len(self.variant_names)))

    def offsets(self, kept: Any, judges: Sequence[str]) -> Any:
        """The offsets of the ``kept`` lines in dataset order."""
        import numpy as np

        judge_rank = np.array([dataset_judge_rank(name, judges, first_seen=index)
                               for index, name in enumerate(self.judge_names)], dtype=np.int64)
        names = list(self.variant_names)
        by_name = sorted(range(len(names)), key=lambda i: (len(names[i]), names[i]))  # order2 before order10
        variant_rank = np.empty(len(names), dtype=np.int64)
        variant_rank[by_name] = np.arange(len(names))

        def kept_of(values: Any) -> Any:
            return np.frombuffer(values, dtype=values.typecode)[kept] if len(values) else np.zeros(0, np.int64)

        # lexsort sorts by its last key first: the row, then the judge, temperature, repeat, variant.
        order = np.lexsort((variant_rank[kept_of(self.variants)], kept_of(self.repeats),
                            kept_of(self.temperatures), judge_rank[kept_of(self.judges)], kept_of(self.rows)))
        return kept_of(self.starts)[order]


def judge_order(manifest: Manifest) -> list[str]:
    """The run's judges, juries and cascade in its config's order: the ``judges`` of
    :func:`latest_outcome_lines` for dataset order."""
    config = manifest.config
    cascade = config.get("cascade") or {}
    names = [entry.get("name") for key in ("judges", "juries") for entry in config.get(key) or ()
             if isinstance(entry, Mapping)]
    names.append(cascade.get("name") if isinstance(cascade, Mapping) else None)
    return [str(name) for name in names if name]


def dataset_judge_rank(name: str, judges: Sequence[str], *, first_seen: int = 0) -> int:
    """Where a judge's lines come among an item's in dataset order: the config's judges (then
    juries and the cascade) in the order ``judges`` lists them, a judge's derived lines (its
    item decisions, ``<judge>:item``) right after its own, any other name after them all, in
    the order names were ``first_seen``."""
    base, _, derived = name.partition(":")
    if base in judges:
        return 2 * judges.index(base) + (1 if derived else 0)
    return 2 * len(judges) + first_seen


def read_blocks(run_dir: Path) -> dict[str, Any]:
    """The run's message blocks, id -> body (empty for a run written before blocks existed).
    A torn last line is skipped: no transcript line can refer to it (a block is written before
    any line that uses it)."""
    path = run_dir / BLOCKS
    blocks: dict[str, Any] = {}
    for raw in read_jsonl(path):
        ident, body = read_block_line(raw, where=str(path))
        blocks[ident] = body
    return blocks


def iter_transcript(run_dir: Path, *, offset: int = 0, requests: bool = True) -> Iterator[TranscriptRecord]:
    """Every transcript line (attempts and protocol errors) in the order written, each request
    rebuilt exactly as sent (``requests=False``: left encoded, for readers that need only the
    usage, costs and answers)."""
    path = run_dir / TRANSCRIPTS
    blocks = read_blocks(run_dir) if requests else None
    for raw in read_jsonl(path, offset=offset):
        yield transcript_record(raw, blocks=blocks, where=str(path), requests=requests)


def iter_batch_lines(run_dir: Path, *, notes: list[str] | None = None) -> Iterator[BatchLine]:
    """Every line of ``batches.jsonl`` in the order written (none for a run without batches)."""
    path = run_dir / BATCHES
    for raw in read_jsonl(path, notes=notes):
        yield batch_line(raw, where=str(path))


def writer_active(run_dir: Path) -> bool:
    """Whether a judge-engine process is writing this run now (it holds the run's lock)."""
    try:
        fd = os.open(run_dir / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def open_index(run_dir: Path) -> RunIndex:
    """The run's index, brought up to date with its files, unless another process is writing
    the run (its own store keeps the index current, flushing every couple of seconds).

    Raises:
        RunDirError: not a run directory, or a corrupt line the index would have to read.
    """
    return RunIndex.open(run_dir, catch_up=not writer_active(run_dir))


class LineReader:
    """Reads single lines of a run's JSONL files by offset, through one open handle each."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._handles: dict[str, Any] = {}
        self._blocks: dict[str, Any] | None = None

    def read_line(self, name: str, offset: int, length: int) -> dict[str, Any]:
        """The JSON record at ``offset`` of the run's ``name`` file (one open handle per file)."""
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = (self.run_dir / name).open("rb")
        handle.seek(offset)
        try:
            record: dict[str, Any] = loads(handle.read(length))
        except JSONDecodeError:
            raise RunDirError(f"{self.run_dir / name}: no line at byte {offset} (rebuild the index: delete "
                              f"{self.run_dir / 'index.sqlite'})") from None
        return record

    def outcome(self, offset: int, length: int) -> OutcomeRecord:
        return OutcomeRecord.from_dict(self.read_line(OUTCOMES, offset, length), where=str(self.run_dir / OUTCOMES))

    def transcript(self, offset: int, length: int, *, requests: bool = True) -> TranscriptRecord:
        """The transcript line at ``offset`` (``requests=False``: its request left encoded)."""
        if requests and self._blocks is None:
            self._blocks = read_blocks(self.run_dir)
        return transcript_record(self.read_line(TRANSCRIPTS, offset, length), blocks=self._blocks,
                                 where=str(self.run_dir / TRANSCRIPTS), requests=requests)

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    def __enter__(self) -> LineReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunStore:
    """Writer for one run directory. Use :meth:`create` or :meth:`open`, then :meth:`close`."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._lock_fd: int | None = None
        self._outcomes_fd: int | None = None
        self._transcripts_fd: int | None = None
        self._blocks_fd: int | None = None
        self._batches_fd: int | None = None
        self._watcher: Callable[[OutcomeRecord], OutcomeRecord | None] | None = None
        self._known_blocks: set[str] = set()
        self._refused: DiskError | None = None
        """Why no line is written any more this session: the index could not be written, or a
        cut-short write could not be taken back."""
        self._new_blocks: list[bytes] = []
        self._paths: dict[str, Path] = {}
        """The run's files by name, each joined once (a ``Path`` join per line showed in a paced
        run's CPU)."""
        self._encoder = Encoder(self)
        self._index: RunIndex | None = None
        self._indexer: IndexWriter | None = None
        self.spend: dict[str, Spend] = {}
        """What each judge has spent over the whole run (every session), kept current by each
        transcript write."""

    @classmethod
    def create(cls, run_dir: Path, manifest: Manifest) -> RunStore:
        """Start a new run directory (locked, with its manifest).

        Raises:
            RunDirError: a run exists there, or another process holds it.
            DiskError: the place cannot be written (full, read-only, over quota).
        """
        with writing(run_dir):
            run_dir.mkdir(parents=True, exist_ok=True)
        if (run_dir / MANIFEST).exists():
            raise RunDirError(f"{run_dir}: a run already exists here")
        store = cls(run_dir)
        with store._closed_on_failure():
            store._acquire()
            store.write_manifest(manifest)
            store._open_files()
        return store

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        """Open an existing run for appending (resume): locks it, cuts torn last lines and
        brings the run's spend up to date with transcript lines its manifest did not cover."""
        manifest = read_manifest(run_dir)
        store = cls(run_dir)
        with store._closed_on_failure():
            store._acquire()
            for name in (OUTCOMES, TRANSCRIPTS, BLOCKS, BATCHES):
                with writing(run_dir / name):
                    _cut_torn_tail(run_dir / name)
            recorded = manifest.spend
            store.spend = {judge: Spend.from_dict(r) for judge, r in (recorded.get("judges") or {}).items()}
            for record in iter_transcript(run_dir, offset=int(recorded.get("covers_bytes") or 0), requests=False):
                store._count(record)
            store._known_blocks = set(read_blocks(run_dir))
            store._open_files()
        return store

    @contextlib.contextmanager
    def _closed_on_failure(self) -> Iterator[None]:
        """Close the store (its lock released) when opening it fails half-way."""
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.close()
            raise

    def _acquire(self) -> None:
        with writing(self.run_dir / LOCK):
            fd = os.open(self.run_dir / LOCK, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirError(f"{self.run_dir}: another judge-engine process is writing this run") from None
        self._lock_fd = fd

    def _open_files(self) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        with writing(self.run_dir):
            self._outcomes_fd = os.open(self.run_dir / OUTCOMES, flags, 0o644)
            self._transcripts_fd = os.open(self.run_dir / TRANSCRIPTS, flags, 0o644)
            self._blocks_fd = os.open(self.run_dir / BLOCKS, flags, 0o644)
        self._reserve()
        # The index catches up with whatever an earlier session wrote, then follows every line.
        with writing(self.run_dir / INDEX):
            self._index = RunIndex.open(self.run_dir, holds_lock=True)
        self._indexer = self._index.writer()

    def _reserve(self) -> None:
        """Hold room on the run's disk for :meth:`release_reserve` to give back; a disk without
        even that much room fails here, before anything is sent."""
        size = RESERVE_BYTES
        with contextlib.suppress(OSError):
            size = max(size, 2 * (self.run_dir / MANIFEST).stat().st_size)
        hold_room(self.run_dir / RESERVE, size)

    def release_reserve(self) -> None:
        """Give back the room :meth:`_reserve` held (a full disk stopped the run: what it still
        has to write, it writes there)."""
        with contextlib.suppress(OSError):
            (self.run_dir / RESERVE).unlink(missing_ok=True)

    def _write(self, fd: int, data: bytes) -> int:
        """The one call that puts bytes into the run's JSONL files: ``os.write``. Tests replace
        it to simulate a disk that fills or turns read-only at a chosen line."""
        return os.write(fd, data)

    def _append(self, fd: int, data: bytes, name: str) -> None:
        """Append whole lines to the run's file ``name`` (:func:`~judge_engine.rundir.disk.append_whole`),
        through :meth:`_write`."""
        if self._refused is not None:
            raise self._refused
        try:
            path = self._paths.get(name) or self._paths.setdefault(name, self.run_dir / name)
            append_whole(fd, data, path, self._write)
        except DiskError as exc:
            if not exc.taken_back:  # the file ends in a torn line: nothing more may follow it
                self._refused = exc
            raise

    def write_outcome(self, record: OutcomeRecord) -> None:
        """Append a task's outcome line (and index it).

        Raises:
            DiskError: the line could not be written; the file is as before.
        """
        assert self._outcomes_fd is not None and self._indexer is not None
        line = dumps_line(record.to_dict())
        self._append(self._outcomes_fd, line, OUTCOMES)
        try:
            self._indexer.outcome(record, len(line))
        except DiskError as exc:
            # The line is recorded (the index catches up later): the next line is refused
            # instead, so a DiskError from a write always means its line is not written.
            self._refused = exc
        if self._watcher is not None and (derived := self._watcher(record)) is not None:
            self.write_outcome(derived)

    def watch(self, watcher: Callable[[OutcomeRecord], OutcomeRecord | None] | None) -> None:
        """Show every outcome line written to ``watcher`` (None: to nobody); an outcome it
        returns is written next (an item's outcome, once its last request's is written:
        :class:`judge_engine.trust.decisions.ItemCollector`)."""
        self._watcher = watcher

    def write_transcript(self, record: TranscriptRecord) -> None:
        """Append a transcript line; an attempt's new blocks are written first, so that no line
        ever refers to a block a crash could have lost."""
        assert self._transcripts_fd is not None and self._blocks_fd is not None
        if isinstance(record, AttemptRecord):
            line = record.encode(self._encoder)
            if self._new_blocks:
                self._append(self._blocks_fd, b"".join(self._new_blocks), BLOCKS)
                self._new_blocks.clear()
        else:
            line = record.to_dict()
        data = dumps_line(line)
        self._append(self._transcripts_fd, data, TRANSCRIPTS)
        assert self._indexer is not None
        self._count(record)
        try:
            self._indexer.attempt(record.task_id, record.item_id, record.judge, len(data))
        except DiskError as exc:  # the line is recorded: the next one is refused (see write_outcome)
            self._refused = exc

    def write_batch(self, line: BatchLine, *, sync: bool = False) -> None:
        """Append a line to ``batches.jsonl`` (opened on first use); ``sync``: on disk before
        this returns, for the lines a resumed run must find after a power loss too (an intent
        before its batch is created, a batch id once it is)."""
        path = self.run_dir / BATCHES
        if self._batches_fd is None:
            with writing(path):
                self._batches_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._append(self._batches_fd, dumps_line(line.to_dict()), BATCHES)
        if sync:
            with writing(path):
                os.fsync(self._batches_fd)

    def add(self, kind: str, body: Any) -> str:
        """:class:`~judge_engine.rundir.blocks.BlockSink`: queue a block the run does not have yet."""
        ident = block_id(kind, body)
        if ident not in self._known_blocks:
            self._known_blocks.add(ident)
            self._new_blocks.append(dumps_line(block_line(kind, body, ident)))
        return ident

    def _count(self, record: TranscriptRecord) -> None:
        spend = self.spend.get(record.judge)
        if spend is None:
            spend = self.spend[record.judge] = Spend()
        spend.add(record)

    @property
    def index(self) -> RunIndex:
        """The run's index, current with every line this store has written (flushed first)."""
        assert self._index is not None and self._indexer is not None, "the store is closed"
        self._indexer.flush()
        return self._index

    def counts(self) -> dict[str, Any]:
        """The manifest's ``counts`` of the run as written so far: tasks, scored and unscored by
        reason code, per judge and in total (from the index, not a read of every line; from one
        read of the outcome lines when the index cannot be written: a full disk)."""
        try:
            tally = self.index.counts()
        except DiskError:
            tally = Counter()
            for record in latest_outcome_lines(self.run_dir):
                status = "scored" if record.status == "scored" else "unscored"
                tally[(record.judge, status, None if status == "scored" else record.reason_code or UNRECORDED)] += 1
        per_judge: dict[str, Counts] = {}
        for (judge, status, code), n in tally.items():
            if status == "undone":
                continue
            per_judge.setdefault(judge, Counts()).add(status, code, n)
        return counts_section(per_judge)

    def total_spend(self) -> Spend:
        """The whole run's spend over every judge."""
        return total_spend(self.spend)

    def spend_record(self) -> dict[str, Any]:
        """The run's spend for the manifest (total and per judge), with the transcript offset
        it covers."""
        covers = os.lseek(self._transcripts_fd, 0, os.SEEK_END) if self._transcripts_fd is not None else 0
        return spend_section(self.spend, covers_bytes=covers)

    def write_manifest(self, manifest: Manifest) -> None:
        """Replace ``run.json`` atomically.

        Raises:
            DiskError: it could not be written (the old one stays as it was).
        """
        path = self.run_dir / MANIFEST
        tmp = path.with_suffix(".json.tmp")
        try:
            with writing(path):
                tmp.write_text(pretty(manifest.to_dict()), encoding="utf-8")
                os.replace(tmp, path)
        except DiskError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise

    def close(self) -> None:
        """Flush, sync and close every file, give back the reserve and release the lock, all of
        it whatever fails on the way.

        Raises:
            DiskError: a file could not be synced to disk (its last lines may not be there).
        """
        failed: DiskError | None = None
        if self._index is not None:
            try:
                if self._indexer is not None:
                    self._indexer.flush()
            except DiskError:
                pass  # the index is derived: the next reader catches up from what it covers
            finally:
                self._index.close()
                self._index = self._indexer = None
        for name, fd in ((BLOCKS, self._blocks_fd), (OUTCOMES, self._outcomes_fd),
                         (TRANSCRIPTS, self._transcripts_fd), (BATCHES, self._batches_fd)):
            if fd is not None:
                try:
                    with writing(self.run_dir / name):
                        os.fsync(fd)
                except DiskError as exc:
                    failed = failed or exc
                finally:
                    os.close(fd)
        self._outcomes_fd = self._transcripts_fd = self._blocks_fd = self._batches_fd = None
        if self._lock_fd is not None:
            self.release_reserve()
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None
        if failed is not None:
            raise failed


def _cut_torn_tail(path: Path) -> None:
    """Truncate a file after its last newline (drops a line torn by a crash)."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        chunk = 1 << 16
        position = size
        while position > 0:
            start = max(0, position - chunk)
            handle.seek(start)
            data = handle.read(position - start)
            index = data.rfind(b"\n")
            if index != -1:
                handle.truncate(start + index + 1)
                return
            position = start
        handle.truncate(0)
