"""The cascade while a session runs: items routed between stages as their deciding lines are
written, and each later stage's judges fed the items escalated to it.

**Routing.** The run store shows the router every outcome line as it is written (after the
item collector, whose item lines it sees too). A stage's deciding line routes its item
(:meth:`~judge_engine.trust.cascade.state.CascadeState.route`): the cascade's line is written at once
when a stage answers, the last asked stage escalates (abstained) or a stage holds the item; an
escalation moves it to the next asked stage. A jury stage's line is made here, as its last
juror's outcome is written (:func:`judge_engine.trust.jury.jury_record`, the line the session's end
would write), and routed in turn.

**Feeding** (:class:`StageSource`). The first asked stage's judges stream the dataset as any
judge does. A later stage's judge reads the dataset once per session too, but releases an
item's tasks only when the item is at its stage: the read runs ahead of the decisions by up to
:data:`WINDOW` undecided items, each released (in decision order) as soon as the router moves
it, and dropped once it is finished, held or past the stage, or when the stage it waits at has
finished for this session (its judges are done: nothing more can move it). So the strong
judge is asked about an item within moments of the cheap one's decision, memory holds at most
the window's items, and a resumed session finds the items escalated earlier at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections import deque
from collections.abc import Callable, Iterator, Mapping

from judge_engine.inputs.config import DatasetConfig, JobConfig, JudgeConfig
from judge_engine.planning.plan import Task, iter_tasks
from judge_engine.protocols import Protocol
from judge_engine.rundir.records import OutcomeRecord
from judge_engine.trust.cascade.state import DONE, CascadeState
from judge_engine.trust.decisions import ItemCollector
from judge_engine.trust.jury import Juror, jury_record

WINDOW = 4096
"""Undecided items a later stage's source reads ahead of the decisions (their tasks held)."""
BATCH = 32
"""Tasks a source hands over at once (the engine prepares tasks 32 at a time)."""


class CascadeRouter:
    """Routes items between stages and feeds the later stages (module docstring).

    :attr:`counters`: judge name -> a callable adding tasks to that judge's planned total (the
    display's), called as items reach its stage.
    """

    def __init__(self, state: CascadeState, config: JobConfig, protocols: Mapping[str, Protocol],
                 items: ItemCollector | None) -> None:
        self.state = state
        self.plan = state.plan
        self._config, self._protocols, self._items = config, protocols, items
        plan = self.plan
        self._deciders = {s.decides: i for i, s in enumerate(plan.stages) if s.asked}
        self._jurors = {j: i for i, s in enumerate(plan.stages) if s.asked and s.kind == "jury" for j in s.judges}
        self._panels: dict[int, dict[str, dict[str, OutcomeRecord]]] = {}
        self._juries = {j.name: j for j in config.juries}
        self._finished: set[str] = set()
        self._sources: list[StageSource] = []
        self._watchers: dict[str, set[StageSource]] = {}
        self.counters: dict[str, Callable[[int], None]] = {}
        self.per_item: dict[str, int] = {}
        """Judge name -> its tasks per item (what an item reaching its stage adds to its total)."""

    # --- routing ------------------------------------------------------------------------------

    def offer(self, record: OutcomeRecord) -> OutcomeRecord | None:
        """The run store's watcher: an outcome line was written; the line it makes (an item
        line, a jury line, the cascade's line), if any, is written next and shown here too."""
        if self._items is not None and (derived := self._items.offer(record)) is not None:
            return derived
        return self.route_only(record)

    def route_only(self, record: OutcomeRecord) -> OutcomeRecord | None:
        """:meth:`offer` without the item collector (a session's end writes the item lines)."""
        stage = self._deciders.get(record.judge)
        if stage is not None:
            before = self.state.position(record.item_id)
            written = self.state.route(stage, record)
            if self.state.position(record.item_id) != before:
                self._moved(record.item_id, before[0])
            return written
        panel = self._jurors.get(record.judge)
        return self._juror(panel, record) if panel is not None else None

    def seed(self, position: int, parts: list[OutcomeRecord]) -> None:
        """An item's finished requests (or jurors' outcomes) from earlier sessions, so that the
        line that completes it this session decides it."""
        stage = self.plan.stages[position]
        for part in parts:
            if stage.kind == "jury":
                self._panels.setdefault(position, {}).setdefault(part.item_id, {})[part.judge] = part
            elif self._items is not None:
                made = self._items.offer(part)
                assert made is None, "seeded parts never complete an item (its line was written at the start)"

    def _juror(self, position: int, record: OutcomeRecord) -> OutcomeRecord | None:
        if self.state.position(record.item_id)[0] != position:
            return None
        stage = self.plan.stages[position]
        panel = self._panels.setdefault(position, {}).setdefault(record.item_id, {})
        panel[record.judge] = record
        if len(panel) < len(stage.judges):
            return None
        del self._panels[position][record.item_id]
        jury = self._juries[stage.name]
        scale = stage.rule.scale
        jurors = []
        for name in jury.judges:
            part = panel[name]
            vote = self._protocols[name].vote(part.verdict, part.score) if part.scored else None
            jurors.append(Juror(name, part.model, part.task_id, part.status, part.reason_code, part.score, vote))
        line = jury_record(jury, scale, (record.item_id, record.variant, record.temperature, record.repeat), jurors)
        return dataclasses.replace(line, cost=round(sum(p.cost for p in panel.values()), 8), row=record.row)

    def _moved(self, item_id: str, was: int) -> None:
        position, _ = self.state.position(item_id)
        if position != DONE and position != was:
            for judge in self.plan.stages[position].judges:
                if judge in self.counters:
                    self.counters[judge](self.per_item.get(judge, 0))
        for source in self._watchers.pop(item_id, ()):
            source.recheck(item_id)

    # --- feeding ------------------------------------------------------------------------------

    def source(self, judge: JudgeConfig, dataset: DatasetConfig) -> StageSource:
        """The task source of ``judge``, a judge of a stage after the first asked one."""
        position = self.plan.stage_of(judge.name)
        assert position is not None, "only a stage's judges are fed by the cascade"
        source = StageSource(self, position, judge, self._protocols[judge.name], dataset)
        self._sources.append(source)
        return source

    def finished(self, judge: str) -> None:
        """Judge ``judge`` is done for this session (its stream ran out or it stopped): the items
        waiting at its stage, once all its judges are done, can move no more."""
        self._finished.add(judge)
        for source in self._sources:
            source.recheck_all()

    def stage_finished(self, position: int) -> bool:
        return all(judge in self._finished for judge in self.plan.stages[position].judges)

    def classify(self, position: int, item_id: str) -> str:
        """For the source of stage ``position``: ``emit`` (the item is at the stage), ``drop``
        (finished, past it, or stuck at an earlier stage that is done) or ``wait``."""
        here, _ = self.state.position(item_id)
        if here == DONE or here > position:
            return "drop"
        if here == position:
            return "emit"
        return "drop" if self.stage_finished(here) else "wait"

    def watch(self, item_id: str, source: StageSource) -> None:
        self._watchers.setdefault(item_id, set()).add(source)


