"""CDAT's reference points: the Random baseline drawn from the lexicon, and the scoring of any
stored word lists (baselines, human answers) exactly as a run scores a model's list.

The Random baseline is ten random WordNet nouns per cue: single-word, lower-case, non-numeric noun
lemmas, drawn with ``random.sample`` from one entry per (synset, lemma), as the paper's
``generate_random_baseline.py`` draws them; the paper ran without a seed, here the seed is
required so a baseline can be drawn again.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from judge_engine.embeddings import Embedder, Vectors, appropriateness, novelty
from judge_engine.lexicon import Lexicon, default_lexicon
from judge_engine.protocols.word_lists import CheckedList, check_words

RANDOM_LIST_SIZE = 10


@dataclass(frozen=True, slots=True)
class WordList:
    """One list of words, for a cue (CDAT) or none (DAT)."""

    cue: str | None
    words: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ScoredList:
    """A list's validity and scores (None when fewer than seven words are valid).

    Attributes:
        valid_count: unique valid words (the paper's ``valid_count``), before the first-7 cut.
    """

    cue: str | None
    words: tuple[str, ...]
    valid_words: tuple[str, ...]
    valid_count: int
    novelty: float | None
    appropriateness: float | None


def random_baseline(cues: Sequence[str], *, seed: int, lexicon: Lexicon | None = None,
                    size: int = RANDOM_LIST_SIZE) -> list[WordList]:
    """The Random baseline for ``cues``: ``size`` random nouns each, reproducible from ``seed``."""
    population = (lexicon or default_lexicon()).nouns()
    rng = random.Random(seed)
    return [WordList(cue, tuple(rng.sample(population, size))) for cue in cues]


def score_lists(lists: Sequence[WordList], *, lexicon: Lexicon, embedder: Embedder | None) -> list[ScoredList]:
    """Validity and scores of many lists, all their words embedded in one batched call.

    Without an embedder only validity is computed (scores None).
    """
    checked = [check_words(wl.words, lexicon) for wl in lists]
    vectors: dict[str, Vectors] = {}
    if embedder is not None:
        texts = list(dict.fromkeys(
            text for wl, c in zip(lists, checked, strict=True)
            for text in (*c.scored, *([wl.cue] if wl.cue is not None and c.scorable else []))
        ))
        vectors = dict(zip(texts, embedder.embed(texts), strict=True)) if texts else {}
    return [_scored(wl, c, vectors) for wl, c in zip(lists, checked, strict=True)]


def _scored(wl: WordList, checked: CheckedList, vectors: dict[str, Vectors]) -> ScoredList:
    nov = app = None
    if checked.scorable and vectors:
        words = np.stack([vectors[w] for w in checked.scored])
        nov = novelty(words)
        if wl.cue is not None:
            app = appropriateness(vectors[wl.cue], words)
    return ScoredList(wl.cue, wl.words, checked.valid, len(checked.valid), nov, app)

