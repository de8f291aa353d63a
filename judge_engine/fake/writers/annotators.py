"""Fake answers to ``pairwise-annotators`` prompts: ``[[A]]`` or ``[[B]]``, within its 10 tokens.

The writer's answer is the item's truth: the response whose text hashes higher is preferred
(:func:`preferred`, in the pair's own labels), whichever side it is shown on, so it does not
depend on the annotator or the order. The fake server then answers as a judge of the model's
strength would (:mod:`judge_engine.fake.logprobs`): right more often when it is sure, with
log-probs at the label when asked.
"""

from __future__ import annotations

from collections.abc import Sequence

from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message, stable_seed

SIGNATURE = "Given an instruction and two assistant's responses to the instruction, an annotator chose"
_QUERY = "\n[Instruction]\n"


def preferred(instruction: str, response_a: str, response_b: str) -> str:
    """The truth the fake's annotators judge against: ``A`` or ``B`` (an item's own labels).
    A demo's human labels can be drawn from it."""
    return "A" if stable_seed(response_a) >= stable_seed(response_b) else "B"


def query(messages: Sequence[Message]) -> tuple[str, str, str] | None:
    """The pair a ``pairwise-annotators`` prompt asks about: (instruction, shown A, shown B)."""
    last = last_turn(messages)
    if not last.startswith(SIGNATURE) or _QUERY not in last:
        return None
    section = last[last.rindex(_QUERY) + len(_QUERY):]
    instruction, _, rest = section.partition("\n\n[Assistant A's response]\n")
    first, _, rest = rest.partition("\n\n[Assistant B's response]\n")
    second, _, _ = rest.partition("\n\n[Preferred response]")
    return instruction, first, second


def item_key(messages: Sequence[Message]) -> str | None:
    """The same for both orders and every annotator of one pair."""
    found = query(messages)
    return None if found is None else "\x1f".join([found[0], *sorted(found[1:])])


def write_annotator(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool) -> str | None:
    """A ``pairwise-annotators`` answer, or None."""
    found = query(messages)
    if found is None:
        return None
    return f"[[{preferred(*found)}]]"
