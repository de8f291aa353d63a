"""Prometheus score rubrics: any criteria on any integer scale, and the ones that ship built in.

A rubric is a criteria question plus descriptions of some of the scores on its scale. The library's
rubrics describe every score 1-5 (``SCORE_RUBRIC_TEMPLATE``); LitEval's literary SQM rubric runs
0-6 and describes only 0, 2, 4 and 6. The scale is ``low..high`` (by default the lowest and highest
described score); every integer in it is a valid score, described or not.

Rubrics arrive in several shapes, all accepted by :func:`coerce_rubric`:

* a built-in name (``helpfulness``, ``literary-sqm``, ``literary-sqm-litransproqa``);
* ``{criteria, descriptions: {score: text}, scale: [low, high]?}`` (our shape);
* ``{criteria, score1_description, ..., score5_description}`` (the library's and BiGGen-Bench's);
* rendered rubric text ``[criteria]\\nScore 1: ...`` (what the rendered prompts contain);
* any of the dict shapes as a JSON string (a CSV cell).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from judge_engine.protocols import templating


class Rubric(BaseModel):
    """A score rubric: the criteria and descriptions of (some of) the integer scores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    criteria: str = Field(min_length=1)
    """The question the score answers, without the surrounding brackets."""
    descriptions: dict[int, str] = Field(default_factory=dict)
    """Score -> what that score means. Rendered in ascending order as ``Score k: text`` lines."""
    scale: tuple[int, int] | None = None
    """Inclusive (low, high); defaults to the lowest and highest described score."""

    @model_validator(mode="after")
    def _check_scale(self) -> Rubric:
        if self.scale is None and not self.descriptions:
            raise ValueError("a rubric needs score descriptions or an explicit scale [low, high]")
        low, high = self.bounds
        if low < 0:
            # The library's score pattern reads digits only, so a negative score could never parse.
            raise ValueError(f"scores must be non-negative integers, got a scale from {low}")
        if low >= high:
            raise ValueError(f"the scale must have low < high, got {low}..{high}")
        outside = sorted(s for s in self.descriptions if not low <= s <= high)
        if outside:
            raise ValueError(f"described scores {outside} lie outside the scale {low}..{high}")
        return self

    @property
    def bounds(self) -> tuple[int, int]:
        """The inclusive (low, high) of valid scores."""
        if self.scale is not None:
            return self.scale
        return min(self.descriptions), max(self.descriptions)

    def render(self) -> str:
        """The rubric block of the absolute prompt (byte-exact ``SCORE_RUBRIC_TEMPLATE`` for 1-5)."""
        return templating.render(
            "prometheus_absolute/rubric.j2",
            criteria=self.criteria,
            descriptions=sorted(self.descriptions.items()),
        )

    def criteria_line(self) -> str:
        """The first line of the rendered rubric: all the library's relative prompt keeps."""
        return f"[{self.criteria}]"


HELPFULNESS = Rubric(
    criteria="Does the model provide relevant and useful responses to the user's needs or questions?",
    descriptions={
        1: "The model's responses are irrelevant or unhelpful to the user's needs or queries.",
        2: "The model sometimes provides helpful information, but often fails to address the user's actual needs or questions.",
        3: "The model generally provides helpful responses that address the user's needs, though it may occasionally miss the mark.",
        4: "The model regularly provides helpful responses that are well-aligned with the user's inquiries, with only rare inaccuracies.",
        5: "The model consistently offers highly relevant and useful responses that perfectly cater to the user's needs and inquiries.",
    },
)
"""The library's ``HELPFULNESS_RUBRIC``."""

LITERARY_SQM = Rubric(
    criteria="What is the overall quality of the given literary translation based on the source texts?",
    descriptions={
        0: "Nonsense: Nearly all information is lost between the translation and source. Grammar and style are irrelevant.",
        2: "Some Meaning and Style Preserved: The translation preserves some of the meaning and style of the source but misses significant parts. The narrative is hard to follow due to fundamental errors. Grammar may be poor. Style may be inconsistent.",
        4: "Most Meaning and Style Preserved and Few Grammar Mistakes: The translation retains most of the meaning and style of the source. This may contain some grammar mistakes or minor style and contextual inconsistencies.",
        6: "Perfect Meaning and Style Preserved: The meaning and style of the translation are completely consistent with the source and the surrounding context.",
    },
)
"""LitEval's literary SQM rubric (Table 13), 0-6 with descriptions at 0/2/4/6."""

