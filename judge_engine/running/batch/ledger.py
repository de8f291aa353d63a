"""``batches.jsonl`` folded into what each batch-mode judge has in flight: its chunks, their
states, and the tasks waiting for another request.

The file is the record (:class:`~judge_engine.rundir.records.BatchEvent`,
:class:`~judge_engine.rundir.records.BatchCarry`); a :class:`Ledger` is what it says now. The driver
applies every line it writes to its ledger as well, so the running process and a resumed one
(or ``judge-engine status``, without any process) see the same state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from judge_engine.rundir.records import BatchCarry, BatchEvent, BatchLine
from judge_engine.rundir.store import iter_batch_lines

ENDED = frozenset({"completed", "expired", "cancelled", "ended"})
"""Provider statuses after which a batch's results can be read (OpenAI's three, Anthropic's one)."""


def custom_id(task_id: str, round_: int) -> str:
    """A request's custom id: the task id's hash and the round (``<32 hex>-<round>``): stable,
    within Anthropic's ``^[a-zA-Z0-9_-]{1,64}$``, and another one for the same task in a later round."""
    return f"{task_id.removeprefix('b2:')}-{round_}"


def task_of(custom: str) -> str:
    """The task id a custom id belongs to."""
    return "b2:" + custom.rpartition("-")[0]


def unix(at: str) -> float:
    """A line's ``at`` as Unix time (0 when unreadable)."""
    try:
        return datetime.fromisoformat(at).timestamp()
    except ValueError:
        return 0.0


@dataclass(slots=True)
class Chunk:
    """One chunk as its lines say: which tasks, where it is at the provider, what came back."""

    chunk_id: str
    judge: str
    round: int
    api: str
    tasks: tuple[str, ...]
    """Task id hashes (without ``b2:``); emptied once the chunk is collected."""
    rows: tuple[int, int] | None
    requests: int
    bytes: int
    tokens: int
    intent_at: str
    file_id: str | None = None
    batch_id: str | None = None
    """The batch it is in now (None: not created yet, or refused/rejected and to be sent again)."""
    tentative: bool = False
    status: str = "planned"
    """``planned`` (intent only), ``uploaded``, ``submitted``, then the provider's own status;
    ``refused`` or ``rejected`` (to be sent again); ``collected``."""
    counts: dict[str, int] = field(default_factory=dict)
    submitted_at: str | None = None
    refusals: int = 0
    refused_at: str | None = None
    known: set[str] = field(default_factory=set)
    """Every batch id recorded for the chunk (a rejected or refused one is never adopted again)."""
    collected: bool = False

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def sent(self) -> bool:
        """A batch holds the chunk (waiting for its results)."""
        return self.batch_id is not None and not self.collected

    @property
    def charged(self) -> float:
        """The share of the chunk's requests the provider charges, as last known: all of them
        while its batch may still answer them; once it has ended (completed, expired,
        cancelled), only those it answered (the rest are sent again, and held again then)."""
        if not self.ended or not self.requests:
            return 1.0
        return min(1.0, int(self.counts.get("completed") or 0) / self.requests)


@dataclass(slots=True)
class Ledger:
    """One judge's batches, as the lines written so far say."""

    chunks: dict[str, Chunk] = field(default_factory=dict)
    pending: dict[str, BatchCarry] = field(default_factory=dict)
    """Task id -> its carry, while no later chunk holds the task (and it may have no outcome)."""
    carried_into: dict[str, dict[str, BatchCarry]] = field(default_factory=dict)
    """Chunk id -> the carries its intent took (what its collection rebuilds the tasks from)."""
    carried_from: dict[str, set[str]] = field(default_factory=dict)
    """Chunk id -> the tasks its collection carried on (skipped if the collection is redone)."""

    def apply(self, line: BatchLine) -> None:
        """Fold one line in (the lines of one judge, in file order)."""
        if isinstance(line, BatchCarry):
            self.pending[line.task_id] = line
            self.carried_from.setdefault(line.chunk, set()).add(line.task_id)
            return
        if line.event == "intent":
            self._intent(line)
            return
        chunk = self.chunks.get(line.chunk)
        if chunk is None:
            return  # a line about a chunk whose intent was cut off: nothing was sent for it
        match line.event:
            case "uploaded":
                chunk.file_id, chunk.status = line.file_id, "uploaded"
            case "submitted":
                chunk.batch_id, chunk.tentative, chunk.status = line.batch_id, line.tentative, "submitted"
                chunk.file_id = line.file_id or chunk.file_id
                chunk.submitted_at = line.at
                if line.batch_id:
                    chunk.known.add(line.batch_id)
            case "state":
                chunk.status, chunk.counts = line.status, dict(line.counts)
            case "refused" | "rejected":
                if line.batch_id:
                    chunk.known.add(line.batch_id)
                chunk.batch_id, chunk.status, chunk.tentative = None, line.event, False
                if line.event == "refused":
                    chunk.refusals += 1
                    chunk.refused_at = line.at
            case "collected":
                chunk.collected, chunk.status, chunk.tasks = True, "collected", ()
                chunk.counts = {**chunk.counts, **line.counts}
                self.carried_into.pop(chunk.chunk_id, None)
                self.carried_from.pop(chunk.chunk_id, None)

    def _intent(self, line: BatchEvent) -> None:
        self.chunks[line.chunk] = Chunk(
            chunk_id=line.chunk, judge=line.judge, round=line.round, api=line.api, tasks=line.tasks, rows=line.rows,
            requests=line.requests, bytes=line.bytes, tokens=line.tokens, intent_at=line.at)
        taken = {}
        for hashed in line.tasks:
            carry = self.pending.get("b2:" + hashed)
            if carry is not None and carry.to == "batch" and carry.round == line.round:
                taken[carry.task_id] = self.pending.pop(carry.task_id)
        if taken:
            self.carried_into[line.chunk] = taken

    def drop_carries(self, task_ids: Iterable[str]) -> None:
        """Forget the pending carries of ``task_ids`` (``resume --retry`` judges them again from
        the start)."""
        for task_id in task_ids:
            self.pending.pop(task_id, None)

    def open_chunks(self) -> list[Chunk]:
        return [c for c in self.chunks.values() if not c.collected]

    def in_flight(self) -> set[str]:
        """Task ids (``b2:...``) some open chunk or pending carry holds: never sent afresh."""
        held = {"b2:" + t for c in self.chunks.values() if not c.collected for t in c.tasks}
        return held | set(self.pending)

    def known_batches(self) -> frozenset[str]:
        return frozenset(b for c in self.chunks.values() for b in c.known)

    def next_sequence(self) -> int:
        return 1 + max((int(c.chunk_id.rpartition("-")[2]) for c in self.chunks.values()
                        if c.chunk_id.rpartition("-")[2].isdigit()), default=0)


def read_ledgers(run_dir: Path, lines: Iterable[BatchLine] | None = None) -> dict[str, Ledger]:
    """Judge name -> its ledger, from the run's ``batches.jsonl`` (empty for a run without one)."""
    ledgers: dict[str, Ledger] = {}
    for line in lines if lines is not None else iter_batch_lines(run_dir):
        ledgers.setdefault(line.judge, Ledger()).apply(line)
    return ledgers
