"""The run directory: append-only JSONL, flushed per line, safe to kill at any instant.

```
runs/<run_id>/
  run.json           manifest: resolved config (no secrets), versions, template hashes, counts, status
  outcomes.jsonl     one line per finished task (scored, or unscored with the reason)
  transcripts.jsonl  one line per provider attempt (request as sent, raw answer or error, usage, cost)
  .lock              held by the process writing the run
```

Each line is written with a single ``write`` on an ``O_APPEND`` descriptor, so a crash leaves at
most one torn last line. Readers skip a torn last line; :meth:`RunStore.open` cuts it off before
appending, so it can never glue itself to the next record. ``run.json`` is replaced atomically.

A task may have several outcome lines (``resume --retry`` judges it again): the last one is the
task's outcome, for every reader.

What the run spent (provider calls, tokens, cost) is summed from the transcript lines as they are
written (:class:`Spend`), so it counts every attempt, including those of tasks that were retried
or abandoned. The manifest keeps the total with the transcript offset it covers; a run killed
before its last checkpoint has the rest of its transcript summed when it is opened again.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judge_engine.errors import RunDirError
from judge_engine.jsonio import JSONDecodeError, dumps_line, loads, pretty

MANIFEST = "run.json"
OUTCOMES = "outcomes.jsonl"
TRANSCRIPTS = "transcripts.jsonl"
FORMAT_VERSION = 1


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def read_jsonl(path: Path, *, offset: int = 0) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file (from byte ``offset``, a line start); a torn (unterminated,
    unparseable) last line is skipped, a bad line anywhere else is an error naming it."""
    if not path.exists():
        return
    with path.open("rb") as handle:
        handle.seek(offset)
        previous: tuple[int, bytes] | None = None
        for number, line in enumerate(handle, start=1):
            if previous is not None:
                yield _parse_line(path, *previous)
            previous = (number, line)
        if previous is not None:
            number, line = previous
            if line.endswith(b"\n"):
                yield _parse_line(path, number, line)
            else:
                try:
                    yield loads(line)
                except JSONDecodeError:
                    return  # torn by a crash mid-write


def _parse_line(path: Path, number: int, line: bytes) -> dict[str, Any]:
    try:
        record = loads(line)
    except JSONDecodeError:
        raise RunDirError(f"{path}:{number}: corrupt line (not JSON)") from None
    if not isinstance(record, dict):
        raise RunDirError(f"{path}:{number}: corrupt line (not an object)")
    return record


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST
    try:
        manifest = loads(path.read_bytes())
    except FileNotFoundError:
        raise RunDirError(f"{run_dir}: not a judge-engine run directory (no {MANIFEST})") from None
    except JSONDecodeError:
        raise RunDirError(f"{path}: unreadable manifest") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "judge-engine-run":
        raise RunDirError(f"{path}: not a judge-engine manifest")
    if int(manifest.get("version", 0)) > FORMAT_VERSION:
        raise RunDirError(f"{path}: written by a newer judge-engine (format {manifest.get('version')})")
    return manifest


@dataclass(slots=True)
class Spend:
    """What provider attempts cost, summed over transcript lines."""

    calls: int = 0
    """Attempts sent to the provider (failed ones included; cache hits not)."""
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    def add(self, attempt: Mapping[str, Any]) -> None:
        """Count one transcript line (lines that are not attempts count nothing)."""
        if "request" not in attempt:
            return
        if attempt.get("cache_hit"):
            self.cache_hits += 1
            return
        self.calls += 1
        usage = attempt.get("usage")
        if usage:
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
        self.cost += float(attempt.get("cost") or 0.0)

    def minus(self, other: Spend) -> Spend:
        """This spend less ``other`` (e.g. a session's share of the run's)."""
        return Spend(self.calls - other.calls, self.cache_hits - other.cache_hits,
                     self.prompt_tokens - other.prompt_tokens,
                     self.completion_tokens - other.completion_tokens, self.cost - other.cost)

    def plus(self, other: Spend) -> Spend:
        return Spend(self.calls + other.calls, self.cache_hits + other.cache_hits,
                     self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens, self.cost + other.cost)

    def as_record(self) -> dict[str, Any]:
        record = asdict(self)
        record["cost"] = round(self.cost, 8)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None) -> Spend:
        record = record or {}
        return cls(int(record.get("calls") or 0), int(record.get("cache_hits") or 0),
                   int(record.get("prompt_tokens") or 0), int(record.get("completion_tokens") or 0),
                   float(record.get("cost") or 0.0))


@dataclass(frozen=True, slots=True)
class LatestOutcome:
    """What the readers of a whole run need of a task's last outcome line (small: a million of
    them fit in memory)."""

    judge: str
    status: str
    reason_code: str | None


