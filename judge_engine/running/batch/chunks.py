"""A chunk being formed: its request lines written to its request file as tasks come, within
the provider's limits (requests and bytes per batch) and the judge's enqueued-token quota.

The request file (``batches/<chunk>.jsonl`` in the run directory) holds exactly what is sent:
OpenAI uploads it as the batch's input file; Anthropic's create call carries its lines. It is
complete and on disk before the chunk's intent is recorded, so a resumed run can always send
it, and deleted once the chunk is collected. A disk that refuses it raises a
:class:`~judge_engine.errors.DiskError` naming the file (the run stops; the chunk has no intent
yet, so resume forms it again).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from judge_engine.rundir.disk import writing
from judge_engine.rundir.records import BATCH_DIR

BODY_MARGIN = 64
"""Bytes kept free under a byte limit for the request body's frame (Anthropic's ``{"requests": [...]}``)."""


@dataclass(frozen=True, slots=True)
class ChunkLimits:
    """How much one chunk may hold."""

    requests: int
    bytes: int
    tokens: int | None = None
    """The judge's enqueued-token quota (None: unknown)."""


@dataclass(slots=True)
class ChunkWriter:
    """Requests of one chunk, appended to its request file."""

    chunk_id: str
    round: int
    path: Path
    limits: ChunkLimits
    tasks: list[str] = field(default_factory=list)
    """Task id hashes (without ``b2:``), in the order written."""
    first_row: int = -1
    last_row: int = -1
    size: int = 0
    """Bytes written so far."""
    tokens: int = 0
    _handle: BinaryIO | None = field(default=None, repr=False)

    @classmethod
    def start(cls, run_dir: Path, chunk_id: str, round_: int, limits: ChunkLimits) -> ChunkWriter:
        folder = run_dir / BATCH_DIR
        path = folder / f"{chunk_id}.jsonl"
        writer = cls(chunk_id, round_, path, limits)
        with writing(path):
            folder.mkdir(exist_ok=True)
            writer._handle = path.open("wb")  # a leftover of a chunk whose intent was never written: replaced
        return writer

    @property
    def requests(self) -> int:
        return len(self.tasks)

    def fits(self, size: int, tokens: int) -> bool:
        """Whether one more request of ``size`` bytes and ``tokens`` prompt tokens fits (a
        chunk always takes its first request, whatever its size)."""
        if not self.tasks:
            return True
        limits = self.limits
        if self.requests + 1 > limits.requests or self.size + size + self.requests + BODY_MARGIN > limits.bytes:
            return False
        return limits.tokens is None or self.tokens + tokens <= limits.tokens

    def add(self, task_hash: str, line: bytes, tokens: int, row: int) -> None:
        assert self._handle is not None, "the chunk is closed"
        with writing(self.path):
            self._handle.write(line)
        self.tasks.append(task_hash)
        self.size += len(line)
        self.tokens += tokens
        if row >= 0:
            self.first_row = row if self.first_row < 0 else min(self.first_row, row)
            self.last_row = max(self.last_row, row)

    def close(self) -> None:
        """Flush the request file to disk: it must outlive a power loss once the intent says so."""
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                with writing(self.path):
                    handle.flush()
                    os.fsync(handle.fileno())
            finally:
                with contextlib.suppress(OSError):  # (a flush that failed above fails here again)
                    handle.close()

    def discard(self) -> None:
        """Delete the request file (its lines are never sent: nothing to flush or sync, even on a
        disk that refused them)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()
        self.path.unlink(missing_ok=True)
