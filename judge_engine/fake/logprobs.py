"""How sure, and how right, the fake server's judge is; and the token log-probs it answers with.

**A judge of the model's strength.** For a verdict the fake can find in its answer (``[[A]]``,
``[RESULT] 4``, a JSON ``score`` or ``winner``), the answer writers' verdict is the item's
*truth*; the judge's belief over the accepted values is a softmax of logits
``-1.5 * |value - truth|`` (labels: 0 for the truth, -1.5 otherwise) plus Gaussian noise drawn
per item and model (so a judge is consistently unsure about the same items) and a little per
request (so simulated annotators differ). At temperature 0 it writes the value it believes
most, otherwise it samples from its belief, and its log-probs at the verdict are that belief: it
is more often right when it is confident, as a real judge is. The noise's scale follows the
model's name (:func:`strength`): ``mini``, ``nano``, ``haiku``, ``flash``, ``small``, ``7b``,
``8b``, ``3.5`` are weak (sigma 1.8: ~72% right on two labels), ``gpt-4``, ``opus``, ``sonnet``,
``pro``, ``large``, ``70b``, ``405b`` strong (0.7: ~94%), the rest in between (1.0: ~86%).

This judge answers every ``pairwise-annotators`` request, and every request that asks for
log-probs; any other request gets the answer writers' verdict as it is, so every earlier use of
the fake server (tests, demos, benchmarks) answers as before.

**Which models give log-probs.** As the real providers: none for a name containing ``claude``
(Anthropic), an o-series name (``o1``, ``o3-mini``, ``o4-mini``) or ``gpt-5`` (OpenAI's
reasoning models); those answer with ``"logprobs": null`` even when asked.

**Tokens.** A word with its leading space, a run of punctuation, ``[[`` and ``]]`` are tokens;
a number is one token, except for a name containing ``gemini`` (one token per digit, as Gemini
writes numbers), so a score of 10 is then two tokens. Every token comes with its log-prob, its
bytes and ``top_logprobs`` alternatives in OpenAI's shape; away from the verdict the
alternatives are plausible fillers (another digit for a digit elsewhere in the text).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judge_engine.protocols.base import Message, stable_seed

_NO_LOGPROBS = re.compile(r"claude|(?:^|[/_.\-])o[1-9](?:$|[-_.])|gpt-5", re.IGNORECASE)
_WEAK = ("mini", "nano", "haiku", "flash", "small", "7b", "8b", "3.5", "lite")
_STRONG = ("gpt-4", "opus", "sonnet", "pro", "large", "70b", "405b")
SIGMA = {"weak": 1.8, "mid": 1.0, "strong": 0.7}
MARGIN = 1.5
"""The truth's logit advantage per step of distance."""
PER_REQUEST = 0.35
"""The noise one request adds to the item's (simulated annotators differ a little)."""

_LABEL = re.compile(r"\[\[([AB])\]\]")
_RESULT = re.compile(r"\[RESULT\]\s*([AB]|\d+)\s*$")
_JSON = re.compile(r'"(score|winner)"\s*:\s*"?([AB]|\d+)"?')
_SCALE = re.compile(r"(?:between|from) (\d+) (?:and|to) (\d+)")
_TOKENS = re.compile(r"\[\[|\]\]|\[RESULT\]| ?[A-Za-z]+| ?\d+|\s+|[^\sA-Za-z\d]")
_FILLERS = (" the", " a", " and", " of", " to", ".", ",", " is", " it", " this")


def gives_logprobs(model: str) -> bool:
    """Whether the fake answers ``model`` with log-probs when asked (see the module docstring)."""
    return _NO_LOGPROBS.search(model) is None


def strength(model: str) -> str:
    """``weak``, ``mid`` or ``strong``, from the model's name."""
    name = model.lower()
    if _named(name, _WEAK):
        return "weak"
    return "strong" if _named(name, _STRONG) else "mid"


def _named(name: str, words: tuple[str, ...]) -> bool:
    """Whether a word starts a part of the name: ``mini`` in ``gpt-4o-mini``, not in ``gemini``."""
    return any(re.search(rf"(?<![a-z0-9]){re.escape(word)}", name) for word in words)


@dataclass(frozen=True, slots=True)
class Belief:
    """Where the verdict is in an answer, the value written there, and the judge's belief."""

    start: int
    end: int
    chosen: str
    probs: dict[str, float]


def judge(content: str, messages: Sequence[Message], *, model: str, seed: int, temperature: float,
          item_key: str) -> tuple[str, Belief | None]:
    """The answer as the model's judge writes it, and its belief (None: no verdict found)."""
    found = _verdict(content)
    if found is None:
        return content, None
    start, end, truth = found
    values = _values(truth, messages)
    item = random.Random(f"{stable_seed(item_key)}:{model}")
    request = random.Random(f"{seed}:{model}:request")
    sigma = SIGMA[strength(model)]
    # The item's noise belongs to a value's meaning, not to where it is shown: a label's to
    # "the truth" or "not", a score's to the number, so both orders of a pair share one belief.
    item_noise = {key: item.gauss(0, 1) for key in (["truth", "other"] if not truth.isdigit() else values)}
    logits = {v: -MARGIN * _distance(v, truth) + sigma * item_noise[v if truth.isdigit() else
                                                                     ("truth" if v == truth else "other")]
              + PER_REQUEST * request.gauss(0, 1) for v in values}
    probs = _softmax(logits)
    if temperature <= 0:
        chosen = max(probs, key=lambda v: probs[v])
    else:
        scaled = _softmax({v: logit / temperature for v, logit in logits.items()})
        chosen = random.Random(f"{seed}:{model}:{temperature}").choices(list(scaled), list(scaled.values()))[0]
    return content[:start] + chosen + content[end:], Belief(start, start + len(chosen), chosen, probs)


