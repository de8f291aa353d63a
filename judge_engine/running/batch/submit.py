"""A chunk into a batch, exactly once.

```
intent (durable: which tasks; the request file is on disk)
  -> OpenAI: upload the request file -> "uploaded" line with the file id
  -> create the batch (metadata: the run directory's name and the chunk's id)
  -> "submitted" line with the batch id (durable)
```

A process killed anywhere in there leaves a chunk whose batch may exist without its id on
record: between the create call's arrival and the "submitted" line. So a chunk this session did
not plan itself (or whose create call failed in a way that may have reached the provider) is
looked for first: on OpenAI by the metadata of the batches listed since its intent, on Anthropic
(whose batches carry none) by its size among the batches created since its intent, adopted
tentatively and confirmed by its results' custom ids (:mod:`judge_engine.running.batch.results` rejects
it otherwise, and the chunk is sent again). Only a chunk found nowhere is created. A batch the
provider refuses for its quota is sent again once something of the judge's has ended (or after a
backoff); one refused repeatedly with nothing else in flight stops the judge.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from judge_engine.errors import FatalProviderError, TransientError
from judge_engine.providers.batch import BatchAPI
from judge_engine.rundir.records import BATCH_DIR, BatchEvent
from judge_engine.rundir.store import utc_now
from judge_engine.running.batch.ledger import Chunk, unix
from judge_engine.util.naming import judge_stopped

if TYPE_CHECKING:
    from judge_engine.running.batch.driver import BatchDriver

FIND_SLACK_S = 600.0
"""How long before a chunk's intent a batch may have been created and still be its (clock skew)."""
REFUSALS_ALONE = 3
"""Refusals of a chunk, with nothing else of the judge in a batch, before the judge stops."""


class Refused(Exception):
    """The provider refused to create a batch for its quota (Anthropic: 429 on create)."""


