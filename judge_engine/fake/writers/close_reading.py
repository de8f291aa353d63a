"""Fake answers to the close-reading prompts (``novel-spans``, ``nonpragmatic-spans``, zero- or
few-shot): 0-4 expressions that are real substrings of the passage, each with a justification.

A prompt is recognised by the text of the protocol's template before the passage; the passage
is the rest of the prompt. The zero-shot novelty prompt shows one bare object as its example,
so models answer it with objects separated by blank lines: its fake does too, to keep that
parser path exercised. Every other answer is one JSON list (``{"expressions": [...]}`` in JSON
mode).

The expressions drawn from the prompt's seed are the passage's truth; a model finds them through
its persona (:mod:`judge_engine.fake.persona`): it misses some (a lenient reader more), cuts
some a word shorter or longer, and marks others of its own (a harsh reader more).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from functools import cache
from typing import Literal

from judge_engine.fake.persona import TRUTH, Persona, persona
from judge_engine.fake.writers import last_turn
from judge_engine.protocols import templating
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
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = TRUTH
) -> str | None:
    """A ``novel-spans`` answer, or None."""
    return _write(NovelSpans, messages, seed=seed, temperature=temperature, json_mode=json_mode, model=model)


def write_nonpragmatic_spans(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = TRUTH
) -> str | None:
    """A ``nonpragmatic-spans`` answer, or None."""
    return _write(NonPragmaticSpans, messages, seed=seed, temperature=temperature, json_mode=json_mode, model=model)


def _write(
    protocol: type[CloseReading],
    messages: Sequence[Message],
    *,
    seed: int,
    temperature: float,
    json_mode: bool,
    model: str,
) -> str | None:
    last = last_turn(messages)
    shots: Literal["zero", "few"]
    for shots in ("few", "zero"):
        prefix = _prefix(protocol.template_for(shots))
        if last.startswith(prefix):
            break
    else:
        return None
    records = fake_expressions(last[len(prefix) :], seed=seed, temperature=temperature, model=model)
    if json_mode:
        return json.dumps({"expressions": records}, ensure_ascii=False)
    if protocol is NovelSpans and shots == "zero" and records:
        return "\n\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    return json.dumps(records, ensure_ascii=False)


@cache
def _prefix(template: str) -> str:
    """The prompt text before the passage."""
    return templating.render(template, passage="")


def fake_expressions(passage: str, *, seed: int, temperature: float, model: str = TRUTH) -> list[dict[str, str]]:
    """Deterministic expressions that are real substrings of ``passage`` (2-6 words each).

    The base choice (the truth) depends on ``seed`` only; ``model`` finds it as its persona
    does; with probability ``temperature / 2`` one expression is added or dropped, so answers
    vary with temperature but never between identical requests.
    """
    tokens = list(_TOKEN.finditer(passage))
    if not tokens:
        return []
    base = random.Random(seed)
    spans = [_bounds(tokens, base) for _ in range(base.choice((0, 1, 2, 2, 3, 4)))]
    judge = persona(model)
    records = [_record(passage, tokens, span) for span in _found(spans, tokens, judge, judge.rng(seed, "spans"))]
    noise = judge.sampling(seed, temperature)
    if temperature > 0 and noise.random() < temperature / 2:
        if records and noise.random() < 0.5:
            records.pop(noise.randrange(len(records)))
        else:
            records.append(_span(passage, tokens, noise))
    return records


def _found(truth: list[tuple[int, int, str]], tokens: list[re.Match[str]], judge: Persona,
           rng: random.Random) -> list[tuple[int, int, str]]:
    """The true spans as ``judge`` finds them (the truth finds them all, as they are)."""
    if judge.is_truth:
        return truth
    found = []
    for first, last, reason in truth:
        if rng.random() < judge.chance(0.2, lenient=0.6):
            continue
        if rng.random() < judge.chance(0.2):  # a word more or less at one end
            last = min(len(tokens) - 1, max(first + 1, last + rng.choice((-1, 1))))
        found.append((first, last, reason))
    for _ in range(2):
        if rng.random() < judge.chance(0.2, lenient=-0.6):
            found.append(_bounds(tokens, rng))
    return found


def _bounds(tokens: list[re.Match[str]], rng: random.Random) -> tuple[int, int, str]:
    """A span's first and last token, and the justification it is given."""
    first = rng.randrange(len(tokens))
    last = min(first + rng.randint(1, 5), len(tokens) - 1)
    return first, last, rng.choice(_REASONS)


def _record(passage: str, tokens: list[re.Match[str]], span: tuple[int, int, str]) -> dict[str, str]:
    first, last, reason = span
    return {"expression": passage[tokens[first].start() : tokens[last].end()], "justification": reason}


def _span(passage: str, tokens: list[re.Match[str]], rng: random.Random) -> dict[str, str]:
    return _record(passage, tokens, _bounds(tokens, rng))
