"""``judge-engine cancel RUN_DIR``: a run's open batches cancelled at the provider.

Each open batch of the run's batch-mode judges is asked for first (it may have ended since it
was last polled: nothing to cancel then) and cancelled through the provider's endpoint (OpenAI
``POST /v1/batches/{id}/cancel``, Anthropic ``POST /v1/messages/batches/{id}/cancel``). The
provider's answer is the chunk's next ``state`` line in ``batches.jsonl`` (``cancelling``,
``canceling``...), its ``reason`` saying that ``judge-engine cancel`` asked for it. A chunk with
no batch on record is looked for on the provider first, as a resumed run would (a kill between a
batch's creation and its record): found by its metadata (OpenAI), it is recorded and cancelled;
found by its size alone (Anthropic), it may be someone else's, and is left alone with a note.

Nothing else changes: a later ``resume`` collects each cancelled batch once it has ended (the
answers it holds are kept) and carries its other requests on per ``batch.fallback`` (the next
round, or online). The command holds the run's lock while it writes, so it refuses a run a
process is writing: that process would send the cancelled requests again at once (stop it first:
after a Ctrl-C its batches stay at the provider).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from judge_engine.errors import RunDirError
from judge_engine.inputs.config import JudgeConfig
from judge_engine.providers.batch import BatchAPI, BatchInfo
from judge_engine.rundir.records import BatchEvent
from judge_engine.rundir.store import RunStore, read_manifest, utc_now, writer_active
from judge_engine.running.batch.ledger import Chunk, Ledger, read_ledgers, unix
from judge_engine.running.batch.submit import FIND_SLACK_S, chunk_metadata
from judge_engine.running.session import prepare_resume
from judge_engine.running.status import batch_apis

CANCELLED_HERE = "cancelled by judge-engine cancel"
"""The ``reason`` of the ``state`` line that records a cancel call's answer."""


Outcome = Literal["cancelled", "ended", "not sent", "unsure", "failed"]
"""What became of an open chunk: its batch ``cancelled``; ``ended`` before it could be (resume
collects it); ``not sent`` (no batch at the provider); ``unsure`` (a batch found by its size
alone: maybe another's, left alone); ``failed`` (the provider's answer is the note)."""


@dataclass(frozen=True, slots=True)
class Cancel:
    """What became of one open chunk."""

    judge: str
    chunk: str
    batch_id: str | None
    status: str
    """The provider's status of its batch now (the chunk's last known one when none was read)."""
    outcome: Outcome
    note: str = ""


def cancel_run(run_dir: Path, *, judges: Sequence[str] = ()) -> list[Cancel]:
    """Cancel the open batches of ``run_dir`` (of ``judges`` only, when given): one :class:`Cancel`
    per open chunk.

    Raises:
        RunDirError: not a run directory, a process is writing it, or an unknown judge.
        ConfigError: the run's config no longer loads, or its API key is not set.
    """

    run_dir = run_dir.resolve()
    manifest = read_manifest(run_dir)
    if writer_active(run_dir):
        raise RunDirError(f"{run_dir}: a judge-engine process is running it; stop it first (Ctrl-C: its batches "
                          "stay at the provider), then cancel them")
    unknown = set(judges) - {j.name for j in manifest.judges}
    if unknown:
        raise RunDirError(f"--judge {', '.join(sorted(unknown))}: no such judge in {run_dir} "
                          f"(its judges: {', '.join(j.name for j in manifest.judges)})")
    ledgers = _open_ledgers(run_dir, judges)
    if not ledgers:
        return []
    prepared = prepare_resume(run_dir)
    store = RunStore.open(run_dir)  # the run's lock, held while its lines are written
    try:
        ledgers = _open_ledgers(run_dir, judges)  # as they are now that no other process can write
        with batch_apis(prepared, read_only=False) as api_of:  # a demo's: its fake servers, started again
            return asyncio.run(_cancel_all(store, ledgers, {j.name: j for j in prepared.config.judges}, api_of))
    finally:
        store.close()


def _open_ledgers(run_dir: Path, judges: Sequence[str]) -> dict[str, Ledger]:
    return {name: ledger for name, ledger in read_ledgers(run_dir).items()
            if ledger.open_chunks() and (not judges or name in judges)}


async def _cancel_all(store: RunStore, ledgers: dict[str, Ledger], configs: Mapping[str, JudgeConfig],
                      api_of: Callable[[JudgeConfig], BatchAPI]) -> list[Cancel]:
    done: list[Cancel] = []
    for name, ledger in ledgers.items():
        api = api_of(configs[name])
        try:
            for chunk in ledger.open_chunks():
                done.append(await _cancel(store, api, ledger, chunk))
        finally:
            await api.aclose()
    return done


async def _cancel(store: RunStore, api: BatchAPI, ledger: Ledger, chunk: Chunk) -> Cancel:
    """Cancel ``chunk``'s batch (looked for first when none is on record)."""
    batch_id = chunk.batch_id
    try:
        if batch_id is None:
            metadata = chunk_metadata(store.run_dir.name, chunk.chunk_id)
            since = unix(chunk.refused_at or chunk.intent_at) - FIND_SLACK_S
            found = await api.find(metadata, since=since, requests=chunk.requests, known=ledger.known_batches())
            if found is None:
                return Cancel(chunk.judge, chunk.chunk_id, None, chunk.status, "not sent")
            if found[1]:
                return Cancel(chunk.judge, chunk.chunk_id, found[0].batch_id, found[0].status, "unsure",
                              "found by its size alone (it may be another's): left alone; resume confirms it")
            batch_id = found[0].batch_id
            _record(store, ledger, BatchEvent("submitted", chunk.judge, chunk.chunk_id, utc_now(), batch_id=batch_id,
                                              file_id=chunk.file_id, found=True))
        info = await api.retrieve(batch_id)
        if info.ended or info.refused is not None or info.error is not None:
            _state(store, ledger, chunk, info, "")
            return Cancel(chunk.judge, chunk.chunk_id, batch_id, info.status, "ended")
        info = await api.cancel(batch_id)
    except Exception as exc:  # the provider's answer, for a person: the other batches are still tried
        return Cancel(chunk.judge, chunk.chunk_id, batch_id, chunk.status, "failed", api.classify(exc).message)
    _state(store, ledger, chunk, info, CANCELLED_HERE)
    return Cancel(chunk.judge, chunk.chunk_id, batch_id, info.status, "cancelled")


def _state(store: RunStore, ledger: Ledger, chunk: Chunk, info: BatchInfo, reason: str) -> None:
    counts = {"total": info.total, "completed": info.completed, "failed": info.failed, "expired": info.expired,
              "cancelled": info.cancelled}
    _record(store, ledger, BatchEvent("state", chunk.judge, chunk.chunk_id, utc_now(), batch_id=info.batch_id,
                                      status=info.status, counts={k: v for k, v in counts.items() if v},
                                      reason=reason))


def _record(store: RunStore, ledger: Ledger, line: BatchEvent) -> None:
    store.write_batch(line, sync=True)
    ledger.apply(line)