class Submitter:
    """Sends a batch-mode judge's chunks (see the module docstring)."""

    def __init__(self, driver: BatchDriver, api: BatchAPI) -> None:
        self.driver, self.api = driver, api
        self.checked: set[str] = set()
        """Chunks known to have no batch the ledger does not record (planned by this session,
        or looked for on the provider): they can be created without looking first."""
        self._sending: set[str] = set()
        self._alone: dict[str, int] = {}
        """Refusals per chunk while nothing else of the judge was in a batch (this session)."""

    async def send_waiting(self) -> bool:
        """Send every open chunk no batch holds: planned by an earlier session (looked for on
        the provider first), waiting for quota, refused, or rejected."""
        sent = False
        for chunk in self.driver.ledger.open_chunks():
            if self.driver.stopped:
                break
            if chunk.batch_id is None and chunk.chunk_id not in self._sending:
                sent = await self.send(chunk) or sent
        return sent

    async def send(self, chunk: Chunk) -> bool:
        """Create ``chunk``'s batch (after looking for it, unless this session knows it has none);
        False when it must wait (quota, a refusal) or the provider could not be reached."""
        if chunk.chunk_id in self._sending or chunk.batch_id is not None or chunk.collected or self.driver.stopped:
            return False
        self._sending.add(chunk.chunk_id)
        try:
            if chunk.chunk_id not in self.checked:
                if await self._adopt(chunk):
                    return True
                self.checked.add(chunk.chunk_id)
            if not self._may_send(chunk):
                return False
            return await self._create(chunk)
        except TransientError as exc:
            self.driver.note(f"{chunk.chunk_id}: the batch API failed ({exc}); trying again at the next poll")
            self.driver.stop_if_unreachable()
            return False
        finally:
            self._sending.discard(chunk.chunk_id)

    async def _adopt(self, chunk: Chunk) -> bool:
        """Look for a batch of ``chunk`` that was created but never recorded; record it if found."""
        metadata = self.metadata(chunk)
        since = unix(chunk.refused_at or chunk.intent_at) - FIND_SLACK_S
        known = self.driver.ledger.known_batches()
        api = self.api
        found = await self.driver.call(lambda: api.find(metadata, since=since, requests=chunk.requests, known=known))
        if found is None:
            return False
        info, tentative = found
        self.driver.record(BatchEvent("submitted", chunk.judge, chunk.chunk_id, utc_now(), batch_id=info.batch_id,
                                      file_id=chunk.file_id, found=True, tentative=tentative), sync=True)
        self.driver.note(f"{chunk.chunk_id}: found its batch {info.batch_id} on the provider (not sent again)")
        return True

    def _may_send(self, chunk: Chunk) -> bool:
        """Within the judge's enqueued-token quota, and not too soon after a refusal."""
        open_sent = [c for c in self.driver.ledger.open_chunks() if c.batch_id is not None and not c.ended]
        limit = self.driver.config.max_enqueued_tokens
        if limit is not None and open_sent and sum(c.tokens for c in open_sent) + chunk.tokens > limit:
            return False
        if chunk.refused_at is None:
            return True
        if not open_sent and self._alone.get(chunk.chunk_id, 0) >= REFUSALS_ALONE:
            judge = self.driver.judge
            judge.stopped = judge_stopped(
                judge.config.name, judge.config.model, f"the provider refused chunk {chunk.chunk_id} "
                f"({chunk.tokens:,} tokens) {REFUSALS_ALONE} times with no other batch of this "
                "judge in progress: its enqueued-token quota is below one chunk. Set batch.max_enqueued_tokens "
                "(or max_requests_per_file) lower, then resume the run")
            return False
        wait = self.driver.config.poll_interval_s * 2 ** min(chunk.refusals, 5)
        return self.driver.last_ended > unix(chunk.refused_at) or time.time() - unix(chunk.refused_at) >= wait

    async def _create(self, chunk: Chunk) -> bool:
        api = self.api
        path = self.driver.store.run_dir / BATCH_DIR / f"{chunk.chunk_id}.jsonl"
        if not path.exists():
            raise FatalProviderError(f"chunk {chunk.chunk_id}'s request file {path} is gone; nothing can be sent "
                                     "for it (was the run directory copied without its batches/ folder?)")
        if chunk.file_id is None:
            name = f"{self.driver.store.run_dir.name}-{chunk.chunk_id}.jsonl"
            file_id = await self.driver.call(lambda: api.upload(path, name))
            if file_id is not None:
                self.driver.record(BatchEvent("uploaded", chunk.judge, chunk.chunk_id, utc_now(), file_id=file_id),
                                   sync=True)
        file_id = chunk.file_id
        metadata = self.metadata(chunk)
        self.checked.discard(chunk.chunk_id)  # from here until its id is recorded, a batch may exist unseen
        try:
            window = self.driver.config.completion_window
            info = await self.driver.call(lambda: api.create(path, file_id, metadata=metadata, window=window),
                                          refusal=True)
        except Refused as exc:
            self.checked.add(chunk.chunk_id)
            self.refused(chunk, None, str(exc))
            return False
        self.driver.record(BatchEvent("submitted", chunk.judge, chunk.chunk_id, utc_now(), batch_id=info.batch_id,
                                      file_id=file_id), sync=True)
        self.checked.add(chunk.chunk_id)
        if info.refused is not None:
            self.refused(chunk, info.batch_id, info.refused)
            return False
        self.driver.capacity.set()
        return True

    def refused(self, chunk: Chunk, batch_id: str | None, reason: str) -> None:
        """Record that the provider refused ``chunk``'s batch for its quota: sent again later."""
        alone = not any(c.batch_id is not None and not c.ended and c.chunk_id != chunk.chunk_id
                        for c in self.driver.ledger.open_chunks())
        if alone:
            self._alone[chunk.chunk_id] = self._alone.get(chunk.chunk_id, 0) + 1
        self.driver.record(BatchEvent("refused", chunk.judge, chunk.chunk_id, utc_now(), batch_id=batch_id,
                                      reason=reason))
        self.driver.note(f"{chunk.chunk_id}: refused by the provider's quota; sent again later")

    def metadata(self, chunk: Chunk) -> dict[str, str]:
        return chunk_metadata(self.driver.store.run_dir.name, chunk.chunk_id)


def chunk_metadata(run_name: str, chunk_id: str) -> dict[str, str]:
    """What a chunk's batch carries, where the API keeps metadata (OpenAI): the run directory's
    name and the chunk's id, by which it is found again."""
    return {"judge_engine_run": run_name, "judge_engine_chunk": chunk_id}
