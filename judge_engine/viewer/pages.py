"""The JSON documents the viewer's pages are drawn from: the overview, a list page, an item, a
task's transcript. Plain data, built on the viewer's query thread from the catalog (SQL and
lines read by offset) and what the builder has derived; :mod:`judge_engine.viewer.server`
serves them, :file:`static/` draws them. Run text is only ever a JSON string here.
"""

from __future__ import annotations

import time
from typing import Any

from judge_engine.errors import RunDirError
from judge_engine.protocols.base import REASK_MARKER
from judge_engine.rundir.blocks import decode_request
from judge_engine.rundir.records import (
    DEMO_TOKENS_NOTE,
    OUTCOMES,
    TRANSCRIPTS,
    AttemptRecord,
    transcript_record,
)
from judge_engine.trust.estimate_rows import HumanLabels, judge_estimates
from judge_engine.util.jsonio import loads
from judge_engine.viewer.cascade import cascade_card, decisions_of, stage_place
from judge_engine.viewer.catalog import Catalog, Judge, OpenRun
from judge_engine.viewer.composed import parts
from judge_engine.viewer.derived import Builder, RunState
from judge_engine.viewer.queries import STATUSES, TaskList, filter_from
from judge_engine.viewer.verdicts import card

SPREAD_REFRESH_S = 10.0
"""A live run's disagreement order is rebuilt at most this often."""


