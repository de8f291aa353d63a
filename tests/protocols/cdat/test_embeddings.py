"""Novelty and appropriateness on hand-made vectors, the embedder seam, and all-MiniLM-L6-v2
against a list the paper scored (skips without ``judge-engine[embeddings]``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from judge_engine.protocols import embeddings
from judge_engine.protocols.embeddings import (
    INSTALL_HINT,
    Embedder,
    EmbeddingsUnavailable,
    Vectors,
    appropriateness,
    cosine_distances,
    embedder_problem,
    get_embedder,
    list_scores,
    minilm_problem,
    novelty,
)

E1, E2, E3 = [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]


def vectors(*rows: Sequence[float]) -> Vectors:
    return np.asarray(rows, dtype=np.float32)


def test_novelty_is_100_times_the_mean_pairwise_cosine_distance() -> None:
    # d(E1,E2) = 1 - 0 = 1, d(E1,E3) = 1 - (-1) = 2, d(E2,E3) = 1: mean 4/3, x100.
    assert novelty(vectors(E1, E2, E3)) == pytest.approx(400 / 3)
    # Lengths do not matter, only directions: (5, 0) is E1.
    assert novelty(vectors([5.0, 0.0], E2, E3)) == pytest.approx(400 / 3)


def test_appropriateness_is_200_minus_100_times_the_mean_cue_distance() -> None:
    # cue E1: d = 0 to E1, 1 to E2 -> mean 0.5 -> 200 - 50 = 150; to E3 alone: 200 - 200 = 0.
    assert appropriateness(vectors(E1), vectors(E1, E2)) == pytest.approx(150.0)
    assert appropriateness(vectors(E1), vectors(E3)) == pytest.approx(0.0)


def test_cosine_distances_are_clipped_to_zero_and_two() -> None:
    same = vectors([0.1, 0.2, 0.3])
    assert cosine_distances(same, same)[0, 0] >= 0.0
    assert cosine_distances(vectors(E1), vectors(E3))[0, 0] == 2.0


class TableEmbedder:
    name = "table"

    def __init__(self) -> None:
        self.table = {"cue": E1, "a": E1, "b": E2, "c": E3}
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        return vectors(*(self.table[t] for t in texts))


def test_list_scores_embeds_the_cue_with_the_words_in_one_call() -> None:
    embedder = TableEmbedder()
    assert isinstance(embedder, Embedder)
    nov, app = list_scores(embedder, ["a", "b", "c"], "cue")
    assert nov == pytest.approx(400 / 3)
    assert app == pytest.approx(200 - 100 * (0 + 1 + 2) / 3)  # 100
    assert embedder.calls == [["a", "b", "c", "cue"]]
    assert list_scores(embedder, ["a", "b"], None) == (pytest.approx(100.0), None)  # DAT: no cue


def test_embedders_are_named_and_unknown_ones_say_what_exists() -> None:
    assert "unknown embedder 'fasttext'" in (embedder_problem("fasttext") or "")
    assert "none" in (embedder_problem("fasttext") or "")
    with pytest.raises(EmbeddingsUnavailable):
        get_embedder("fasttext")


def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = embeddings.importlib.util.find_spec
    monkeypatch.setattr(embeddings.importlib.util, "find_spec", lambda name: None if name == "torch" else real(name))
    problem = minilm_problem()
    assert problem is not None and "torch" in problem and INSTALL_HINT in problem


# --- the real model -------------------------------------------------------------------------

RELEASE = ["admirer", "infringement", "respect", "infield", "spackle", "dispossession", "incurvation"]
"""The first seven words of the paper's Random list for the cue "release"
(``random_results550.json``: sbert_novelty 74.99394989013672, sbert_appropriateness
125.78086853027344, stored as float32)."""


def test_minilm_reproduces_a_list_the_paper_scored(minilm: Embedder) -> None:
    nov, app = list_scores(minilm, RELEASE, "release")
    assert nov == pytest.approx(74.99394989013672, abs=1e-4)
    assert app == pytest.approx(125.78086853027344, abs=1e-4)


def test_minilm_encodes_each_word_once(minilm: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    # The embedder is the process's shared one: other tests (the CDAT example) may have met "harbor".
    monkeypatch.setattr(minilm, "_cache", type(minilm._cache)())  # type: ignore[attr-defined]
    minilm.embed(["lantern"])
    model = minilm._load()  # type: ignore[attr-defined]
    seen: list[list[str]] = []
    original = model.encode
    monkeypatch.setattr(model, "encode", lambda texts, **kw: seen.append(list(texts)) or original(texts, **kw))
    rows = minilm.embed(["lantern", "harbor", "lantern"])
    assert seen == [["harbor"]] and rows.shape == (3, 384)
    assert np.array_equal(rows[0], rows[2])
