"""Fake answers to the close-reading prompts (``novel-spans``, ``nonpragmatic-spans``, zero- or
few-shot): 0-4 expressions that are real substrings of the passage, each with a justification.

A prompt is recognised by the text of the protocol's template before the passage; the passage
is the rest of the prompt. The zero-shot novelty prompt shows one bare object as its example,
so models answer it with objects separated by blank lines: its fake does too, to keep that
parser path exercised. Every other answer is one JSON list (``{"expressions": [...]}`` in JSON
mode).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from functools import cache
from typing import Literal

from judge_engine import templating
from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message
from judge_engine.protocols.close_reading import CloseReading, NonPragmaticSpans, NovelSpans

_TOKEN = re.compile(r"\S+")
_REASONS = (
    "An unexpected image in this context.",
    "The phrase stands out from its surroundings.",
    "It reads oddly next to the previous sentence.",
    "An unusual word choice for the narrator's voice.",
)


def write_novel_spans(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool
) -> str | None:
    """A ``novel-spans`` answer, or None."""
    return _write(NovelSpans, messages, seed=seed, temperature=temperature, json_mode=json_mode)


def write_nonpragmatic_spans(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool
) -> str | None:
    """A ``nonpragmatic-spans`` answer, or None."""
    return _write(NonPragmaticSpans, messages, seed=seed, temperature=temperature, json_mode=json_mode)


def _write(
    protocol: type[CloseReading],
    messages: Sequence[Message],
    *,
    seed: int,
    temperature: float,
    json_mode: bool,
) -> str | None:
    last = last_turn(messages)
    shots: Literal["zero", "few"]
    for shots in ("few", "zero"):
        prefix = _prefix(protocol.template_for(shots))
        if last.startswith(prefix):
            break
    else:
        return None
    records = fake_expressions(last[len(prefix) :], seed=seed, temperature=temperature)
    if json_mode:
        return json.dumps({"expressions": records}, ensure_ascii=False)
    if protocol is NovelSpans and shots == "zero" and records:
        return "\n\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    return json.dumps(records, ensure_ascii=False)


@cache
def _prefix(template: str) -> str:
    """The prompt text before the passage."""
    return templating.render(template, passage="")


def fake_expressions(passage: str, *, seed: int, temperature: float) -> list[dict[str, str]]:
    """Deterministic expressions that are real substrings of ``passage`` (2-6 words each).

    The base choice depends on ``seed`` only; with probability ``temperature / 2`` one expression
    is added or dropped, so answers vary with temperature but never between identical requests.
    """
    tokens = list(_TOKEN.finditer(passage))
    if not tokens:
        return []
    base = random.Random(seed)
    records = [_span(passage, tokens, base) for _ in range(base.choice((0, 1, 2, 2, 3, 4)))]
    noise = random.Random(f"{seed}:{temperature}")
    if temperature > 0 and noise.random() < temperature / 2:
        if records and noise.random() < 0.5:
            records.pop(noise.randrange(len(records)))
        else:
            records.append(_span(passage, tokens, noise))
    return records


def _span(passage: str, tokens: list[re.Match[str]], rng: random.Random) -> dict[str, str]:
    first = rng.randrange(len(tokens))
    last = min(first + rng.randint(1, 5), len(tokens) - 1)
    return {
        "expression": passage[tokens[first].start() : tokens[last].end()],
        "justification": rng.choice(_REASONS),
    }
