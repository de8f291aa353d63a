"""Fixtures for CDAT/DAT: a lexicon written for the tests, and the real lexicon and embedder
when their optional extras are installed (the tests that need them skip otherwise)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest

from judge_engine.protocols.embeddings import Embedder, minilm_problem
from judge_engine.protocols.lexicon import Lexicon, LexiconUnavailable, PackagedLexicon


class SetLexicon:
    """A lexicon whose nouns are the words given: tests say exactly which words count."""

    name = "test-set"

    def __init__(self, nouns: Iterable[str]) -> None:
        self._nouns = tuple(nouns)

    def is_noun(self, word: str) -> bool:
        return word in self._nouns

    def nouns(self) -> Sequence[str]:
        return self._nouns


@pytest.fixture(scope="session")
def packaged_lexicon() -> Lexicon:
    """WordNet 3.0 + tagger from the ``cdat`` extra; skips when it is not installed."""
    try:
        lexicon = PackagedLexicon()
    except LexiconUnavailable as exc:
        pytest.skip(str(exc))
    return lexicon


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    """all-MiniLM-L6-v2 from the ``embeddings`` extra; skips when it is not installed."""
    problem = minilm_problem()
    if problem:
        pytest.skip(problem)
    from judge_engine.protocols.embeddings import get_embedder

    return get_embedder("minilm")
