"""What the overview says of a cascaded run's judges: the cascade's card (its guarantee, each
stage with its threshold, the items it reached, answered, sent on, abstained on and held, what
its judges cost; the coverage and the cascade's cost), each stage judge's place in it (a stage
not asked says why it has no task), and whose decisions a ``<judge>:item`` line holds.

All of it from the run's manifest (its ``cascade`` section, kept current by the run and rebuilt
by ``status`` for a killed one; the judges' entries and config) and the counts and spend the
overview already has: the cascade's answered and abstained lines give each stage's answers
(:func:`~judge_engine.trust.cascade.state.answered_per_stage`, as the run's summary and
``status`` count them), so a stage's figures add up: reached = answered + escalated + abstained
+ held + waiting, and agree with ``stats``'s cascade section on a finished run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from judge_engine.errors import ReasonCode
from judge_engine.rundir.records import Manifest
from judge_engine.trust.cascade.state import answered_per_stage

NOT_ASKED = "not asked: its calibration found no threshold, so the cascade never asks it (it answers nothing)"


def cascade_card(section: Mapping[str, Any], counts: Mapping[str, Any] | None,
                 cost_of: Callable[[str], float | None]) -> dict[str, Any]:
    """The cascade's card: ``{name, guarantee, thresholds, items, answered, abstained, held,
    coverage, cost, stages: [{stage, judges, asked, threshold, reached, answered, escalated,
    abstained, held, waiting, cost}]}``. ``counts``: the cascade line's counts (scored,
    by_code); ``cost_of``: a judge's spend in dollars (None: none known)."""
    counts = counts or {}
    answered = int(counts.get("scored") or 0)
    abstained = int((counts.get("by_code") or {}).get(str(ReasonCode.ABSTAINED), 0))
    stages = [dict(stage) for stage in section.get("stages") or []]
    shares = answered_per_stage(section, answered, abstained)
    asked = [i for i, stage in enumerate(stages) if stage.get("asked")]
    rows = []
    for position, stage in enumerate(stages):
        name = str(stage.get("stage"))
        later = [i for i in asked if i > position]
        reached = int(stage.get("reached") or 0) if stage.get("asked") else 0
        sent_on = int(stages[later[0]].get("reached") or 0) if later and stage.get("asked") else 0
        costs = [cost_of(str(judge)) for judge in stage.get("judges") or []]
        rows.append({
            "stage": name, "judges": list(stage.get("judges") or []), "asked": bool(stage.get("asked")),
            "threshold": stage.get("threshold"), "reached": reached, "answered": shares.get(name, 0) if reached else 0,
            "escalated": sent_on, "abstained": abstained if stage.get("asked") and asked and position == asked[-1] else 0,
            "held": int(stage.get("held") or 0), "waiting": int(stage.get("waiting") or 0),
            "cost": None if any(c is None for c in costs) else sum(c for c in costs if c is not None)})
    items = int(section.get("items") or 0)
    priced = [r["cost"] for r in rows]
    return {"name": str(section.get("name") or "cascade"), "guarantee": section.get("guarantee") or "",
            "thresholds": section.get("thresholds"), "items": items, "answered": answered, "abstained": abstained,
            "held": sum(r["held"] for r in rows), "waiting": sum(r["waiting"] for r in rows),
            "coverage": answered / items if items else None,
            "cost": None if any(c is None for c in priced) else sum(c for c in priced if c is not None),
            "stages": rows}


def stage_place(manifest: Manifest, judge: str) -> dict[str, Any] | None:
    """Where ``judge`` (a stage's judge, its ``<judge>:item`` line, a stage's jury) sits in the
    run's cascade: ``{cascade, stage, position, stages, asked, threshold, reached, items, why}``
    (``why``: a stage not asked, the reason it has no task); None outside a cascade."""
    section = manifest.cascade or {}
    stages = list(section.get("stages") or [])
    for position, stage in enumerate(stages):
        if judge in (stage.get("judges") or []) or judge == stage.get("decides") or judge == stage.get("stage"):
            asked = bool(stage.get("asked"))
            return {"cascade": str(section.get("name") or "cascade"), "stage": str(stage.get("stage")),
                    "position": position + 1, "stages": len(stages), "asked": asked,
                    "threshold": stage.get("threshold"), "reached": int(stage.get("reached") or 0),
                    "items": int(section.get("items") or 0), "why": "" if asked else NOT_ASKED}
    return None


def decisions_of(manifest: Manifest, name: str, counts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """What a ``<judge>:item`` line holds: ``{judge, model, protocol, requests, confidence}``,
    the judge whose requests it decides (``requests``: per item and temperature, from the
    counts; None when neither has a task yet); None for any other name."""
    base, _, kind = name.rpartition(":")
    entry = manifest.judge(base) if kind == "item" else None
    if entry is None or not entry.item_outcomes:
        return None
    own, theirs = int((counts.get(base) or {}).get("tasks") or 0), int((counts.get(name) or {}).get("tasks") or 0)
    config = next((j for j in manifest.config.get("judges") or [] if isinstance(j, dict) and j.get("name") == base), {})
    confidence = (config.get("confidence") or {}).get("method") if isinstance(config.get("confidence"), dict) else None
    return {"judge": base, "model": entry.model, "protocol": entry.protocol,
            "requests": round(own / theirs) if own and theirs else None, "confidence": confidence}
