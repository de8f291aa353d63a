"""Word-list answers for the fake server (CDAT and DAT prompts): a deterministic function of the
request's seed and temperature, shaped like real models' answers.

Most answers are ten nouns in one of the shapes models use (numbered, numbered with a short
explanation, one per line, comma-separated, a preamble before a numbered list); some hold too few
nouns to be scored (adverbs and adjectives that neither WordNet nor the tagger reads as nouns);
a few are refusals with no list at all. Higher temperatures swap more everyday nouns for rarer
ones, so a demo's novelty rises with temperature as a real model's does.

The fake knows a few semantic fields (:data:`FIELDS`: the sea, the sky, music, weather, the
kitchen, the garden). For a cue in one of them, part of the list comes from the field, more at
low temperatures and nearly all of it for the Common prompt ("most semantically associated"), so
a demo shows what the method measures: associated lists score higher appropriateness and lower
novelty, and a model moves towards the Random baseline as its temperature rises. Other cues get
lists that ignore them (``release`` in the tests), exactly as before the fields existed.

Each model writes its own lists (its name is part of the seed) and has its own bent, its
persona's lean (:mod:`judge_engine.fake.persona`): a model with a positive lean is more
associative (up to 0.15 more of a field's words, a little fewer rare ones), one with a negative
lean more divergent, so two models land on different points of the appropriateness-novelty plane.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from judge_engine.fake.persona import TRUTH, persona
from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message, stable_seed
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

FIELDS: tuple[tuple[frozenset[str], tuple[str, ...]], ...] = (
    (frozenset({"sea", "ocean", "sailor", "tide", "voyage", "coast"}),
     ("wave", "shell", "ship", "sail", "fish", "beach", "sand", "seagull", "port", "buoy", "net", "whale")),
    (frozenset({"sky", "space", "star", "astronomy", "night"}),
     ("moon", "planet", "comet", "orbit", "sun", "meteor", "constellation", "cosmos", "darkness", "dawn",
      "twilight", "stargazer")),
    (frozenset({"music", "song", "concert", "band"}),
     ("melody", "piano", "drum", "choir", "guitar", "rhythm", "harmony", "orchestra", "chord", "tune",
      "singer", "flute")),
    (frozenset({"weather", "storm", "winter", "climate"}),
     ("rain", "cloud", "lightning", "wind", "snow", "hail", "fog", "frost", "sleet", "blizzard", "gale",
      "drizzle")),
    (frozenset({"kitchen", "recipe", "breakfast", "meal", "cooking"}),
     ("bread", "soup", "spoon", "oven", "flour", "butter", "pan", "salt", "spice", "egg", "knife", "plate")),
    (frozenset({"garden", "gardener", "flower"}),
     ("rose", "seed", "soil", "tulip", "petal", "bee", "leaf", "root", "blossom", "stem", "rake", "sprout")),
)
"""Semantic fields: the cues that call one up, and twelve nouns of it (WordNet 3.0 nouns, none of
them in :data:`EVERYDAY`, :data:`RARE` or a field's cues, so a list never repeats a word)."""
COMMON_PROMPT = "most semantically associated"
"""In the Common baseline's prompt only."""

SHAPES = ("numbered", "explained", "lines", "commas", "preamble", "too_few", "refusal")
_WEIGHTS = (30, 15, 15, 15, 10, 10, 5)


def answer_shape(seed: int) -> str:
    """Which shape the answer with this seed takes (one of :data:`SHAPES`)."""
    return random.Random(seed).choices(SHAPES, weights=_WEIGHTS)[0]


def field_of(cue: str | None) -> tuple[str, ...]:
    """The nouns of the semantic field ``cue`` calls up (empty: none)."""
    key = (cue or "").strip().lower()
    return next((words for cues, words in FIELDS if key in cues), ())


def associated_share(temperature: float, *, common: bool = False, lean: float = 0.0) -> float:
    """The chance that a word of the list comes from the cue's field: 0.95 for the Common
    prompt; for CDAT ``0.8 - 0.4 * temperature`` (0.6 at 0.5, 0.2 at 1.5) plus ``0.15 * lean``
    (the model's bent), within [0, 1]."""
    return 0.95 if common else min(1.0, max(0.0, 0.8 - 0.4 * temperature + 0.15 * lean))


def fake_words(seed: int, temperature: float, count: int = 10, *, field: Sequence[str] = (),
               associated: float = 0.0, lean: float = 0.0) -> list[str]:
    """``count`` distinct nouns; each is a rare one with probability
    ``0.15 + temperature / 4 - 0.05 * lean``, then replaced by a word of ``field`` with
    probability ``associated``."""
    rng = random.Random(f"{seed}:words")
    everyday, rare = rng.sample(EVERYDAY, count), rng.sample(RARE, count)
    share = min(1.0, max(0.0, 0.15 + temperature / 4 - 0.05 * lean))
    words = [rare[i] if rng.random() < share else everyday[i] for i in range(count)]
    if field:  # a draw of its own: lists for cues outside the fields stay as they were
        near = random.Random(f"{seed}:field")
        chosen = near.sample(list(field), count)
        words = [chosen[i] if near.random() < associated else word for i, word in enumerate(words)]
    return words


def fake_word_list(cue: str | None, *, seed: int, temperature: float, common: bool = False,
                   model: str = TRUTH) -> str:
    """The fake model's answer to a CDAT (``cue``) or DAT (``cue=None``) prompt; ``common``:
    the Common baseline's prompt; ``model``: who writes it (its own lists, its own bent)."""
    writer = persona(model)
    if not writer.is_truth:
        seed = stable_seed(seed, writer.name)
    shape = answer_shape(seed)
    rng = random.Random(f"{seed}:shape")
    field = field_of(cue)
    associated = associated_share(temperature, common=common, lean=writer.lean)
    drawn = fake_words(seed, temperature, field=field, associated=associated, lean=writer.lean)
    words = [w.capitalize() if rng.random() < 0.5 else w for w in drawn]
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


def write_cdat(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool,
               model: str = TRUTH) -> str | None:
    """The fake model's word list for a CDAT prompt (any of its prompt options), else None."""
    prompt = last_turn(messages)
    match = CUE_IN_PROMPT.search(prompt) if prompt.startswith(PROMPT_START) else None
    if match is None:
        return None
    return fake_word_list(match.group("cue"), seed=seed, temperature=temperature, common=COMMON_PROMPT in prompt,
                          model=model)


def write_dat(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool,
              model: str = TRUTH) -> str | None:
    """The fake model's word list for a DAT prompt (or its task-aware baseline), else None."""
    prompt = last_turn(messages)
    if not prompt.startswith(PROMPT_START) or "cue word" in prompt:
        return None
    return fake_word_list(None, seed=seed, temperature=temperature, model=model)
