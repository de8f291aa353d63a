"""One batch-mode judge, start to finish: tasks -> chunks -> batches -> results -> outcomes.

```
feeder:  the task stream (finished tasks and tasks some chunk or carry holds skipped)
         -> prepare_task (render, request, cache key, cache lookup: a cached answer is judged at once)
         -> request lines into a chunk's request file, within the provider's limits and the quota
         -> intent line (durable) -> upload (OpenAI) -> create -> batch id line (durable)
poller:  every poll_interval_s (longer while nothing changes): each open batch's state
         -> an ended batch's results (results.py: each one judged like an online answer)
         -> what needs another request: the next round's chunks, or online (batch.fallback)
```

A run killed at any instant and resumed finds its chunks in ``batches.jsonl``: a chunk with a
batch id is polled; a chunk without one is looked for on the provider first (OpenAI: the batch's
metadata names the run and the chunk; Anthropic: a batch of its size created since its intent,
confirmed by its results' custom ids), and only sent when it is not there. A task is never in
two chunks of one round, and is only sent again in a later round (or online) for a reason its
result gave.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from judge_engine.errors import DiskError, FatalProviderError, TransientError
from judge_engine.inputs.config import DatasetConfig
from judge_engine.lanes import rough_prompt_tokens
from judge_engine.planning.plan import Task, iter_tasks
from judge_engine.providers import batch_api_for
from judge_engine.providers.base import ErrorClass, ErrorKind
from judge_engine.providers.batch import BatchAPI, BatchInfo
from judge_engine.rundir.records import BatchEvent, BatchLine
from judge_engine.rundir.store import RunStore, utc_now
from judge_engine.running.batch.board import BatchBoard
from judge_engine.running.batch.chunks import ChunkLimits, ChunkWriter
from judge_engine.running.batch.ledger import Chunk, Ledger, custom_id, read_ledgers
from judge_engine.running.batch.results import Results
from judge_engine.running.batch.submit import Refused, Submitter
from judge_engine.running.budget import BudgetStop
from judge_engine.running.cache import AnswerCache
from judge_engine.running.resumption import Resumption
from judge_engine.running.retry import with_transport_retries
from judge_engine.running.runtime import JudgeRuntime
from judge_engine.running.task import PreparedTask, prepare_task
from judge_engine.util.naming import judge_stopped

if TYPE_CHECKING:
    from judge_engine.running.engine import TaskSource

T = TypeVar("T")
Online = Callable[[JudgeRuntime, "asyncio.Queue[PreparedTask | None]"], Coroutine[Any, Any, None]]
"""The engine's online worker loop (:meth:`Engine._work`): takes prepared tasks until None."""

_PREPARE_BATCH = 32
CHUNK_AGE = 10
"""A chunk fed by a cascade's earlier stage is sent once no task came for one poll interval,
or once it is this many poll intervals old, if it does not fill first."""


