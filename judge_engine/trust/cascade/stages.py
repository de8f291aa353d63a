"""A cascade's stages: checked against the config and its thresholds file, and what a stage's
decision line says about an item (answer, escalate, or hold it).

A stage is one of three kinds, by the line that decides an item there:

- ``judge``: a judge of one request per item (and temperature) with a ``confidence``: its
  outcome line, decided by :func:`judge_engine.trust.decisions.decide_item` over that one request;
- ``item``: a judge of several requests per item (``pairwise-annotators``' annotators, repeats):
  its item line ``<judge>:item``, written by :class:`judge_engine.trust.decisions.ItemCollector` as the
  item's last request is written;
- ``jury``: a jury of judges of one request per item: its outcome line, made by the cascade as
  its last juror's outcome is written, decided by the share of jurors that gave its value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from judge_engine.errors import CalibrationError, ConfigError, ReasonCode
from judge_engine.inputs.config import CascadeConfig, JobConfig, JudgeConfig
from judge_engine.protocols import Protocol, VoteScale
from judge_engine.rundir.records import OutcomeRecord
from judge_engine.trust.calibration import answering_advice
from judge_engine.trust.decisions import (
    LEFT_OUT_CODES,
    ItemRule,
    decide_item,
    decides_items,
    item_judge,
    item_rule,
)
from judge_engine.trust.thresholds import Thresholds, read_thresholds

StageKind = Literal["judge", "item", "jury"]
Route = Literal["answer", "escalate", "hold"]

ESCALATE_CODES = frozenset({ReasonCode.NONE_READABLE, ReasonCode.ITEM_TIE, ReasonCode.SELF_PREFERENCE,
                            ReasonCode.JURY_TIE})
"""A stage's line without a decision that sends the item on: the stage has no judgment of it
(every answer unreadable, a tie, kept off by ``self_preference: forbid``), as calibration treats
an item a stage has no confidence for. Any other code (``item_incomplete``,
``transport_exhausted``, ``protocol_error``...) holds the item at the stage: an outage is not a
judgment, and the next stage is not paid for it; ``resume --retry`` asks again."""
VERDICT_CODES = LEFT_OUT_CODES | {ReasonCode.SELF_PREFERENCE}
"""A juror's (or a single request's) codes that are about its answer, not an outage."""


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of a cascade."""

    name: str
    """The judge's or jury's name."""
    kind: StageKind
    judges: tuple[str, ...]
    """The judges asked about an item at this stage (a jury's jurors)."""
    decides: str
    """The ``judge`` of the outcome line that decides an item here."""
    rule: ItemRule
    threshold: float | None
    """The stage answers an item whose confidence is >= this; None: it is not asked at all."""
    reach: float
    """The share of the calibration items that reached it (0 when it is not asked)."""
    escalation_rate: float | None
    """Of the calibration items that reached it, the share it sent on."""
    temperature: float
    models: str
    """Its model (a jury's jurors' models joined with ``+``)."""

    @property
    def asked(self) -> bool:
        return self.threshold is not None


@dataclass(frozen=True, slots=True)
class CascadePlan:
    """A config's cascade, ready to run: its stages with their thresholds."""

    name: str
    stages: tuple[Stage, ...]
    thresholds: Thresholds
    path: Path

    @property
    def asked(self) -> tuple[int, ...]:
        """Positions of the stages that are asked, in order."""
        return tuple(i for i, stage in enumerate(self.stages) if stage.asked)

    def next_asked(self, after: int) -> int | None:
        """The first asked stage after position ``after`` (-1: the first one), or None."""
        return next((i for i in self.asked if i > after), None)

    def stage_of(self, judge: str) -> int | None:
        """The position of the stage ``judge`` is asked at (as the judge or a juror), or None."""
        return next((i for i, stage in enumerate(self.stages) if judge in stage.judges), None)

    @property
    def judges(self) -> set[str]:
        return {name for stage in self.stages for name in stage.judges}

    def identity(self) -> dict[str, Any]:
        """What of the cascade defines a run's answers (part of the run id): the stages and the
        thresholds (the file's digest, not its path)."""
        return {"name": self.name, "stages": [s.name for s in self.stages],
                "thresholds": [s.threshold for s in self.stages], "calibration": self.thresholds.digest,
                "risk": self.thresholds.risk, "delta": self.thresholds.delta,
                "delta_rule": self.thresholds.delta_rule}


# --- checked when a config is prepared ----------------------------------------------------------


def cascade_plan(config: JobConfig, protocols: Mapping[str, Protocol]) -> CascadePlan | None:
    """The config's cascade, checked, with its thresholds read (None: no cascade, or switched
    off with ``enabled: false`` / ``--no-cascade``).

    Raises:
        ConfigError: naming the key: a stage that cannot be a stage (no confidence, several
            temperatures, an interval scale, a juror of several requests), stages of different
            protocols or scales, a judge in two stages, or a thresholds file that is unreadable,
            calibrated for other stages, or answers nothing at any stage.
    """
    cascade = config.cascade
    if cascade is None or not cascade.enabled:
        return None
    check_stages(config, protocols)
    thresholds = _thresholds(cascade)
    stages = tuple(_stage(config, protocols, name, thresholds, s) for s, name in enumerate(cascade.stages))
    return CascadePlan(cascade.name, stages, thresholds, cascade.thresholds)


