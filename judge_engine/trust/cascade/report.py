"""What a person reads about a cascade outside ``stats``: a run's summary line (the run's end,
``status``) and ``plan``'s lines (each stage asked or not, and the expected cost from the
calibration's escalation rates; the judges' plans scaled to those rates are the dry run's:
:func:`judge_engine.running.estimate.expected_plans`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from judge_engine._moved import moved_names
from judge_engine.errors import JudgeEngineError, ReasonCode
from judge_engine.inputs.config import recorded_config
from judge_engine.planning.plan import build_protocol
from judge_engine.rundir.records import Counts
from judge_engine.rundir.store import LineReader, open_index, writer_active
from judge_engine.trust.cascade.stages import CascadePlan, cascade_plan
from judge_engine.trust.cascade.state import answered_per_stage, rebuild
from judge_engine.util import cascade_words as words
from judge_engine.util.naming import cascade_title

if TYPE_CHECKING:
    from pathlib import Path

    from judge_engine.rundir.index import RunIndex
    from judge_engine.rundir.records import Manifest


def summary_lines(manifest_cascade: Mapping[str, Any] | None, counts: Mapping[str, Any]) -> list[str]:
    """The cascade's lines in a run's summary and ``status``: items answered per stage,
    abstained (apart from failures: the method working), held, waiting; empty for a run
    without a cascade. ``counts`` is the manifest's ``counts``."""
    if not manifest_cascade:
        return []
    name = str(manifest_cascade.get("name"))
    mine = (counts.get("judges") or {}).get(name) or {}
    by_code = mine.get("unscored_by_code") or {}
    abstained = int(by_code.get(str(ReasonCode.ABSTAINED), 0))
    answered = int(mine.get("scored") or 0)
    shares = answered_per_stage(manifest_cascade, answered, abstained)
    stages = manifest_cascade.get("stages") or []
    parts = [f"{stage['stage']} {shares[str(stage['stage'])]:,}" for stage in stages if stage.get("asked")]
    silent = [str(stage["stage"]) for stage in stages if not stage.get("asked")]
    items = int(manifest_cascade.get("items") or 0)
    held = sum(int(stage.get("held") or 0) for stage in stages)
    waiting = sum(int(stage.get("waiting") or 0) for stage in stages)
    undecided = items - answered - abstained - held - waiting
    kind = words.guarantee_name(manifest_cascade.get("guarantee_kind"))
    line = (f"{cascade_title(str(name))} ({kind}): {items:,} items; {words.ANSWERED} by " + ", ".join(parts)
            + (f" ({', '.join(silent)} {words.NOT_ASKED}: no threshold)" if silent else "")
            + f"; {abstained:,} {words.ABSTAINED} (no stage sure enough: not a failure)")
    if held:
        line += f"; {held:,} {words.HELD} at a stage (an outage there: resume --retry asks again)"
    if waiting or undecided > 0:
        line += f"; {waiting + max(0, undecided):,} not decided yet"
    return [line]


def plan_lines(plan: CascadePlan, costs: Mapping[str, tuple[float, float] | None] | None) -> list[str]:
    """``plan``'s lines: per stage whether it is asked, at what threshold, the share of the
    calibration items that reached it and that it escalated, and the cascade's expected cost
    (each stage's cost over every item times the share reached) against the last stage on every
    item. ``costs``: each stage's cost over every item (low, high), None when unpriced; None: no
    costs (``protocols --check``)."""
    lines = [f"{cascade_title(plan.name)}: {plan.thresholds.statement} (calibrated on {plan.thresholds.items:,} items)"]
    low = high = 0.0
    priced = True
    for stage in plan.stages:
        cost = (costs or {}).get(stage.name)
        if not stage.asked:
            why = ("the thresholds that passed the cascade's test give it none" if plan.thresholds.kind == "cascade"
                   else "its calibration found no threshold: it answers nothing")
            lines.append(f"  {stage.name}: {words.NOT_ASKED} ({why})")
            continue
        rate = "" if stage.escalation_rate is None else f", {words.ESCALATED} {_percent(stage.escalation_rate)} of them"
        share = f"{words.REACHED} by {_percent(stage.reach)} of the calibration items"
        if costs is None:
            spent = ""
        elif cost is None:
            priced = False
            spent = "; no price known"
        else:
            low, high = low + cost[0] * stage.reach, high + cost[1] * stage.reach
            spent = f"; expected ${_range(cost[0] * stage.reach, cost[1] * stage.reach)}"
        lines.append(f"  {stage.name}: answers at confidence >= {words.threshold_text(stage.threshold)}; "
                     f"{share}{rate}{spent}")
    last = (costs or {}).get(plan.stages[-1].name)
    if costs is not None and priced and last is not None:
        ratio = f" ({_percent(low / last[0])})" if last[0] else ""
        lines.append(f"  expected cost ${_range(low, high)} against ${_range(*last)} for {plan.stages[-1].name} on every "
                     f"item{ratio}, both at plan's token counts (stats measures them in the run); the table shows "
                     "each stage's expected share of the items")
    return lines


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%"


def _range(low: float, high: float) -> str:
    return f"{low:.4f}" if abs(high - low) < 5e-5 else f"{low:.4f}-{high:.4f}"


def refreshed(run_dir: Path, manifest: Manifest) -> Manifest:
    """``manifest`` with its ``cascade`` section rebuilt from the run's lines (for ``status``: a
    killed run's manifest is as of its last checkpoint), unless a process is writing the run (its
    checkpoints are current) or the cascade cannot be rebuilt (its thresholds file changed or
    is gone: the recorded section stays)."""
    if not manifest.cascade or writer_active(run_dir):
        return manifest
    name = str(manifest.cascade.get("name"))
    try:
        with open_index(run_dir) as index:
            manifest.counts = {**manifest.counts, "judges": {**(manifest.counts.get("judges") or {}),
                                                             name: _counts(index, name)}}
            config = recorded_config(manifest.config, where=run_dir / "run.json")
            plan = cascade_plan(config, {judge.name: build_protocol(judge) for judge in config.judges})
            if plan is None or plan.name != name:
                return manifest
            with LineReader(run_dir) as reader:
                state = rebuild(plan, index, reader, items=int(manifest.cascade.get("items") or 0)).state
    except (JudgeEngineError, OSError):
        return manifest
    manifest.cascade = state.section
    return manifest


def _counts(index: RunIndex, judge: str) -> dict[str, Any]:
    counts = Counts()
    for (name, status, code), n in index.counts().items():
        if name == judge and status != "undone":
            counts.add(status, code, n)
    return counts.to_dict()


if not TYPE_CHECKING:  # names of 0.1 that moved (a type checker reads the new homes)
    __getattr__ = moved_names(__name__, {
        "expected_plans": "judge_engine.running.estimate",
        "stage_costs": "judge_engine.running.estimate",
    })
