"""TTCT creativity rubric (CPers: creativity of LLMs in Persian literary text generation).

Twelve questions in four dimensions, each rated 1 (lowest) to 5 (``prompts/ttct/user.j2``):

============  =========  ==============================================================
dimension     questions  what they ask
============  =========  ==============================================================
originality   Q1-Q3      far from clichés; similar to famous sayings (reversed); devices
fluency       Q4-Q6      grammatical; natural to a native reader; usable in text or talk
flexibility   Q7-Q9      several ideas; a new perspective; different styles
elaboration   Q10-Q12    detail and vocabulary; a clear mental image; a specific feeling
============  =========  ==============================================================

**The reverse-phrased question.** Q2 ("Is the sentence similar to famous sentences, poems, or
Persian proverbs?") is phrased so that "yes" means *less* original. The judge is asked every
question as written on one uniform scale (1 = "no, not at all", 5 = "yes, completely"), told that
Q2 is reverse-scored and told not to invert it; the scorer then uses ``6 - rating`` for Q2. Judges
answer a question literally far more reliably than they apply an inversion instruction, and the
verdict keeps the judge's raw answer, so the choice stays auditable. ``Score.scores["q2"]`` is the
reversed (originality-oriented) value; the verdict's ``q2`` is the judge's raw rating.

Scores: each dimension is the mean of its three (oriented) questions, ``Score.score`` is the mean
of the four dimensions; ``Score.scores`` holds the four dimensions and ``q1``..``q12``.

The target language and culture come from options (``language``, ``culture``; Persian by default,
as in the paper); one template serves every language. Text answers are one line per question
(``Q1: 4``); JSON answers are ``{"q1": 4, ..., "q12": 3}``. A missing question, a rating outside
1-5, a non-integer rating or two different ratings for one question is a :class:`VerdictError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from judge_engine.errors import ReasonCode, VerdictError
from judge_engine.protocols import templating
from judge_engine.protocols.base import (
    Item,
    Message,
    Protocol,
    ProtocolOptions,
    Score,
    json_error_code,
    strip_code_fence,
)
from judge_engine.protocols.verdict_spans import VerdictSpan, json_value_span, scale_values

DIMENSIONS: dict[str, tuple[str, str, str]] = {
    "originality": ("q1", "q2", "q3"),
    "fluency": ("q4", "q5", "q6"),
    "flexibility": ("q7", "q8", "q9"),
    "elaboration": ("q10", "q11", "q12"),
}
QUESTIONS: tuple[str, ...] = tuple(q for qs in DIMENSIONS.values() for q in qs)
REVERSED: frozenset[str] = frozenset({"q2"})
"""Questions where "yes" means less creative: scored ``6 - rating``."""

_Rating = Field(ge=1, le=5)


class TTCTVerdict(BaseModel):
    """The judge's raw 1-5 answer to each of the twelve questions (Q2 not yet reversed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q1: int = _Rating
    """Is the sentence creative and far from common clichés?"""
    q2: int = _Rating
    """Is the sentence similar to famous sentences, poems, or proverbs? (reverse-scored)"""
    q3: int = _Rating
    """Does it contain a simile, metaphor, antithesis or hyperbole?"""
    q4: int = _Rating
    """Is it grammatically correct and understandable?"""
    q5: int = _Rating
    """Does it seem fluent and natural to a native reader?"""
    q6: int = _Rating
    """Can it be used in a literary text or everyday conversation?"""
    q7: int = _Rating
    """Does it use multiple ideas to express the intended topic?"""
    q8: int = _Rating
    """Does it look at the topic from a new perspective?"""
    q9: int = _Rating
    """Does it use different styles (ironic, humorous, philosophical...)?"""
    q10: int = _Rating
    """Does it go into detail and use a variety of vocabulary?"""
    q11: int = _Rating
    """Does it create a clear mental image in the reader?"""
    q12: int = _Rating
    """Does it convey a specific feeling (love, sadness, hope...) well?"""