LITRANSPROQA_SQM = Rubric(
    criteria="How good is the translation quality of literary source texts?",
    descriptions={
        0: "Nonsense/No meaning preserved: Nearly all information is lost between the translation and source. Grammar is irrelevant.",
        2: "Some Meaning Preserved: The translation preserves some of the meaning of the source but misses significant parts. The narrative is hard to follow due to fundamental errors. Grammar may be poor.",
        4: "Most Meaning Preserved and Few Grammar Mistakes: The translation retains most of the meaning of the source. This may contain some grammar mistakes or minor contextual inconsistencies.",
        6: "Perfect Meaning and Grammar: The meaning of the translation is completely consistent with the source and the surrounding context (if applicable). The grammar is also correct.",
    },
)
"""The 0/2/4/6 rubric of the authors' follow-up (LiTransProQA, M-Prometheus), verbatim. It is
rendered here as a proper rubric block, not as the Python dict repr their script inserted."""

BUILTIN_RUBRICS: dict[str, Rubric] = {
    "helpfulness": HELPFULNESS,
    "literary-sqm": LITERARY_SQM,
    "literary-sqm-litransproqa": LITRANSPROQA_SQM,
}
LITERARY_RUBRICS: tuple[Rubric, ...] = (LITERARY_SQM, LITRANSPROQA_SQM)
"""Rubrics that get the literary critic's system prompt when ``system_prompt`` is ``auto``."""

_LIBRARY_KEY = re.compile(r"^score(\d+)_description$")
_RUBRIC_TEXT = re.compile(r"\A\[(?P<criteria>.*?)\]\n(?P<scores>Score -?\d+: .*)\Z", re.DOTALL)
_SCORE_LINE = re.compile(r"^Score (-?\d+): ", re.MULTILINE)


def coerce_rubric(value: Any) -> Rubric:
    """Any accepted rubric shape (see the module docstring) as a :class:`Rubric`.

    Raises:
        ValueError: the value is none of the accepted shapes, or an invalid rubric.
    """
    if isinstance(value, Rubric):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text in BUILTIN_RUBRICS:
            return BUILTIN_RUBRICS[text]
        if text.startswith("{"):
            return coerce_rubric(json.loads(text))
        if text.startswith("["):
            return parse_rubric_text(value)
        known = ", ".join(BUILTIN_RUBRICS)
        raise ValueError(f"unknown rubric {text[:60]!r}: give one of {known}, a mapping, or rubric text")
    if isinstance(value, Mapping):
        return _rubric_from_mapping(value)
    raise ValueError(f"a rubric must be a name, a mapping or rubric text, not {type(value).__name__}")


def _rubric_from_mapping(value: Mapping[str, Any]) -> Rubric:
    library = {int(m.group(1)): str(v) for k, v in value.items() if (m := _LIBRARY_KEY.match(str(k)))}
    data: dict[str, Any] = {k: v for k, v in value.items() if not _LIBRARY_KEY.match(str(k))}
    if library:
        data["descriptions"] = {**library, **dict(data.get("descriptions") or {})}
    try:
        return Rubric.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'rubric'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"invalid rubric: {problems}") from None


def parse_rubric_text(text: str) -> Rubric:
    """Read a rendered rubric block (``[criteria]`` then ``Score k: description`` lines).

    The inverse of :meth:`Rubric.render`: ``parse_rubric_text(r.render()) == r`` whenever no
    description itself contains a line starting with ``Score <n>: ``.
    """
    match = _RUBRIC_TEXT.match(text)
    if match is None:
        raise ValueError("rubric text must be '[criteria]' followed by 'Score <n>: <description>' lines")
    scores = match.group("scores")
    starts = list(_SCORE_LINE.finditer(scores))
    descriptions: dict[int, str] = {}
    for here, after in zip(starts, [*starts[1:], None], strict=True):
        end = after.start() - 1 if after is not None else len(scores)
        descriptions[int(here.group(1))] = scores[here.end() : end]
    return Rubric(criteria=match.group("criteria"), descriptions=descriptions)


def criteria_line(value: Any) -> str:
    """The ``[criteria]`` line the relative prompt shows, from any rubric shape or a question.

    Raises:
        ValueError: ``value`` is neither a rubric nor a non-empty question.
    """
    if isinstance(value, Rubric):
        return value.criteria_line()
    if isinstance(value, Mapping) and set(value) == {"criteria"}:
        return f"[{value['criteria']}]"
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            return criteria_line(json.loads(text))
        if text.startswith("["):
            return text.split("\n")[0]  # the library's load_rubric keeps the first line only
        if text and text not in BUILTIN_RUBRICS:
            return f"[{text}]"
    return coerce_rubric(value).criteria_line()
