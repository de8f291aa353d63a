"""The cascade's outcome line: one per item, judge ``<cascade name>``, protocol ``cascade``.

============  ============================================================================
field         value
============  ============================================================================
status        ``scored``: a stage answered; ``unscored``: ``abstained`` (no stage was sure
              enough: the method working) or held at a stage (its line's code, e.g.
              ``item_incomplete``, ``transport_exhausted``: ``resume --retry`` asks again)
score         the answering stage's score for its verdict
verdict       ``stage`` (the stage that answered; None otherwise), ``prediction``,
              ``confidence``, ``threshold`` (the answering stage's), ``held_at`` (the stage
              an item waits at), ``not_asked`` (stages with no threshold) and ``asked``: every
              stage asked, in order, ``{stage, route, prediction, confidence, threshold,
              code, cost}``
confidence    ``{"method": "cascade", "value", "stage", "threshold"}``
cost          what every stage asked spent on the item
model         the answering (or last asked) stage's model
============  ============================================================================

The line's task id is the cascade's name and the item's id: a later line for the item (after
``resume --retry`` of a held item) supersedes the earlier one, as for any task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge_engine.errors import ReasonCode
from judge_engine.rundir.records import OutcomeRecord
from judge_engine.rundir.store import utc_now
from judge_engine.trust.cascade.stages import CascadePlan, StageDecision
from judge_engine.util import cascade_words as words
from judge_engine.util.cascade_words import compared
from judge_engine.util.jsonio import content_hash

CASCADE_PROTOCOL = "cascade"
"""The ``protocol`` of a cascade's outcome lines."""
CASCADE_VERSION = "1"


def cascade_task_id(name: str, item_id: str) -> str:
    """The task id of cascade ``name``'s line for ``item_id``."""
    return content_hash({"cascade": name, "item": item_id})


def cascade_record(plan: CascadePlan, item_id: str, row: int | None, asked: Sequence[StageDecision]) -> OutcomeRecord:
    """The cascade's line for an item whose last asked stage's decision is ``asked[-1]``: answered
    there, held there, or (an escalation from the last asked stage) abstained."""
    last = asked[-1]
    answered = last.route == "answer"
    verdict: dict[str, Any] = {
        "stage": last.stage if answered else None,
        "prediction": last.prediction if answered else None,
        "confidence": last.confidence if answered else None,
        "threshold": last.threshold if answered else None,
        "held_at": last.stage if last.route == "hold" else None,
        "asked": [decision.to_dict() for decision in asked],
        "not_asked": [s.name for s in plan.stages if not s.asked],
    }
    if answered:
        code, reason = None, None
    elif last.route == "hold":
        code = last.code or str(ReasonCode.ITEM_INCOMPLETE)
        reason = f"held at stage {last.stage}: {last.reason or last.code} (resume --retry asks it again)"
    else:
        code = str(ReasonCode.ABSTAINED)
        reason = "no stage was sure enough: " + "; ".join(_why(d) for d in asked)
    confidence = {"method": "cascade", "value": last.confidence if answered else None,
                  "stage": last.stage if answered else None, "threshold": last.threshold if answered else None}
    return OutcomeRecord(
        task_id=cascade_task_id(plan.name, item_id), item_id=item_id, judge=plan.name, protocol=CASCADE_PROTOCOL,
        protocol_version=CASCADE_VERSION, model=last.model, temperature=0.0, repeat=0, variant="",
        status="scored" if answered else "unscored", score=last.score if answered else None, verdict=verdict,
        reason=reason, reason_code=code, cost=round(sum(d.cost for d in asked), 8), at=utc_now(), row=row,
        row_tasks=1, confidence=confidence,
    )


def _why(decision: StageDecision) -> str:
    if decision.code is not None:
        return f"{decision.stage} gave no decision ({decision.code})"
    confidence, threshold = compared(decision.confidence, decision.threshold)
    return f"{decision.stage} {confidence} < {threshold}"


@dataclass(frozen=True, slots=True)
class CascadeLine:
    """A cascade outcome line as readers see it (``stats``, ``show``, the viewer)."""

    item_id: str
    stage: str | None
    """The stage that answered; None when abstained or held."""
    prediction: Any
    confidence: float | None
    threshold: float | None
    code: str | None
    """``abstained``, a hold's code, or None (answered)."""
    held_at: str | None
    asked: tuple[StageDecision, ...]
    cost: float

    @property
    def abstained(self) -> bool:
        return self.code == ReasonCode.ABSTAINED

    @property
    def held(self) -> bool:
        return self.held_at is not None

    @classmethod
    def read(cls, record: OutcomeRecord) -> CascadeLine:
        verdict: Mapping[str, Any] = record.verdict or {}
        asked = tuple(StageDecision.from_dict(a) for a in verdict.get("asked") or () if isinstance(a, Mapping))
        stage = verdict.get("stage")
        held = verdict.get("held_at")
        return cls(record.item_id, None if stage is None else str(stage), verdict.get("prediction"),
                   _float(verdict.get("confidence")), _float(verdict.get("threshold")),
                   None if record.scored else record.reason_code, None if held is None else str(held), asked,
                   record.cost)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def describe(record: OutcomeRecord, guarantee: str | None = None) -> str:
    """A cascade line in one sentence (``show``), in the cascade's words: ``cascade (stage
    guarantee): answered by mid: A at confidence 0.9700 >= 0.9000; asked: cheap 0.8200 < 0.9500
    (escalated), mid 0.9700 >= 0.9000 (answered)``; ``guarantee``: the guarantee the cascade runs
    under, as said (:func:`~judge_engine.util.cascade_words.guarantee_name`; None: not said)."""
    line = CascadeLine.read(record)
    name = f"cascade ({guarantee})" if guarantee else "cascade"
    if line.stage is not None:
        confidence, threshold = compared(line.confidence, line.threshold)
        head = f"{name}: {words.ANSWERED} by {line.stage}: {line.prediction} at confidence {confidence} >= {threshold}"
    elif line.held:
        head = f"{name}: {words.HELD} at {line.held_at} ({line.code}: an outage there; resume --retry asks again)"
    else:
        head = f"{name}: {words.ABSTAINED} (no stage was sure enough)"
    steps = []
    abstained = line.stage is None and not line.held
    for position, step in enumerate(line.asked):
        then = words.then_word(step.route, last_of_abstained=abstained and position == len(line.asked) - 1)
        if step.code is not None:
            steps.append(f"{step.stage} no decision ({step.code}: {then})")
        else:
            confidence, threshold = compared(step.confidence, step.threshold)
            sign = ">=" if step.route == "answer" else "<"
            steps.append(f"{step.stage} {confidence} {sign} {threshold} ({then})")
    not_asked = (record.verdict or {}).get("not_asked") or []
    tail = f"; {words.NOT_ASKED}: {', '.join(map(str, not_asked))}" if not_asked else ""
    return f"{head}; asked: {', '.join(steps)}{tail}"
