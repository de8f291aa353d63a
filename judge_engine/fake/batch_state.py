"""One fake batch (its requests, draws and schedule by the wall clock) and its files, and all of
them on disk, so that a fake server started later finds them.

A real provider keeps a batch going when the client that submitted it dies; a demo run's fake
server dies with the run. With a state directory (``python -m judge_engine.fake --state-dir``;
``--demo`` gives each of its servers one under the run's ``demo/`` folder), the server writes
every file and batch it accepts there before answering, and a server started on the same
directory (``resume``, ``status --poll``, ``cancel``) serves them again: the same ids, the same
request files, progress by the wall clock from their creation, the same answers (recomputed from
the requests, as they are deterministic) and, once made, the same result files.

This is the fake provider's state, not the run's: the run's own record never points into it,
and nothing but the fake server reads it. Layout (each JSON document carries its
:data:`VERSION`)::

    files/<file id>.content     a file's bytes (an uploaded request file, a batch's results)
    files/<file id>.json        its id, name, purpose and creation time (written last)
    batches/<batch id>.requests the batch's request lines, one per line
    batches/<batch id>.json     the batch: custom ids, draws, schedule, cancel, result files

Writes replace whole files (a temporary file renamed), so a server killed in the middle leaves
the previous state. A read-only store (``status --poll`` beside a running demo) writes nothing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_engine.util import jsonio

VERSION = 1
"""The version of the documents below; a later one stays readable or is refused by name."""
_NUMBER = re.compile(r"(\d+)$")


@dataclass(slots=True)
class FakeFile:
    file_id: str
    filename: str
    purpose: str
    created_at: int
    content: bytes


@dataclass(slots=True)
class FakeBatch:
    """One batch: its requests, their draws, and (once computed) their result lines."""

    batch_id: str
    api: str
    """``openai`` or ``anthropic``."""
    created_at: float
    """Wall time; the schedule runs on it."""
    model: str
    tokens: int
    custom_ids: list[str]
    requests: list[bytes]
    """The request lines, released once the answers are computed."""
    fails: list[bool]
    expires: list[bool]
    empties: list[bool]
    validating_s: float
    processing_s: float
    metadata: dict[str, str] = field(default_factory=dict)
    input_file_id: str = ""
    window: str = "24h"
    results: list[bytes | None] = field(default_factory=list)
    """Per request: its answer's result line (None until computed, or never processed)."""
    computed: int = 0
    cancelled_at: float | None = None
    refused: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def size(self) -> int:
        return len(self.custom_ids)

    def processed(self, now: float) -> int:
        """Requests processed by ``now`` (in order; expired ones included, never answered)."""
        start = self.created_at + self.validating_s
        until = min(now, self.cancelled_at) if self.cancelled_at is not None else now
        if until < start:
            return 0
        if self.processing_s <= 0:
            done = self.size
        else:
            done = min(self.size, int((until - start) / self.processing_s * self.size))
        return min(done, self.computed)

    def ended(self, now: float) -> bool:
        if self.refused is not None:
            return False
        if self.cancelled_at is not None:
            return self.computed >= self.processed(self.cancelled_at)
        return self.computed >= self.size and now >= self.created_at + self.validating_s + self.processing_s

    def counts(self, now: float) -> tuple[int, int, int]:
        """(answered, failed, expired) so far."""
        done = self.processed(now)
        failed = sum(1 for i in range(done) if self.fails[i] and not self.expires[i])
        expired = sum(1 for i in range(done) if self.expires[i])
        return done - failed - expired, failed, expired


@dataclass(slots=True)
class Loaded:
    """What a state directory holds: its files, its batches with their request lines, and the
    highest id number taken (new ids continue after it)."""

    files: list[FakeFile] = field(default_factory=list)
    batches: list[tuple[FakeBatch, list[bytes]]] = field(default_factory=list)
    last_id: int = 0


