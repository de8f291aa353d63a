"""CDAT's reference points: the Random baseline drawn from the lexicon, the scoring of any
stored word lists (baselines, human answers) exactly as a run scores a model's list, and the
baseline file.

The Random baseline is ten random WordNet nouns per cue: single-word, lower-case, non-numeric noun
lemmas, drawn with ``random.sample`` from one entry per (synset, lemma), as the paper's
``generate_random_baseline.py`` draws them; the paper ran without a seed, here the seed is
required so a baseline can be drawn again.

**The baseline file** (written by ``judge-engine cdat-baselines``, read by ``judge-engine stats
--baselines``) is the paper's own format, ``random_results550.json`` and
``common_results550.json``: a JSON array with one object per list, ``{"Model", "Cue", "Words",
"sbert_novelty", "sbert_appropriateness", "sbert_valid_count"}`` (the scores null for a list
with fewer than seven valid nouns). It is kept exactly, so the paper's files and ours are
interchangeable; that is why it carries no version field, unlike the run directory's files.
:class:`BaselineList` is its one definition.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from judge_engine.errors import TableError
from judge_engine.protocols.embeddings import Embedder, Vectors, appropriateness, novelty
from judge_engine.protocols.lexicon import Lexicon, default_lexicon
from judge_engine.protocols.word_lists import CheckedList, check_words
from judge_engine.util import jsonio

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



# --- the baseline file ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BaselineList:
    """One list of a baseline file (the paper's format; see the module docstring)."""

    model: str
    """``Random``, ``Common``, or whatever produced the list."""
    cue: str
    words: tuple[str, ...]
    """The words as given (the paper's Common file keeps their capitals)."""
    novelty: float | None
    appropriateness: float | None
    valid_count: int
    """Unique valid nouns (the scores need at least seven)."""

    @classmethod
    def of(cls, model: str, scored: ScoredList) -> BaselineList:
        return cls(model, scored.cue or "", scored.words, scored.novelty, scored.appropriateness, scored.valid_count)

    @property
    def point(self) -> tuple[float, float] | None:
        """(appropriateness, novelty), the list's place on the plane; None when unscored."""
        if self.appropriateness is None or self.novelty is None:
            return None
        return self.appropriateness, self.novelty

    def to_json(self) -> dict[str, Any]:
        return {"Model": self.model, "Cue": self.cue, "Words": list(self.words), "sbert_novelty": self.novelty,
                "sbert_appropriateness": self.appropriateness, "sbert_valid_count": self.valid_count}

    @classmethod
    def from_json(cls, row: Any, where: str) -> BaselineList:
        """One object of the file; ``where`` names it in errors.

        Raises:
            TableError: a key is missing or has the wrong type.
        """
        if not isinstance(row, Mapping):
            raise TableError(f"{where}: expected an object with Model, Cue, Words and the sbert_ scores")
        missing = [k for k in ("Model", "Cue", "Words", "sbert_novelty", "sbert_appropriateness",
                               "sbert_valid_count") if k not in row]
        if missing:
            raise TableError(f"{where}: missing {', '.join(missing)}")
        words = row["Words"]
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise TableError(f"{where}: Words must be a list of strings")
        return cls(str(row["Model"]), str(row["Cue"]), tuple(words), _score(row, "sbert_novelty", where),
                   _score(row, "sbert_appropriateness", where), _count(row["sbert_valid_count"], where))


def _score(row: Mapping[str, Any], key: str, where: str) -> float | None:
    value = row[key]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TableError(f"{where}: {key} must be a number or null, not {value!r}")
    return None if math.isnan(value) else float(value)


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise TableError(f"{where}: sbert_valid_count must be a whole number, not {value!r}")
    return int(value)


def write_baseline(path: Path, lists: Sequence[BaselineList]) -> None:
    """Write a baseline file (parent folders created), indented as the paper's files are."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(jsonio.indented([bl.to_json() for bl in lists]), encoding="utf-8")


def read_baseline(path: Path) -> list[BaselineList]:
    """Read a baseline file: ours, or the paper's ``random_results550.json`` /
    ``common_results550.json``.

    Raises:
        TableError: the file is missing, not JSON, not a list of lists, or empty (naming it).
    """
    if not path.is_file():
        raise TableError(f"{path}: baseline file not found")
    try:
        rows = jsonio.loads(path.read_bytes())
    except jsonio.JSONDecodeError as exc:
        raise TableError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(rows, list):
        raise TableError(f"{path}: expected a JSON array of lists (the format of random_results550.json)")
    if not rows:
        raise TableError(f"{path}: no lists")
    return [BaselineList.from_json(row, f"{path}: list {number}") for number, row in enumerate(rows, start=1)]
