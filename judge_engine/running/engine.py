"""The orchestrator: per judge, a feeder streams tasks into a bounded queue drained by lane workers.

```
feeder (lazy task stream, skips finished tasks; renders prompts and looks them up in the cache
        in batches) -> bounded queue -> N workers (N = concurrency)
   each worker: task.judge_task (cache hit, or lane, provider, parse, re-ask) -> outcome line
```

Each judge has its own feeder, queue, workers and lane, so a slow or rate-limited judge never
stalls another. Coroutines alive at any moment are bounded by the judges' concurrency, never by
the job size. :meth:`Engine.request_stop` stops dispatching at once: tasks waiting for their lane
or for a retry's backoff are abandoned (no outcome: resume redoes them), tasks in a provider call
finish and are recorded (the caller decides how long to wait before cancelling them), so the run
directory stays consistent and nothing is sent after the request. A disk that refuses a write of
the run (full, read-only, over quota: a :class:`~judge_engine.errors.DiskError`) stops the run the
same way (:meth:`Engine.stop_for_disk`): the calls in flight finish, recorded if the disk lets them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from judge_engine.errors import Abandoned, DiskError, FatalProviderError
from judge_engine.inputs.config import DatasetConfig
from judge_engine.planning.plan import Task, iter_tasks
from judge_engine.rundir.store import RunStore
from judge_engine.running.batch.driver import BatchDriver
from judge_engine.running.budget import BudgetStop
from judge_engine.running.cache import AnswerCache
from judge_engine.running.resumption import Resumption
from judge_engine.running.runtime import JudgeRuntime
from judge_engine.running.task import PreparedTask, judge_task, prepare_task
from judge_engine.util.naming import judge_stopped

_YIELD_EVERY = 512
_PREPARE_BATCH = 32
"""Tasks the feeder prepares at once: a paced run wakes for each answer, and work done on that
wake-up runs cold, so the next tasks' prompts and cache lookups are done together instead."""


class TaskSource(Protocol):
    """Where a judge's tasks come from instead of its stream over the dataset: a cascade's later
    stage (:class:`judge_engine.trust.cascade.router.StageSource`), fed as items are escalated to it."""

    async def next_batch(self, *, skip_rows: int = 0, timeout: float | None = None) -> list[Task] | None:
        """Some tasks; ``[]`` when none came within ``timeout`` seconds; None when there are no more."""
        ...


@dataclass(frozen=True, slots=True)
class EngineResult:
    status: Literal["completed", "cancelled", "failed", "stopped"]
    """``failed``: a judge stopped (fatal provider error, unreachable endpoint); ``stopped``: a
    budget was reached, or the run's disk refused a write."""
    failures: dict[str, str]
    """judge name -> why it stopped."""
    budget: BudgetStop | None = None
    """The budget reached (``stopped``)."""
    disk: DiskError | None = None
    """The write the disk refused (``stopped``)."""