class TTCTOptions(ProtocolOptions):
    """Options of ``ttct``."""

    language: str = "Persian"
    """The language of the judged texts, named in the prompt ("natural to a Persian reader")."""
    culture: str | None = None
    """The culture whose famous sayings Q2 asks about ("Persian proverbs"); defaults to
    ``language``."""


_LINE = re.compile(
    r"^q(?:uestion)?\s*(?P<number>\d{1,2})\s*(?:\([^)]*\))?\s*[).:=\-–—]*\s*(?P<rating>[^\s/,;()]+)",
    re.IGNORECASE,
)
_DECORATION = re.compile(r"[*_`#>]+")
_TRAILING_RATING = re.compile(r"[\s:=\-–—]\s*(?P<rating>\d+(?:\.\d+)?)\s*(?:/\s*5)?\s*\.?$")


class TTCT(Protocol):
    """The CPers TTCT rubric: twelve 1-5 questions, four dimensions, overall creativity."""

    name: ClassVar[str] = "ttct"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = (
        "TTCT creativity rubric (CPers): 12 questions, 4 dimensions, 1-5; Q2 reverse-scored"
    )
    required_fields: ClassVar[tuple[str, ...]] = ("text",)
    output_model: ClassVar[type[BaseModel]] = TTCTVerdict
    options_model: ClassVar[type[ProtocolOptions]] = TTCTOptions
    # Twelve "Qn: r" lines, as the prompt demands: 72 tokens (84 as JSON) from the fake server.
    typical_completion_tokens: ClassVar[int] = 80
    template: ClassVar[str] = "ttct/user.j2"

    options: TTCTOptions

    def templates(self) -> Sequence[str]:
        return (self.template,)

    def render(self, item: Item, variant: str = "") -> list[Message]:
        content = templating.render(
            self.template,
            language=self.options.language,
            culture=self.options.culture or self.options.language,
            text=str(item["text"]),
            topic=str(item.get("topic") or ""),
            json_mode=self.json_mode,
        )
        return [{"role": "user", "content": content}]

    def parse(self, answer: str, item: Item, variant: str = "") -> TTCTVerdict:
        stripped = strip_code_fence(answer)
        if stripped.startswith("{"):
            return self._parse_json(stripped, answer)
        return self._parse_text(answer)

    def _parse_json(self, text: str, answer: str) -> TTCTVerdict:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise VerdictError(
                f"the answer is not valid JSON: {exc}", raw=answer, code=json_error_code(exc, text)
            ) from None
        if not isinstance(raw, dict):
            raise VerdictError("the JSON answer is not an object", raw=answer)
        # "Q1" and "q1" are the same question; everything else goes to the model's checks.
        normalised = {str(k).strip().lower(): v for k, v in raw.items()}
        verdict = self.verdict_from_json(json.dumps(normalised))
        assert isinstance(verdict, TTCTVerdict)
        return verdict

    def _parse_text(self, answer: str) -> TTCTVerdict:
        ratings: dict[str, int] = {}
        unreadable: set[str] = set()
        problems: list[str] = []
        out_of_range = False
        for line in answer.splitlines():
            match = _LINE.match(_DECORATION.sub("", line).strip().lstrip("-• ").strip())
            if match is None:
                continue  # preamble, dimension headers, blank lines
            question = f"q{int(match.group('number'))}"
            if question not in QUESTIONS:
                problems.append(f"there is no question {question.upper()} (Q1 to Q12 only)")
                continue
            token = _rating_token(match)
            rating = _rating(token)
            if rating is None:
                unreadable.add(question)
                problems.append(f"{question.upper()}: {token!r} is not an integer from 1 to 5")
                out_of_range = out_of_range or token.rstrip(".").strip().isdigit()
            elif ratings.setdefault(question, rating) != rating:
                problems.append(f"{question.upper()} is rated twice, differently")
        unread = bool(problems)
        missing = [q.upper() for q in QUESTIONS if q not in ratings and q not in unreadable]
        if missing:
            # Every question must be answered: a dimension rated from some of its questions is
            # another measure, and an answer that stopped early looks just like this.
            problems.append(f"no rating for {', '.join(missing)} (answer 'Q<n>: <1-5>' per line)")
        if problems:
            if len(missing) == len(QUESTIONS) or (unread and not out_of_range):
                code = ReasonCode.UNREADABLE
            else:
                code = ReasonCode.OUT_OF_RANGE if out_of_range else ReasonCode.INCOMPLETE
            raise VerdictError(problems, raw=answer, code=code)
        return TTCTVerdict(**ratings)

    def score_range(self) -> tuple[float, float] | None:
        return (1.0, 5.0)

    def verdict_spans(self, answer: str, item: Item, variant: str = "") -> tuple[VerdictSpan, ...]:
        """Each question's rating where the parser reads it (the JSON field, or the rating
        after ``Qn:``), on the 1-5 scale, as the judge wrote it (Q2 before its reversal)."""
        scale = scale_values(1, 5)
        if strip_code_fence(answer).startswith("{"):
            found = [(q, json_value_span(answer, q)) for q in QUESTIONS]
        else:
            found = list(_rating_spans(answer).items())
        return tuple(VerdictSpan(q, *span, scale) for q, span in found if span is not None)

    def weighted_score(self, verdict: BaseModel, expected: Mapping[str, float], item: Item,
                       variant: str = "") -> float | None:
        """The overall score with every rating its probability-weighted mean (Q2 reversed as ever)."""
        return ttct_score({**verdict.model_dump(), **expected}).score

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, TTCTVerdict)
        return ttct_score(verdict.model_dump())


