"""Where every item of a cascade is: finished, waiting at a stage (escalated there, or held),
or at the first stage; rebuilt from the run's outcome lines (through the index) when a session
starts, kept current by the router while it runs.

**Rebuilding** reads, in order:

1. the cascade's own lines (the index's rows: status and code say finished or held; a held
   line is read for the decisions it records);
2. for each asked stage in turn, its deciding lines (``<judge>:item``, the judge's, the jury's)
   of the items that are at that stage and newer than what put them there: each is decided
   again (:func:`~judge_engine.trust.cascade.stages.decide`), exactly as the router decided it or
   would have, so a line written just before a kill is routed now: an answer or a hold gets its
   missing cascade line (``to_write``), an escalation moves the item to the next asked stage,
   whose lines are read next;
3. per stage, the items that reached it (judged there, or waiting there), for the planned
   counts, and the partial items the live decisions need (``parts``): requests or jurors finished
   in an earlier session of an item not decided yet, fed to the collectors before the engine
   starts.

Nothing here writes; the session writes ``to_write``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from judge_engine.errors import ReasonCode
from judge_engine.rundir.index import RunIndex, TaskRow
from judge_engine.rundir.records import OutcomeRecord
from judge_engine.rundir.store import LineReader
from judge_engine.trust.cascade.outcome import CascadeLine, cascade_record
from judge_engine.trust.cascade.stages import CascadePlan, StageDecision, decide

DONE = -1
"""An item's position once the cascade has its final line (answered or abstained)."""


@dataclass(slots=True)
class Waiting:
    """An item past the first asked stage, or held: where it is, and what the stages before it
    decided (the cascade's line records them all)."""

    stage: int
    """The position (in the plan's stages) of the asked stage it is at."""
    asked: list[StageDecision]
    """The decisions so far, the hold's last when it is held."""
    row: int | None
    held: bool = False
    since: int = -1
    """The outcome offset of the line that put it here: a deciding line of this stage older
    than it is not a decision about this visit."""


@dataclass(slots=True)
class CascadeState:
    """Every item's place in the cascade (module docstring). Items in neither :attr:`done` nor
    :attr:`waiting` are at the first asked stage.

    :attr:`section` is the manifest's ``cascade`` section, kept current as items move: per
    stage whether it is asked, its threshold, the items that ``reached`` it (what its judges'
    planned tasks are counted from), and those ``held`` and ``waiting`` there (escalated to it,
    not decided yet). Of the items that reached a stage, the ones it answered are the rest once
    those it sent on (``reached`` of the next asked stage, or the cascade's abstentions after
    the last), held and has waiting are taken away (:func:`answered_per_stage`).
    """

    plan: CascadePlan
    items: int
    """The dataset's items (all reach the first asked stage)."""
    done: set[str] = field(default_factory=set)
    waiting: dict[str, Waiting] = field(default_factory=dict)
    section: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        first = self.plan.asked[0]
        self.section = {
            "name": self.plan.name, "items": self.items, "thresholds": str(self.plan.path),
            "guarantee": self.plan.thresholds.statement, "guarantee_kind": self.plan.thresholds.kind,
            "stages": [{"stage": s.name, "kind": s.kind, "judges": list(s.judges), "decides": s.decides,
                        "threshold": s.threshold, "asked": s.asked, "reached": self.items if i == first else 0,
                        "held": 0, "waiting": 0} for i, s in enumerate(self.plan.stages)],
        }

    @property
    def first(self) -> int:
        return self.plan.asked[0]

    @property
    def reached(self) -> list[int]:
        return [int(stage["reached"]) for stage in self.section["stages"]]

    def set_reached(self, position: int, items: int) -> None:
        self.section["stages"][position]["reached"] = items

    def position(self, item_id: str) -> tuple[int, bool]:
        """(the stage position an item is at, held there); ``(DONE, False)`` once finished."""
        if item_id in self.done:
            return DONE, False
        waiting = self.waiting.get(item_id)
        return (waiting.stage, waiting.held) if waiting is not None else (self.first, False)

    def place(self, item_id: str, waiting: Waiting | None, *, done: bool = False) -> None:
        """Put an item at a stage (``waiting``), or take it off every stage (finished when
        ``done``), keeping the section's counts."""
        stages = self.section["stages"]
        before = self.waiting.pop(item_id, None)
        if before is not None:
            stages[before.stage]["held" if before.held else "waiting"] -= 1
        if waiting is not None:
            self.waiting[item_id] = waiting
            stages[waiting.stage]["held" if waiting.held else "waiting"] += 1
        if done:
            self.done.add(item_id)

    def route(self, stage: int, line: OutcomeRecord, offset: int = -1) -> OutcomeRecord | None:
        """Route the item of ``line``, the deciding line of stage ``stage``: the cascade's line
        when that finishes or holds it, None when it goes on (or the line is not about the
        item's present visit to the stage)."""
        item = line.item_id
        position, held = self.position(item)
        waiting = self.waiting.get(item)
        if position != stage or (waiting is not None and 0 <= offset <= waiting.since):
            return None
        decision = decide(self.plan.stages[stage], line)
        earlier = [] if waiting is None else waiting.asked[:-1] if held else waiting.asked
        asked = [*earlier, decision]
        row = line.row if line.row is not None else (waiting.row if waiting is not None else None)
        if decision.route == "hold":
            self.place(item, Waiting(stage, asked, row, held=True, since=offset))
            return cascade_record(self.plan, item, row, asked)
        following = self.plan.next_asked(stage) if decision.route == "escalate" else None
        if following is not None:
            self.place(item, Waiting(following, asked, row, since=offset))
            self.section["stages"][following]["reached"] += 1
            return None
        self.place(item, None, done=True)
        return cascade_record(self.plan, item, row, asked)

    @property
    def held(self) -> int:
        return sum(int(stage["held"]) for stage in self.section["stages"])

    @property
    def unfinished(self) -> int:
        """Items escalated to a stage that has not decided them yet."""
        return sum(int(stage["waiting"]) for stage in self.section["stages"])


