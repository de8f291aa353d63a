"""The Random baseline drawn from the lexicon, and the paper's stored baselines and human lists
recomputed from their words (``../shared/data/cdat``; skips without it or without the extras)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from benchmarks.cdat_baselines import (
    SETS,
    StoredList,
    compare,
    decided_by_the_tagger,
    load_lists,
    rejected_a_word,
)
from judge_engine.protocols.cdat_baselines import WordList, random_baseline, score_lists
from judge_engine.protocols.embeddings import Embedder
from judge_engine.protocols.lexicon import PackagedLexicon
from tests.protocols.cdat.conftest import SetLexicon

POPULATION = [f"noun{i:03d}" for i in range(100)]


def test_the_random_baseline_draws_ten_nouns_per_cue_reproducibly() -> None:
    lexicon = SetLexicon(POPULATION)
    lists = random_baseline(["release", "outset"], seed=7, lexicon=lexicon)
    rng = random.Random(7)  # the original's draw: random.sample(population, 10) per cue, in order
    assert lists == [WordList("release", tuple(rng.sample(POPULATION, 10))), WordList("outset", tuple(rng.sample(POPULATION, 10)))]
    assert random_baseline(["release"], seed=7, lexicon=lexicon)[0] == lists[0]
    assert random_baseline(["release"], seed=8, lexicon=lexicon)[0] != lists[0]


def test_random_lists_from_wordnet_are_valid_nouns(packaged_lexicon: PackagedLexicon) -> None:
    lists = random_baseline([f"cue{i}" for i in range(20)], seed=1, lexicon=packaged_lexicon)
    scored = score_lists(lists, lexicon=packaged_lexicon, embedder=None)
    # A list can repeat a word (the population has one entry per sense), so 9 is possible too.
    assert all(s.valid_count >= 9 and s.novelty is None for s in scored)
    assert all(w in packaged_lexicon.nouns() for wl in lists for w in wl.words)


EXPECTED_AGREEMENT = {
    # set: (lists, valid count agrees, lists with a non-noun, of which agree)
    "random": (550, 550, 14, 14),
    "common": (550, 535, 60, 45),
    "human": (104, 93, 38, 27),
}
"""Measured with the packaged lexicon; every disagreement is a word NLTK's tagger model tags
otherwise (listed by ``python benchmarks/cdat_baselines.py``)."""


_LOADED: dict[Path, dict[str, list[StoredList]]] = {}


@pytest.fixture
def stored(shared_data: Path) -> dict[str, list[StoredList]]:
    """The stored lists, read once per session."""
    if shared_data not in _LOADED:
        _LOADED[shared_data] = load_lists(shared_data / "cdat")
    return _LOADED[shared_data]


def test_valid_counts_agree_with_the_papers_as_measured(stored: dict[str, list[StoredList]],
                                                        packaged_lexicon: PackagedLexicon) -> None:
    wordnet_only = PackagedLexicon(tagger=False)
    for name in SETS:
        lists = [WordList(s.cue, s.words) for s in stored[name]]
        ours = score_lists(lists, lexicon=packaged_lexicon, embedder=None)
        alone = score_lists(lists, lexicon=wordnet_only, embedder=None)
        full, _ = compare(stored[name], ours, alone, packaged_lexicon)
        assert (full.lists, full.valid_agree, full.nonnoun_lists, full.nonnoun_agree) == EXPECTED_AGREEMENT[name], name


@pytest.mark.slow
def test_scores_reproduce_the_stored_sbert_scores(stored: dict[str, list[StoredList]],
                                                  packaged_lexicon: PackagedLexicon, minilm: Embedder) -> None:
    """Every human list and every fifth baseline list (the benchmark scores all of them): where
    the valid words agree, novelty and appropriateness agree to the stored float32 precision."""
    for name in SETS:
        sample = stored[name] if name == "human" else stored[name][::5]
        ours = score_lists([WordList(s.cue, s.words) for s in sample], lexicon=packaged_lexicon, embedder=minilm)
        full, _ = compare(sample, ours, ours, packaged_lexicon)
        assert full.scored_both >= (89 if name == "human" else 0.95 * len(sample)), name
        assert full.novelty_max < 1e-4 and full.appropriateness_max < 1e-4, name


def test_the_lists_where_the_original_rejected_a_word(stored: dict[str, list[StoredList]],
                                                      packaged_lexicon: PackagedLexicon) -> None:
    """36 lists hold a word the original code rejected as a non-noun; 17 agree. Each of the 19
    others turns on words WordNet has no noun for (the tagger decides them alone)."""
    rejecting = [s for name in SETS for s in stored[name] if rejected_a_word(s)]
    ours = score_lists([WordList(s.cue, s.words) for s in rejecting], lexicon=packaged_lexicon, embedder=None)
    differ = [s for s, o in zip(rejecting, ours, strict=True) if s.valid_count != o.valid_count]
    assert (len(rejecting), len(rejecting) - len(differ)) == (36, 17)
    assert all(decided_by_the_tagger(s, packaged_lexicon) for s in differ)
