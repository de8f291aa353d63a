"""Fake answers to Prometheus prompts: absolute (feedback + a score) and relative (feedback + A|B).

Absolute: the score is drawn on the scale the prompt names ("an integer between 1 and 5"),
favouring its upper half as real judges do; the answer starts with ``Feedback:`` when the prompt's
wording does. Relative: the same response text wins whichever side it is shown on.

Those are the item's truth; a model reads it through its persona
(:mod:`judge_engine.fake.persona`): an absolute score moved by its lean and noise, a relative
verdict flipped on the pairs it misjudges (in both orders alike) and now and then, more for a
weak model, the first response preferred whatever it says.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence

from judge_engine.fake.persona import TRUTH, persona
from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message, stable_seed
from judge_engine.protocols.prometheus_parse import Winner

ABSOLUTE_SIGNATURE = "a score rubric representing a evaluation criteria are given"
RELATIVE_SIGNATURE = "two responses to evaluate (denoted as Response A and Response B)"

_SCALE = re.compile(r"write a score that is an integer between (\d+) and (\d+)\.")
_FEEDBACK = (
    "The response follows the instruction and meets most of the rubric's expectations; it earns {score} of {high}.",
    "The response addresses the criteria unevenly: some parts are precise, others vague, so it earns {score}.",
    "Measured against the rubric, the response is mostly adequate but misses details; {score} fits best.",
)
_COMPARISONS = (
    "Both responses address the instruction, but Response {winner} is more precise and complete.",
    "The responses share a structure; Response {winner} follows the criteria more closely.",
    "Response {winner} handles the key point of the instruction better, while the other stays vague.",
)


def write_absolute(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = TRUTH
) -> str | None:
    """A ``prometheus-absolute`` answer, or None."""
    last = last_turn(messages)
    scale = _SCALE.search(last)
    if ABSOLUTE_SIGNATURE not in last or scale is None:
        return None
    low, high = int(scale.group(1)), int(scale.group(2))
    base = random.Random(seed)
    # Judges favour the upper middle of a scale (LitEval: Prometheus gave 4 of 6 to 55%).
    score = base.choice([s for s in range(low, high + 1) for _ in range(1 + (s > (low + high) / 2))])
    judge = persona(model)
    score = min(high, max(low, score + judge.steps(judge.rng(seed, "absolute"))))
    noise = judge.sampling(seed, temperature)
    if temperature > 0 and noise.random() < temperature / 2:
        score = min(high, max(low, score + noise.choice((-1, 1))))
    feedback = base.choice(_FEEDBACK).format(score=score, high=high)
    if json_mode:
        return json.dumps({"feedback": feedback, "score": score})
    prefix = "Feedback: " if '"Feedback: (write a feedback' in last else ""
    return f"{prefix}{feedback} [RESULT] {score}"


def write_relative(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = TRUTH
) -> str | None:
    """A ``prometheus-relative`` answer, or None."""
    last = last_turn(messages)
    if RELATIVE_SIGNATURE not in last:
        return None
    shown_a = _section(last, "###Response A:\n")
    shown_b = _section(last, "###Response B:\n")
    # The same text wins whichever side it is shown on, so a greedy fake judge is position
    # consistent; sampling noise (temperature / 2) flips some verdicts, as real judges do.
    winner: Winner = "A" if stable_seed(shown_a) >= stable_seed(shown_b) else "B"
    judge = persona(model)
    misjudged = judge.rng(stable_seed(*sorted((shown_a, shown_b))), "relative")  # the pair's, in either order
    if misjudged.random() < judge.chance(0.15):
        winner = "B" if winner == "A" else "A"
    if judge.rng(seed, "primacy").random() < judge.chance(0.05):
        winner = "A"
    noise = judge.sampling(seed, temperature)
    if temperature > 0 and noise.random() < temperature / 2:
        winner = "B" if winner == "A" else "A"
    feedback = random.Random(seed).choice(_COMPARISONS).format(winner=winner)
    if json_mode:
        return json.dumps({"feedback": feedback, "winner": winner})
    return f"Feedback: {feedback} [RESULT] {winner}"


def _section(prompt: str, header: str) -> str:
    start = prompt.find(header)
    if start == -1:
        return ""
    start += len(header)
    end = prompt.find("\n\n###", start)
    return prompt[start : end if end != -1 else None]
