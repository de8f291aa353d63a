"""Fake answers to the TTCT creativity prompt: a 1-5 rating for each of the twelve questions,
one ``Q<n>: <rating>`` line each, or the JSON object ``{"q1": ..., "q12": ...}``."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message
from judge_engine.protocols.ttct import DIMENSIONS

SIGNATURE = "Torrance Tests of Creative Thinking (TTCT)"


def write_ttct(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool
) -> str | None:
    """A ``ttct`` answer, or None."""
    if SIGNATURE not in last_turn(messages):
        return None
    ratings = fake_ratings(seed=seed, temperature=temperature)
    if json_mode:
        return json.dumps(ratings)
    return "".join(f"{q.upper()}: {r}\n" for q, r in ratings.items())


def fake_ratings(*, seed: int, temperature: float) -> dict[str, int]:
    """Deterministic ratings: a level per dimension, each question within one point of it; with
    temperature, each rating moves one point with probability ``t / 3``."""
    base = random.Random(seed)
    noise = random.Random(f"{seed}:{temperature}")
    ratings: dict[str, int] = {}
    for questions in DIMENSIONS.values():
        level = base.randint(2, 4)
        for question in questions:
            rating = level + base.choice((-1, 0, 0, 1))
            if temperature > 0 and noise.random() < temperature / 3:
                rating += noise.choice((-1, 1))
            ratings[question] = min(5, max(1, rating))
    return ratings
