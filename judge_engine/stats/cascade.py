"""The cascade section of ``judge-engine stats RUN_DIR``: how a cascaded run's items ended, what
each stage answered, agreement with a human table where one is given, and what the cascade
cost against its strongest stage alone.

Read from the cascade's own outcome lines (``protocol: cascade``: the stage that answered, its
prediction, and every stage asked), the manifest's ``cascade`` section (the stages, in order,
and which are asked) and each judge's spend.

Per stage: ``reached`` (items asked of it), ``answered`` and its ``share`` of all the items,
``escalated`` (sent on to the next asked stage), ``abstained`` (not sure enough, and no stage
after it is asked: the item ends unanswered), ``held`` (an outage at the stage: no verdict,
waiting for ``resume --retry``), so that reached = answered + escalated + abstained + held; its
``cost`` (its judges' spend; a jury's, its jurors') and, with human labels, ``agreement`` on
the items it answered (``labelled`` of them had a label). A last row, ``cascade``, holds the whole: ``coverage`` =
answered / items, overall agreement, the cascade's cost and the estimate of the last stage
asked about every item (its cost per item reached x items), and their ratio.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from judge_engine.rundir.records import DEMO_TOKENS_NOTE
from judge_engine.stats.risk_control import agreement_key
from judge_engine.stats.runs import Outcome, Run
from judge_engine.stats.sections import CASCADE_PROTOCOL, Section
from judge_engine.util import cascade_words as words
from judge_engine.util.money import dollars
from judge_engine.util.naming import cascade_title

COLUMNS = [words.STAGE, words.THRESHOLD, words.REACHED, words.ANSWERED, words.SHARE, words.ESCALATED,
           words.ABSTAINED, words.HELD, words.AGREEMENT, "cost"]
"""Shown as a table, in the cascade's words (:mod:`judge_engine.util.cascade_words`); the rows
(JSON, CSV) also hold ``labelled``, ``cost_per_item`` and, in the ``cascade`` row, ``alone``
and ``ratio``."""
FORMATS = {words.THRESHOLD: words.threshold_text, words.SHARE: words.percent, words.AGREEMENT: words.percent}
"""Thresholds and shares as ``calibrate`` writes them."""


def cascade_sections(run: Run, spend: Mapping[str, float], *, human: Mapping[str, Any] | None = None,
                     fallback_cost: float | None = None) -> list[Section]:
    """The cascade section, when the run has cascade lines (none otherwise).

    Args:
        spend: each judge's cost over the run.
        human: item id -> human label (``--human-table``), or None.
        fallback_cost: the last stage's cost per item from its calibration, used for the
            estimate of the last stage alone when it judged no item in this run.
    """
    lines = [o for o in run.outcomes if o.protocol == CASCADE_PROTOCOL and isinstance(o.verdict, dict)]
    section = (run.manifest.cascade if run.manifest is not None else None) or {}
    if not lines or not section:
        return []
    stages = [dict(s) for s in section.get("stages") or []]
    items = int(section.get("items") or len(lines))
    judged = _items_judged(run, {j for s in stages for j in s.get("judges") or []})
    rows = [_stage_row(stage, lines, items, spend, judged, human) for stage in stages]
    _escalated(rows, stages, lines)
    total, notes = _total_row(rows, stages, lines, items, human, fallback_cost, judged)
    if not math.isnan(total["alone"]):  # plan prints its own figure for the last stage alone
        notes.append(f"{rows[-1]['stage']} alone differs from plan's: plan's figure prices its token counts before "
                     f"the run; this one is what {rows[-1]['stage']} cost per item")
        if run.manifest is not None and run.manifest.demo:
            notes.append(DEMO_TOKENS_NOTE)
    title = f"{cascade_title(str(section.get('name')))}: {section.get('guarantee') or ''}".rstrip(": ")
    if human is None:
        notes.append("agreement with humans: give --human-table FILE --key ID --label COLUMN")
    return [Section("cascade", title, COLUMNS, [*rows, total], notes=notes, dollar_values=("cost",),
                    formats=FORMATS)]


def _items_judged(run: Run, judges: set[str]) -> dict[str, int]:
    found: dict[str, set[str]] = {judge: set() for judge in judges}
    for outcome in run.outcomes:
        if outcome.judge in found:
            found[outcome.judge].add(outcome.item_id)
    return {judge: len(ids) for judge, ids in found.items()}


def _stage_row(stage: Mapping[str, Any], lines: list[Outcome], items: int, spend: Mapping[str, float],
               judged: Mapping[str, int], human: Mapping[str, Any] | None) -> dict[str, Any]:
    name = str(stage.get("stage"))
    answered = [o for o in lines if o.verdict.get("stage") == name and o.status == "scored"]
    reached = sum(1 for o in lines if any(a.get("stage") == name for a in o.verdict.get("asked") or []))
    reached = max(reached, int(stage.get("reached") or 0)) if stage.get("asked") else 0
    cost = sum(float(spend.get(j, 0.0)) for j in stage.get("judges") or [])
    per_item = sum(float(spend.get(j, 0.0)) / judged[j] for j in stage.get("judges") or [] if judged.get(j)) \
        if reached else math.nan
    agreement, labelled = _agreement(answered, human)
    return {"stage": name, "threshold": stage.get("threshold") if stage.get("asked") else words.NOT_ASKED,
            "reached": reached, "answered": len(answered), "share": len(answered) / items if items else math.nan,
            "escalated": 0, "abstained": 0, "held": sum(1 for o in lines if o.verdict.get("held_at") == name),
            "agreement": agreement, "labelled": labelled, "cost": cost, "cost_per_item": per_item}


def _escalated(rows: list[dict[str, Any]], stages: list[dict[str, Any]], lines: list[Outcome]) -> None:
    """Per stage, the items it sent on to a later stage, and those it abstained on: routed on
    from the last stage the item was asked (its line is ``abstained``: no stage came after)."""
    by_stage = {row["stage"]: row for row in rows}
    for o in lines:
        asked = [a for a in o.verdict.get("asked") or [] if isinstance(a, dict)]
        for position, step in enumerate(asked):
            row = by_stage.get(step.get("stage"))
            if row is None or step.get("route") != "escalate":
                continue
            last = position == len(asked) - 1 and o.reason_code == "abstained"
            row["abstained" if last else "escalated"] += 1


def _agreement(answered: list[Outcome], human: Mapping[str, Any] | None) -> tuple[float, int]:
    if human is None:
        return math.nan, 0
    pairs = [(o.verdict.get("prediction"), human[o.item_id]) for o in answered if o.item_id in human]
    if not pairs:
        return math.nan, 0
    return sum(agreement_key(p) == agreement_key(h) for p, h in pairs) / len(pairs), len(pairs)


def _total_row(rows: list[dict[str, Any]], stages: list[dict[str, Any]], lines: list[Outcome], items: int,
               human: Mapping[str, Any] | None, fallback_cost: float | None, judged: Mapping[str, int]
               ) -> tuple[dict[str, Any], list[str]]:
    answered = [o for o in lines if o.status == "scored"]
    abstained = sum(1 for o in lines if o.reason_code == "abstained")
    held = sum(1 for o in lines if o.verdict.get("held_at"))
    agreement, labelled = _agreement(answered, human)
    cost = sum(float(r["cost"]) for r in rows)
    last = rows[-1]
    notes = [f"coverage {len(answered) / items:.1%}: {len(answered):,} of {items:,} items answered, "
             f"{abstained:,} abstained (no stage sure enough), {held:,} held (an outage at a stage)"
             + (f", {items - len(lines):,} not finished" if items > len(lines) else "")]
    per_item, source = last["cost_per_item"], "its cost per item in this run"
    if not isinstance(per_item, float) or math.isnan(per_item) or not last["reached"]:
        per_item, source = (fallback_cost, "its cost per item in the calibration run") if fallback_cost is not None \
            else (math.nan, "")
    alone = per_item * items if not math.isnan(per_item) else math.nan
    if math.isnan(alone):
        notes.append(f"{last['stage']} alone: no estimate (it judged no item here, and the thresholds file has no "
                     "cost for it: calibrate with costs)")
    else:
        notes.append(f"the cascade cost {dollars(cost)}; {last['stage']} alone on all {items:,} items: about "
                     f"{dollars(alone)} ({source}); ratio {cost / alone:.1%}" if alone else "")
    total = {"stage": "cascade", "threshold": "", "reached": items, "answered": len(answered),
             "share": len(answered) / items if items else math.nan, "escalated": "", "abstained": abstained, "held": held,
             "agreement": agreement, "labelled": labelled, "cost": cost,
             "cost_per_item": cost / items if items else math.nan, "alone": alone,
             "ratio": cost / alone if alone and not math.isnan(alone) else math.nan}
    return total, [n for n in notes if n]