def check_stages(config: JobConfig, protocols: Mapping[str, Protocol]) -> None:
    """What makes the config's cascade stages (whether the cascade is on or not: a run with it
    off judges the calibration items with these stages).

    Raises:
        ConfigError: naming ``cascade.stages`` or the judge's key.
    """
    cascade = config.cascade
    if cascade is None:
        return
    judges = {j.name: j for j in config.judges}
    juries = {j.name: j for j in config.juries}
    seen: dict[str, str] = {}
    scales: dict[str, VoteScale] = {}
    for name in cascade.stages:
        members = juries[name].judges if name in juries else [name]
        for member in members:
            if member in seen:
                raise ConfigError(f"cascade.stages: {member} is asked at two stages ({seen[member]} and {name}); "
                                  "a judge belongs to one stage")
            seen[member] = name
            _check_member(judges[member], protocols[member], jury=name if name in juries else None)
        if len({judges[m].temperatures[0] for m in members}) > 1:
            raise ConfigError(f"juries[{name}].judges: the jurors of a cascade stage judge at one temperature")
        scale = protocols[members[0]].vote_scale()
        assert scale is not None, "_check_member refuses a judge without votes"
        scales[name] = scale
    names = {protocols[m].name for m in seen}
    if len(names) > 1:
        raise ConfigError("cascade.stages: a cascade's stages judge with one protocol (here: "
                          + ", ".join(f"{m} {protocols[m].name}" for m in seen) + ")")
    shown = {(s.kind, s.values) for s in scales.values()}
    if len(shown) > 1:
        raise ConfigError("cascade.stages: the stages vote on different scales ("
                          + ", ".join(f"{n} {s.kind}{' ' + '/'.join(s.values) if s.values else ''}"
                                      for n, s in scales.items()) + ")")


def _check_member(judge: JudgeConfig, protocol: Protocol, *, jury: str | None) -> None:
    where = f"judges[{judge.name}]"
    scale = protocol.vote_scale()
    if scale is None or scale.kind == "interval":
        raise ConfigError(f"cascade.stages: {judge.name}'s verdict ({protocol.name}) is "
                          f"{'no vote' if scale is None else 'a number on an interval scale'}; a cascade's "
                          "stages answer with a label or a grade that a human label can agree with")
    if len(judge.temperatures) != 1:
        raise ConfigError(f"{where}.temperatures: a cascade stage judges each item at one temperature "
                          f"(now {len(judge.temperatures)})")
    if jury is not None:
        if judge.repeats * _variants(protocol) != 1:
            raise ConfigError(f"{where}: a juror of the cascade stage {jury} asks one request per item (its "
                              f"protocol's variants and repeats make {judge.repeats * _variants(protocol)}); the "
                              "jury's confidence is the share of its jurors that agree")
        return
    if item_rule(judge, protocol) is None:
        raise ConfigError(f"{where}.confidence: a cascade stage needs a confidence to compare with its threshold: "
                          "confidence: logprobs (a model that gives token log-probs), or agreement with repeats: 3 "
                          "or more")


def _variants(protocol: Protocol) -> int:
    try:
        return len(protocol.variants({"id": ""}))
    except Exception:  # variants that need a real item: take them as several
        return 2


def _thresholds(cascade: CascadeConfig) -> Thresholds:
    try:
        thresholds = read_thresholds(cascade.thresholds)
    except CalibrationError as exc:
        raise ConfigError(f"cascade.thresholds: {exc} (judge-engine calibrate RUN_DIR ... --output "
                          f"{cascade.thresholds.name} writes it)") from None
    calibrated = [s.stage for s in thresholds.stages]
    if calibrated != list(cascade.stages):
        raise ConfigError(f"cascade.thresholds: {cascade.thresholds} was calibrated for the stages "
                          f"{', '.join(calibrated)}; the config's are {', '.join(cascade.stages)}: calibrate "
                          f"again with --stages {','.join(cascade.stages)}")
    if cascade.guarantee is not None and thresholds.kind != cascade.guarantee:
        raise ConfigError(f"cascade.guarantee: {cascade.guarantee}, but {cascade.thresholds} was calibrated under the "
                          f"{thresholds.kind} guarantee: calibrate again with --guarantee {cascade.guarantee}, or "
                          f"set guarantee: {thresholds.kind}")
    if all(s.threshold is None for s in thresholds.stages):
        advice = "; ".join(answering_advice(thresholds.document)) or "its report says how many each stage needs"
        raise ConfigError(f"cascade.thresholds: in {cascade.thresholds} no stage answers anything (no threshold "
                          f"passed its test), so the cascade would abstain on every item; calibrate on more items: "
                          f"{advice}")
    return thresholds


