"""Reading a verdict's confidence from the answer's token log-probs, at the verdict's position.

The parser says where it read each value of the verdict (:meth:`Protocol.verdict_spans
<judge_engine.protocols.base.Protocol.verdict_spans>`: the score after ``[RESULT]``, the label
after ``[[``, a JSON field's value) and which values it accepts there; this module maps those
characters to the answer's tokens (by each token's character offset) and reads, among the top
log-probs at that position, the probability of every accepted value. A digit anywhere else in
the answer is never read.

**The rule, value by value.** The first token of the span may carry characters before it (a
token `` 4`` for the span ``4``): an alternative at that position is read with the same
characters removed, or with its leading whitespace removed (``5`` and `` 5`` both mean 5); a
token that runs past the span (``4.``) is read with the same tail removed. Then a value's
probability is the sum, over the alternatives that spell it, of:

- an alternative that spells the whole value: its probability, times the probability that the
  value ends there when the answer itself went on from that token (1 minus the probability of
  the alternatives at the next position that would continue it: a digit after ``1`` makes
  ``10``); when the alternative is not the answer's own token, what would follow it was never
  generated, and the value is taken to end there (``1`` is 1, not the start of 10);
- an alternative that spells the start of the value: followed only along the answer's own
  tokens (``1`` then ``0`` for 10, as Gemini writes numbers digit by digit), multiplying the
  probabilities position by position; a start the answer did not take cannot be followed, and
  adds nothing.

A value absent from the top log-probs has probability 0 (so the probabilities need not sum to
1: their sum is kept as ``mass``). The probability-weighted score of a closed integer scale
(G-Eval) renormalises over the scale: sum of v * p(v) / sum of p(v).

A verdict of several values (TTCT's twelve questions, a custom judge's fields) is as sure as its
least sure value: its confidence is their minimum, each value's reading kept under ``fields``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from judge_engine.protocols.base import Item, Protocol, VerdictSpan
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


def value_probabilities(span: VerdictSpan, tokens: Sequence[TokenLogprob]) -> dict[str, float] | None:
    """Each accepted value's probability at ``span`` (values as written), or None when the
    tokens at the span were not kept (an answer read by another parser than the one that kept
    them). See the module docstring for the rule."""
    first = _token_at(tokens, span.start)
    if first is None:
        return None
    token = tokens[first]
    lead = token.token[: max(0, span.start - token.offset)]
    tail = token.token[span.end - token.offset:] if _end(token) > span.end else ""
    return {written: _spelled(tokens, first, written, lead, tail) for written in span.values}


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
    chosen = _chosen(span, answer)
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


def _chosen(span: VerdictSpan, answer: str) -> str | None:
    """The accepted value the answer wrote at the span (compared without case as parsers do)."""
    shown = answer[span.start:span.end].strip()
    if shown in span.values:
        return shown
    folded = {key.casefold(): key for key in span.values}
    return folded.get(shown.casefold())


def _end(token: TokenLogprob) -> int:
    return token.offset + len(token.token)


def _token_at(tokens: Sequence[TokenLogprob], char: int) -> int | None:
    for index, token in enumerate(tokens):
        if token.offset <= char < max(_end(token), token.offset + 1):
            return index
    return None


def _next(tokens: Sequence[TokenLogprob], index: int) -> int | None:
    """The token right after ``index`` in the answer, if it was kept."""
    following = index + 1
    if following < len(tokens) and tokens[following].offset == _end(tokens[index]):
        return following
    return None


def _alternatives(token: TokenLogprob) -> list[tuple[str, float]]:
    """The top log-probs at a token's position, with the token itself when a provider left it out."""
    seen = dict(token.top)
    if token.token not in seen:
        seen[token.token] = token.logprob
    return list(seen.items())


def _spelled(tokens: Sequence[TokenLogprob], index: int, value: str, lead: str = "", tail: str = "") -> float:
    """The probability that the answer writes ``value`` from token ``index`` on."""
    own = tokens[index].token
    total = 0.0
    for alternative, logprob in _alternatives(tokens[index]):
        text = _trimmed(alternative, lead, tail)
        p = math.exp(logprob)
        if text == value:
            ends = _ends_after(tokens, index) if alternative == own and not tail else 1.0
            total += p * ends
        elif text and value.startswith(text) and alternative == own and not tail:
            following = _next(tokens, index)
            if following is not None:
                total += p * _spelled(tokens, following, value[len(text):])
    return total


def _trimmed(alternative: str, lead: str, tail: str) -> str:
    text = alternative[len(lead):] if lead and alternative.startswith(lead) else alternative.lstrip()
    if tail and text.endswith(tail):
        text = text[: -len(tail)]
    return text.strip()


def _ends_after(tokens: Sequence[TokenLogprob], index: int) -> float:
    """The probability that a value ends after the answer's own token ``index``: 1 minus the
    alternatives at the next position that would continue the word (a letter or a digit)."""
    following = _next(tokens, index)
    if following is None:
        return 1.0
    going_on = sum(math.exp(lp) for alt, lp in _alternatives(tokens[following]) if alt[:1].isalnum())
    return max(0.0, 1.0 - going_on)


_JSON_TOKENS = re.compile(r'"(?:\\.|[^"\\])*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def json_value_span(text: str, field: str) -> tuple[int, int] | None:
    """The characters of a top-level JSON field's value in ``text`` (a string's without its
    quotes), found by walking the JSON's tokens, so a field name quoted inside another value
    (feedback that says ``"score": 3``) is never taken for the field. Keys compare without case."""
    depth = 0
    previous: tuple[str, int, int] | None = None
    wanted = field.casefold()
    found_key = False
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if found_key:
            if token == ":":
                continue
            if token.startswith('"'):
                return match.start() + 1, match.end() - 1
            return (match.start(), match.end()) if token not in "{}[]," else None
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
        elif token == ":" and depth == 1 and previous is not None and previous[0].startswith('"'):
            found_key = previous[0][1:-1].casefold() == wanted
        previous = (token, match.start(), match.end())
    return None