class BatchDriver:
    """Runs one judge in batch mode within a session (see the module docstring).

    Args:
        online: the engine's worker loop, for tasks sent on online (``batch.fallback: online``).
        stopping: whether the session was asked to stop (no new batch is created after it).
    """

    def __init__(self, judge: JudgeRuntime, *, store: RunStore, cache: AnswerCache, dataset: DatasetConfig,
                 resumption: Resumption, online: Online, stopping: Callable[[], bool],
                 source: TaskSource | None = None) -> None:
        self.judge = judge
        self.source = source
        """Where the tasks come from when not the dataset (a cascade's later stage)."""
        self.config = judge.config.batch
        self.store, self.cache, self.dataset = store, cache, dataset
        self.resumption = resumption
        self._online, self._stopping = online, stopping
        self.board = judge.batch if judge.batch is not None else BatchBoard()
        self.ledger = Ledger()
        self.api: BatchAPI | None = None
        self.queue: asyncio.Queue[PreparedTask | None] = asyncio.Queue()
        self._results: Results | None = None
        self.submitter: Submitter
        self.capacity = asyncio.Event()
        """Set when a chunk was sent or collected: a feeder waiting for quota tries again."""
        self._reached = False
        self._last_failure: ErrorClass | None = None
        self.last_ended = 0.0
        self._sequence = 0
        self._held: dict[str, float] = {}
        """Chunk id -> the cost committed for it under a budget, settled when it is collected."""

    @property
    def stopped(self) -> bool:
        """Nothing more is done this session: a stop request, a fatal error, or ``max_hours``."""
        stop = self._budget_stop
        return (self._stopping() or self.judge.stopping or self.judge.stopped is not None
                or (stop is not None and stop.kind == "hours"))

    @property
    def halted(self) -> bool:
        """No new chunk is sent: :attr:`stopped`, or a cost budget reached (the batches already
        submitted are still collected: they are paid for)."""
        return self.stopped or self._budget_stop is not None

    @property
    def _budget_stop(self) -> BudgetStop | None:
        guard = self.judge.guard
        if guard is None or not guard.stopped_for(self.judge.config.name):
            return None
        return guard.stop

    # --- the lifecycle --------------------------------------------------------------------------

    async def run(self) -> None:
        judge = self.judge
        endpoint = judge.endpoint
        api = self.api = batch_api_for(endpoint.model, endpoint.api_base, api_key=endpoint.api_key,
                                       judge=judge.config.name, network=endpoint.network)
        self.board.api = api.name
        self.ledger = read_ledgers(self.store.run_dir).get(judge.config.name, Ledger())
        self.ledger.drop_carries(self.resumption.again)  # judged again from the start: old carries are moot
        for chunk in self.ledger.chunks.values():
            self.board.track(chunk)
        for chunk in self.ledger.open_chunks():  # sent (or about to be) by an earlier session: what it is charged
            share = chunk.charged
            self._commit(chunk.chunk_id, round(chunk.tokens * share), round(chunk.requests * share), check=False)
        workers = judge.concurrency  # online fallback over every deployment
        self.queue = asyncio.Queue(maxsize=2 * workers)
        self._results = Results(self, api)
        self.submitter = Submitter(self, api)
        try:
            async with asyncio.TaskGroup() as group:
                for index in range(workers):
                    group.create_task(self._online(judge, self.queue), name=f"{judge.config.name}:online:{index}")
                try:
                    await self._drive(group)
                except FatalProviderError as exc:
                    self.stop(exc)
                # Not in a finally: when cancelled, the group cancels the workers, and a sentinel
                # put into a full queue that nobody reads would wait forever.
                for _ in range(workers):
                    await self.queue.put(None)
        finally:
            await api.aclose()

    async def _drive(self, group: asyncio.TaskGroup) -> None:
        assert self._results is not None
        await self._results.restart_online()
        feeder = group.create_task(self._feed_or_stop(), name=f"{self.judge.config.name}:batch-feeder")
        base = self.config.poll_interval_s
        delay = base
        guard = self.judge.guard
        while not self.stopped:
            if guard is not None and guard.active and guard.hours_passed(self.judge.config.name):
                break  # the open batches stay at the provider: resume collects them
            progressed = await self.submitter.send_waiting()
            progressed = await self._poll() or progressed
            progressed = await self._send_carries() or progressed
            if feeder.done() and self._finished():
                break
            delay = base if progressed else min(delay * 1.5, base * 10)
            await self._sleep(delay)
        await feeder

    def _finished(self) -> bool:
        return not self.ledger.open_chunks() and (self.halted or not self._pending_batch())

    async def _sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or less when the session stops or the feeder sent a chunk."""
        deadline = time.monotonic() + seconds
        while not self.stopped and (left := deadline - time.monotonic()) > 0:
            self.capacity.clear()
            try:
                async with asyncio.timeout(min(left, 0.5)):
                    await self.capacity.wait()
                return
            except TimeoutError:
                continue

    # --- round 1: the task stream into chunks ---------------------------------------------------

    async def _feed_or_stop(self) -> None:
        try:
            await self._feed()
        except FatalProviderError as exc:  # raised here, it would cancel the whole run's task group
            self.stop(exc)

    async def _feed(self) -> None:
        judge, resumption = self.judge, self.resumption
        counters = judge.counters
        counters.done += resumption.skip_tasks
        counters.resumed += resumption.skip_tasks
        held = self.ledger.in_flight() - resumption.again  # an old carry of a task judged again is moot
        if self.source is not None:
            await self._feed_from(self.source, held)
            return
        writer: ChunkWriter | None = None
        pending: list[Task] = []
        stream = iter_tasks(judge.config, judge.protocol, self.dataset, skip_rows=resumption.skip_rows)
        for position, task in enumerate(stream):
            if self.halted:
                break
            if task.task_id in resumption.done:
                counters.done += 1
                counters.resumed += 1
                if position % 512 == 0:
                    await asyncio.sleep(0)
                continue
            if task.task_id in held:
                continue
            pending.append(task)
            if len(pending) >= _PREPARE_BATCH:
                writer = await self._take(pending, writer)
                pending = []
        writer = await self._take(pending, writer)
        if writer is not None:
            await self._close(writer)
        if not self.halted:
            self.board.submitted_all = True
        self.capacity.set()

    async def _feed_from(self, source: TaskSource, held: set[str]) -> None:
        """Chunks from a source that gives tasks as an earlier stage escalates their items: a
        chunk is sent when it is full, when no task came for a poll interval, or when it is
        :data:`CHUNK_AGE` poll intervals old, so that a stage's batches go out while the earlier
        stage's results are still coming in."""
        resumption, counters, interval = self.resumption, self.judge.counters, self.config.poll_interval_s
        loop = asyncio.get_running_loop()
        writer: ChunkWriter | None = None
        opened = last = loop.time()
        while not self.halted:
            tasks = await source.next_batch(skip_rows=resumption.skip_rows, timeout=min(0.5, interval))
            if tasks is None:
                break
            fresh = [t for t in tasks if t.task_id not in resumption.done and t.task_id not in held]
            counters.done += sum(1 for t in tasks if t.task_id in resumption.done)
            counters.resumed += sum(1 for t in tasks if t.task_id in resumption.done)
            now = loop.time()
            if fresh:
                if writer is None:
                    opened = now
                writer, last = await self._take(fresh, writer), now
            if writer is not None and writer.tasks and (now - last >= interval or now - opened >= CHUNK_AGE * interval):
                await self._close(writer, wait=False)
                writer = None
        if writer is not None:
            await self._close(writer)
        if not self.halted:
            self.board.submitted_all = True
        self.capacity.set()

    async def _take(self, tasks: list[Task], writer: ChunkWriter | None) -> ChunkWriter | None:
        """Prepare tasks together (warm, as the online feeder does); a cached answer is judged
        at once, the others' requests go into the chunk being formed."""
        assert self.api is not None and self._results is not None
        for prepared in [prepare_task(self.judge, task, self.cache) for task in tasks]:
            if self.halted:
                break
            if prepared.render_error is not None or prepared.cached is not None:
                await self._results.judge_now(prepared)
                continue
            assert prepared.request is not None
            task = prepared.task
            line = self.api.request_line(custom_id(task.task_id, 1), prepared.request)
            tokens = rough_prompt_tokens(prepared.request.messages)
            if writer is None:
                writer = self._start(1)
            elif not writer.fits(len(line), tokens):
                await self._close(writer)
                writer = self._start(1)
            writer.add(task.task_id.removeprefix("b2:"), line, tokens, task.row)
        await asyncio.sleep(0)
        return writer

    def _start(self, round_: int) -> ChunkWriter:
        assert self.api is not None
        api, config = self.api, self.config
        limits = ChunkLimits(requests=min(config.max_requests_per_file or api.max_requests, api.max_requests),
                             bytes=min(config.max_bytes_per_file or api.max_bytes, api.max_bytes),
                             tokens=config.max_enqueued_tokens)
        self._sequence = max(self._sequence, self.ledger.next_sequence())
        chunk_id = f"{self.judge.config.name}-r{round_}-{self._sequence:05d}"
        self._sequence += 1  # the feeder's and a later round's chunks may be formed at the same time
        return ChunkWriter.start(self.store.run_dir, chunk_id, round_, limits)

    async def _close(self, writer: ChunkWriter, *, wait: bool = True) -> None:
        """Record a formed chunk's intent and send it. ``wait`` (the feeder): while a chunk waits
        for quota, wait too, so that one chunk file at most is on disk waiting; the poll loop
        does not wait (it sends waiting chunks at its next pass)."""
        assert self.api is not None
        writer.close()
        if not writer.tasks or self.halted or not self._commit(writer.chunk_id, writer.tokens, writer.requests):
            writer.discard()  # its tasks are streamed (or carried) again by the next session
            return
        rows = (writer.first_row, writer.last_row) if writer.round == 1 and writer.first_row >= 0 else None
        self.record(BatchEvent("intent", self.judge.config.name, writer.chunk_id, utc_now(), round=writer.round,
                               api=self.api.name, tasks=tuple(writer.tasks), rows=rows, requests=writer.requests,
                               bytes=writer.path.stat().st_size, tokens=writer.tokens), sync=True)
        self.submitter.checked.add(writer.chunk_id)
        await self.submitter.send(self.ledger.chunks[writer.chunk_id])
        while wait and not self.stopped and any(c.batch_id is None for c in self.ledger.open_chunks()):
            await self._sleep(self.config.poll_interval_s)

    # --- later rounds ---------------------------------------------------------------------------

    def _pending_batch(self) -> list[Any]:
        return [c for c in self.ledger.pending.values() if c.to == "batch" and not self.settled(c.task_id, c.row)]

    async def _send_carries(self) -> bool:
        """Chunks of the next round from the tasks their results carried on."""
        assert self.api is not None and self._results is not None
        carries = self._pending_batch()
        self.board.waiting = len(carries)
        if not carries or self.halted:
            return False
        for round_ in sorted({c.round for c in carries}):
            writer: ChunkWriter | None = None
            for carry in (c for c in carries if c.round == round_):
                ready = await self._results.rebuild(carry)
                if ready is None:
                    continue  # judged from the cache, or failed to render: it has its outcome or next carry
                request, tokens = ready
                line = self.api.request_line(custom_id(carry.task_id, round_), request)
                if writer is None:
                    writer = self._start(round_)
                elif not writer.fits(len(line), tokens):
                    await self._close(writer, wait=False)
                    writer = self._start(round_)
                writer.add(carry.task_id.removeprefix("b2:"), line, tokens, carry.row)
            if writer is not None:
                await self._close(writer, wait=False)
        self.board.waiting = len(self._pending_batch())
        return True

    # --- polling --------------------------------------------------------------------------------

    async def _poll(self) -> bool:
        """Each open batch's state; an ended one's results collected. True when anything changed."""
        assert self.api is not None and self._results is not None
        api = self.api
        changed = False
        for chunk in [c for c in self.ledger.open_chunks() if c.batch_id is not None]:
            if self.stopped:
                break
            batch_id = chunk.batch_id
            assert batch_id is not None
            try:
                info = await self.call(lambda batch_id=batch_id: api.retrieve(batch_id))  # type: ignore[misc]
            except TransientError as exc:
                self.note(f"{chunk.chunk_id}: could not poll {batch_id} ({exc}); trying again later")
                continue
            changed = self._record_state(chunk, info) or changed
            if info.refused is not None:
                self.submitter.refused(chunk, batch_id, info.refused)
                changed = True
            elif info.error is not None:
                raise FatalProviderError(f"batch {batch_id} of chunk {chunk.chunk_id} failed: {info.error}",
                                         model=self.judge.config.model)
            elif info.ended:
                try:
                    await self._results.collect(chunk, info)
                except TransientError as exc:  # its results could not be downloaded: the next poll tries again
                    self.note(f"{chunk.chunk_id}: could not read the results of {batch_id} ({exc}); trying again later")
                    continue
                self.last_ended = time.time()
                self.capacity.set()
                changed = True
        return changed

    def _record_state(self, chunk: Chunk, info: BatchInfo) -> bool:
        counts = {"total": info.total, "completed": info.completed, "failed": info.failed, "expired": info.expired,
                  "cancelled": info.cancelled}
        counts = {k: v for k, v in counts.items() if v}
        if info.status == chunk.status and counts == chunk.counts:
            return False
        self.record(BatchEvent("state", chunk.judge, chunk.chunk_id, utc_now(), batch_id=info.batch_id,
                               status=info.status, counts=counts))
        return True

    # --- the provider's calls, and the record ---------------------------------------------------

    async def call(self, make: Callable[[], Awaitable[T]], *, refusal: bool = False) -> T:
        """One batch API call within the judge's transport retry budget: 5xx and connection
        failures retried with backoff, 429 waited out (or, for a create, a refusal), any other
        failure stops the judge."""
        assert self.api is not None
        api, retries = self.api, self.judge.config.retries

        async def attempt() -> T:
            try:
                value = await make()
            except DiskError:  # a download's file: the machine's, never the provider's (the run stops)
                raise
            except Exception as exc:
                failure = self._last_failure = api.classify(exc)
                if failure.kind is ErrorKind.RATE_LIMITED:
                    if refusal:
                        raise Refused(failure.message) from None
                    await asyncio.sleep(min(failure.retry_after_s or self.config.poll_interval_s, 300.0))
                    raise TransientError(failure.message, model=self.judge.config.model, status=429) from None
                if failure.kind is ErrorKind.RETRY:
                    raise TransientError(failure.message, model=self.judge.config.model, status=failure.status) from None
                raise FatalProviderError(failure.message, model=self.judge.config.model, status=failure.status) from None
            self._reached = True
            return value

        return await with_transport_retries(attempt, retries=retries.transport, backoff_max_s=retries.backoff_max_s)

    def settled(self, task_id: str, row: int) -> bool:
        """Whether the task (at dataset row ``row``) has its outcome, from this session or an
        earlier one (the leading items a resumed session skips unread included): a result or a
        carry of it is then moot, never recorded or sent again."""
        results = self._results
        return self.resumption.finished(task_id, row) or (results is not None and task_id in results.done)

    def stop(self, error: FatalProviderError) -> None:
        """Stop this judge (its open batches stay at the provider: resume collects them)."""
        judge = self.judge
        if judge.stopped is None:
            judge.stopped = judge_stopped(judge.config.name, judge.config.model, str(error))

    def stop_if_unreachable(self) -> None:
        failure = self._last_failure
        if not self._reached and failure is not None and failure.unreachable and self.judge.stopped is None:
            config = self.judge.config
            self.judge.stopped = judge_stopped(config.name, config.model, f"cannot reach {self.judge.endpoint_label}'s "
                                               f"batch API ({failure.message}); check the endpoint, then resume the run")

    def record(self, line: BatchLine, *, sync: bool = False) -> None:
        """Append a line to ``batches.jsonl`` and fold it into the ledger (and the board)."""
        self.store.write_batch(line, sync=sync)
        self.ledger.apply(line)
        if isinstance(line, BatchEvent):
            self.board.track(self.ledger.chunks[line.chunk])
            if line.event == "collected" and self.judge.guard is not None:  # its cost is in the spend now
                self.judge.guard.settle(self.judge.config.name, self._held.pop(line.chunk, 0.0))

    def _commit(self, chunk_id: str, tokens: int, requests: int, *, check: bool = True) -> bool:
        """Commit a chunk's estimated cost under the budgets (its prompt tokens, a typical answer
        per request, at the batch price); False when sending it would pass a limit (the guard
        then stops the judge, or the run). ``check=False``: a chunk already sent is only held."""
        guard, name = self.judge.guard, self.judge.config.name
        if guard is None or not guard.active:
            return True
        protocol, max_tokens = self.judge.protocol, self.judge.config.max_tokens
        answer = min(protocol.typical_completion_tokens, max_tokens or protocol.typical_completion_tokens)
        cost = guard.estimate(name, tokens, requests * answer, batch=True)
        if not check:
            guard.hold(name, cost)
        elif guard.admit(name, cost) is not None:
            return False
        self._held[chunk_id] = cost
        return True

    def note(self, text: str) -> None:
        self.board.note = text

