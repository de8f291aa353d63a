"""Fake answers to the TTCT creativity prompt: a 1-5 rating for each of the twelve questions,
one ``Q<n>: <rating>`` line each, or the JSON object ``{"q1": ..., "q12": ...}``. A model reads
each dimension through its persona (:mod:`judge_engine.fake.persona`): its lean and noise move the
dimension's ratings together, and a question now and then on its own."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from judge_engine.fake.persona import TRUTH, persona
from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message
from judge_engine.protocols.ttct import DIMENSIONS

SIGNATURE = "Torrance Tests of Creative Thinking (TTCT)"


def write_ttct(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = TRUTH
) -> str | None:
    """A ``ttct`` answer, or None."""
    if SIGNATURE not in last_turn(messages):
        return None
    ratings = fake_ratings(seed=seed, temperature=temperature, model=model)
    if json_mode:
        return json.dumps(ratings)
    return "".join(f"{q.upper()}: {r}\n" for q, r in ratings.items())


def fake_ratings(*, seed: int, temperature: float, model: str = TRUTH) -> dict[str, int]:
    """Deterministic ratings: a level per dimension, each question within one point of it (the
    truth), as ``model`` reads them; with temperature, each rating moves one point with
    probability ``t / 3``."""
    base = random.Random(seed)
    judge = persona(model)
    reading = judge.rng(seed, "ttct")
    noise = judge.sampling(seed, temperature)
    ratings: dict[str, int] = {}
    for questions in DIMENSIONS.values():
        level = base.randint(2, 4)
        moved = round(judge.shift(reading))  # a dimension's ratings move together
        for question in questions:
            rating = level + base.choice((-1, 0, 0, 1)) + moved
            if reading.random() < judge.chance(0.1):
                rating += reading.choice((-1, 1))
            if temperature > 0 and noise.random() < temperature / 3:
                rating += noise.choice((-1, 1))
            ratings[question] = min(5, max(1, rating))
    return ratings