def _verdict(content: str) -> tuple[int, int, str] | None:
    for pattern, group in ((_LABEL, 1), (_RESULT, 1), (_JSON, 2)):
        match = pattern.search(content)
        if match is not None:
            return match.start(group), match.end(group), match.group(group)
    return None


def _values(truth: str, messages: Sequence[Message]) -> list[str]:
    if not truth.isdigit():
        return ["A", "B"]
    scale = _SCALE.search(messages[-1]["content"] if messages else "")
    low, high = (int(scale.group(1)), int(scale.group(2))) if scale else (1, 5 if int(truth) <= 5 else 10)
    if not low <= int(truth) <= high:
        low, high = min(low, int(truth)), max(high, int(truth))
    return [str(v) for v in range(low, high + 1)]


def _distance(value: str, truth: str) -> float:
    if value.isdigit() and truth.isdigit():
        return abs(int(value) - int(truth))
    return float(value != truth)


def _softmax(logits: dict[str, float]) -> dict[str, float]:
    top = max(logits.values())
    weights = {v: math.exp(logit - top) for v, logit in logits.items()}
    total = sum(weights.values())
    return {v: w / total for v, w in weights.items()}


# --- tokens and their log-probs ------------------------------------------------------------------------


def tokenize(text: str, model: str) -> list[str]:
    """The fake tokenizer (see the module docstring); the tokens spell ``text`` exactly."""
    tokens = [m.group() for m in _TOKENS.finditer(text)]
    if "gemini" in model.lower():
        split: list[str] = []
        for token in tokens:
            digits = token.lstrip()
            if digits.isdigit() and len(digits) > 1:
                split += [token[: len(token) - len(digits) + 1], *digits[1:]]
            else:
                split.append(token)
        tokens = split
    assert "".join(tokens) == text, "the fake tokenizer must spell the answer"
    return tokens


def logprobs_content(text: str, model: str, top: int, belief: Belief | None, seed: int) -> list[dict[str, Any]]:
    """``choices[0].logprobs.content`` for ``text``: every token with its log-prob, bytes and
    ``top`` alternatives; at the verdict, the judge's belief."""
    noise = random.Random(f"{seed}:{model}:tokens")
    entries = []
    offset = 0
    for token in tokenize(text, model):
        if belief is not None and offset <= belief.start < offset + len(token) + (not token):
            alternatives = _at_verdict(token, offset, belief)
        elif belief is not None and belief.start < offset < belief.end:
            alternatives = _continuing(text[belief.start:offset], token, belief)
        else:
            alternatives = _filler(token, noise)
        alternatives = alternatives[:max(1, top)]
        own = next((lp for alt, lp in alternatives if alt == token), math.log(0.5))
        entries.append({"token": token, "logprob": round(own, 6), "bytes": list(token.encode()),
                        "top_logprobs": [{"token": alt, "logprob": round(lp, 6), "bytes": list(alt.encode())}
                                         for alt, lp in alternatives]})
        offset += len(token)
    return entries


def _at_verdict(token: str, offset: int, belief: Belief) -> list[tuple[str, float]]:
    """The first token of the verdict: each value's first token (its whole self, or its first
    digit when the number is written digit by digit), with the belief summed per token."""
    lead = token[: belief.start - offset]
    written = token[len(lead):]
    per_digit = len(written) < len(belief.chosen)
    grouped: dict[str, float] = {}
    for value, p in belief.probs.items():
        shown = lead + (value[: len(written)] if per_digit else value)
        grouped[shown] = grouped.get(shown, 0.0) + p
    return sorted(((alt, math.log(max(p, 1e-12))) for alt, p in grouped.items()), key=lambda x: -x[1])


def _continuing(prefix: str, token: str, belief: Belief) -> list[tuple[str, float]]:
    """A later digit of a number written digit by digit: the values that go on from ``prefix``."""
    going = {v: p for v, p in belief.probs.items() if v.startswith(prefix)}
    total = sum(going.values()) or 1.0
    grouped: dict[str, float] = {}
    for value, p in going.items():
        shown = value[len(prefix): len(prefix) + 1] or "\n"
        grouped[shown] = grouped.get(shown, 0.0) + p / total
    if token not in grouped:
        grouped[token] = 1e-6
    return sorted(((alt, math.log(max(p, 1e-12))) for alt, p in grouped.items()), key=lambda x: -x[1])


def _filler(token: str, noise: random.Random) -> list[tuple[str, float]]:
    """A token away from the verdict: itself, likely, and a few plausible others."""
    stripped = token.strip()
    own = noise.uniform(0.97, 0.999) if stripped in ("[[", "]]", "[RESULT]") else noise.uniform(0.6, 0.99)
    if stripped.isdigit():
        others = [token.replace(stripped, str((int(stripped) + k) % 10)) for k in range(1, 10)]
    else:
        others = [f for f in _FILLERS if f != token]
    rest = 1.0 - own
    alternatives = [(token, math.log(own))]
    for index, other in enumerate(others):
        share = rest / (2 ** (index + 1))
        alternatives.append((other, math.log(max(share, 1e-12))))
    return alternatives
