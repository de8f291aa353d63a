"""How a batch result becomes an outcome, or the task's next request.

Every answer goes through :func:`judge_engine.running.task.decide`, the function an online answer goes
through: read, validated, scored, or re-asked. A result without an answer is never judged: a
failed, expired, cancelled or missing one asks for the same request again, a rejected one ends
the task unscored with its reason code. What needs another request is carried on
(:class:`~judge_engine.rundir.records.BatchCarry`): into the next batch round, or online
(``batch.fallback``); after the last round, it ends unscored instead (``transport_exhausted``, or
the answer's own reason).

Each result is one transcript line, the same :class:`~judge_engine.rundir.records.AttemptRecord` as an
online attempt (the request as sent, the answer, its usage and its cost at the batch price) with
the batch and custom ids, so ``show``, ``rescore`` and the index read it unchanged; every answer
goes into the answer cache. A chunk's collection writes, per task, its transcript line and then
its outcome or carry, and last the chunk's ``collected`` line. Collected again after a crash, a
chunk skips the tasks that have a carry from it or an outcome (from any session: the leading
items a resumed session skips unread included), and writes no second transcript line for a
result an earlier session recorded (killed before its outcome or carry): each result is
recorded, and paid, once. :mod:`judge_engine.running.batch.killpoints` names these steps for the tests
that kill the process at each.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from judge_engine.errors import ReasonCode
from judge_engine.lanes import rough_prompt_tokens
from judge_engine.planning.plan import Task, iter_tasks
from judge_engine.protocols import Message
from judge_engine.providers.base import ProviderRequest, ProviderResponse
from judge_engine.providers.batch import BatchAPI, BatchInfo, BatchResult, ResultKind
from judge_engine.providers.catalog import priced_as
from judge_engine.rundir.records import (
    BATCH_DIR,
    AttemptRecord,
    BatchCarry,
    BatchEvent,
    OutcomeRecord,
    TranscriptRecord,
)
from judge_engine.rundir.store import LineReader, utc_now
from judge_engine.running.attempt import TaskLog, attempt_record
from judge_engine.running.batch.killpoints import reached
from judge_engine.running.batch.ledger import Chunk, custom_id
from judge_engine.running.task import PreparedTask, Reask, decide, judge_task, outcome
from judge_engine.util import jsonio

if TYPE_CHECKING:
    from judge_engine.running.batch.driver import BatchDriver

_TALLY = {ResultKind.ANSWER: "completed", ResultKind.FAILED: "failed", ResultKind.REJECTED: "failed",
          ResultKind.MISSING: "failed", ResultKind.EXPIRED: "expired", ResultKind.CANCELLED: "cancelled"}
"""How a collected chunk counts its results (as the providers count requests)."""
_SEND_AGAIN = {ResultKind.FAILED: "failed", ResultKind.EXPIRED: "expired", ResultKind.CANCELLED: "cancelled",
               ResultKind.MISSING: "missing"}


def _empty(response: ProviderResponse) -> bool:
    """No answer at all: no content, or only whitespace, and no tool call."""
    return not (response.content or "").strip()


class Results:
    """Judges a batch-mode judge's answers (batch results and cache hits) and carries on what
    needs another request."""

    def __init__(self, driver: BatchDriver, api: BatchAPI) -> None:
        self.driver, self.api = driver, api
        self.judge = driver.judge
        self.done: set[str] = set()
        """Tasks given an outcome this session."""
        self.inherited = {c.chunk_id for c in driver.ledger.open_chunks()}
        """Chunks an earlier session left open: it may have begun collecting them."""
        self._recorded: set[str] = set()
        """Custom ids of the chunk being collected whose results are in the transcript already."""

    # --- answers ---------------------------------------------------------------------------------

    async def judge_now(self, prepared: PreparedTask) -> None:
        """A task that needs no batch: its prompt failed to render, or its answer is cached."""
        if prepared.render_error is not None or prepared.cached is None:
            self._finish(await judge_task(self.judge, prepared, cache=self.driver.cache, transcript=self._transcript))
            return
        assert prepared.request is not None
        response = ProviderResponse.from_record(prepared.cached)
        self._cache_hit(prepared.task, prepared.log, prepared.request, response)
        await self.answered(prepared.task, prepared.log, prepared.messages, (), response, 0, "")

    async def answered(self, task: Task, log: TaskLog, messages: list[Message], turns: tuple[Any, ...],
                       response: ProviderResponse, round_: int, chunk: str) -> None:
        """Judge an answer to the task's request of ``round_`` (0: a cached first answer):
        its outcome, or its re-ask carried on (re-asks whose answer is cached are read at once)."""
        while True:
            decision = decide(self.judge, task, log, messages, response, transcript=self._transcript,
                              can_reask=self._may_send_again(round_))
            if isinstance(decision, OutcomeRecord):
                self._finish(decision)
                return
            turns = (*turns, *decision.messages[-2:])
            messages = decision.messages
            cached = self.driver.cache.get(decision.key)
            if cached is None:
                await self._carry(task, log, turns, round_ + 1, "reask", chunk, decision)
                return
            response = ProviderResponse.from_record(cached)
            self._cache_hit(task, log, decision.request, response)

    # --- a chunk's results -----------------------------------------------------------------------

    async def collect(self, chunk: Chunk, info: BatchInfo) -> None:
        """Read an ended batch's results into outcomes and carries, then mark the chunk collected
        (a tentatively adopted batch whose custom ids are not the chunk's is rejected instead)."""
        folder = self.driver.store.run_dir / BATCH_DIR
        folder.mkdir(exist_ok=True)
        results = folder / f"{chunk.chunk_id}.results.jsonl"
        api = self.api
        reached(f"fetch-r{chunk.round}")
        await self.driver.call(lambda: api.download(info, results))
        reached(f"downloaded-r{chunk.round}")
        where = _index(results)
        if chunk.tentative and not (where and set(where) <= {custom_id(t, chunk.round) for t in chunk.tasks}):
            self.driver.record(BatchEvent("rejected", chunk.judge, chunk.chunk_id, utc_now(), batch_id=info.batch_id,
                                          reason="its results are not this chunk's requests"), sync=True)
            results.unlink(missing_ok=True)
            return
        self._recorded = self._recorded_before(chunk, info.batch_id) if chunk.chunk_id in self.inherited else set()
        turnaround = (info.ended_at - info.created_at) if info.ended_at and info.created_at else 0.0
        tally: Counter[str] = Counter()
        batch = {"id": info.batch_id, "chunk": chunk.chunk_id}
        with results.open("rb") as handle:
            for task, turns, log in self._tasks_of(chunk):
                place = where.get(custom_id(task.task_id, chunk.round))
                line = None
                if place is not None:
                    handle.seek(place[0])
                    line = handle.read(place[1])
                result = api.read_result(line) if line else BatchResult(
                    custom_id(task.task_id, chunk.round), ResultKind.MISSING,
                    message="the batch ended without a result for this request")
                tally[_TALLY[result.kind]] += 1
                await self._take(task, turns, log, result, chunk, {**batch, "custom_id": result.custom_id}, turnaround)
                reached(f"taken-r{chunk.round}")
        self.driver.record(BatchEvent("collected", chunk.judge, chunk.chunk_id, utc_now(), batch_id=info.batch_id,
                                      status=info.status, counts=dict(tally)), sync=True)
        reached(f"collected-r{chunk.round}")
        results.unlink(missing_ok=True)
        (folder / f"{chunk.chunk_id}.jsonl").unlink(missing_ok=True)

    async def _take(self, task: Task, turns: tuple[Any, ...], log: TaskLog, result: BatchResult, chunk: Chunk,
                    batch: dict[str, str], turnaround: float) -> None:
        judge = self.judge
        try:
            messages = [*judge.protocol.render(task.item, task.variant), *(dict(t) for t in turns)]
        except Exception as exc:  # it rendered when the chunk was formed: the protocol changed since
            self._finish(await judge_task(judge, PreparedTask(task, render_error=exc, log=log), cache=self.driver.cache,
                                          transcript=self._transcript))
            return
        request = judge.task_request(messages, task)
        response = result.response
        if result.kind is ResultKind.ANSWER and response is not None and _empty(response):
            # An empty result is not an answer (a failed request can come back as one): it is
            # recorded, paid for, and sent again as it was, like a failed request; never read,
            # re-asked or cached.
            response = priced_as(response, judge.config.model, batch=True)
            log.cost += response.cost
            judge.counters.cost += response.cost
            empty = {"kind": "retry", "status": None, "message": "empty: the result holds no answer"}
            self._result_line(dataclasses.replace(
                attempt_record(task, log, request, response=response, error=empty), batch=batch), chunk)
            await self._again(task, log, turns, chunk, "came back empty")
            return
        if result.kind is ResultKind.ANSWER and response is not None:
            response = judge.kept(priced_as(response, judge.config.model, batch=True), task)
            log.reached = True
            log.cost += response.cost
            log.latency_s += turnaround
            judge.counters.cost += response.cost
            self._result_line(dataclasses.replace(
                attempt_record(task, log, request, response=response, latency=turnaround), batch=batch), chunk)
            self.driver.cache.set(judge.key(request, task), response.to_record())
            await self.answered(task, log, messages, turns, response, chunk.round, chunk.chunk_id)
            return
        kind = "item" if result.kind is ResultKind.REJECTED else "retry"
        error = {"kind": kind, "status": result.status, "message": f"{result.kind.value}: {result.message}"}
        self._result_line(dataclasses.replace(attempt_record(task, log, request, error=error), batch=batch), chunk)
        if result.kind is ResultKind.REJECTED:
            self._finish(outcome(judge, task, log, reason=f"provider error: {result.message}",
                                 code=result.code or ReasonCode.PROVIDER_REJECTED))
        else:
            await self._again(task, log, turns, chunk, _SEND_AGAIN[result.kind])

    async def _again(self, task: Task, log: TaskLog, turns: tuple[Any, ...], chunk: Chunk, why: str) -> None:
        """The same request into the next round (or online), or, after the last round, the task
        unscored: its requests never got an answer."""
        if self._may_send_again(chunk.round):
            await self._carry(task, log, turns, chunk.round + 1, why, chunk.chunk_id)
        else:
            self._finish(outcome(self.judge, task, log, code=ReasonCode.TRANSPORT_EXHAUSTED,
                                 reason=f"the request {why} in batch round {chunk.round}, the "
                                        f"last of batch.max_rounds ({self.driver.config.max_rounds})"))

    def _tasks_of(self, chunk: Chunk) -> Iterator[tuple[Task, tuple[Any, ...], TaskLog]]:
        """The chunk's tasks that still need their result read: streamed from the dataset rows of
        a first-round chunk, or rebuilt from the carries a later round's chunk took."""
        carried_on = self.driver.ledger.carried_from.get(chunk.chunk_id, set())
        again = self.driver.resumption.again if chunk.chunk_id in self.inherited else frozenset()

        def moot(task_id: str, row: int) -> bool:  # done with it, or judged again from the start
            return task_id in carried_on or task_id in again or self.driver.settled(task_id, row)

        carried = self.driver.ledger.carried_into.get(chunk.chunk_id)
        if carried is not None:
            for carry in carried.values():
                if not moot(carry.task_id, carry.row):
                    yield task_of(carry), tuple(carry.turns), log_of(carry)
            return
        if chunk.rows is None:
            return
        wanted = {"b2:" + t for t in chunk.tasks}
        first, last = chunk.rows
        judge = self.judge
        for task in iter_tasks(judge.config, judge.protocol, self.driver.dataset, skip_rows=first):
            if task.row > last:
                return
            if task.task_id in wanted and not moot(task.task_id, task.row):
                yield task, (), TaskLog()

    # --- what needs another request ----------------------------------------------------------------

    def _may_send_again(self, round_: int) -> bool:
        config = self.driver.config
        return config.fallback == "online" or round_ < config.max_rounds

    async def _carry(self, task: Task, log: TaskLog, turns: tuple[Any, ...], round_: int, why: str, chunk: str,
                     reask: Reask | None = None) -> None:
        to: Literal["batch", "online"] = "online" if self.driver.config.fallback == "online" else "batch"
        self.driver.record(BatchCarry(
            judge=task.judge, chunk=chunk, at=utc_now(), task_id=task.task_id, item=task.item, variant=task.variant,
            temperature=task.temperature, repeat=task.repeat, row=task.row, row_tasks=task.row_tasks, round=round_,
            to=to, why=why, turns=tuple(turns), log=_log_dict(log)))
        if to == "online":
            await self._go_online(task, log, turns, reask)

    async def _go_online(self, task: Task, log: TaskLog, turns: tuple[Any, ...], reask: Reask | None) -> None:
        judge = self.judge
        if reask is not None:
            messages, request, key = reask.messages, reask.request, reask.key
        else:
            messages = [*judge.protocol.render(task.item, task.variant), *(dict(t) for t in turns)]
            request = judge.task_request(messages, task)
            key = judge.key(request, task)
        self.driver.board.online += 1
        await self.driver.queue.put(PreparedTask(task, messages, request, key, self.driver.cache.get(key), log=log))

    async def restart_online(self) -> None:
        """Tasks an earlier session carried on online without finishing them: sent again."""
        for carry in list(self.driver.ledger.pending.values()):
            if carry.to == "online" and not self.driver.settled(carry.task_id, carry.row):
                try:
                    await self._go_online(task_of(carry), log_of(carry), tuple(carry.turns), None)
                except Exception as exc:  # the prompt no longer renders: its outcome says so
                    self._finish(await judge_task(self.judge, PreparedTask(task_of(carry), render_error=exc),
                                                  cache=self.driver.cache, transcript=self._transcript))

    async def rebuild(self, carry: BatchCarry) -> tuple[ProviderRequest, int] | None:
        """A carried task's next request and its tokens, for the next round's chunk; None when
        it needs no batch after all (its answer is in the cache: judged now)."""
        judge, task, log = self.judge, task_of(carry), log_of(carry)
        try:
            messages = [*judge.protocol.render(task.item, task.variant), *(dict(t) for t in carry.turns)]
        except Exception as exc:
            self._finish(await judge_task(judge, PreparedTask(task, render_error=exc, log=log),
                                          cache=self.driver.cache, transcript=self._transcript))
            return None
        request = judge.task_request(messages, task)
        cached = self.driver.cache.get(judge.key(request, task))
        if cached is None:
            return request, rough_prompt_tokens(messages)
        response = ProviderResponse.from_record(cached)
        self._cache_hit(task, log, request, response)
        await self.answered(task, log, messages, tuple(carry.turns), response, carry.round, carry.chunk)
        return None

    # --- records -----------------------------------------------------------------------------------

    def _cache_hit(self, task: Task, log: TaskLog, request: ProviderRequest, response: ProviderResponse) -> None:
        log.cache_hits += 1
        log.reached = True
        self.judge.counters.cache_hits += 1
        self._transcript(attempt_record(task, log, request, response=response, cache_hit=True))

    def _finish(self, record: OutcomeRecord) -> None:
        self.driver.store.write_outcome(record)
        self.done.add(record.task_id)

    def _transcript(self, record: TranscriptRecord) -> None:
        self.driver.store.write_transcript(record)

    def _result_line(self, record: AttemptRecord, chunk: Chunk) -> None:
        """A batch result's transcript line (its outcome or carry follows), unless an earlier
        session recorded it before it was killed: a result is recorded, and paid, once."""
        if record.batch is None or record.batch.get("custom_id") not in self._recorded:
            self._transcript(record)
            self.judge.counters.calls += 1  # a call as the run's spend counts it: once per line
            self.judge.deployments[0].batched += 1
        reached(f"recorded-r{chunk.round}")

    def _recorded_before(self, chunk: Chunk, batch_id: str) -> set[str]:
        """Custom ids of ``chunk``'s results from batch ``batch_id`` that are in the transcript
        already: an earlier session's collection of the chunk, cut short between a result's
        transcript line and its outcome or carry (found through the index)."""
        store = self.driver.store
        places = store.index.attempt_offsets(["b2:" + t for t in chunk.tasks])
        found: set[str] = set()
        with LineReader(store.run_dir) as reader:
            for offset, length in (place for task in places.values() for place in task):
                record = reader.transcript(offset, length, requests=False)
                batch = record.batch if isinstance(record, AttemptRecord) else None
                if batch is not None and batch.get("id") == batch_id and batch.get("chunk") == chunk.chunk_id:
                    found.add(str(batch.get("custom_id")))
        return found


def task_of(carry: BatchCarry) -> Task:
    return Task(task_id=carry.task_id, judge=carry.judge, item=carry.item, variant=carry.variant,
                temperature=carry.temperature, repeat=carry.repeat, row=carry.row, row_tasks=carry.row_tasks)


def log_of(carry: BatchCarry) -> TaskLog:
    log = carry.log
    return TaskLog(attempts=int(log.get("attempts") or 0), reasks=int(log.get("reasks") or 0),
                   cache_hits=int(log.get("cache_hits") or 0), cost=float(log.get("cost") or 0.0),
                   latency_s=float(log.get("latency_s") or 0.0), reached=True)


def _log_dict(log: TaskLog) -> dict[str, float]:
    return {"attempts": log.attempts, "reasks": log.reasks, "cache_hits": log.cache_hits, "cost": round(log.cost, 10),
            "latency_s": round(log.latency_s, 4)}


def _index(path: Path) -> dict[str, tuple[int, int]]:
    """Custom id -> (offset, length) of its line in a results file (the first line per id)."""
    where: dict[str, tuple[int, int]] = {}
    offset = 0
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                try:
                    custom = str(jsonio.loads(line).get("custom_id") or "")
                except jsonio.JSONDecodeError:
                    custom = ""
                if custom and custom not in where:
                    where[custom] = (offset, len(line))
            offset += len(line)
    return where