def latest_outcomes(run_dir: Path) -> dict[str, LatestOutcome]:
    """Task id -> its last outcome line's judge, status and reason code, streaming the file."""
    latest: dict[str, LatestOutcome] = {}
    for record in read_jsonl(run_dir / OUTCOMES):
        if "task_id" in record:
            status = str(record.get("status", "unscored"))
            code = record.get("reason_code") if status != "scored" else None
            latest[record["task_id"]] = LatestOutcome(str(record.get("judge", "?")), status,
                                                      None if code is None else str(code))
    return latest


def count_outcomes(latest: Mapping[str, LatestOutcome]) -> dict[str, Any]:
    """Tasks, scored and unscored (by reason code) per judge and overall. Outcome lines written
    before reason codes existed count as ``unrecorded``."""
    per_judge: dict[str, dict[str, Any]] = {}
    for outcome in latest.values():
        counts = per_judge.setdefault(outcome.judge, {"tasks": 0, "scored": 0, "unscored": 0, "unscored_by_code": {}})
        counts["tasks"] += 1
        if outcome.status == "scored":
            counts["scored"] += 1
        else:
            counts["unscored"] += 1
            code = outcome.reason_code or "unrecorded"
            counts["unscored_by_code"][code] = counts["unscored_by_code"].get(code, 0) + 1
    total: dict[str, Any] = {"tasks": 0, "scored": 0, "unscored": 0, "unscored_by_code": {}}
    for counts in per_judge.values():
        for key in ("tasks", "scored", "unscored"):
            total[key] += counts[key]
        for code, n in counts["unscored_by_code"].items():
            total["unscored_by_code"][code] = total["unscored_by_code"].get(code, 0) + n
    return {"total": total, "judges": per_judge}


class RunStore:
    """Writer for one run directory. Use :meth:`create` or :meth:`open`, then :meth:`close`."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._lock_fd: int | None = None
        self._outcomes_fd: int | None = None
        self._transcripts_fd: int | None = None
        self.spend: dict[str, Spend] = {}
        """What each judge has spent over the whole run (every session), kept current by each
        transcript write."""

    @classmethod
    def create(cls, run_dir: Path, manifest: Mapping[str, Any]) -> RunStore:
        run_dir.mkdir(parents=True, exist_ok=True)
        if (run_dir / MANIFEST).exists():
            raise RunDirError(f"{run_dir}: a run already exists here")
        store = cls(run_dir)
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
        store._acquire()
        for name in (OUTCOMES, TRANSCRIPTS):
            _cut_torn_tail(run_dir / name)
        recorded = manifest.get("spend") or {}
        store.spend = {judge: Spend.from_record(r) for judge, r in (recorded.get("judges") or {}).items()}
        for record in read_jsonl(run_dir / TRANSCRIPTS, offset=int(recorded.get("covers_bytes") or 0)):
            store._count(record)
        store._open_files()
        return store

    def _acquire(self) -> None:
        fd = os.open(self.run_dir / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirError(f"{self.run_dir}: another judge-engine process is writing this run") from None
        self._lock_fd = fd

    def _open_files(self) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        self._outcomes_fd = os.open(self.run_dir / OUTCOMES, flags, 0o644)
        self._transcripts_fd = os.open(self.run_dir / TRANSCRIPTS, flags, 0o644)

    def write_outcome(self, record: Mapping[str, Any]) -> None:
        assert self._outcomes_fd is not None
        os.write(self._outcomes_fd, dumps_line(record))

    def write_transcript(self, record: Mapping[str, Any]) -> None:
        assert self._transcripts_fd is not None
        os.write(self._transcripts_fd, dumps_line(record))
        self._count(record)

    def _count(self, record: Mapping[str, Any]) -> None:
        judge = str(record.get("judge", "?"))
        spend = self.spend.get(judge)
        if spend is None:
            spend = self.spend[judge] = Spend()
        spend.add(record)

    def total_spend(self) -> Spend:
        """The whole run's spend over every judge."""
        total = Spend()
        for spend in self.spend.values():
            total = total.plus(spend)
        return total

    def spend_record(self) -> dict[str, Any]:
        """The run's spend for the manifest (total and per judge), with the transcript offset
        it covers."""
        covers = os.lseek(self._transcripts_fd, 0, os.SEEK_END) if self._transcripts_fd is not None else 0
        return {"total": self.total_spend().as_record(),
                "judges": {judge: spend.as_record() for judge, spend in sorted(self.spend.items())},
                "covers_bytes": covers}

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        path = self.run_dir / MANIFEST
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(pretty(dict(manifest)), encoding="utf-8")
        os.replace(tmp, path)


    def close(self) -> None:
        for fd in (self._outcomes_fd, self._transcripts_fd):
            if fd is not None:
                os.fsync(fd)
                os.close(fd)
        self._outcomes_fd = self._transcripts_fd = None
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None


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
