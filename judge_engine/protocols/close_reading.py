"""Close reading (Death of the Novel(ty)): novel and non-pragmatic expressions in a passage.

Two protocols, ``novel-spans`` and ``nonpragmatic-spans``, each zero-shot or few-shot (option
``shots``). The prompts are the authors' files (``novelty_prompt.txt``, ``pragmatic_prompt.txt``
and their ``*fewshot_prompt.txt``), reproduced byte for byte: ``file.replace("{passage}", passage)``
as one user message, no system prompt. The templates wrap the prompt text in ``{% raw %}`` so the
example JSON braces can never be read as Jinja.

The judge answers with ``{expression, justification}`` objects (see
:mod:`~judge_engine.protocols.close_reading_parse` for every shape that is read; a refusal or an
answer with no list is a :class:`VerdictError`; an explicit ``[]`` means "none found"). The
protocol then looks each expression up in the passage (exact substring, else a normalised match:
:func:`judge_engine.util.text.locate`) and records ``found`` and the character offsets
``[start, end)``. An expression that is not in the passage stays in the verdict with
``found: false`` and does not count.

Score: distinct found spans per word of the passage (words are whitespace-separated tokens), the
passage-level figure the paper uses to predict expert preferences. ``Score.scores`` also has the
counts: ``expressions``, ``found``, ``not_found``, ``words``.

JSON mode sends the schema of :class:`SpansVerdict` (the judge fills ``expression`` and
``justification`` only) and keeps the same prompt text; a bare list answer is accepted too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from judge_engine.protocols import templating
from judge_engine.protocols.base import Item, Message, Protocol, ProtocolOptions, Score
from judge_engine.protocols.close_reading_parse import count_words, read_expressions
from judge_engine.util.text import locate


class Expression(BaseModel):
    """One expression the judge selected, and where it is in the passage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    expression: str
    """The passage text the judge selected, as written by the judge."""
    justification: str = ""
    """Why the judge selected it."""
    found: bool | None = None
    """Filled by the protocol (leave it out): whether the expression is in the passage."""
    start: int | None = None
    """Filled by the protocol: offset of the first character in the passage (None if not found)."""
    end: int | None = None
    """Filled by the protocol: offset one past the last character (None if not found)."""


class JudgedExpression(BaseModel):
    """One expression as the judge writes it (JSON-mode schema)."""

    model_config = ConfigDict(extra="forbid")

    expression: str
    justification: str = ""


class JudgedSpans(BaseModel):
    """What the judge is asked to return in JSON mode."""

    model_config = ConfigDict(extra="forbid")

    expressions: list[JudgedExpression]


class SpansVerdict(BaseModel):
    """A close-reading annotation: every expression the judge selected, in its order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    expressions: list[Expression] = Field(default_factory=list)
    """All selected expressions; an empty list means the judge found none."""


class SpansOptions(ProtocolOptions):
    """Options of ``novel-spans`` and ``nonpragmatic-spans``."""

    shots: Literal["zero", "few"] = "zero"
    """``zero``: the zero-shot prompt; ``few``: the prompt with three annotated passages (their
    ids are in :attr:`CloseReading.few_shot_ids`; keep them out of an evaluation set)."""


class CloseReading(Protocol):
    """Shared machinery of the two close-reading protocols (not registered itself)."""

    # 2: an answer cut after a whole expression, an object without its expression, or an empty
    # list inside another value ({"errors": []}) is no longer scored (version 1 scored them).
    version: ClassVar[str] = "2"
    required_fields: ClassVar[tuple[str, ...]] = ("passage",)
    output_model: ClassVar[type[BaseModel]] = SpansVerdict
    judge_model: ClassVar[type[BaseModel] | None] = JudgedSpans
    options_model: ClassVar[type[ProtocolOptions]] = SpansOptions
    # Real answers: Claude 4.1's 100 zero-shot non-pragmatic answers in the paper's repository
    # (claude_prag_responses_ft.csv) have a median of 237 tokens (o200k; p90 383, max 532).
    typical_completion_tokens: ClassVar[int] = 240

    template_dir: ClassVar[str]
    few_shot_ids: ClassVar[tuple[str, ...]]
    """Passages shown as examples in the few-shot prompt (excluded from the paper's evaluation)."""

    options: SpansOptions

    def templates(self) -> Sequence[str]:
        return (self.template_for(self.options.shots),)

    @classmethod
    def template_for(cls, shots: Literal["zero", "few"]) -> str:
        """The template of the zero- or few-shot prompt (under ``judge_engine/protocols/prompts``)."""
        return f"{cls.template_dir}/{shots}_shot.j2"

    def render(self, item: Item, variant: str = "") -> list[Message]:
        content = templating.render(
            self.template_for(self.options.shots), passage=str(item["passage"])
        )
        return [{"role": "user", "content": content}]

    def parse(self, answer: str, item: Item, variant: str = "") -> SpansVerdict:
        passage = str(item["passage"])
        expressions = []
        for record in read_expressions(answer):
            where = locate(record["expression"], passage)
            expressions.append(
                Expression(
                    expression=record["expression"],
                    justification=record["justification"],
                    found=where is not None,
                    start=where[0] if where else None,
                    end=where[1] if where else None,
                )
            )
        return SpansVerdict(expressions=expressions)

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, SpansVerdict)
        found = [e for e in verdict.expressions if e.found]
        # A span listed twice is one finding: counting repeats would reward a looping judge.
        distinct = len({(e.start, e.end) for e in found})
        words = count_words(str(item["passage"]))
        return Score(
            distinct / words if words else 0.0,
            {
                "expressions": float(len(verdict.expressions)),
                "found": float(len(found)),
                "not_found": float(len(verdict.expressions) - len(found)),
                "words": float(words),
            },
        )

    def score_range(self) -> tuple[float, float] | None:
        return None  # a per-word rate: overlapping spans can exceed one per word in principle


class NovelSpans(CloseReading):
    """Novel expressions: unusual, surprising or original given the context."""

    name: ClassVar[str] = "novel-spans"
    description: ClassVar[str] = (
        "novel expressions in a passage (Death of the Novel(ty)); found per word"
    )
    template_dir: ClassVar[str] = "novel_spans"
    few_shot_ids: ClassVar[tuple[str, ...]] = ("human_7644", "human_12011", "human_11680")


class NonPragmaticSpans(CloseReading):
    """Non-pragmatic expressions: ones that do not make sense or flow naturally in context."""

    name: ClassVar[str] = "nonpragmatic-spans"
    description: ClassVar[str] = (
        "expressions that do not make sense or flow naturally (Death of the Novel(ty)); found per word"
    )
    template_dir: ClassVar[str] = "nonpragmatic_spans"
    few_shot_ids: ClassVar[tuple[str, ...]] = ("ai_15031", "ai_16704", "ai_16204")
