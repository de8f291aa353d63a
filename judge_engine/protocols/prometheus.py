"""Prometheus 2 (Kim et al. 2024): rubric grading, absolute (a score) and relative (A or B).

Prompts are the prometheus-eval library's, rendered byte for byte from
``prompts/prometheus_absolute/`` and ``prompts/prometheus_relative/``; answers end in
``[RESULT] <score>`` or ``[RESULT] A|B`` and are read with the library's patterns
(:mod:`judge_engine.protocols.prometheus_parse`), or as JSON in JSON mode.

The absolute prompt names its scale three times ("a reference answer that gets a score of 5", "an
integer between 1 and 5", "Reference Answer (Score 5)"). For a rubric on another scale those numbers
follow the rubric: ``low`` is its lowest valid score and ``high`` its highest, so LitEval's 0-6
literary rubric asks for "an integer between 0 and 6" and its reference answer "gets a score of 6".
A 1-5 rubric renders exactly the library's text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, field_validator

from judge_engine.errors import DatasetError
from judge_engine.protocols import templating
from judge_engine.protocols.base import (
    Item,
    Message,
    Protocol,
    ProtocolOptions,
    Score,
    VoteScale,
    strip_code_fence,
)
from judge_engine.protocols.prometheus_parse import (
    AbsoluteVerdict,
    RelativeVerdict,
    Winner,
    check_feedback,
    check_score,
    read_score,
    read_winner,
    score_span,
    winner_span,
)
from judge_engine.protocols.prometheus_rubrics import (
    BUILTIN_RUBRICS,
    LITERARY_RUBRICS,
    Rubric,
    coerce_rubric,
    criteria_line,
)
from judge_engine.protocols.verdict_spans import VerdictSpan, json_value_span, scale_values

ReferenceMode = Literal["auto", "with", "without"]

_ABS = "prometheus_absolute"
_REL = "prometheus_relative"
_FEEDBACK_PREFIX = {"library": "", "eval": "Feedback: "}


class PrometheusAbsoluteOptions(ProtocolOptions):
    """Options of ``prometheus-absolute``."""

    rubric: Rubric | None = None
    """The rubric for items without a ``rubric`` field: a built-in name (``helpfulness``,
    ``literary-sqm``, ``literary-sqm-litransproqa``), ``{criteria, descriptions: {score: text}}``,
    the library's ``{criteria, score1_description, ...}``, or rubric text. An item's own ``rubric``
    field wins. Without either, the item cannot be rendered."""
    reference: ReferenceMode = "auto"
    """``auto``: the reference-answer prompt when the item has a non-empty ``reference_answer``,
    else the library's WO_REF prompt; ``with``: require a reference answer; ``without``: never
    show one (the library's ``PrometheusEval`` default)."""
    wording: Literal["library", "eval"] = "library"
    """Item 3 of the task description. ``library`` (default): ``"(write a feedback for criteria)
    [RESULT] ..."``, what prometheus-eval sends today and what its users (LitEval, LiTransProQA)
    ran. ``eval``: ``"Feedback: (write a feedback ...``, the wording of the Prometheus training
    and benchmark data (``shared/data/prometheus``)."""
    system_prompt: Literal["auto", "library", "literary", "none"] = "auto"
    """``auto``: LitEval's literary critic for the built-in literary rubrics, else the library's
    ``ABS_SYSTEM_PROMPT``; ``none`` sends no system message."""

    @field_validator("rubric", mode="before")
    @classmethod
    def _coerce(cls, value: Any) -> Any:
        return None if value is None else coerce_rubric(value)


class PrometheusRelativeOptions(ProtocolOptions):
    """Options of ``prometheus-relative``."""

    rubric: str | None = None
    """The criteria for items without ``criteria``/``rubric`` fields: a built-in rubric name, a
    rubric mapping or text (only its criteria line is kept, as the library's ``load_rubric`` does
    for relative grading), or the criteria question itself."""
    reference: ReferenceMode = "auto"
    """As in ``prometheus-absolute``: RELATIVE_PROMPT with a reference answer, or _WO_REF."""
    both_orders: bool = False
    """Judge each pair twice, as given (variant ``AB``) and swapped (``BA``); see
    :func:`position_consistency`."""

    @field_validator("rubric", mode="before")
    @classmethod
    def _criteria(cls, value: Any) -> Any:
        return None if value is None else criteria_line(value)


class PrometheusAbsolute(Protocol):
    """Prometheus absolute grading: feedback and an integer score on any rubric's scale.

    Item fields: ``instruction``, ``response``; optional ``reference_answer`` and ``rubric``.
    Score: the judge's score (``scores["normalized"]`` maps it to 0..1 across rubrics).
    """

    name: ClassVar[str] = "prometheus-absolute"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "Prometheus 2 rubric grading: feedback + integer score on the rubric's scale"
    required_fields: ClassVar[tuple[str, ...]] = ("instruction", "response")
    output_model: ClassVar[type[BaseModel]] = AbsoluteVerdict
    options_model: ClassVar[type[ProtocolOptions]] = PrometheusAbsoluteOptions

    options: PrometheusAbsoluteOptions

    def templates(self) -> Sequence[str]:
        prompts = {"with": ["absolute.j2"], "without": ["absolute_wo_ref.j2"]}.get(
            self.options.reference, ["absolute.j2", "absolute_wo_ref.j2"]
        )
        systems = {"library": ["system.j2"], "literary": ["system_literary.j2"], "none": []}.get(
            self.options.system_prompt, ["system.j2", "system_literary.j2"]
        )
        return tuple(f"{_ABS}/{name}" for name in [*systems, *prompts, "rubric.j2"])

    def score_range(self) -> tuple[float, float] | None:
        """The option rubric's scale; items that bring their own rubric may use another."""
        if self.options.rubric is None:
            return None
        low, high = self.options.rubric.bounds
        return (float(low), float(high))

    def vote_scale(self) -> VoteScale:
        """A grade on the rubric's short integer scale: ordinal."""
        return VoteScale("ordinal", bounds=self.score_range())

    def rubric_for(self, item: Item) -> Rubric:
        """The item's own ``rubric`` if it has one, else the option's."""
        value = item.get("rubric")
        if not _blank(value):
            try:
                return coerce_rubric(value)
            except ValueError as exc:
                raise DatasetError(f"item {item.get('id', '?')}: rubric: {exc}") from None
        if self.options.rubric is None:
            raise DatasetError(
                f"item {item.get('id', '?')}: no rubric: set protocol_options.rubric "
                f"(e.g. one of {', '.join(BUILTIN_RUBRICS)}) or give items a 'rubric' field"
            )
        return self.options.rubric

    def render(self, item: Item, variant: str = "") -> list[Message]:
        rubric = self.rubric_for(item)
        low, high = rubric.bounds
        reference = _reference(item, self.options.reference)
        template = "absolute.j2" if reference is not None else "absolute_wo_ref.j2"
        user = templating.render(
            f"{_ABS}/{template}",
            instruction=str(item["instruction"]),
            response=str(item["response"]),
            reference_answer=reference,
            rubric=rubric.render(),
            low=low,
            high=high,
            feedback_prefix=_FEEDBACK_PREFIX[self.options.wording],
        )
        return [*self._system(rubric), {"role": "user", "content": user}]

    def _system(self, rubric: Rubric) -> list[Message]:
        choice = self.options.system_prompt
        if choice == "auto":
            choice = "literary" if rubric in LITERARY_RUBRICS else "library"
        if choice == "none":
            return []
        template = "system_literary.j2" if choice == "literary" else "system.j2"
        return [{"role": "system", "content": templating.render(f"{_ABS}/{template}")}]

    def parse(self, answer: str, item: Item, variant: str = "") -> AbsoluteVerdict:
        low, high = self.rubric_for(item).bounds
        if strip_code_fence(answer).startswith("{"):
            verdict = self.verdict_from_json(answer)
            assert isinstance(verdict, AbsoluteVerdict)
            return check_score(verdict, low, high, answer)
        return read_score(answer, low, high)

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, AbsoluteVerdict)
        low, high = self.rubric_for(item).bounds
        return Score(float(verdict.score), {"normalized": (verdict.score - low) / (high - low)})

    def verdict_spans(self, answer: str, item: Item, variant: str = "") -> tuple[VerdictSpan, ...]:
        """The score after ``[RESULT]`` (or the JSON ``score``), on the item's rubric scale."""
        low, high = self.rubric_for(item).bounds
        json_mode = strip_code_fence(answer).startswith("{")
        span = json_value_span(answer, "score") if json_mode else score_span(answer, high)
        return () if span is None else (VerdictSpan("score", *span, scale_values(low, high)),)

    def weighted_score(self, verdict: BaseModel, expected: Mapping[str, float], item: Item,
                       variant: str = "") -> float | None:
        return expected.get("score")


