"""Reading a verdict's confidence from the answer's token log-probs, at the verdict's position.

The parser says where it read each value of the verdict (:meth:`Protocol.verdict_spans
<judge_engine.protocols.base.Protocol.verdict_spans>`), and the protocol reads each accepted
value's probability there (:meth:`Protocol.read_probabilities
<judge_engine.protocols.base.Protocol.read_probabilities>`, by default the token rule of
:mod:`judge_engine.protocols.verdict_spans`). This module makes a task's confidence of those
readings. A value absent from the top log-probs has probability 0, so the probabilities need
not sum to 1: their sum is kept as ``mass``. The probability-weighted score of a closed integer scale
(G-Eval) renormalises over the scale: sum of v * p(v) / sum of p(v).

A verdict of several values (TTCT's twelve questions, a custom judge's fields) is as sure as its
least sure value: its confidence is their minimum, each value's reading kept under ``fields``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from judge_engine._moved import moved_names
from judge_engine.protocols.base import Item, Protocol
from judge_engine.protocols.verdict_spans import VerdictSpan, chosen_value
from judge_engine.util.logprobs import TokenLogprob

METHOD = "logprobs"
DIGITS = 6
"""Decimals a probability is written with."""


@dataclass(frozen=True, slots=True)
class TaskConfidence:
    """What an answer's log-probs say of its verdict: the outcome's ``confidence`` and, for a
    closed integer scale, the weighted score."""

    record: Mapping[str, Any]
    """The outcome line's ``confidence``."""
    weighted: float | None = None
    """The probability-weighted score (None when the protocol has none, or no value of the
    scale is among the top log-probs)."""


def read_task_confidence(protocol: Protocol, verdict: BaseModel, answer: str, tokens: Sequence[TokenLogprob],
                         item: Item, variant: str = "") -> TaskConfidence:
    """The confidence of one answer's verdict, from its (kept) tokens."""
    spans = protocol.verdict_spans(answer, item, variant)
    if not spans:
        return TaskConfidence({"method": METHOD, "value": None, "problem": "the parser found no verdict to read"})
    fields: dict[str, dict[str, Any]] = {}
    expected: dict[str, float] = {}
    for span in spans:
        reading = _field_reading(protocol, span, answer, tokens)
        fields[span.field] = reading
        if reading.get("weighted") is not None:
            expected[span.field] = float(reading["weighted"])
    numeric = [s.field for s in spans if s.numeric]
    weighted = None
    if numeric and all(name in expected for name in numeric):
        weighted = protocol.weighted_score(verdict, expected, item, variant)
    values = [f.get("value") for f in fields.values()]
    value = None if any(v is None for v in values) else min(float(v) for v in values if v is not None)
    record: dict[str, Any] = {"method": METHOD, "value": value}
    if len(fields) == 1:
        record.update(next(iter(fields.values())))
    else:
        record["fields"] = fields
    record["value"] = value
    if weighted is not None:
        record["weighted"] = round(weighted, DIGITS)
    return TaskConfidence(record, weighted)


def _field_reading(protocol: Protocol, span: VerdictSpan, answer: str,
                   tokens: Sequence[TokenLogprob]) -> dict[str, Any]:
    written = protocol.read_probabilities(span, tokens)
    if written is None:
        return {"value": None, "problem": "the answer's log-probs at the verdict were not kept"}
    probs: dict[str, float] = {}
    for shown, p in written.items():
        key = str(span.values[shown])
        probs[key] = probs.get(key, 0.0) + p
    chosen = chosen_value(span, answer)
    reading: dict[str, Any] = {
        "verdict": span.values[chosen] if chosen is not None else answer[span.start:span.end],
        "value": round(probs.get(str(span.values[chosen]), 0.0), DIGITS) if chosen is not None else None,
        "probs": {key: round(p, DIGITS) for key, p in probs.items()},
        "mass": round(sum(probs.values()), DIGITS),
    }
    if span.numeric:
        total = sum(p * float(span.values[shown]) for shown, p in written.items())
        mass = sum(written.values())
        reading["weighted"] = round(total / mass, DIGITS) if mass > 0 else None
    return reading


if not TYPE_CHECKING:  # names of 0.1 that moved (a type checker reads the new homes)
    __getattr__ = moved_names(__name__, {
        "json_value_span": "judge_engine.protocols.verdict_spans",
        "value_probabilities": "judge_engine.protocols.verdict_spans",
    })