class Engine:
    """Runs every judge's tasks against one run store and one answer cache."""

    def __init__(
        self,
        judges: Iterable[JudgeRuntime],
        *,
        dataset: DatasetConfig,
        store: RunStore,
        cache: AnswerCache,
        resumptions: Mapping[str, Resumption] | None = None,
        sources: Mapping[str, TaskSource] | None = None,
        finished: Callable[[str], None] | None = None,
    ) -> None:
        self.judges = list(judges)
        self._dataset = dataset
        self._store = store
        self._cache = cache
        self._resumptions = dict(resumptions or {})
        self._stopping = asyncio.Event()
        self.disk: DiskError | None = None
        """The first write of the run the disk refused, when one was."""
        self._sources = dict(sources or {})
        """Judge name -> its task source, for judges not fed from the dataset (a cascade's)."""
        self._finished = finished
        """Told each judge's name when the judge is done for this session (a cascade's router)."""

    @property
    def done_count(self) -> int:
        """Tasks finished before this session and left as they are."""
        return sum(r.skip_tasks + len(r.done) for r in self._resumptions.values())

    @property
    def retry_count(self) -> int:
        """Finished tasks this session judges again (``resume --retry``)."""
        return sum(len(r.again) for r in self._resumptions.values())

    def request_stop(self) -> None:
        """Stop dispatching: no new provider call starts; calls in flight finish and are recorded."""
        self._stopping.set()
        for judge in self.judges:
            judge.abandon_waiting()

    def stop_for_disk(self, error: DiskError) -> None:
        """The run's disk refused a write: stop dispatching (as :meth:`request_stop`) and keep the
        first such error for the run's status."""
        if self.disk is None:
            self.disk = error
        self.request_stop()

    @property
    def in_flight(self) -> int:
        """Provider calls under way, over every judge."""
        return sum(j.counters.in_flight for j in self.judges)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def run(self) -> EngineResult:
        async with asyncio.TaskGroup() as group:
            for judge in self.judges:
                group.create_task(self._run_and_tell(judge), name=f"judge:{judge.config.name}")
        failures = {j.config.name: j.stopped for j in self.judges if j.stopped}
        if self.disk is not None:  # first: nothing goes on until the disk takes writes again
            return EngineResult("stopped", failures, disk=self.disk)
        if failures:
            return EngineResult("failed", failures)
        guard = self.judges[0].guard if self.judges else None
        if guard is not None and guard.stop is not None:
            return EngineResult("stopped", {}, guard.stop)
        return EngineResult("cancelled" if self.stopping else "completed", {})

    def _halted(self, judge: JudgeRuntime) -> bool:
        """Whether ``judge`` dispatches nothing more: a stop request, a fatal error, a budget."""
        return self.stopping or judge.stopped is not None or (
            judge.guard is not None and judge.guard.stopped_for(judge.config.name))

    async def _run_and_tell(self, judge: JudgeRuntime) -> None:
        await self._run_judge(judge)
        if self._finished is not None:
            self._finished(judge.config.name)

    async def _run_judge(self, judge: JudgeRuntime) -> None:
        if judge.config.mode == "batch":  # the provider's batch API instead of the lane's calls
            try:
                await BatchDriver(judge, store=self._store, cache=self._cache, dataset=self._dataset,
                                  resumption=self._resumptions.get(judge.config.name, Resumption()),
                                  online=self._work, stopping=lambda: self.stopping,
                                  source=self._sources.get(judge.config.name)).run()
            except* DiskError as refused:  # a request file, a download or a line of the run
                self.stop_for_disk(_first(refused))
            return
        workers = judge.concurrency  # over every deployment
        # Holds rendered prompts now, so it is sized by the batch, not doubled with concurrency.
        queue: asyncio.Queue[PreparedTask | None] = asyncio.Queue(maxsize=workers + _PREPARE_BATCH)
        async with asyncio.TaskGroup() as group:
            group.create_task(self._feed(judge, queue, workers))
            for index in range(workers):
                group.create_task(self._work(judge, queue), name=f"{judge.config.name}:{index}")

    async def _feed(self, judge: JudgeRuntime, queue: asyncio.Queue[PreparedTask | None], workers: int) -> None:
        await self._stream(judge, queue)
        # Only after a normal end (the stream ran out, or the judge halted): a cancelled feeder's
        # group cancels the workers as well, and a sentinel put into a full queue that nobody
        # reads any more would wait forever (a Ctrl-C whose grace period ran out never ended).
        for _ in range(workers):
            await queue.put(None)

    async def _stream(self, judge: JudgeRuntime, queue: asyncio.Queue[PreparedTask | None]) -> None:
        """Queue ``judge``'s tasks, prepared in batches, until they run out or the judge halts."""
        batch: list[Task] = []
        resumption = self._resumptions.get(judge.config.name, Resumption())
        judge.counters.done += resumption.skip_tasks
        judge.counters.resumed += resumption.skip_tasks
        done = resumption.done
        if (source := self._sources.get(judge.config.name)) is not None:
            await self._stream_from(judge, queue, source, resumption)
            return
        stream = iter_tasks(judge.config, judge.protocol, self._dataset, skip_rows=resumption.skip_rows)
        for position, task in enumerate(stream):
            if self._halted(judge):
                return
            if task.task_id in done:
                judge.counters.done += 1
                judge.counters.resumed += 1
                if position % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # a long resumed prefix must not starve the loop
                continue
            batch.append(task)
            if len(batch) >= _PREPARE_BATCH:
                await self._hand_over(judge, queue, batch)
                batch = []
        await self._hand_over(judge, queue, batch)

    async def _stream_from(self, judge: JudgeRuntime, queue: asyncio.Queue[PreparedTask | None], source: TaskSource,
                           resumption: Resumption) -> None:
        """Queue the tasks ``source`` gives (those not done before), as it gives them, until it
        has no more or the judge halts (checked twice a second while the source is quiet)."""
        while not self._halted(judge):
            tasks = await source.next_batch(skip_rows=resumption.skip_rows, timeout=0.5)
            if tasks is None:
                return
            fresh = [task for task in tasks if task.task_id not in resumption.done]
            judge.counters.done += len(tasks) - len(fresh)
            judge.counters.resumed += len(tasks) - len(fresh)
            await self._hand_over(judge, queue, fresh)

    async def _hand_over(self, judge: JudgeRuntime, queue: asyncio.Queue[PreparedTask | None], batch: list[Task]) -> None:
        """Prepare a batch of tasks together, then queue them (tasks not queued when the run
        stops are simply not done: resume redoes them).

        The cache lookup is thus made up to ``concurrency + 2 x batch`` tasks before the request:
        two tasks of a run with the same cache key (duplicate item content, two judges with the
        same model and prompt) both call the provider unless the first was answered by then.
        """
        for prepared in [prepare_task(judge, task, self._cache) for task in batch]:
            if self._halted(judge):
                return
            await queue.put(prepared)

    async def _work(self, judge: JudgeRuntime, queue: asyncio.Queue[PreparedTask | None]) -> None:
        while True:
            task = await queue.get()
            if task is None:
                return
            if self._halted(judge):
                continue  # drain without judging: unrecorded tasks are redone on resume
            try:
                record = await judge_task(judge, task, cache=self._cache, transcript=self._store.write_transcript)
            except FatalProviderError as exc:
                if judge.stopped is None:
                    judge.stopped = judge_stopped(judge.config.name, judge.config.model, str(exc))
                continue
            except DiskError as exc:  # a transcript line: the task is left undone
                self.stop_for_disk(exc)
                continue
            except Abandoned:
                continue
            except asyncio.CancelledError:
                if judge.was_abandoned(asyncio.current_task()):
                    continue  # cancelled by the stop while waiting: left undone
                raise
            finally:
                judge.interruptible(False)
            try:
                self._store.write_outcome(record)
            except DiskError as exc:  # not recorded: resume judges the task again
                judge.counters.done -= 1
                if record.status == "scored":
                    judge.counters.scored -= 1
                else:
                    judge.counters.unscored -= 1
                self.stop_for_disk(exc)


def _first(group: BaseExceptionGroup[DiskError]) -> DiskError:
    """The first DiskError of a group (groups nest as task groups do)."""
    first = group.exceptions[0]
    return first if isinstance(first, DiskError) else _first(first)
