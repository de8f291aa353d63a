"""Reading Prometheus answers: the library's patterns, generalised to any scale, plus JSON.

The prometheus-eval library reads ``... [RESULT] 4`` with one regex per mode, anchored at the end
of the answer (see ``shared/reference/prometheus.md``). :func:`library_parse_absolute` and
:func:`library_parse_relative` reproduce it exactly (their tests are the library's fixtures).
The protocols use :func:`read_score` and :func:`read_winner`, which differ in two ways only:
the ``/ 5`` and ``out of 5`` suffixes follow the rubric's top score, and failures raise
:class:`VerdictError` with the reason instead of returning ``(None, None)``. An out-of-range score
is a failure, never clamped (LitEval's own parser let 8s through on a 0-6 rubric).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from judge_engine.errors import ReasonCode, VerdictError

Winner = Literal["A", "B"]


class AbsoluteVerdict(BaseModel):
    """A Prometheus absolute grade."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feedback: str
    """The judge's feedback on the response, judged against the rubric."""
    score: int
    """An integer on the rubric's scale (checked against the item's rubric, never clamped)."""


class RelativeVerdict(BaseModel):
    """A Prometheus relative (A/B) grade."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feedback: str
    """The judge's comparison of the two responses."""
    winner: Winner = Field(description='The better response, "A" or "B".')
    """The better response. In stored outcomes this is always the item's own label: when the
    pair was shown swapped (variant ``BA``) the judge's letter is mapped back."""


_Verdict = TypeVar("_Verdict", AbsoluteVerdict, RelativeVerdict)

# The library's absolute pattern, with its two "/5" suffixes left open for the scale's top.
_ABSOLUTE = (
    r"(?:\[RESULT\]|\[SCORE\]|Score:?|score:?|Result:?|\[Result\]:?|score\s+of)"
    r"\s*(?:\(|\[|\s)*(\d+)"
    r"(?:(?:\)|\]|\s|$)|(?:/\s*{top}|\s*out\s*of\s*{top}))?(?:\s*$)"
)
_RELATIVE = re.compile(
    r"(?:\[RESULT\]|\[RESULT:\s*|\[Response\s+|\[Result\](?:\s+Response)?|\[Result:\s*|(?:^|\n)Result:?\s*)"
    r"\s*(A|B)(?:\])?(?:\s*$)",
    re.IGNORECASE | re.VERBOSE | re.MULTILINE,
)
_FEEDBACK_LABEL = re.compile(r"\A\s*(?:#+\s*)?feedback\s*:\s*", re.IGNORECASE)


@lru_cache(maxsize=64)
def absolute_pattern(top: int = 5) -> re.Pattern[str]:
    """The library's absolute pattern for a scale whose highest score is ``top``."""
    return re.compile(_ABSOLUTE.format(top=top), re.IGNORECASE | re.VERBOSE)


def library_parse_absolute(output: str | None) -> tuple[str | None, int | None]:
    """The library's ``parse_output(output, "absolute")``: ``(output, score)`` or ``(None, None)``."""
    if not output:
        return None, None
    match = absolute_pattern(5).search(output)
    if match and 1 <= int(match.group(1)) <= 5:
        return output, int(match.group(1))
    return None, None


def library_parse_relative(output: str | None) -> tuple[str | None, str | None]:
    """The library's ``parse_output(output, "relative")``: ``(output, "A"|"B")`` or ``(None, None)``."""
    if not output:
        return None, None
    match = _RELATIVE.search(output)
    if match:
        return output, match.group(1).upper()
    return None, None


def read_score(answer: str, low: int, high: int) -> AbsoluteVerdict:
    """Read a text answer ``<feedback> [RESULT] <score>`` on the scale ``low..high``.

    Raises:
        VerdictError: no score at the end of the answer (``incomplete`` when it stops at the
            marker), a score outside ``low..high`` (``out_of_range``), or no feedback before
            the score (``incomplete``: the format has both parts).
    """
    match = absolute_pattern(high).search(answer)
    if match is None:
        raise VerdictError(
            [f"no score found: end the answer with '[RESULT] <an integer between {low} and {high}>'"],
            raw=answer,
            code=_missing_result_code(answer),
        )
    score = int(match.group(1))
    if not low <= score <= high:
        raise VerdictError(
            [f"score {score} is outside the rubric's scale: give an integer between {low} and {high}"],
            raw=answer,
            code=ReasonCode.OUT_OF_RANGE,
        )
    return check_feedback(AbsoluteVerdict(feedback=_feedback(answer[: match.start()]), score=score), answer)


def score_span(answer: str, high: int) -> tuple[int, int] | None:
    """Where :func:`read_score` reads the score: the digits after ``[RESULT]`` (the library's
    pattern, anchored at the end of the answer), never a number in the feedback."""
    match = absolute_pattern(high).search(answer)
    return None if match is None else match.span(1)


def winner_span(answer: str) -> tuple[int, int] | None:
    """Where :func:`read_winner` reads the winner: the ``A`` or ``B`` after ``[RESULT]``."""
    match = _RELATIVE.search(answer) if answer else None
    return None if match is None else match.span(1)


def check_score(verdict: AbsoluteVerdict, low: int, high: int, raw: str) -> AbsoluteVerdict:
    """Reject a JSON verdict whose score lies outside ``low..high`` or that has no feedback."""
    if not low <= verdict.score <= high:
        raise VerdictError(
            [f"score: {verdict.score} is outside the rubric's scale {low}..{high}"],
            raw=raw,
            code=ReasonCode.OUT_OF_RANGE,
        )
    return check_feedback(verdict, raw)


def check_feedback(verdict: _Verdict, raw: str) -> _Verdict:
    """Reject a verdict without feedback: Prometheus answers are feedback, then the result,
    and a bare result is an answer that skipped (or lost) half of what was asked."""
    if not verdict.feedback.strip():
        raise VerdictError(
            ["no feedback: write the feedback first, then '[RESULT]' and the verdict"],
            raw=raw,
            code=ReasonCode.INCOMPLETE,
        )
    return verdict


def read_winner(answer: str) -> RelativeVerdict:
    """Read a text answer ``<feedback> [RESULT] A|B``.

    Raises:
        VerdictError: no verdict at the end of the answer, or no feedback before it.
    """
    match = _RELATIVE.search(answer) if answer else None
    if match is None:
        raise VerdictError(
            ['no verdict found: end the answer with \'[RESULT] A\' or \'[RESULT] B\''],
            raw=answer,
            code=_missing_result_code(answer),
        )
    winner: Winner = "A" if match.group(1).upper() == "A" else "B"
    return check_feedback(RelativeVerdict(feedback=_feedback(answer[: match.start()]), winner=winner), answer)


def _missing_result_code(answer: str) -> ReasonCode:
    """``incomplete`` for an answer that ends at (or just after) its result marker, i.e. stopped
    before the verdict; ``unreadable`` for one that never got to the format."""
    tail = answer.rstrip()[-12:].lower()
    return ReasonCode.INCOMPLETE if "[result" in tail or tail.endswith("result:") else ReasonCode.UNREADABLE


def _feedback(text: str) -> str:
    """The feedback before the verdict marker, without a leading ``Feedback:`` label."""
    return _FEEDBACK_LABEL.sub("", text.strip(), count=1).strip()
