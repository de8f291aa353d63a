"""Fake answers to best-worst scaling prompts: ``Best: <label>`` / ``Worst: <label>``, or the JSON
``{"best": ..., "worst": ...}``, picked from the translations the prompt shows: the truth's picks,
or a model's, that sees each candidate's quality through its persona's noise
(:mod:`judge_engine.fake.persona`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from judge_engine.fake.persona import TRUTH, persona
from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message, stable_seed
from judge_engine.protocols.bws import MIN_CANDIDATES

SIGNATURE = "choose the single best translation and the single worst"
_SHOWN = re.compile(r'^Translation ([A-Z]):\n"""\n(.*?)\n"""$', re.DOTALL | re.MULTILINE)


def write_bws(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = TRUTH
) -> str | None:
    """A ``bws`` answer, or None (also for a prompt that shows fewer than two translations)."""
    last = last_turn(messages)
    if SIGNATURE not in last:
        return None
    shown: list[tuple[str, str]] = _SHOWN.findall(last)
    if len(shown) < MIN_CANDIDATES:
        return None
    best, worst = fake_picks(shown, seed=seed, temperature=temperature, model=model)
    if json_mode:
        return json.dumps({"best": best, "worst": worst})
    return f"Best: {best}\nWorst: {worst}\n"


def fake_picks(
    shown: Sequence[tuple[str, str]], *, seed: int, temperature: float, model: str = TRUTH
) -> tuple[str, str]:
    """Deterministic picks among ``(label, text)``: quality is a hash of each text (so the same
    candidate wins under every order), seen by ``model`` with its noise (a candidate's rank moved
    by a draw of the model's own for that text, so it too picks alike in every order), with a
    mild primacy bias (``A`` is picked best in about one request in eight) and, with
    temperature, an occasional random pick."""
    judge = persona(model)
    by_quality = sorted(shown, key=lambda pair: stable_seed("fake-bws-quality", pair[1]))
    seen = {text: rank + judge.noise * judge.rng(stable_seed("fake-bws-quality", text), "bws").gauss(0, 1)
            for rank, (_, text) in enumerate(by_quality)}
    ranked = sorted(by_quality, key=lambda pair: seen[pair[1]])
    best, worst = ranked[-1][0], ranked[0][0]
    rng = judge.sampling(seed, temperature)
    if rng.random() < 0.125:
        best = shown[0][0]
    if temperature > 0 and rng.random() < temperature / 3:
        best = rng.choice(shown)[0]
    if worst == best:
        worst = next(label for label, _ in ranked if label != best)
    return best, worst