class BatchStore:
    """A fake server's files and batches under ``root`` (created on the first write)."""

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.root = root
        self.read_only = read_only

    def save_file(self, file: FakeFile) -> None:
        """Write a file's bytes, then its description (which marks it complete)."""
        if self.read_only:
            return
        self._write(self.root / "files" / f"{file.file_id}.content", file.content)
        self._write(self.root / "files" / f"{file.file_id}.json", jsonio.dumps(
            {"version": VERSION, "id": file.file_id, "filename": file.filename, "purpose": file.purpose,
             "created_at": file.created_at}))

    def save_batch(self, batch: FakeBatch, requests: list[bytes] | None = None) -> None:
        """Write a batch (its request lines too when given: at its creation)."""
        if self.read_only:
            return
        if requests is not None:
            self._write(self.root / "batches" / f"{batch.batch_id}.requests", b"".join(r + b"\n" for r in requests))
        self._write(self.root / "batches" / f"{batch.batch_id}.json", jsonio.dumps(_batch_document(batch)))

    def load(self) -> Loaded:
        """Everything the directory holds (nothing for a directory not written yet)."""
        loaded = Loaded()
        for path in sorted((self.root / "files").glob("*.json")):
            raw = _document(path)
            content = (path.parent / f"{raw['id']}.content").read_bytes()
            loaded.files.append(FakeFile(str(raw["id"]), str(raw["filename"]), str(raw["purpose"]),
                                         int(raw["created_at"]), content))
        for path in (self.root / "batches").glob("*.json"):
            batch = _batch(_document(path))
            lines = (path.parent / f"{batch.batch_id}.requests").read_bytes().splitlines()
            loaded.batches.append((batch, [line for line in lines if line]))
        loaded.batches.sort(key=lambda pair: (pair[0].created_at, pair[0].batch_id))
        ids = [f.file_id for f in loaded.files] + [b.batch_id for b, _ in loaded.batches]
        loaded.last_id = max((int(m.group(1)) for i in ids if (m := _NUMBER.search(i))), default=0)
        return loaded

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_bytes(data)
        os.replace(temporary, path)


def _document(path: Path) -> dict[str, Any]:
    raw = jsonio.loads(path.read_bytes())
    if not isinstance(raw, dict) or raw.get("version") != VERSION:
        raise ValueError(f"{path}: not a fake server state document of version {VERSION}")
    return raw


def _flags(values: list[bool]) -> str:
    return "".join("1" if v else "0" for v in values)


def _batch_document(batch: FakeBatch) -> dict[str, Any]:
    return {
        "version": VERSION, "id": batch.batch_id, "api": batch.api, "created_at": batch.created_at,
        "model": batch.model, "tokens": batch.tokens, "custom_ids": batch.custom_ids,
        "fails": _flags(batch.fails), "expires": _flags(batch.expires), "empties": _flags(batch.empties),
        "validating_s": batch.validating_s, "processing_s": batch.processing_s, "metadata": batch.metadata,
        "input_file_id": batch.input_file_id, "window": batch.window, "cancelled_at": batch.cancelled_at,
        "refused": batch.refused, "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
    }


def _batch(raw: dict[str, Any]) -> FakeBatch:
    def flags(key: str) -> list[bool]:
        return [c == "1" for c in str(raw[key])]

    custom_ids = [str(c) for c in raw["custom_ids"]]
    return FakeBatch(
        batch_id=str(raw["id"]), api=str(raw["api"]), created_at=float(raw["created_at"]), model=str(raw["model"]),
        tokens=int(raw["tokens"]), custom_ids=custom_ids, requests=[], fails=flags("fails"),
        expires=flags("expires"), empties=flags("empties"), validating_s=float(raw["validating_s"]),
        processing_s=float(raw["processing_s"]), metadata={str(k): str(v) for k, v in raw["metadata"].items()},
        input_file_id=str(raw["input_file_id"]), window=str(raw["window"]), results=[None] * len(custom_ids),
        cancelled_at=raw["cancelled_at"], refused=raw["refused"], output_file_id=raw["output_file_id"],
        error_file_id=raw["error_file_id"])