def _stage(config: JobConfig, protocols: Mapping[str, Protocol], name: str, thresholds: Thresholds,
           position: int) -> Stage:
    entry = thresholds.stages[position]
    reach = entry.offered / thresholds.items if thresholds.items and entry.threshold is not None else 0.0
    rate = (entry.offered - entry.answered) / entry.offered if entry.offered else None
    return dataclasses.replace(stage_shape(config, protocols, name), threshold=entry.threshold, reach=reach,
                               escalation_rate=rate)


def stage_shape(config: JobConfig, protocols: Mapping[str, Protocol], name: str) -> Stage:
    """Stage ``name`` of a config (a judge or a jury, checked by :func:`check_stages`), with no
    threshold: its kind, judges, deciding line and rule."""
    judges = {j.name: j for j in config.judges}
    jury = next((j for j in config.juries if j.name == name), None)
    if jury is not None:
        scale = protocols[jury.judges[0]].vote_scale()
        assert scale is not None
        first = judges[jury.judges[0]]
        return Stage(name, "jury", tuple(jury.judges), name, ItemRule("jury", scale), None, 0.0, None,
                     first.temperatures[0], "+".join(judges[j].model for j in jury.judges))
    judge, protocol = judges[name], protocols[name]
    several = decides_items(judge, protocol)
    rule = several if several is not None else item_rule(judge, protocol)
    assert rule is not None, "check_stages refuses a stage without a confidence"
    return Stage(name, "item" if several is not None else "judge", (name,),
                 item_judge(name) if several is not None else name, rule, None, 0.0, None,
                 judge.temperatures[0], judge.model)


# --- what a stage's line decides -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StageDecision:
    """What one stage decided about one item, and where that sends it."""

    stage: str
    route: Route
    prediction: Any = None
    """A label (the item's own terms) or a grade; None when the stage gave no decision."""
    confidence: float | None = None
    threshold: float | None = None
    code: str | None = None
    """Why there is no decision (the line's reason code), else None."""
    reason: str | None = None
    score: float | None = None
    cost: float = 0.0
    """What the stage's requests for the item cost."""
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        """As the cascade's outcome line records a stage asked (``verdict.asked``)."""
        entry: dict[str, Any] = {"stage": self.stage, "route": self.route, "prediction": self.prediction,
                                 "confidence": self.confidence, "threshold": self.threshold}
        if self.code is not None:
            entry["code"] = self.code
        entry["cost"] = round(self.cost, 8)
        return entry

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StageDecision:
        route = raw.get("route")
        return cls(str(raw.get("stage") or ""), route if route in ("answer", "escalate", "hold") else "escalate",
                   raw.get("prediction"), _number(raw.get("confidence")), _number(raw.get("threshold")),
                   None if raw.get("code") is None else str(raw["code"]), cost=float(raw.get("cost") or 0.0))


def decide(stage: Stage, line: OutcomeRecord) -> StageDecision:
    """What ``line`` (the stage's deciding outcome line for an item) decides, and the route: the
    stage's verdict stands when its confidence reaches the threshold (answer), the item goes on
    when the confidence is below it or the stage has no judgment of the item (escalate), and it
    waits at the stage when the line ended for a reason that is not about the answers (hold)."""
    base = StageDecision(stage.name, "escalate", threshold=stage.threshold, cost=line.cost, model=line.model)
    if stage.kind == "item":
        value = (line.confidence or {}).get("value")
        prediction = (line.verdict or {}).get("prediction") if line.scored else None
        return _routed(base, prediction, _number(value), line.reason_code, line.reason, line.score)
    if not line.scored and stage.kind == "judge" and line.reason_code not in VERDICT_CODES:
        return dataclasses.replace(base, route="hold", code=line.reason_code, reason=line.reason)
    if not line.scored and stage.kind == "jury" and (outage := _juror_outage(line)) is not None:
        return dataclasses.replace(base, route="hold", code=outage, reason=line.reason)
    decided = decide_item([line], stage.rule)
    code = None if decided.decided else str(decided.code)
    return _routed(base, decided.prediction, decided.confidence, code, decided.reason,
                   line.score if decided.decided else None)


def _routed(base: StageDecision, prediction: Any, confidence: float | None, code: str | None, reason: str | None,
            score: float | None) -> StageDecision:
    if code is None and prediction is not None and confidence is not None:
        threshold = base.threshold
        route: Route = "answer" if threshold is not None and confidence >= threshold else "escalate"
        return dataclasses.replace(base, route=route, prediction=prediction, confidence=confidence, score=score)
    route = "escalate" if code in ESCALATE_CODES or code == ReasonCode.JURY_INCOMPLETE else "hold"
    return dataclasses.replace(base, route=route, confidence=confidence, code=code, reason=reason)


def _juror_outage(line: OutcomeRecord) -> str | None:
    """A jury line's juror that ended for a reason that is not about its answer (its code)."""
    jurors = ((line.verdict or {}).get("jurors") or {}).values()
    return next((str(j.get("reason_code")) for j in jurors if isinstance(j, Mapping) and j.get("status") != "scored"
                 and j.get("reason_code") not in VERDICT_CODES), None)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)
