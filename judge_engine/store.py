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
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Mapping
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


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file; a torn (unterminated, unparseable) last line is skipped, a bad line
    anywhere else is an error naming it."""
    if not path.exists():
        return
    with path.open("rb") as handle:
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


class RunStore:
    """Writer for one run directory. Use :meth:`create` or :meth:`open`, then :meth:`close`."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._lock_fd: int | None = None
        self._outcomes_fd: int | None = None
        self._transcripts_fd: int | None = None

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
        """Open an existing run for appending (resume): locks it and cuts torn last lines."""
        read_manifest(run_dir)
        store = cls(run_dir)
        store._acquire()
        for name in (OUTCOMES, TRANSCRIPTS):
            _cut_torn_tail(run_dir / name)
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

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        path = self.run_dir / MANIFEST
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(pretty(dict(manifest)), encoding="utf-8")
        os.replace(tmp, path)

    def done_task_ids(self) -> set[str]:
        return {r["task_id"] for r in read_jsonl(self.run_dir / OUTCOMES) if "task_id" in r}

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
