"""What a judging protocol is: the contract between the engine and one judging method.

A protocol is a versioned unit. It declares the item fields it needs, renders an item to chat
messages from templates in ``judge_engine/protocols/prompts/<protocol>/``, reads the judge's answer (strict
JSON, or the text format of the original method) into a pydantic verdict, checks it, and scores it.
It never turns an unreadable answer into a score: ``parse`` raises :class:`VerdictError`, the engine
re-asks with the problems stated, and after the re-ask budget records the task as unscored.

The engine treats protocols as pure functions of (options, item, variant, answer): no I/O, no
clocks, no global state, so parsing can be re-run offline from transcripts.

A protocol only reads answers. The answers the project's fake server makes up for its prompt
(tests, ``--demo``, benchmarks) are written in :mod:`judge_engine.fake.writers`, which may import
a protocol's models and helpers; nothing here imports the fake.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from judge_engine._moved import moved_names
from judge_engine.errors import ConfigError, ReasonCode, VerdictError
from judge_engine.protocols.verdict_spans import VerdictSpan, value_probabilities
from judge_engine.util.naming import describe_error, shown_loc

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""

Item = Mapping[str, Any]
"""One dataset row after field mapping: canonical field names (``id``, ``source``, ...) to values."""

OutputMode = Literal["text", "json"]

REASK_MARKER = "Your previous answer could not be used"
"""First words of every re-ask turn (the fake server strips re-ask turns by this marker)."""


class ProtocolOptions(BaseModel):
    """Options every protocol accepts under a judge's ``protocol_options``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    output: OutputMode = "text"
    """``text``: the original method's answer format; ``json``: a response schema is sent to the
    provider and the answer is read as JSON (a text-format answer is still accepted)."""


@dataclass(frozen=True, slots=True)
class VoteScale:
    """What a judge's verdict is as a vote in a jury (:mod:`judge_engine.trust.jury`), and so which
    aggregates and which agreement coefficient fit it.

    Attributes:
        kind: ``categorical`` (labels: a majority or weighted vote; kappa), ``ordinal`` (numbers
            on a short ordered scale: any aggregate; Krippendorff's alpha, ordinal) or
            ``interval`` (numbers: mean, median, weighted mean; ICC).
        values: the labels a categorical vote may take, when the protocol knows them.
        bounds: the numbers' range, when the protocol knows it.
    """

    kind: Literal["categorical", "ordinal", "interval"]
    values: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class Score:
    """What a valid verdict is worth.

    Attributes:
        score: the headline number in the protocol's units (None for purely categorical verdicts).
        scores: named breakdowns (per aspect, per dimension, per candidate...).
    """

    score: float | None
    scores: Mapping[str, float] = field(default_factory=dict)