def answered_per_stage(section: Mapping[str, Any], answered: int, abstained: int) -> dict[str, int]:
    """Each stage's items answered, from a manifest's ``cascade`` section and the cascade's
    answered (scored) and abstained lines (:class:`CascadeState`)."""
    stages = list(section.get("stages") or [])
    asked = [i for i, stage in enumerate(stages) if stage.get("asked")]
    shares = {str(stage.get("stage")): 0 for stage in stages}
    later = 0
    for k, position in enumerate(asked):
        if position == asked[0]:
            continue
        stage = stages[position]
        passed = int(stages[asked[k + 1]]["reached"]) if k + 1 < len(asked) else abstained
        count = int(stage["reached"]) - passed - int(stage.get("held") or 0) - int(stage.get("waiting") or 0)
        shares[str(stage["stage"])] = count
        later += count
    if asked:
        shares[str(stages[asked[0]]["stage"])] = answered - later
    return shares


@dataclass(slots=True)
class Rebuilt:
    """What a session starts from (module docstring)."""

    state: CascadeState
    to_write: list[OutcomeRecord]
    """Cascade lines the run lacks for items its lines decide (written before the engine starts)."""
    parts: dict[int, dict[str, list[OutcomeRecord]]]
    """Stage position -> item -> the finished requests (or jurors' outcomes) of an item at that
    stage that is not decided there yet."""


def rebuild(plan: CascadePlan, index: RunIndex, reader: LineReader, *, items: int, again: frozenset[str] = frozenset()
            ) -> Rebuilt:
    """The cascade's state from a run's lines (module docstring). ``again``: tasks ``resume
    --retry`` judges again (left out of ``parts``: their new lines complete the items)."""
    state = CascadeState(plan, items)
    _read_cascade_lines(state, index, reader)
    to_write: list[OutcomeRecord] = []
    parts: dict[int, dict[str, list[OutcomeRecord]]] = {}
    for position in plan.asked:
        stage = plan.stages[position]
        for row in index.finished([stage.decides]):
            offset = row.outcome_offset if row.outcome_offset is not None else -1
            if state.position(row.item_id)[0] != position or row.outcome_offset is None or row.outcome_length is None:
                continue
            line = reader.outcome(row.outcome_offset, row.outcome_length)
            written = state.route(position, line, offset)
            if written is not None:
                to_write.append(written)
        if position != state.first:
            state.set_reached(position, 0)
        parts[position] = _reached_and_parts(state, position, index, reader, again)
    return Rebuilt(state, to_write, parts)


def _read_cascade_lines(state: CascadeState, index: RunIndex, reader: LineReader) -> None:
    positions = {stage.name: i for i, stage in enumerate(state.plan.stages)}
    for row in index.finished([state.plan.name]):
        if row.status == "scored" or row.reason_code == ReasonCode.ABSTAINED:
            state.place(row.item_id, None, done=True)
            continue
        if row.outcome_offset is None or row.outcome_length is None:
            continue
        record = reader.outcome(row.outcome_offset, row.outcome_length)
        line = CascadeLine.read(record)
        position = positions.get(line.held_at or "")
        if position is None or not line.asked:
            continue  # a line this plan cannot place: the item starts over at the first stage
        state.place(row.item_id, Waiting(position, list(line.asked), record.row, held=True, since=row.outcome_offset))


def _reached_and_parts(state: CascadeState, position: int, index: RunIndex, reader: LineReader,
                       again: frozenset[str]) -> dict[str, list[OutcomeRecord]]:
    """Count the items that reached stage ``position`` (judged there, or waiting there) into
    ``state.reached``, and return the finished parts of the items at it that it has not decided
    yet: an item part-way through its requests (or jurors), or a held one some of whose tasks
    ``resume --retry`` judges again (its other parts)."""
    stage = state.plan.stages[position]
    seen: set[str] = set()
    parts: dict[str, list[OutcomeRecord]] = {}
    if stage.kind == "judge" and position == state.first:
        return parts  # every item reaches it, and one line decides
    for item_id, rows in itertools.groupby(_rows(index, stage.judges), key=lambda row: row.item_id):
        seen.add(item_id)
        here, held = state.position(item_id)
        if stage.kind == "judge" or here != position:
            continue
        finished = list(rows)
        if held and not any(row.task_id in again for row in finished):
            continue
        # A held item's tasks that --retry judges again are left out (their new lines complete it);
        # an item part-way through keeps every finished part (--retry leaves it alone).
        kept = [reader.outcome(row.outcome_offset, row.outcome_length) for row in finished
                if not (held and row.task_id in again) and row.outcome_offset is not None
                and row.outcome_length is not None]
        if kept:
            parts[item_id] = kept
    if position != state.first:
        seen.update(item for item, w in state.waiting.items() if w.stage == position)
        state.set_reached(position, len(seen))
    return parts


def _rows(index: RunIndex, judges: tuple[str, ...]) -> Iterator[TaskRow]:
    return index.finished(list(judges))
