"""The fields a custom judge writes: their declarations, how each is read from an answer, and how
it is described to the judge (the pydantic types they become: :mod:`.custom_options`).

A config declares fields by name under ``protocol_options.fields``::

    fields:
      reasoning: {type: text}                                   # or just: reasoning: text
      score: {type: integer, min: 1, max: 5, description: "1 = unusable, 5 = publishable"}
      verdict: {type: label, choices: [pass, fail], score_map: {pass: 1, fail: 0}}
      quotes: {type: spans, of: response}                       # exact quotes of the item's response
      harmful: {type: boolean}
      better: {type: candidate}                                 # a candidate's label, mapped to its id

Every value is read the same way from JSON and from text: a number may come as ``4``, ``"4"`` or
``4/5``; a label is matched without regard to case or surrounding markup; a boolean is
``true/false/yes/no``; spans are a JSON list of strings, or in text quoted strings (one per line
without quotes), each located in the named item field with :func:`judge_engine.util.text.locate`.
A value that is missing is :attr:`~judge_engine.errors.ReasonCode.INCOMPLETE`, one that cannot
be read ``UNREADABLE``, one outside its range or set ``OUT_OF_RANGE``: :class:`FieldProblem`.
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judge_engine.errors import ReasonCode
from judge_engine.util.text import locate

LABELS = string.ascii_uppercase
"""Candidate labels as shown: the first candidate is ``A``."""


class FieldProblem(Exception):
    """One field of an answer that cannot be used: the message (shown to the judge in the
    re-ask, prefixed with the field's name) and its reason code."""

    def __init__(self, message: str, code: ReasonCode) -> None:
        super().__init__(message)
        self.code = code


class _Field(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # a range of .nan checks nothing

    description: str | None = None
    """Shown to the judge beside the field in the answer format, and in the JSON schema."""

    @property
    def numeric(self) -> bool:
        """Whether the field has a number a score can use."""
        return False

    def bounds(self) -> tuple[float, float] | None:
        """The range of the field's number, when it is bounded."""
        return None

    def number(self, value: Any) -> float:
        """The field's stored value as a number (only for :attr:`numeric` fields)."""
        raise TypeError(f"a {type(self).__name__} has no number")


class IntegerField(_Field):
    """A whole number, optionally within ``min``..``max`` (inclusive)."""

    type: Literal["integer"]
    min: int | None = None
    max: int | None = None

    @model_validator(mode="after")
    def _ordered(self) -> IntegerField:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    @property
    def numeric(self) -> bool:
        return True

    def bounds(self) -> tuple[float, float] | None:
        return None if self.min is None or self.max is None else (float(self.min), float(self.max))

    def number(self, value: Any) -> float:
        return float(value)

    def read(self, raw: Any) -> int:
        value = _read_number(raw, "an integer")
        if not float(value).is_integer():
            raise FieldProblem(f"{value:g} is not an integer{_range_words(self.min, self.max)}", ReasonCode.OUT_OF_RANGE)
        _check_range(int(value), self.min, self.max)
        return int(value)

    def phrase(self) -> str:
        return "an integer" + _range_words(self.min, self.max)


class NumberField(_Field):
    """A number, optionally within ``min``..``max`` (inclusive)."""

    type: Literal["number"]
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> NumberField:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g} is greater than max {self.max:g}")
        return self

    @property
    def numeric(self) -> bool:
        return True

    def bounds(self) -> tuple[float, float] | None:
        return None if self.min is None or self.max is None else (self.min, self.max)

    def number(self, value: Any) -> float:
        return float(value)

    def read(self, raw: Any) -> float:
        value = float(_read_number(raw, "a number"))
        _check_range(value, self.min, self.max)
        return value

    def phrase(self) -> str:
        return "a number" + _range_words(self.min, self.max)


class LabelField(_Field):
    """One of a closed set of labels (``choices``), optionally worth a number each
    (``score_map``; without ``choices``, its keys are the choices)."""

    type: Literal["label"]
    choices: tuple[str, ...] = ()
    score_map: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _choices_from_score_map(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and not raw.get("choices") and isinstance(raw.get("score_map"), dict):
            return {**raw, "choices": list(raw["score_map"])}
        return raw

    @model_validator(mode="after")
    def _closed_set(self) -> LabelField:
        if not self.choices:
            raise ValueError("a label field needs choices (or a score_map whose keys are the choices)")
        folded = [c.strip().casefold() for c in self.choices]
        if any(not c for c in folded) or len(set(folded)) != len(folded):
            raise ValueError("choices must be non-empty and distinct (ignoring case)")
        unknown = sorted(set(self.score_map) - set(self.choices))
        if unknown:
            raise ValueError(f"score_map names labels that are not choices: {', '.join(unknown)}")
        return self

    @property
    def numeric(self) -> bool:
        return bool(self.score_map)

    def bounds(self) -> tuple[float, float] | None:
        values = [self.score_map[c] for c in self.choices if c in self.score_map]
        return (min(values), max(values)) if values and len(values) == len(self.choices) else None

    def number(self, value: Any) -> float:
        if value not in self.score_map:
            raise FieldProblem(f"the label {value!r} has no number in score_map", ReasonCode.OUT_OF_RANGE)
        return float(self.score_map[value])

    def read(self, raw: Any) -> str:
        found = _match_label(_as_text(raw), self.choices)
        if found is None:
            raise FieldProblem(f"{_shorten(_as_text(raw))!r} is not one of: {', '.join(self.choices)}",
                               ReasonCode.OUT_OF_RANGE)
        return found

    def phrase(self) -> str:
        return "one of: " + ", ".join(f'"{c}"' for c in self.choices)


class TextField(_Field):
    """Free text (reasoning, feedback); ``required: false`` lets it be missing or empty."""

    type: Literal["text"]
    required: bool = True

    def read(self, raw: Any) -> str:
        text = _as_text(raw).strip()
        if not text and self.required:
            raise FieldProblem("empty: write it", ReasonCode.INCOMPLETE)
        return text

    def phrase(self) -> str:
        return "text" if self.required else "text, may be empty"


class BooleanField(_Field):
    """Yes or no: ``true``/``false`` (also ``yes``/``no``); as a number 1 or 0."""

    type: Literal["boolean"]

    @property
    def numeric(self) -> bool:
        return True

    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def number(self, value: Any) -> float:
        return 1.0 if value else 0.0

    def read(self, raw: Any) -> bool:
        if isinstance(raw, bool):
            return raw
        word = re.match(r"[\W_]*([A-Za-z0-9]+)", _as_text(raw))
        key = word.group(1).casefold() if word else ""
        if key in ("true", "yes", "y", "1"):
            return True
        if key in ("false", "no", "n", "0"):
            return False
        raise FieldProblem(f"{_shorten(_as_text(raw))!r} is not true or false", ReasonCode.UNREADABLE)

    def phrase(self) -> str:
        return "true or false"


class SpansField(_Field):
    """Exact quotes of an item field (``of``), each located in it: a list of
    ``{text, start, end}`` with character offsets into that field."""

    type: Literal["spans"]
    of: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The item field the quotes must come from (checked per dataset line)."""

    def read(self, raw: Any, source: str) -> list[dict[str, Any]]:
        quotes = _quotes(raw)
        spans, missing = [], []
        for quote in quotes:
            where = locate(quote, source)
            if where is None:
                missing.append(quote)
            else:
                spans.append({"text": quote, "start": where[0], "end": where[1]})
        if missing:
            shown = "; ".join(repr(_shorten(q)) for q in missing)
            raise FieldProblem(f"not found in the {_words(self.of)} (quote it exactly): {shown}", ReasonCode.OUT_OF_RANGE)
        return spans

    def phrase(self, json_mode: bool) -> str:
        what = f"exact quotes copied from the {_words(self.of)}"
        return f"a list of {what}" if json_mode else f"{what}, each in double quotes, or none"


class CandidateField(_Field):
    """One of the candidates shown (``protocol_options.candidates``), by its label (``A``,
    ``B``...); stored as the label shown and, in ``<name>_id``, the candidate's own id, the same
    whatever the order. ``score_map`` gives candidate ids numbers."""

    type: Literal["candidate"]
    score_map: dict[str, float] = Field(default_factory=dict)

    @property
    def numeric(self) -> bool:
        return bool(self.score_map)

    def bounds(self) -> tuple[float, float] | None:
        return (min(self.score_map.values()), max(self.score_map.values())) if self.score_map else None

    def number(self, value: Any) -> float:
        if value not in self.score_map:
            raise FieldProblem(f"the candidate {value!r} has no number in score_map", ReasonCode.OUT_OF_RANGE)
        return float(self.score_map[value])

    def read(self, raw: Any, labels: tuple[str, ...]) -> str:
        match = _CANDIDATE.match(_as_text(raw).strip())
        label = match.group("label").upper() if match else None
        if label is None or label not in labels:
            raise FieldProblem(f"{_shorten(_as_text(raw))!r} is not one of the labels {', '.join(labels)}",
                               ReasonCode.OUT_OF_RANGE)
        return label

    def phrase(self, labels: tuple[str, ...]) -> str:
        return "the label of one candidate: " + ", ".join(f'"{label}"' for label in labels)


FieldSpec = Annotated[
    IntegerField | NumberField | LabelField | TextField | BooleanField | SpansField | CandidateField,
    Field(discriminator="type"),
]
"""One declared field (the ``type`` key picks which)."""

FIELD_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
RESERVED_NAMES = frozenset({"mean", "min", "max", "count", "order"})
"""Field names taken by score expressions (functions) and the verdict (``order``)."""


# --- reading values ----------------------------------------------------------------------------

_NUMBER = re.compile(r"^[\s*_`\"'“”(\[]*([-+]?(?:\d+(?:\.\d*)?|\.\d+))")
_CANDIDATE = re.compile(r"^[\s*_`\"'“”(\[]*(?:(?:candidate|response|answer|option|translation)\s+)?"
                        r"(?P<label>[A-Za-z])(?![A-Za-z])", re.IGNORECASE)
_QUOTED = re.compile(r"\"([^\"\n]+)\"|“([^”\n]+)”|„([^“”\n]+)[“”]")
_NONE = frozenset({"", "none", "-", "n/a", "[]", "nothing"})


def _as_text(raw: Any) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return raw if isinstance(raw, str) else str(raw)


def _read_number(raw: Any, what: str) -> float:
    if isinstance(raw, bool):
        raise FieldProblem(f"{raw} is not {what}", ReasonCode.UNREADABLE)
    if isinstance(raw, int | float):
        return float(raw)
    match = _NUMBER.match(_as_text(raw))
    if match is None:
        raise FieldProblem(f"{_shorten(_as_text(raw))!r} is not {what}", ReasonCode.UNREADABLE)
    return float(match.group(1))


def _check_range(value: float, low: float | None, high: float | None) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        raise FieldProblem(f"{value:g} is outside the range: give a value{_range_words(low, high)}",
                           ReasonCode.OUT_OF_RANGE)


def _range_words(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" from {low:g} to {high:g}"
    if low is not None:
        return f" of at least {low:g}"
    if high is not None:
        return f" of at most {high:g}"
    return ""


def _match_label(text: str, choices: tuple[str, ...]) -> str | None:
    """The choice ``text`` names: the whole text without markup, or its first words (longest
    choice first), ignoring case."""
    cleaned = text.strip().strip("*_`\"'“”‘’()[]{}<>.,;:!").strip()
    folded = cleaned.casefold()
    for choice in choices:
        if folded == choice.casefold():
            return choice
    for choice in sorted(choices, key=len, reverse=True):
        key = choice.casefold()
        if folded.startswith(key) and not folded[len(key):len(key) + 1].isalnum():
            return choice
    return None


def _quotes(raw: Any) -> list[str]:
    """The quotes of a spans value: a JSON list of strings, or text holding quoted strings (else
    one quote per non-empty line); ``none`` for no quote."""
    if isinstance(raw, list):
        if not all(isinstance(q, str) for q in raw):
            raise FieldProblem("must be a list of quoted strings", ReasonCode.UNREADABLE)
        return [q for q in raw if q.strip()]
    text = _as_text(raw).strip()
    if text.casefold() in _NONE:
        return []
    quoted = [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(text)]
    if quoted:
        return quoted
    return [line.strip().lstrip("-•*").strip() for line in text.splitlines() if line.strip()]


def _words(name: str) -> str:
    return name.replace("_", " ")


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