class Pages:
    """Builds every page's document (one instance per viewer, used on its query thread)."""

    def __init__(self, catalog: Catalog, builder: Builder, *, human: HumanLabels | None = None,
                 by: str | None = None) -> None:
        self.catalog = catalog
        self.builder = builder
        self.human, self.by = human, by
        self._estimates: dict[int, tuple[int, dict[str, Any]]] = {}
        """run number -> (its outcomes' size when estimated, each judge's estimate)"""
        self.tasks = TaskList(catalog)
        self._spread_built = 0.0

    # --- overview ---------------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        self.catalog.refresh_judges()
        runs = [self._run(run) for run in self.catalog.runs]
        judges = [self._judge(j) for j in self.catalog.judges]
        if self.human is not None:
            for judge in judges:
                found = self.estimates(judge["run"])
                judge["estimate"] = {"absent": found["absent"]} if "absent" in found else found.get(judge["name"])
        codes = sorted({code for j in judges for code in (j["counts"] or {}).get("by_code", {})})
        temperatures = sorted({t for run in self.catalog.runs for e in run.manifest.judges for t in e.temperatures})
        repeats = max((e.repeats for run in self.catalog.runs for e in run.manifest.judges), default=1)
        return {"demo": self.catalog.demo, "synthetic": self.catalog.synthetic(), "runs": runs,
                "judges": judges, "live": any(r["live"] for r in runs),
                "facets": {"judges": [j.label for j in self.catalog.judges], "statuses": list(STATUSES),
                           "reason_codes": codes, "temperatures": temperatures, "repeats": list(range(repeats))}}

    def estimates(self, number: int) -> dict[str, Any]:
        """A run's estimates against the human table, by judge; again only when its outcomes grew."""
        assert self.human is not None
        run_dir = self.catalog.runs[number].run_dir
        try:
            size = (run_dir / OUTCOMES).stat().st_size
        except OSError:
            size = -1
        cached = self._estimates.get(number)
        if cached is None or cached[0] != size:
            cached = (size, judge_estimates(run_dir, self.human, by=self.by))
            self._estimates[number] = cached
        return cached[1]

    def _run(self, run: OpenRun) -> dict[str, Any]:
        manifest = run.current_manifest()
        state = self.builder.states[run.number]
        return {"number": run.number, "run_id": run.run_id, "dir": str(run.run_dir), "status": manifest.status,
                "live": run.live(), "demo": manifest.demo, "created_at": manifest.created_at,
                "updated_at": manifest.updated_at, "package_version": manifest.package_version,
                "dataset": {k: manifest.dataset.get(k) for k in ("path", "items")},
                "rescored_from": manifest.rescored_from, "failures": manifest.failures,
                "tokens_note": DEMO_TOKENS_NOTE if manifest.demo else None,
                "sessions": len(manifest.sessions),
                "derived": {"indexed": state.indexed, "attempts": state.attempts_share, "items": state.items,
                            "items_done": state.items_done, "items_origin": state.items_origin,
                            "problems": state.problems}}

    def _judge(self, judge: Judge) -> dict[str, Any]:
        number, name, label = judge.run, judge.name, judge.label
        run = self.catalog.runs[number]
        manifest = run.manifest
        entry = manifest.judge(name)
        state = self.builder.states[number]
        counts = (state.counts or {}).get(name)
        if counts is None and state.counts is None:  # not counted yet: what run.json says
            recorded = ((manifest.counts or {}).get("judges") or {}).get(name)
            counts = None if recorded is None else {**recorded, "by_code": recorded.get("unscored_by_code", {}),
                                                    "undone": 0, "recorded": True}
        counts = _planned(counts, manifest.planned_tasks(name))
        return {"label": label, "run": number, "name": name, "model": entry.model if entry else "",
                "protocol": entry.protocol if entry else "", "protocol_version": entry.protocol_version if entry else "",
                "protocol_options": entry.protocol_options if entry else {},
                "temperatures": entry.temperatures if entry else [], "repeats": entry.repeats if entry else None,
                "score_range": judge.score_range, "counts": counts,
                "jury": None if judge.jury is None else {"jurors": list(judge.jury.jurors),
                                                         "aggregate": judge.jury.aggregate},
                "spend": _spend(state, manifest.spend, name),
                "attempts": None if state.attempts is None else state.attempts.get(name, {}),
                "attempts_share": state.attempts_share,
                "histogram": (state.histograms or {}).get(name),
                "consistency": ((state.consistency or {}).get("judges") or {}).get(name),
                **self._cascaded(run, name, counts)}

    def _cascaded(self, run: OpenRun, name: str, counts: dict[str, Any] | None) -> dict[str, Any]:
        """A cascaded run's judge: the cascade's card, a stage judge's place in it, or whose
        decisions a ``<judge>:item`` line holds (:mod:`judge_engine.viewer.cascade`)."""
        manifest = run.manifest
        state = self.builder.states[run.number]

        def cost_of(judge: str) -> float | None:
            spend = _spend(state, manifest.spend, judge)
            return 0.0 if spend is None else float(spend.get("cost") or 0.0)

        found: dict[str, Any] = {}
        if manifest.cascade and name == manifest.cascade.get("name"):
            found["cascade"] = cascade_card(manifest.cascade, counts, cost_of)
        elif (place := stage_place(manifest, name)) is not None:
            found["stage"] = place
        if (decisions := decisions_of(manifest, name, state.counts or {})) is not None:
            found["decisions"] = decisions
        return found

    # --- the task list -----------------------------------------------------------------------------

    def task_page(self, params: dict[str, str]) -> dict[str, Any]:
        f = filter_from(params, self.catalog.judges)
        states = self.builder.states
        searchable = [s.items for s in states]
        notes = []
        if f.text and not all(searchable):
            done = sum(s.items_done for s in states)
            notes.append(f"the search index is being built ({done:,} items so far): search covers "
                         + ("no run yet" if not any(searchable) else "only the runs it has finished"))
        if f.sort == "disagreement":
            self.ensure_spread()
        total, rows = self.tasks.page(f, searchable, [s.indexed for s in states])
        spreads = self.tasks.spreads(sorted({r.item_id for r in rows}))
        cascades = {run.number: str(run.manifest.cascade.get("name")) for run in self.catalog.runs if run.manifest.cascade}
        return {"total": total, "page": f.page, "size": f.size, "pages": max(1, -(-total // f.size)), "sort": f.sort,
                "spread_unit": self.tasks.spread_unit(), "notes": notes, "cascades": bool(cascades),
                "synthetic": self.catalog.synthetic({r.run for r in rows}), "rows": [{
                    "run": r.run, "demo": self.catalog.runs[r.run].manifest.demo, "task_id": r.task_id,
                    "item_id": r.item_id,
                    "judge": self.catalog.judge_of(r.run, r.judge).label,
                    # a cascade's line is its answering stage's verdict: no temperature of its own
                    "temperature": None if cascades.get(r.run) == r.judge else r.temperature,
                    "repeat": r.repeat, "variant": r.variant or "", "status": r.status or "undone",
                    "reason_code": r.reason_code, "score": r.score, "spread": spreads.get(r.item_id),
                    "stage": self._answered_by(r.run, r.task_id) if cascades.get(r.run) == r.judge else None}
                    for r in rows]}

    def _answered_by(self, number: int, task_id: str) -> str | None:
        """The stage that answered a cascade line, ``held at`` the stage that holds it, or
        ``abstained``."""
        run = self.catalog.runs[number]
        row = self.catalog.db.execute(f"SELECT outcome_offset, outcome_length FROM {run.schema}.tasks WHERE task_id = ?",
                                      (task_id,)).fetchone()
        if row is None or row[0] is None or row[1] is None:
            return None
        outcome = run.outcome(row[0], row[1])
        verdict = outcome.verdict if isinstance(outcome.verdict, dict) else {}
        if verdict.get("stage"):
            return str(verdict["stage"])
        return f"held at {verdict['held_at']}" if verdict.get("held_at") else outcome.reason_code

    def ensure_spread(self) -> None:
        """Build the disagreement order if it is missing or in another unit (a jury, found late,
        changed the scales), or stale and old enough."""
        unit = self.tasks.spread_unit()
        covers = (*(_covered(self.catalog, run) for run in self.catalog.runs), unit)
        stale = self.tasks.spread_covers != covers
        other_unit = self.tasks.spread_covers is None or self.tasks.spread_covers[-1] != unit  # a jury came in
        if other_unit or (stale and time.monotonic() - self._spread_built >= SPREAD_REFRESH_S):
            self.tasks.build_spread(covers)
            self._spread_built = time.monotonic()

    # --- one item ----------------------------------------------------------------------------------

    def item(self, item_id: str) -> dict[str, Any]:
        """Every task of the item in every open run, each with its card.

        Raises:
            RunDirError: no open run has the item.
        """
        fields, origin = self._fields(item_id)
        tasks = []
        for run in self.catalog.runs:
            cascade = (run.manifest.cascade or {}).get("name")
            rows = self.catalog.db.execute(
                f"SELECT task_id, judge, temperature, repeat, variant, status, score, outcome_offset, outcome_length "
                f"FROM {run.schema}.tasks WHERE item_id = ? ORDER BY judge, temperature, repeat, variant", (item_id,))
            for task_id, judge, temperature, repeat, variant, status, score, offset, length in rows.fetchall():
                task: dict[str, Any] = {"run": run.number, "run_id": run.run_id, "task_id": task_id,
                                        "judge": self.catalog.judge_of(run.number, judge).label,
                                        # a cascade's verdict is its answering stage's: no temperature of its own
                                        "temperature": None if judge == cascade else temperature,
                                        "repeat": repeat, "variant": variant or "",
                                        "status": status or "undone", "score": score, "card": {"kind": "none"}}
                if offset is not None and length is not None:
                    outcome = run.outcome(offset, length)
                    entry = run.manifest.judge(judge)
                    task.update(model=outcome.model, protocol=outcome.protocol,
                                protocol_version=outcome.protocol_version, scores=dict(outcome.scores),
                                reason=outcome.reason, reason_code=outcome.reason_code, attempts=outcome.attempts,
                                reasks=outcome.reasks, cache_hits=outcome.cache_hits, cost=outcome.cost,
                                latency_s=outcome.latency_s, card=card(outcome, fields or {}, entry),
                                confidence=None if outcome.confidence is None else dict(outcome.confidence))
                tasks.append(task)
        if not tasks:
            raise RunDirError(f"no open run has item {item_id!r}")
        spread = self.tasks.spreads([item_id]).get(item_id)
        return {"item_id": item_id, "fields": fields, "origin": origin, "spread": spread,
                "spread_unit": self.tasks.spread_unit(), "synthetic": self.catalog.synthetic({t["run"] for t in tasks}),
                "tasks": tasks}

    def _fields(self, item_id: str) -> tuple[dict[str, Any] | None, str]:
        """The item's fields and where they come from (``dataset``; ``request``: the prompt
        the judge was sent, when the dataset is gone or not read yet; ``none``)."""
        for run in self.catalog.runs:
            if not self.builder.states[run.number].items:
                continue
            row = self.catalog.db.execute(f"SELECT fields, origin FROM {run.derived_schema}.viewer_items "
                                          "WHERE item_id = ?", (item_id,)).fetchone()
            if row is not None:
                return loads(row[0]), str(row[1])
        for run in self.catalog.runs:
            row = self.catalog.db.execute(
                f"SELECT a.offset, a.length FROM {run.schema}.attempts a JOIN {run.schema}.tasks t ON t.id = a.task "
                "WHERE t.item_id = ? ORDER BY a.offset LIMIT 1", (item_id,)).fetchone()
            if row is not None:
                request = _request(run, run.transcript_line(*row))
                messages = request.get("messages") or []
                return {"prompt": str(messages[-1].get("content") or "") if messages else ""}, "request"
        return None, "none"

    # --- one transcript ----------------------------------------------------------------------------

    def transcript(self, number: int, task_id: str) -> dict[str, Any]:
        """Every attempt of the task in order, as sent and as answered.

        Raises:
            RunDirError: no such run or task.
        """
        run = self.catalog.run(number)
        db = self.catalog.db
        row = db.execute(f"SELECT id, item_id, judge, outcome_offset, outcome_length FROM {run.schema}.tasks "
                         "WHERE task_id = ?", (task_id,)).fetchone()
        if row is None:
            raise RunDirError(f"run {run.run_id} has no task {task_id!r}")
        key, item_id, judge, offset, length = row
        lines = db.execute(f"SELECT offset, length FROM {run.schema}.attempts WHERE task = ? ORDER BY offset", (key,))
        attempts: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        previous: list[dict[str, Any]] = []
        for line_offset, line_length in lines.fetchall():
            raw = run.transcript_line(line_offset, line_length)
            record = transcript_record(raw, requests=False, where=str(run.run_dir / TRANSCRIPTS))
            if not isinstance(record, AttemptRecord):
                errors.append({"stage": record.stage, "error": record.error, "traceback": record.traceback,
                               "at": record.at})
                continue
            messages = _messages(run, raw)
            attempts.append(_attempt(record, _request(run, raw), messages, previous))
            previous = messages
        _link_reasks(attempts)
        outcome = None
        if offset is not None and length is not None:
            o = run.outcome(offset, length)
            outcome = {"status": o.status, "score": o.score, "scores": dict(o.scores), "reason": o.reason,
                       "reason_code": o.reason_code, "attempts": o.attempts, "reasks": o.reasks, "cost": o.cost,
                       "latency_s": o.latency_s, "at": o.at, "model": o.model, "protocol": o.protocol,
                       "temperature": o.temperature, "repeat": o.repeat, "variant": o.variant,
                       "parts": parts(o)}  # a jury's: its jurors' tasks, whose transcripts stand for its own
        return {"run": number, "run_id": run.run_id, "synthetic": self.catalog.synthetic([number]),
                "task_id": task_id, "item_id": item_id,
                "judge": self.catalog.judge_of(number, judge).label, "outcome": outcome, "attempts": attempts,
                "protocol_errors": errors}


def _spend(state: RunState, recorded: dict[str, Any], name: str) -> dict[str, Any] | None:
    """What the judge's attempts cost: counted from the whole transcript as written so far once
    the builder has read it all (``counted``), else as ``run.json`` last recorded it (a running
    session rewrites it every few seconds)."""
    if state.attempts is not None and state.attempts_share >= 1.0:
        counted = state.attempts.get(name)
        return None if counted is None else {**counted, "counted": True}
    spend = ((recorded or {}).get("judges") or {}).get(name)
    return None if spend is None else {**spend, "counted": False}


def _planned(counts: dict[str, Any] | None, planned: int | None) -> dict[str, Any] | None:
    """A judge's counts against the tasks the run plans for it: ``tasks`` is the plan, ``undone``
    what is not finished (``started``: those of them the index knows, begun but without an
    outcome: the list's undone ones; the rest were not started yet). Unchanged when the
    manifest has no plan for the judge."""
    if planned is None:
        return counts
    counts = dict(counts or {"tasks": 0, "scored": 0, "unscored": 0, "undone": 0, "by_code": {}})
    finished = int(counts.get("scored") or 0) + int(counts.get("unscored") or 0)
    return {**counts, "tasks": max(planned, finished), "undone": max(0, planned - finished),
            "started": int(counts.get("undone") or 0)}


def _covered(catalog: Catalog, run: OpenRun) -> int:
    row = catalog.db.execute(f"SELECT value FROM {run.schema}.meta WHERE key = ?", (f"covered:{OUTCOMES}",)).fetchone()
    return int(row[0]) if row else 0


def _request(run: OpenRun, raw: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = raw.get("request") or {}
    if int(raw.get("v") or 1) >= 3:
        request = decode_request(request, run.blocks(), where=str(run.run_dir / TRANSCRIPTS))
    return request


def _messages(run: OpenRun, raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages, each marked ``shared`` when it is part of the prefix every
    request of the judge repeats (a ``seq`` block: system prompt and few-shot turns)."""
    encoded = raw.get("request") or {}
    if int(raw.get("v") or 1) < 3:
        return [{"role": str(m.get("role")), "content": str(m.get("content") or ""), "shared": False}
                for m in encoded.get("messages") or []]
    blocks = run.blocks()
    found: list[dict[str, Any]] = []
    for entry in encoded.get("messages") or []:
        one = decode_request({"frame": encoded["frame"], "messages": [entry]}, blocks)["messages"]
        found += [{"role": str(m.get("role")), "content": str(m.get("content") or ""), "shared": "seq" in entry}
                  for m in one]
    return found


def _attempt(record: AttemptRecord, request: dict[str, Any], messages: list[dict[str, Any]],
             previous: list[dict[str, Any]]) -> dict[str, Any]:
    """One attempt: the parameters and messages sent (those the previous attempt also sent
    marked ``repeated``), and the answer or the error."""
    repeated = len(previous) if messages[:len(previous)] == previous else 0
    response = record.response or {}
    return {"attempt": record.attempt, "reask": record.reask, "at": record.at, "cache_hit": record.cache_hit,
            "replayed": record.replayed, "latency_s": record.latency_s,
            "parameters": {k: v for k, v in request.items() if k != "messages"},
            "messages": [{**m, "repeated": i < repeated} for i, m in enumerate(messages)],
            "answer": response.get("content"), "finish_reason": response.get("finish_reason"),
            "usage": dict(record.usage) if record.usage else None, "cost": record.cost,
            "headers": dict(response.get("headers") or {}), "model": response.get("model"),
            "error": dict(record.error) if record.error else None, "reasked": None}


def _link_reasks(attempts: list[dict[str, Any]]) -> None:
    """Give each answer that was sent back the re-ask message that followed it, and the
    problems that message states (the protocol's :meth:`~judge_engine.protocols.base.Protocol.reask`)."""
    for before, after in zip(attempts, attempts[1:], strict=False):
        if after["reask"] <= before["reask"] or not after["messages"]:
            continue
        message = after["messages"][-1]["content"]
        problems = [line[2:] for line in message.splitlines() if line.startswith("- ")] \
            if message.startswith(REASK_MARKER) else []
        answered = next((a for a in reversed(attempts[:attempts.index(after)]) if a["answer"] is not None), before)
        answered["reasked"] = {"message": message, "problems": problems}