class PrometheusRelative(Protocol):
    """Prometheus relative grading: feedback and the better of two responses.

    Item fields: ``instruction``, ``response_a``, ``response_b``; optional ``reference_answer``,
    ``criteria`` or ``rubric``. Score: 1.0 when the item's response A wins, 0.0 when B wins
    (in both orders, the winner is always reported in the item's own labels).
    """

    name: ClassVar[str] = "prometheus-relative"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "Prometheus 2 pairwise grading: feedback + winner A/B; score 1 if A wins"
    required_fields: ClassVar[tuple[str, ...]] = ("instruction", "response_a", "response_b")
    output_model: ClassVar[type[BaseModel]] = RelativeVerdict
    options_model: ClassVar[type[ProtocolOptions]] = PrometheusRelativeOptions

    options: PrometheusRelativeOptions

    def templates(self) -> Sequence[str]:
        prompts = {"with": ["relative.j2"], "without": ["relative_wo_ref.j2"]}.get(
            self.options.reference, ["relative.j2", "relative_wo_ref.j2"]
        )
        return tuple(f"{_REL}/{name}" for name in ["system.j2", *prompts])

    def score_range(self) -> tuple[float, float] | None:
        return (0.0, 1.0)

    def variants(self, item: Item) -> Sequence[str]:
        return ("AB", "BA") if self.options.both_orders else ("",)

    def vote_scale(self) -> VoteScale:
        """The winner, in the item's own labels: categorical."""
        return VoteScale("categorical", values=("A", "B"))

    def vote(self, verdict: Mapping[str, Any] | None, score: float | None) -> str | None:
        winner = (verdict or {}).get("winner")
        return None if winner is None else str(winner)

    def criteria_for(self, item: Item) -> str:
        """The bracketed criteria line: the item's ``criteria`` or ``rubric``, else the option's."""
        for field in ("criteria", "rubric"):
            if not _blank(value := item.get(field)):
                try:
                    return criteria_line(value)
                except ValueError as exc:
                    raise DatasetError(f"item {item.get('id', '?')}: {field}: {exc}") from None
        if self.options.rubric is None:
            raise DatasetError(
                f"item {item.get('id', '?')}: no criteria: set protocol_options.rubric "
                "or give items a 'criteria' or 'rubric' field"
            )
        return self.options.rubric

    def render(self, item: Item, variant: str = "") -> list[Message]:
        first, second = str(item["response_a"]), str(item["response_b"])
        if _swapped(variant):
            first, second = second, first
        reference = _reference(item, self.options.reference)
        template = "relative.j2" if reference is not None else "relative_wo_ref.j2"
        user = templating.render(
            f"{_REL}/{template}",
            instruction=str(item["instruction"]),
            response_a=first,
            response_b=second,
            reference_answer=reference,
            rubric=self.criteria_for(item),
        )
        system = templating.render(f"{_REL}/system.j2")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def parse(self, answer: str, item: Item, variant: str = "") -> RelativeVerdict:
        if strip_code_fence(answer).startswith("{"):
            verdict = self.verdict_from_json(answer)
            assert isinstance(verdict, RelativeVerdict)
            verdict = check_feedback(verdict, answer)
        else:
            verdict = read_winner(answer)
        if _swapped(variant):
            verdict = verdict.model_copy(update={"winner": _other(verdict.winner)})
        return verdict

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, RelativeVerdict)
        return Score(1.0 if verdict.winner == "A" else 0.0)

    def verdict_spans(self, answer: str, item: Item, variant: str = "") -> tuple[VerdictSpan, ...]:
        """The ``A`` or ``B`` after ``[RESULT]`` (or the JSON ``winner``), in the item's own
        labels (swapped back in the ``BA`` order)."""
        json_mode = strip_code_fence(answer).startswith("{")
        span = json_value_span(answer, "winner") if json_mode else winner_span(answer)
        values = {"A": "B", "B": "A"} if _swapped(variant) else {"A": "A", "B": "B"}
        return () if span is None else (VerdictSpan("winner", *span, values),)