def ttct_score(ratings: dict[str, Any]) -> Score:
    """Dimension means of the oriented ratings (Q2 reversed) and their mean, the overall score."""
    oriented = {q: float(6 - ratings[q] if q in REVERSED else ratings[q]) for q in QUESTIONS}
    dimensions = {d: fmean(oriented[q] for q in qs) for d, qs in DIMENSIONS.items()}
    return Score(fmean(dimensions.values()), {**dimensions, **oriented})


def _rating_spans(answer: str) -> dict[str, tuple[int, int]]:
    """Question -> the characters of its rating in ``answer``: the lines :meth:`TTCT._parse_text`
    reads, each rating found in the line as written (after its question's number, or the
    number ending the line when the judge echoed the question first)."""
    spans: dict[str, tuple[int, int]] = {}
    offset = 0
    for line in answer.splitlines(keepends=True):
        match = _LINE.match(_DECORATION.sub("", line).strip().lstrip("-• ").strip())
        if match is not None and (question := f"q{int(match.group('number'))}") in QUESTIONS:
            token = _rating_token(match).rstrip(".")
            label = re.search(rf"q(?:uestion)?\s*0*{int(match.group('number'))}(?!\d)", line, re.IGNORECASE)
            after = label.end() if label is not None else 0
            at = line.find(token, after) if match.group("rating")[:1].isdigit() else line.rfind(token)
            if at >= 0 and question not in spans:
                spans[question] = (offset + at, offset + at + len(token))
        offset += len(line)
    return spans


def _rating_token(match: re.Match[str]) -> str:
    """The rating after ``Qn:``, or, when the judge echoed the question first
    (``Q2. Is the sentence ...? 4``), the number that ends the line."""
    token = match.group("rating")
    if token[:1].isdigit():
        return token
    trailing = _TRAILING_RATING.search(match.string)
    return trailing.group("rating") if trailing else token


def _rating(token: str) -> int | None:
    token = token.rstrip(".").strip()
    if not token.isdigit():
        return None
    value = int(token)
    return value if 1 <= value <= 5 else None
