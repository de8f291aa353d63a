"""Fake answers to GEMBA-MQM prompts, original (``gemba-mqm``) and literary (``gemba-mqm-literary``).

Both prompts end with the item's translation in triple backticks; the fake picks 0-4 of its words
as error spans, with categories from the prompt's own list, and writes them in the GEMBA text
format (``no-error`` under empty sections) or as the JSON of :class:`MQMVerdict`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message
from judge_engine.protocols.gemba_mqm import SEVERITIES, MQMError

# Words only the original task prompt has (the literary prompt shares the rest of it).
GEMBA_SIGNATURE = "fluency (character encoding, grammar, inconsistency, punctuation, register, spelling)"
LITERARY_SIGNATURE = "including too-literal translation and temporal effect"

GEMBA_CATEGORIES = (
    "accuracy/mistranslation",
    "accuracy/omission",
    "accuracy/addition",
    "fluency/grammar",
    "fluency/punctuation",
    "style/awkward",
    "terminology/inappropriate for context",
)
LITERARY_CATEGORIES = (
    "accuracy/mistranslation (too-literal)",
    "accuracy/mistranslation (temporal effect)",
    "accuracy/omission",
    "accuracy/misnomer",
    "fluency/coherence",
    "fluency/grammar",
    "style/unidiomatic",
    "style/register",
    "terminology/inappropriate for context",
    "locale convention",
)


def write_gemba_mqm(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool
) -> str | None:
    """A ``gemba-mqm`` answer (JSON with non-ASCII characters escaped), or None."""
    last = last_turn(messages)
    if GEMBA_SIGNATURE not in last:
        return None
    errors = fake_errors(_target(last), seed=seed, temperature=temperature, categories=GEMBA_CATEGORIES)
    if json_mode:
        return json.dumps({"errors": [e.model_dump(exclude={"span_found"}) for e in errors]})
    return format_text_answer(errors)


def write_gemba_mqm_literary(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool
) -> str | None:
    """A ``gemba-mqm-literary`` answer (JSON with non-ASCII characters as they are), or None."""
    last = last_turn(messages)
    if LITERARY_SIGNATURE not in last:
        return None
    errors = fake_errors(_target(last), seed=seed, temperature=temperature, categories=LITERARY_CATEGORIES)
    if json_mode:
        return json.dumps(
            {"errors": [e.model_dump(exclude={"span_found"}) for e in errors]}, ensure_ascii=False
        )
    return format_text_answer(errors)


def fake_errors(
    target: str, *, seed: int, temperature: float, categories: Sequence[str]
) -> list[MQMError]:
    """Deterministic plausible errors in ``target``.

    The base annotation depends on the item only; with probability ``temperature / 2`` one error
    is added or dropped, so answers vary with temperature but never between identical requests.
    """
    words = [w.strip(".,;:!?\"'“”«»()") for w in target.split()] or ["text"]
    words = [w for w in words if w] or ["text"]
    base = random.Random(seed)
    count = base.choice((0, 1, 1, 2, 2, 3, 4))
    errors = [
        MQMError(
            severity=base.choice(("major", "minor", "minor", "minor", "critical")),
            category=base.choice(categories),
            span=base.choice(words),
        )
        for _ in range(count)
    ]
    noise = random.Random(f"{seed}:{temperature}")
    if temperature > 0 and noise.random() < temperature / 2:
        if errors and noise.random() < 0.5:
            errors.pop(noise.randrange(len(errors)))
        else:
            errors.append(MQMError(severity="minor", category=noise.choice(categories), span=noise.choice(words)))
    return errors


def format_text_answer(errors: Sequence[MQMError]) -> str:
    """Write errors in the GEMBA text format (``no-error`` under empty sections)."""
    lines: list[str] = []
    for severity in SEVERITIES:
        lines.append(f"{severity.capitalize()}:")
        found = [e for e in errors if e.severity == severity]
        lines.extend(f'{e.category} - "{e.span}"' for e in found)
        if not found:
            lines.append("no-error")
    return "\n".join(lines) + "\n"


def _target(prompt: str) -> str:
    """The translation in the prompt's last ``translation:`` block ("" when there is none)."""
    opening = "translation:\n```"
    begin = prompt.rfind(opening)
    if begin == -1:
        return ""
    begin += len(opening)
    end = prompt.find("```", begin)
    return prompt[begin : end if end != -1 else None]