def position_consistency(outcomes: Iterable[tuple[Hashable, str, str | None]]) -> float | None:
    """Share of pairs whose winner is the same in both orders.

    Args:
        outcomes: ``(key, variant, winner)`` with variant ``AB`` or ``BA`` and the winner in the
            item's own labels (as :class:`PrometheusRelative` stores it), None when unscored.
            With repeats or several temperatures, make the key ``(item_id, temperature, repeat)``.

    Returns:
        consistent pairs / pairs judged in both orders, or None when no pair was.

    Raises:
        ValueError: an unknown variant, or two outcomes for the same key and variant.
    """
    winners: dict[Hashable, dict[str, str | None]] = defaultdict(dict)
    for key, variant, winner in outcomes:
        if variant not in ("AB", "BA"):
            raise ValueError(f"variant must be 'AB' or 'BA', got {variant!r}")
        if variant in winners[key]:
            raise ValueError(f"two {variant} outcomes for {key!r}: put the repeat in the key")
        winners[key][variant] = winner
    pairs = [
        (both["AB"], both["BA"])
        for both in winners.values()
        if both.get("AB") is not None and both.get("BA") is not None
    ]
    if not pairs:
        return None
    return sum(ab == ba for ab, ba in pairs) / len(pairs)


def _reference(item: Item, mode: ReferenceMode) -> str | None:
    value = item.get("reference_answer")
    if mode == "without":
        return None
    if _blank(value):
        if mode == "with":
            raise DatasetError(
                f"item {item.get('id', '?')}: reference: with needs a non-empty reference_answer"
            )
        return None
    return str(value)


def _blank(value: Any) -> bool:
    """Missing, None, or an empty CSV cell."""
    return value is None or (isinstance(value, str) and not value.strip())


def _swapped(variant: str) -> bool:
    if variant not in ("", "AB", "BA"):
        raise ValueError(f"prometheus-relative has variants 'AB' and 'BA', not {variant!r}")
    return variant == "BA"


def _other(winner: Winner) -> Winner:
    return "B" if winner == "A" else "A"


__all__ = [
    "AbsoluteVerdict",
    "PrometheusAbsolute",
    "PrometheusAbsoluteOptions",
    "PrometheusRelative",
    "PrometheusRelativeOptions",
    "RelativeVerdict",
    "criteria_line",
    "position_consistency",
]