class StageSource:
    """A later stage's judge's tasks (module docstring): :meth:`next_batch` is the engine's and
    the batch driver's feed."""

    def __init__(self, router: CascadeRouter, position: int, judge: JudgeConfig, protocol: Protocol,
                 dataset: DatasetConfig) -> None:
        self._router, self._position = router, position
        self._judge, self._protocol, self._dataset = judge, protocol, dataset
        self._groups: Iterator[list[Task]] | None = None
        self._waiting: dict[str, list[Task]] = {}
        self._ready: deque[list[Task]] = deque()
        self._moved = asyncio.Event()
        self._exhausted = False

    async def next_batch(self, *, skip_rows: int = 0, timeout: float | None = None) -> list[Task] | None:
        """The tasks of a few items at this stage (about :data:`BATCH`); ``[]`` when none came
        within ``timeout`` seconds; None once no more can come this session."""
        if self._groups is None:
            stream = iter_tasks(self._judge, self._protocol, self._dataset, skip_rows=skip_rows)
            self._groups = (list(group) for _, group in itertools.groupby(stream, key=lambda task: task.row))
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            self._fill()
            if self._ready:
                batch: list[Task] = []
                while self._ready and len(batch) < BATCH:
                    batch += self._ready.popleft()
                return batch
            if self._exhausted and not self._waiting:
                return None
            self._moved.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._moved.wait()
            except TimeoutError:
                return []

    def _fill(self) -> None:
        """Read the dataset on while fewer than :data:`WINDOW` items are held (undecided, or
        released and not taken yet)."""
        assert self._groups is not None
        while not self._exhausted and len(self._waiting) + len(self._ready) < WINDOW:
            tasks = next(self._groups, None)
            if tasks is None:
                self._exhausted = True
                return
            self._place(tasks[0].item_id, tasks)

    def _place(self, item_id: str, tasks: list[Task]) -> None:
        verdict = self._router.classify(self._position, item_id)
        if verdict == "emit":
            self._ready.append(tasks)
        elif verdict == "wait":
            self._waiting[item_id] = tasks
            self._router.watch(item_id, self)
            return
        self._waiting.pop(item_id, None)
        self._moved.set()

    def recheck(self, item_id: str) -> None:
        """The router moved ``item_id``: release it, drop it, or keep waiting."""
        tasks = self._waiting.get(item_id)
        if tasks is not None:
            self._place(item_id, tasks)

    def recheck_all(self) -> None:
        for item_id, tasks in list(self._waiting.items()):
            self._place(item_id, tasks)
        self._moved.set()


class EmptySource:
    """The feed of a stage that is not asked (its calibration found no threshold): nothing."""

    async def next_batch(self, *, skip_rows: int = 0, timeout: float | None = None) -> list[Task] | None:
        return None