class Protocol(ABC):
    """Base class of every judging protocol. Subclasses set the class variables and implement
    :meth:`render`, :meth:`parse` and :meth:`score`."""

    name: ClassVar[str]
    """Registry name, e.g. ``gemba-mqm``."""
    version: ClassVar[str]
    """Bumped whenever prompts, parsing or scoring change meaning; part of cache keys and task ids."""
    description: ClassVar[str]
    """One line for ``judge-engine protocols``."""
    required_fields: ClassVar[tuple[str, ...]]
    """Canonical item fields the protocol needs (checked per dataset line before any call)."""
    output_model: ClassVar[type[BaseModel]]
    """The verdict model: the JSON-mode response schema and the shape stored in outcomes."""
    options_model: ClassVar[type[ProtocolOptions]] = ProtocolOptions
    """The model of ``protocol_options`` for this protocol."""
    judge_model: ClassVar[type[BaseModel] | None] = None
    """The JSON-mode schema sent to the provider when it differs from :attr:`output_model`
    (fields the protocol fills in itself, such as span offsets, are left out)."""
    typical_completion_tokens: ClassVar[int] = 200
    """Tokens in a typical well-formed answer: ``plan``'s completion estimate per call (capped at
    the judge's ``max_tokens``). Protocols set it from real answers where the references hold
    some. The default, a paragraph of feedback and a verdict, is what the Prometheus prompts ask
    for ("write a detailed feedback" then ``[RESULT]``); the references hold no real Prometheus
    answer and the fake server's one-sentence feedback (~25 tokens) is a floor, not typical."""
    reasks: ClassVar[bool] = True
    """False for methods whose data is the model's first answer (generation protocols): an
    unusable answer is then recorded unscored at once instead of re-asked, since a re-ask would
    change what the method measures (its valid-response rate)."""
    item_in_cache_key: ClassVar[bool] = False
    """True when each item is an independent draw of a prompt that may be the same for every item
    (DAT's names no cue; CDAT's repeats a cue across samples): the item's id then goes into the
    answer cache key, so one item's answer is never served as another's."""
    reads_truncated: ClassVar[bool] = False
    """True when an answer cut off at ``max_tokens`` is still read as it is (methods that set a
    small ``max_tokens`` on purpose and parse what came); otherwise it is ``incomplete``."""
    output_per_config: ClassVar[bool] = False
    """True when :attr:`output_model` is built from the options (``custom``: the fields a
    config declares), so no one schema of it can be published in ``schemas/``."""
    request_defaults: ClassVar[Mapping[str, Any]] = {}
    """Judge settings the method itself fixes, used where a judge's config does not set them
    (``pairwise-annotators``: ``max_tokens`` 10 and log-probs, as the reference asks)."""

    def __init__(self, options: ProtocolOptions | None = None) -> None:
        self.options = options if options is not None else self.options_model()

    @classmethod
    def from_options(cls, raw: Mapping[str, Any] | None, *, where: str = "protocol_options") -> Self:
        """Validate raw ``protocol_options``; errors name the offending key."""
        try:
            return cls(cls.options_model.model_validate(dict(raw or {})))
        except ValidationError as exc:
            model = cls.options_model
            problems = "; ".join(f"{where}{''.join(f'.{p}' for p in shown_loc(model, e['loc']))}: "
                                 f"{describe_error(model, e, what='option')}" for e in exc.errors())
            raise ConfigError(f"protocol {cls.name}: {problems}") from None

    # --- what the engine asks of every protocol -------------------------------------------

    @property
    def json_mode(self) -> bool:
        return self.options.output == "json"

    def score_range(self) -> tuple[float, float] | None:
        """Inclusive (low, high) of :attr:`Score.score`, or None when unbounded or categorical."""
        return None

    def templates(self) -> Sequence[str]:
        """Template paths (under ``judge_engine/protocols/prompts``) this configuration renders; hashed
        into run manifests and cache keys so that editing a template invalidates old answers."""
        return ()

    def template_hashes(self) -> list[str]:
        """Content hashes of :meth:`templates`, in the same order (a protocol whose templates
        are not package files, such as a config's own, hashes their text instead)."""
        # Here, not at the top: jinja2 loads with the first template, not with the contract.
        from judge_engine.protocols.templating import template_hash

        return [template_hash(t) for t in self.templates()]

    def vote_scale(self) -> VoteScale | None:
        """What a verdict is as a jury vote (None: the protocol has no one verdict per item to
        vote with, e.g. BWS scores each candidate). Default: the score, on an interval scale."""
        return VoteScale("interval", bounds=self.score_range())

    def vote(self, verdict: Mapping[str, Any] | None, score: float | None) -> str | float | None:
        """A scored outcome's vote in a jury, from its stored verdict and score: a label for a
        categorical :meth:`vote_scale`, else a number. Default: the score."""
        return score

    def field_reader(self, field: str) -> str | None:
        """The option that reads required item field ``field``, for a message about a field no
        row has (a custom judge's ``protocol_options.template, line 3, reads the variable
        'mesage'``); None when the protocol reads it by a name of its own."""
        return None

    def check_item(self, item: Item) -> list[str]:
        """Problems with ``item`` beyond missing required fields, found when the dataset is
        scanned (before anything is sent). Empty when the item is fine."""
        return []

    def variants(self, item: Item) -> Sequence[str]:
        """Sub-tasks per item (e.g. both A/B orders, several candidate orders). One by default."""
        return ("",)

    @abstractmethod
    def render(self, item: Item, variant: str = "") -> list[Message]:
        """The chat messages sent to the judge for ``item`` (and ``variant``)."""

    def response_format(self) -> dict[str, Any] | None:
        """The provider ``response_format`` in JSON mode (a JSON schema of :attr:`output_model`).

        Built once per protocol instance (options are frozen): it is read for every request, and
        generating a pydantic schema costs far more than the rest of building one.
        """
        if not self.json_mode:
            return None
        cached: dict[str, Any] | None = self.__dict__.get("_response_format")
        if cached is None:
            cached = self.__dict__["_response_format"] = self._build_response_format()
        return cached

    def _build_response_format(self) -> dict[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {
                "name": self.name.replace("-", "_"),
                "schema": (self.judge_model or self.output_model).model_json_schema(),
            },
        }

    @abstractmethod
    def parse(self, answer: str, item: Item, variant: str = "") -> BaseModel:
        """Read and check one answer. Raises :class:`VerdictError` naming every problem."""

    @abstractmethod
    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        """Score a verdict that :meth:`parse` accepted."""

    # --- confidence: where the verdict is, and what a weighted score is ----------------------

    def verdict_spans(self, answer: str, item: Item, variant: str = "") -> tuple[VerdictSpan, ...]:
        """Where :meth:`parse` reads the verdict's values in ``answer`` (an answer it accepts),
        each with the values it accepts there. Empty (the default) when the protocol cannot
        say: a judge of it cannot read its confidence from token probabilities."""
        return ()

    def read_probabilities(self, span: VerdictSpan, tokens: Sequence[Any]) -> dict[str, float] | None:
        """Each value's probability at ``span`` from the answer's tokens
        (:class:`~judge_engine.providers.base.TokenLogprob`): by default the rule of
        :func:`judge_engine.protocols.verdict_spans.value_probabilities`; a method with a rule of
        its own (``pairwise-annotators``: the reference's token rule) says so here."""
        return value_probabilities(span, tokens)

    def locates_verdict(self) -> bool:
        """Whether :meth:`verdict_spans` says where the verdict is (for ``confidence: logprobs``)."""
        return type(self).verdict_spans is not Protocol.verdict_spans

    def weighted_score(self, verdict: BaseModel, expected: Mapping[str, float], item: Item,
                       variant: str = "") -> float | None:
        """The score with each numeric field's value replaced by its probability-weighted mean
        (``expected``: field -> the G-Eval value of a closed integer scale), or None when the
        protocol's score is not made from such fields (the default)."""
        return None

    def weighs_scores(self) -> bool:
        """Whether :meth:`weighted_score` can give a score (for ``confidence.score: weighted``)."""
        return type(self).weighted_score is not Protocol.weighted_score

    def request_group(self, variant: str) -> str:
        """The requests of an item that are left out together when one of them is unreadable
        (``pairwise-annotators``: an annotator's two orders); by default each variant alone."""
        return variant

    def reask(self, error: VerdictError) -> str:
        """The user turn that asks the judge again after an unusable answer."""
        problems = "\n".join(f"- {p}" for p in error.problems)
        return (
            f"{REASK_MARKER}:\n{problems}\n"
            "Please answer the original request again, following the requested format exactly."
        )

    def verdict_from_json(self, answer: str) -> BaseModel:
        """Validate a JSON answer against :attr:`output_model` (fences around it are tolerated)."""
        text = strip_code_fence(answer)
        try:
            return self.output_model.model_validate_json(text)
        except ValidationError as exc:
            problems = [
                f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()
            ]
            raise VerdictError(problems, raw=answer, code=validation_code(exc)) from None


