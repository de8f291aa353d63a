"""A cascaded session's share of the work: what :func:`judge_engine.running.session.execute` calls.

```
start    item and jury lines the run lacks written (as a session's end writes them), the
         state rebuilt from the lines (state.py), the cascade lines a kill lost written,
         ``resume --retry`` narrowed to the items the cascade holds, the collectors seeded
attach   each stage judge's planned total: the items that reached its stage
sources  the feeds of the later stages' judges (router.py); nothing for a stage not asked
offer    the store's watcher while the engine runs (the item collector, then the router)
settle   the watcher while the session's end writes item and jury lines (routed too)
```

**Retries.** ``resume --retry CODES`` judges again, in a cascaded run, only the tasks of items
the cascade holds, at the stage that holds them: an item a stage answered, abstained or sent on
keeps its line (a stage is never asked twice about an item, and an earlier stage's answer
stands), even when one of its requests was left out unreadable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from judge_engine.rundir.index import Query, RunIndex
from judge_engine.rundir.records import OutcomeRecord
from judge_engine.rundir.store import LineReader, RunStore
from judge_engine.running.resumption import Resumption
from judge_engine.trust.cascade.router import CascadeRouter, EmptySource
from judge_engine.trust.cascade.stages import CascadePlan
from judge_engine.trust.cascade.state import CascadeState, rebuild
from judge_engine.trust.decisions import ItemCollector, write_item_outcomes
from judge_engine.trust.jury import write_jury_outcomes

if TYPE_CHECKING:
    from judge_engine.running.engine import TaskSource
    from judge_engine.running.runtime import JudgeRuntime
    from judge_engine.running.session import PreparedRun


class CascadeRun:
    """One session of a cascaded run (module docstring)."""

    def __init__(self, prepared: PreparedRun, plan: CascadePlan) -> None:
        self.prepared, self.plan = prepared, plan
        self.router: CascadeRouter | None = None

    @property
    def state(self) -> CascadeState:
        assert self.router is not None, "start() first"
        return self.router.state

    @property
    def section(self) -> dict[str, Any]:
        """The manifest's ``cascade`` section, kept current while the session runs."""
        return self.state.section

    def start(self, store: RunStore, resumptions: Mapping[str, Resumption]) -> dict[str, Resumption]:
        """Bring the run's lines and the cascade's state up to date before anything is sent;
        returns the resumptions with ``--retry`` narrowed to the items the cascade holds."""
        prepared = self.prepared
        config, protocols = prepared.config, prepared.protocols
        write_item_outcomes(store, config, protocols)
        write_jury_outcomes(store, config, protocols)
        again = frozenset(t for r in resumptions.values() for t in r.again)
        _ = store.index  # flushed: the snapshot sees every line written so far
        with RunIndex.open(store.run_dir, catch_up=False) as snapshot, LineReader(store.run_dir) as reader:
            rebuilt = rebuild(self.plan, snapshot, reader, items=prepared.dataset.items, again=again)
            narrowed = self._narrowed(resumptions, snapshot, rebuilt.state)
        for line in rebuilt.to_write:
            store.write_outcome(line)
        seeded = sum(len(items) for items in rebuilt.parts.values())
        collector = ItemCollector(config, protocols, max_open=ItemCollector.MAX_OPEN + seeded)
        self.router = CascadeRouter(rebuilt.state, config, protocols, collector if collector.active else None)
        for position, items in rebuilt.parts.items():
            for parts in items.values():
                self.router.seed(position, parts)
        prepared.manifest.cascade = rebuilt.state.section
        return narrowed

    def _narrowed(self, resumptions: Mapping[str, Resumption], index: RunIndex, state: CascadeState
                  ) -> dict[str, Resumption]:
        narrowed = dict(resumptions)
        for judge, resumption in resumptions.items():
            position = self.plan.stage_of(judge)
            if position is None or not resumption.again:
                continue
            rows = index.tasks(Query(judge=judge, status="unscored"))
            keep = frozenset(r.task_id for r in rows if r.task_id in resumption.again
                             and state.position(r.item_id) == (position, True))
            narrowed[judge] = dataclasses.replace(resumption, again=keep, done=resumption.done | (resumption.again - keep))
        return narrowed

    def attach(self, runtimes: list[JudgeRuntime]) -> None:
        """Each stage judge's planned total (the display's): the items that reached its stage."""
        router, state = self.router, self.state
        assert router is not None
        items = max(1, self.prepared.dataset.items)
        for runtime in runtimes:
            position = self.plan.stage_of(runtime.config.name)
            if position is None:
                continue
            per_item = round(self.prepared.tasks_of(runtime.config) / items)
            router.per_item[runtime.config.name] = per_item
            runtime.counters.total = state.reached[position] * per_item if position != state.first else \
                self.prepared.tasks_of(runtime.config)
            router.counters[runtime.config.name] = _adder(runtime)

    def sources(self) -> dict[str, TaskSource]:
        """The feeds of the judges of every stage but the first asked one (which reads the
        dataset as any judge does); a stage that is not asked gets none."""
        router = self.router
        assert router is not None
        first = self.state.first
        judges = {j.name: j for j in self.prepared.config.judges}
        feeds: dict[str, TaskSource] = {}
        for position, stage in enumerate(self.plan.stages):
            if position == first:
                continue
            for name in stage.judges:
                feeds[name] = router.source(judges[name], self.prepared.config.dataset) if stage.asked \
                    else EmptySource()
        return feeds

    def offer(self, record: OutcomeRecord) -> OutcomeRecord | None:
        """The run store's watcher while the engine runs."""
        assert self.router is not None
        return self.router.offer(record)

    def finished(self, judge: str) -> None:
        assert self.router is not None
        self.router.finished(judge)

    def settle(self, record: OutcomeRecord) -> OutcomeRecord | None:
        """The watcher while the session's end writes the item and jury lines it caught up:
        routed like any other (the collector is done: those lines are its)."""
        assert self.router is not None
        return self.router.route_only(record)

    @property
    def unfinished(self) -> int:
        """Items escalated to a stage that has not decided them (not held): none after a
        session that completed, unless a line was missed; a run with some is not complete."""
        return self.state.unfinished


def _adder(runtime: JudgeRuntime) -> Any:
    def add(tasks: int) -> None:
        runtime.counters.total += tasks
    return add


def cascade_run(prepared: PreparedRun) -> CascadeRun | None:
    """The cascade part of a prepared run's session, or None (no cascade, or switched off)."""
    plan = getattr(prepared, "cascade", None)
    return CascadeRun(prepared, plan) if plan is not None else None
