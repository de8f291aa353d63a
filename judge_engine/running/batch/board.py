"""What a batch-mode judge shows while it runs, and what ``judge-engine status`` shows after.

The driver keeps a :class:`BatchBoard` on the judge's runtime current (the live display reads it
from its own thread, as it reads the counters); :func:`chunk_views` makes the same rows from a
:class:`~judge_engine.running.batch.ledger.Ledger`, for a run no process is writing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from judge_engine.running.batch.ledger import Chunk, Ledger, unix


@dataclass(slots=True)
class ChunkView:
    """One chunk as a person sees it."""

    chunk: str
    round: int
    requests: int
    status: str
    """``planned``, ``uploaded``, ``submitted``, the provider's status, ``refused``,
    ``rejected``, ``collected``."""
    batch_id: str | None = None
    completed: int = 0
    failed: int = 0
    expired: int = 0
    submitted_at: float | None = None
    """Unix time the batch was created (its age is counted from it)."""
    ended_at: float | None = None

    @property
    def age_s(self) -> float | None:
        if self.submitted_at is None:
            return None
        return (self.ended_at or time.time()) - self.submitted_at

    @property
    def open(self) -> bool:
        return self.status != "collected"


@dataclass(slots=True)
class BatchBoard:
    """A batch-mode judge's batches as it runs (a list, appended to and updated in place, so a
    display thread can read it while the driver writes)."""

    api: str = ""
    chunks: list[ChunkView] = field(default_factory=list)
    waiting: int = 0
    """Tasks waiting for their next batch round."""
    online: int = 0
    """Tasks sent on online this session (``batch.fallback: online``)."""
    submitted_all: bool = False
    """Every task is in a batch, or done: nothing is left to submit but later rounds."""
    note: str = ""
    """The last thing worth saying (a refusal, a failed poll), for the display."""

    def view(self, chunk_id: str) -> ChunkView | None:
        return next((v for v in self.chunks if v.chunk == chunk_id), None)

    def track(self, chunk: Chunk) -> ChunkView:
        """The view of ``chunk``, made or updated from its ledger state."""
        found = self.view(chunk.chunk_id)
        if found is None:
            found = view_of(chunk)
            self.chunks.append(found)
            return found
        fresh = view_of(chunk)
        for name in ("status", "batch_id", "completed", "failed", "expired", "submitted_at"):
            setattr(found, name, getattr(fresh, name))
        if chunk.collected and found.ended_at is None:
            found.ended_at = time.time()
        return found

    def open_chunks(self) -> list[ChunkView]:
        return [v for v in list(self.chunks) if v.open]


def provider_ids(boards: Mapping[str, BatchBoard], recorded: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """Judge -> chunk -> the provider's batch id, for the manifest: from each judge's board once
    its driver has read its ledger, else as ``recorded`` (the manifest's, from the last session)."""
    ids = {judge: dict(chunks) for judge, chunks in recorded.items()}
    for judge, board in boards.items():
        if board.chunks:
            ids[judge] = {view.chunk: view.batch_id for view in list(board.chunks) if view.batch_id}
    return {judge: chunks for judge, chunks in ids.items() if chunks}


def view_of(chunk: Chunk) -> ChunkView:
    counts = chunk.counts
    return ChunkView(
        chunk=chunk.chunk_id, round=chunk.round, requests=chunk.requests, status=chunk.status,
        batch_id=chunk.batch_id, completed=int(counts.get("completed") or 0), failed=int(counts.get("failed") or 0),
        expired=int(counts.get("expired") or 0),
        submitted_at=unix(chunk.submitted_at) if chunk.submitted_at else None,
    )


def chunk_views(ledger: Ledger) -> list[ChunkView]:
    """Every chunk of a judge, in the order it was planned."""
    return [view_of(chunk) for chunk in ledger.chunks.values()]
