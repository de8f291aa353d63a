"""Fake answers to GEMBA-MQM prompts, original (``gemba-mqm``) and literary (``gemba-mqm-literary``).

Both prompts end with the item's translation in triple backticks; the fake picks 0-4 of its words
as error spans, with categories from the prompt's own list, and writes them in the GEMBA text
format (``no-error`` under empty sections) or as the JSON of :class:`MQMVerdict`. Those are the
item's true errors; a model finds them as its persona does (:func:`read_errors`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from judge_engine.fake.persona import TRUTH, Persona, persona
from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message
from judge_engine.protocols.gemba_mqm import SEVERITIES, MQMError, Severity

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
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = TRUTH
) -> str | None:
    """A ``gemba-mqm`` answer (JSON with non-ASCII characters escaped), or None."""
    last = last_turn(messages)
    if GEMBA_SIGNATURE not in last:
        return None
    errors = fake_errors(_target(last), seed=seed, temperature=temperature, categories=GEMBA_CATEGORIES, model=model)
    if json_mode:
        return json.dumps({"errors": [e.model_dump(exclude={"span_found"}) for e in errors]})
    return format_text_answer(errors)


def write_gemba_mqm_literary(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = TRUTH
) -> str | None:
    """A ``gemba-mqm-literary`` answer (JSON with non-ASCII characters as they are), or None."""
    last = last_turn(messages)
    if LITERARY_SIGNATURE not in last:
        return None
    errors = fake_errors(_target(last), seed=seed, temperature=temperature, categories=LITERARY_CATEGORIES, model=model)
    if json_mode:
        return json.dumps(
            {"errors": [e.model_dump(exclude={"span_found"}) for e in errors]}, ensure_ascii=False
        )
    return format_text_answer(errors)


def fake_errors(
    target: str, *, seed: int, temperature: float, categories: Sequence[str], model: str = TRUTH
) -> list[MQMError]:
    """Deterministic plausible errors in ``target``, as ``model`` finds them.

    The base annotation (the truth) depends on the item only; ``model`` reads it through its
    persona (:func:`read_errors`); with probability ``temperature / 2`` one error is added or
    dropped, so answers vary with temperature but never between identical requests.
    """
    words = [w.strip(".,;:!?\"'“”«»()") for w in target.split()] or ["text"]
    words = [w for w in words if w] or ["text"]
    judge = persona(model)
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
    errors = read_errors(errors, judge, judge.rng(seed, "mqm"), words=words, categories=categories)
    noise = judge.sampling(seed, temperature)
    if temperature > 0 and noise.random() < temperature / 2:
        if errors and noise.random() < 0.5:
            errors.pop(noise.randrange(len(errors)))
        else:
            errors.append(MQMError(severity="minor", category=noise.choice(categories), span=noise.choice(words)))
    return errors


_UP: dict[Severity, Severity] = {"minor": "major", "major": "critical", "critical": "critical"}
_DOWN: dict[Severity, Severity] = {"critical": "major", "major": "minor", "minor": "minor"}


def read_errors(truth: Sequence[MQMError], judge: Persona, rng: random.Random, *, words: Sequence[str],
                categories: Sequence[str]) -> list[MQMError]:
    """The true errors as ``judge`` reports them: some missed (more by a lenient judge), some
    misjudged by a severity (up for a harsh one) or a category, a span it invents now and then
    (more by a harsh judge). A weak model slips about 1.8 times as often as a mid one, a strong
    one 0.7 times; the truth reports them all as they are."""
    if judge.is_truth:
        return list(truth)
    found: list[MQMError] = []
    for error in truth:
        if rng.random() < judge.chance(0.15, lenient=0.6):
            continue
        severity, category = error.severity, error.category
        if rng.random() < judge.chance(0.2):
            severity = (_DOWN if rng.random() < 0.5 + 0.4 * judge.lean else _UP)[severity]
        if rng.random() < judge.chance(0.15):
            category = rng.choice(categories)
        found.append(MQMError(severity=severity, category=category, span=error.span))
    for _ in range(2):
        if rng.random() < judge.chance(0.2, lenient=-0.6):
            found.append(MQMError(severity=rng.choice(("minor", "minor", "major")), category=rng.choice(categories),
                                  span=rng.choice(words)))
    return found


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
