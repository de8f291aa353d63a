"""GEMBA-MQM, literary variant (LitEval, Table 11): literary critic, literary categories, LitEval score.

Prompt: LitEval's literary system prompt, two literary few-shot pairs (En-De, Zh-En) and the item, in
GEMBA's conversation frame, from ``prompts/gemba_mqm_literary/``. The task text adds the literary
categories: mistranslation including too-literal translation and temporal effect, misnomer,
coherence, register, unidiomatic, cultural terminology, locale convention.

The Zh-En shot's Chinese source was lost from the seed document; it is replaced by the clause of
Zhu Ziqing's 匆匆 (1922) that its English target renders word for word (see ``few_shot.json``).
Target and answer are verbatim.

Parsing is GEMBA-MQM's (``strict`` or ``legacy-gemba``), with one fix for hyphenated categories
(``accuracy/mistranslation (too-literal) - "x"``, ``non-translation``). Score, as LitEval computed
it: every error counts (no five-error limit, no cap), critical 25, major 5, minor 1, and the penalty
is divided by the number of sentences of the translation, so ``score = -penalty / sentences``.
``Score.scores`` breaks the same quantity down by aspect: ``accuracy``, ``fluency``, ``style``,
``terminology`` (LitEval's four columns) and ``other`` for non-translation, other, locale
convention and anything unrecognised (legacy mode), so the five always sum to ``score``; plus
``sentences``, the divisor. (LitEval's own per-aspect columns are the raw penalties, i.e. these
values times ``sentences``; normalising them too keeps one unit per verdict.)

Sentences are counted with ``sentencex`` (Wikimedia's rule-based segmenter: ~300 languages, no
model download, no dependencies), given the target language's ISO code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

import sentencex
from pydantic import BaseModel

from judge_engine.protocols.base import Item, Score
from judge_engine.protocols.gemba_mqm import (
    WEIGHTS,
    GembaMQM,
    MQMError,
    MQMVerdict,
    Severity,
)
from judge_engine.util.languages import language_code

ASPECTS: tuple[str, ...] = ("accuracy", "fluency", "style", "terminology", "other")
"""LitEval's four aspects, then ``other`` for non-translation, other and locale convention."""

# A category with a hyphen in it (too-literal, non-translation) followed by a spaced dash and the span.
_SPACED_DASH = re.compile(r'^(?P<category>[^"“”]+?)\s+[-–—]\s+(?P<span>.*)$')
_MASK = "\u2010"  # a Unicode hyphen hides ASCII hyphens of the category from the parent's splitter


class GembaMQMLiterary(GembaMQM):
    """GEMBA-MQM with LitEval's literary prompt and uncapped, sentence-normalised scoring.

    Item fields: ``source``, ``target``, ``source_lang``, ``target_lang`` (language names).
    Options: those of ``gemba-mqm`` (``output``, ``parser``).
    """

    name: ClassVar[str] = "gemba-mqm-literary"
    version: ClassVar[str] = "2"  # as gemba-mqm 2: the same strict parser
    description: ClassVar[str] = (
        "LitEval literary MQM error spans; score -(25 critical + 5 major + 1 minor) per sentence, per aspect"
    )
    template_dir: ClassVar[str] = "gemba_mqm_literary"

    # --- reading: the parent's parser, with hyphenated categories kept whole -----------------

    def _error_from_line(self, line: str, severity: Severity) -> MQMError | None:
        match = _SPACED_DASH.match(line)
        if match is None or "-" not in match.group("category"):
            return super()._error_from_line(line, severity)
        masked = f"{match.group('category').replace('-', _MASK)} - {match.group('span')}"
        error = super()._error_from_line(masked, severity)
        if error is None:
            return None
        return self._checked(error.model_copy(update={"category": error.category.replace(_MASK, "-")}))

    # --- scoring -------------------------------------------------------------------------------

    def score_range(self) -> tuple[float, float] | None:
        return None  # 0 at best, unbounded below: the penalty is not capped

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, MQMVerdict)
        return literary_score(verdict.errors, count_sentences(str(item["target"]), str(item["target_lang"])))


def aspect_of(category: str) -> str:
    """The aspect an error category counts towards (the aspect named earliest in it, else other)."""
    text = category.lower()
    if "non-translation" in text:
        return "other"
    found = [(text.find(a), a) for a in ASPECTS[:4] if a in text]
    return min(found)[1] if found else "other"


def literary_score(errors: Sequence[MQMError], sentences: int) -> Score:
    """LitEval's score: ``-(25 critical + 5 major + 1 minor) / sentences``, all errors counted,
    with the same quantity per aspect in ``scores`` (they sum to the score) and ``sentences``."""
    if sentences < 1:
        raise ValueError(f"sentences must be at least 1, got {sentences}")
    penalty = dict.fromkeys(ASPECTS, 0)
    for error in errors:
        penalty[aspect_of(error.category)] += WEIGHTS[error.severity]
    scores: dict[str, float] = {a: -p / sentences if p else 0.0 for a, p in penalty.items()}
    total = sum(penalty.values())
    return Score(-total / sentences if total else 0.0, {**scores, "sentences": float(sentences)})


def count_sentences(text: str, language: str) -> int:
    """Sentences in ``text`` by ``sentencex``, at least 1 (an empty translation is one sentence,
    so that its penalty is not divided by zero). ``language`` is a name or an ISO code."""
    segments = sentencex.segment(language_code(language), text)
    return max(1, sum(1 for s in segments if s.strip()))