_OUT_OF_RANGE_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "literal_error", "enum"}
)


def validation_code(exc: ValidationError) -> ReasonCode:
    """The reason code of a rejected JSON answer: ``unreadable`` when it is not the verdict's
    shape at all, else ``out_of_range`` for a value outside its scale or closed set, else
    ``incomplete`` for a required field that is missing or JSON that ends too soon."""
    kinds = [e["type"] for e in exc.errors()]
    if any(k == "json_invalid" for k in kinds):
        eof = any("EOF" in e["msg"] for e in exc.errors() if e["type"] == "json_invalid")
        return ReasonCode.INCOMPLETE if eof else ReasonCode.UNREADABLE
    if all(k == "missing" for k in kinds):
        return ReasonCode.INCOMPLETE
    if all(k in _OUT_OF_RANGE_ERRORS or k == "missing" for k in kinds):
        return ReasonCode.OUT_OF_RANGE
    return ReasonCode.UNREADABLE


def json_error_code(exc: ValueError, text: str) -> ReasonCode:
    """``incomplete`` when JSON text ends before its value does (an answer that stopped early),
    else ``unreadable``."""
    position = getattr(exc, "pos", None)
    if position is not None and position >= len(text.rstrip()):
        return ReasonCode.INCOMPLETE
    return ReasonCode.UNREADABLE


def strip_code_fence(text: str) -> str:
    """Remove one surrounding Markdown code fence (```json ... ```), if present."""
    stripped = text.strip()
    if stripped.startswith("```"):
        first_newline = stripped.find("\n")
        if first_newline != -1 and stripped.endswith("```"):
            return stripped[first_newline + 1 : -3].strip()
    return stripped


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from any printable parts, stable across processes (unlike ``hash``)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


if not TYPE_CHECKING:  # names of 0.1 that moved (a type checker reads the new homes)
    __getattr__ = moved_names(__name__, {
        "scale_values": "judge_engine.protocols.verdict_spans",
    })
