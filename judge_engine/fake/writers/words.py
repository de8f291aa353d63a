"""Word-list answers for the fake server (CDAT and DAT prompts): a deterministic function of the
request's seed and temperature, shaped like real models' answers.

Most answers are ten nouns in one of the shapes models use (numbered, numbered with a short
explanation, one per line, comma-separated, a preamble before a numbered list); some hold too few
nouns to be scored (adverbs and adjectives that neither WordNet nor the tagger reads as nouns);
a few are refusals with no list at all. Higher temperatures swap more everyday nouns for rarer
ones, so a demo's novelty rises with temperature as a real model's does.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message
from judge_engine.protocols.cdat import CUE_IN_PROMPT, PROMPT_START

EVERYDAY = (
    "anchor", "lantern", "river", "harvest", "violin", "compass", "orchard", "thunder", "ladder",
    "candle", "mirror", "feather", "marble", "bridge", "meadow", "kettle", "blanket", "engine",
    "forest", "ribbon", "saddle", "tunnel", "puzzle", "garden", "hammer", "island", "jacket",
    "keyboard", "lemon", "magnet", "needle", "ocean", "pebble", "quilt", "rocket", "shadow",
    "teapot", "umbrella", "valley", "window", "zipper", "balloon", "cactus", "desert", "festival",
    "granite", "harbor", "iceberg", "bamboo", "coral", "cinnamon", "whisper", "kite", "yarn",
)
"""Concrete nouns every model names (all WordNet 3.0 nouns)."""
RARE = (
    "glacier", "volcano", "archive", "dragon", "echo", "fossil", "galaxy", "horizon", "igloo",
    "jungle", "labyrinth", "mosaic", "nectar", "oracle", "parachute", "quarry", "riddle",
    "satellite", "telescope", "universe", "vortex", "walrus", "xylophone", "zenith", "alloy",
    "beacon", "cathedral", "dune", "ember", "fjord", "geyser", "hive", "jasmine", "kiln",
    "lullaby", "monsoon", "nebula", "opera", "prism", "quartz", "reef", "symphony", "utopia",
    "velvet", "wreath", "asteroid", "eclipse", "lighthouse",
)
"""Less expected nouns (all WordNet 3.0 nouns), drawn more often at higher temperatures."""
NOT_NOUNS = (
    "quickly", "slowly", "happily", "beautiful", "tangible", "artistic", "political", "mental",
    "crooked", "smelly", "hypocritical", "jealous", "curious", "humble", "loyal", "nervous",
    "obvious", "peaceful", "wooden", "golden", "silently", "rarely", "seldom", "loudly",
)
"""Words the packaged lexicon rejects: no WordNet noun sense and not tagged NN/NNS alone."""
REFUSALS = (
    "I'm sorry, but I can't help with that.",
    "I cannot produce such a list.",
)
"""Answers with no list: read as whitespace-split prose, they leave 3-4 nouns ("sorry", "help",
"list"...). A longer refusal can pass: "As an AI, I do not have personal associations." has
seven words WordNet or the tagger takes for nouns, and the method would score it."""

SHAPES = ("numbered", "explained", "lines", "commas", "preamble", "too_few", "refusal")
_WEIGHTS = (30, 15, 15, 15, 10, 10, 5)


def answer_shape(seed: int) -> str:
    """Which shape the answer with this seed takes (one of :data:`SHAPES`)."""
    return random.Random(seed).choices(SHAPES, weights=_WEIGHTS)[0]


def fake_words(seed: int, temperature: float, count: int = 10) -> list[str]:
    """``count`` distinct nouns; each is a rare one with probability ``0.15 + temperature / 4``."""
    rng = random.Random(f"{seed}:words")
    everyday, rare = rng.sample(EVERYDAY, count), rng.sample(RARE, count)
    share = min(1.0, 0.15 + temperature / 4)
    return [rare[i] if rng.random() < share else everyday[i] for i in range(count)]


def fake_word_list(cue: str | None, *, seed: int, temperature: float) -> str:
    """The fake model's answer to a CDAT (``cue``) or DAT (``cue=None``) prompt."""
    shape = answer_shape(seed)
    rng = random.Random(f"{seed}:shape")
    words = [w.capitalize() if rng.random() < 0.5 else w for w in fake_words(seed, temperature)]
    if shape == "refusal":
        return rng.choice(REFUSALS)
    if shape == "too_few":
        nouns = rng.randint(3, 6)
        words = words[:nouns] + rng.sample(NOT_NOUNS, 10 - nouns)
        rng.shuffle(words)
        return "".join(f"{i}. {w}\n" for i, w in enumerate(words, start=1))
    if shape == "explained":
        about = f"the {cue}" if cue else "the others"
        return "".join(f"{i}. {w} - unlike {about}\n" for i, w in enumerate(words, start=1))
    if shape == "lines":
        return "\n".join(words)
    if shape == "commas":
        return ", ".join(words)
    numbered = "\n".join(f"{i}. {w}" for i, w in enumerate(words, start=1))
    if shape == "preamble":
        topic = f"associated with “{cue}”" if cue else "as different as possible"
        return f"Here are 10 nouns {topic}:\n\n{numbered}\n\nEach word reaches a different meaning."
    return numbered


def write_cdat(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool) -> str | None:
    """The fake model's word list for a CDAT prompt (any of its prompt options), else None."""
    prompt = last_turn(messages)
    match = CUE_IN_PROMPT.search(prompt) if prompt.startswith(PROMPT_START) else None
    return None if match is None else fake_word_list(match.group("cue"), seed=seed, temperature=temperature)


def write_dat(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool) -> str | None:
    """The fake model's word list for a DAT prompt (or its task-aware baseline), else None."""
    prompt = last_turn(messages)
    if not prompt.startswith(PROMPT_START) or "cue word" in prompt:
        return None
    return fake_word_list(None, seed=seed, temperature=temperature)
