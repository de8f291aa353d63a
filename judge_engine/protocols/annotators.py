"""``pairwise-annotators``: the simulated-annotator pairwise judge of "Trust or Escalate" (Jung,
Brahman, Choi, ICLR 2025), as its authors' code runs it.

One simulated annotator is a few-shot prompt with that annotator's K human-labelled examples;
each of N annotators judges the pair in both orders, so an item is 2N requests (variants
``a1-AB``, ``a1-BA``, ``a2-AB``...). The prompts are the reference's, byte for byte
(``prompts/pairwise_annotators/``, filled with Python's ``str.format`` as the reference does),
sent with temperature 0, ``max_tokens`` 10 and ``top_logprobs`` 10 unless the judge says
otherwise (:attr:`request_defaults`).

**Reading an answer** (the reference's ``evaluate_fewshot``): the preferred response is A when
the answer contains ``[[A]]``, else B when it contains ``[[B]]``, else there is none
(``unreadable``). There is no re-ask: the reference parses what came, and a re-ask would change
which annotators count. An answer cut off at ``max_tokens`` is read as it is. The verdict holds
the letter as written (``shown``) and the preferred response in the item's own labels
(``preferred``: the swapped order maps back); the score is 1 when the item's A is preferred.

**The probability of a label** is read the reference's way (:meth:`read_probabilities`): at the
first token that follows a token containing ``[[`` and itself contains ``A`` or ``B``, the
entries of its top log-probs whose token is exactly ``A`` or ``B``; a label absent from them has
probability 0. A readable answer where no such token is found has probability 0 for both.

**The item's prediction and confidence** are :mod:`judge_engine.trust.decisions`'s: the average over
the kept annotators' requests of p(output 1) and p(output 2), the prediction the larger, the
confidence that average. An annotator whose answer is unreadable in either order is left out,
both of its requests (:meth:`request_group`), and counted on the item's outcome; an item with no
annotator left is unscored, ``none_readable``.

**The example pool** (``examples_file``, relative to the config) is data you provide: JSON lines,
either one annotator per line (``{"annotator", "evaluated_samples": [...]}``, the reference's
``fewshot.jsonl``) or one example per line, dealt to the annotators in file order. An example is
``{"instruction", "outputs": [a, b], "preferences": {"human": 1 | 2}}`` (1: A preferred).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from judge_engine.errors import ConfigError, ReasonCode, VerdictError
from judge_engine.protocols.base import (
    Item,
    Message,
    Protocol,
    ProtocolOptions,
    Score,
    VoteScale,
)
from judge_engine.protocols.templating import PROMPTS_DIR, template_hash
from judge_engine.protocols.verdict_spans import VerdictSpan
from judge_engine.util.jsonio import text_hash

FOLDER = "pairwise_annotators"
SYSTEM, INSTRUCTION, EXAMPLE, QUERY = (f"{FOLDER}/{name}.txt" for name in ("system", "instruction", "example", "query"))
Label = Literal["A", "B"]
_LABEL_AT = re.compile(r"\[\[\s*([AB])")


class Example(BaseModel):
    """One human-labelled pair of the pool."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    instruction: str
    outputs: tuple[str, str]
    """The two responses: ``outputs[0]`` is shown as Assistant A."""
    human: Literal[1, 2]
    """The human's preference: 1 (A) or 2 (B)."""

    @model_validator(mode="before")
    @classmethod
    def _preference(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "human" not in raw and isinstance(raw.get("preferences"), dict):
            return {**raw, "human": raw["preferences"].get("human")}
        return raw


class AnnotatorOptions(ProtocolOptions):
    """Options of ``pairwise-annotators``."""

    examples_file: Path | None = Field(default=None, exclude=True)
    """The pool of human-labelled examples (JSON lines; see the module docstring). Not in task
    ids: the pool's content is (its hash goes into the run id and cache keys), so moving the
    project changes nothing."""
    annotators: int | None = Field(default=None, ge=1, le=50)
    """N, the simulated annotators (default: every annotator of the pool; 3 for a pool of
    single examples)."""
    examples: int | None = Field(default=None, ge=1, le=50)
    """K, each annotator's examples (default: all of an annotator's; 3 for a pool of single
    examples)."""
    _pool: tuple[tuple[Example, ...], ...] = PrivateAttr(default=())
    _hash: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _read_pool(self) -> AnnotatorOptions:
        if self.output != "text":
            raise ValueError("output: the simulated annotators answer [[A]] or [[B]] as the reference asks; "
                             "there is no JSON mode")
        if self.examples_file is None:  # the registry's listing builds the protocol bare; a judge cannot
            return self
        try:
            data = self.examples_file.read_bytes()
        except OSError as exc:
            raise ValueError(f"examples_file {self.examples_file}: cannot read it ({exc.strerror or exc})") from None
        self._pool = _annotators(data.decode("utf-8"), self.examples_file, self.annotators, self.examples)
        self._hash = text_hash(json.dumps([[e.model_dump(mode="json") for e in a] for a in self._pool]).encode())
        return self

    @property
    def pool(self) -> tuple[tuple[Example, ...], ...]:
        """The N annotators' K examples each."""
        return self._pool


def _annotators(text: str, where: Path, n: int | None, k: int | None) -> tuple[tuple[Example, ...], ...]:
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                lines.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ValueError(f"examples_file {where} line {number}: not JSON ({exc.msg})") from None
    try:
        if lines and all(isinstance(raw, dict) and "evaluated_samples" in raw for _, raw in lines):
            groups = [[Example.model_validate(e) for e in raw["evaluated_samples"]] for _, raw in lines]
            groups = [g[:k] if k is not None else g for g in groups]
        else:
            examples = [Example.model_validate(raw) for _, raw in lines]
            n, k = n or 3, k or 3
            groups = [examples[i * k:(i + 1) * k] for i in range(n)]
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ValueError(f"examples_file {where}: an example needs instruction, outputs [a, b] and "
                         f"preferences.human 1 or 2 ({str(exc).splitlines()[0]})") from None
    groups = groups[:n] if n is not None else groups
    wanted_k = k if k is not None else None
    short = [i + 1 for i, g in enumerate(groups) if not g or (wanted_k is not None and len(g) < wanted_k)]
    if not groups or short or (n is not None and len(groups) < n):
        raise ValueError(f"examples_file {where}: {n or 'the'} annotators of {k or 'their'} examples each do not "
                         f"fit the pool ({len(groups)} annotators, of {[len(g) for g in groups]} examples)")
    return tuple(tuple(g) for g in groups)


class AnnotatorVerdict(BaseModel):
    """One simulated annotator's choice in one order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    shown: Label
    """The letter the judge wrote (``[[A]]`` or ``[[B]]``), in the order it was shown."""
    preferred: Label
    """The preferred response in the item's own labels (A: ``response_a``)."""


class PairwiseAnnotators(Protocol):
    """Simulated annotators (Trust or Escalate): N few-shot annotators x both orders per pair."""

    name: ClassVar[str] = "pairwise-annotators"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ("Trust or Escalate's simulated annotators: N few-shot prompts x both orders; "
                                  "p(A), p(B) from log-probs, averaged per item")
    required_fields: ClassVar[tuple[str, ...]] = ("instruction", "response_a", "response_b")
    output_model: ClassVar[type[BaseModel]] = AnnotatorVerdict
    options_model: ClassVar[type[ProtocolOptions]] = AnnotatorOptions
    typical_completion_tokens: ClassVar[int] = 5
    reasks: ClassVar[bool] = False
    reads_truncated: ClassVar[bool] = True
    request_defaults: ClassVar[Mapping[str, Any]] = {
        "max_tokens": 10, "confidence": {"method": "logprobs", "top_logprobs": 10}}

    options: AnnotatorOptions

    @classmethod
    def from_options(cls, raw: Mapping[str, Any] | None, *, where: str = "protocol_options") -> Self:
        """As every protocol's, and an ``examples_file`` is required: the annotators are its examples."""
        protocol = super().from_options(raw, where=where)
        if protocol.options.examples_file is None:
            raise ConfigError(f"protocol {cls.name}: {where}.examples_file: required: the pool of human-labelled "
                              "examples the simulated annotators are made of (JSON lines, relative to the config)")
        return protocol

    def templates(self) -> Sequence[str]:
        """The prompt texts, and the example pool (hashed as it was read)."""
        return (SYSTEM, INSTRUCTION, EXAMPLE, QUERY, "examples_file")

    def template_hashes(self) -> list[str]:
        return [*(template_hash(t) for t in (SYSTEM, INSTRUCTION, EXAMPLE, QUERY)), self.options._hash]

    def score_range(self) -> tuple[float, float] | None:
        return (0.0, 1.0)

    def variants(self, item: Item) -> Sequence[str]:
        return tuple(f"a{n}-{order}" for n in range(1, len(self.options.pool) + 1) for order in ("AB", "BA"))

    def request_group(self, variant: str) -> str:
        """An annotator's two orders go together."""
        return variant.partition("-")[0]

    def vote_scale(self) -> VoteScale:
        return VoteScale("categorical", values=("A", "B"))

    def vote(self, verdict: Mapping[str, Any] | None, score: float | None) -> str | None:
        preferred = (verdict or {}).get("preferred")
        return None if preferred is None else str(preferred)

    def render(self, item: Item, variant: str = "") -> list[Message]:
        annotator, swapped = _variant(variant, len(self.options.pool))
        first, second = str(item["response_a"]), str(item["response_b"])
        if swapped:
            first, second = second, first
        prompt = _text(INSTRUCTION)
        for example in self.options.pool[annotator]:
            prompt += "\n" + _text(EXAMPLE).format(
                instruction=example.instruction, assistant_a=example.outputs[0], assistant_b=example.outputs[1],
                preferred_response="[[A]]" if example.human == 1 else "[[B]]")
        prompt += "\n" + _text(QUERY).format(instruction=str(item["instruction"]), assistant_a=first,
                                               assistant_b=second)
        return [{"role": "system", "content": _text(SYSTEM)}, {"role": "user", "content": prompt}]

    def parse(self, answer: str, item: Item, variant: str = "") -> AnnotatorVerdict:
        generation = answer.strip()
        shown: Label
        if "[[A]]" in generation:
            shown = "A"
        elif "[[B]]" in generation:
            shown = "B"
        else:
            raise VerdictError("no verdict: the answer holds neither [[A]] nor [[B]]", raw=answer,
                               code=ReasonCode.UNREADABLE)
        _annotator, swapped = _variant(variant, len(self.options.pool))
        return AnnotatorVerdict(shown=shown, preferred=_other(shown) if swapped else shown)

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, AnnotatorVerdict)
        return Score(1.0 if verdict.preferred == "A" else 0.0)

    def verdict_spans(self, answer: str, item: Item, variant: str = "") -> tuple[VerdictSpan, ...]:
        """The letter of the first ``[[A`` or ``[[B``: where the reference reads the probabilities."""
        match = _LABEL_AT.search(answer)
        if match is None:
            return ()
        _annotator, swapped = _variant(variant, len(self.options.pool))
        values: dict[str, str | int] = {"A": "B", "B": "A"} if swapped else {"A": "A", "B": "B"}
        return (VerdictSpan("preferred", *match.span(1), values),)

    def read_probabilities(self, span: VerdictSpan, tokens: Sequence[Any]) -> dict[str, float] | None:
        """The reference's rule (see the module docstring): its tokens, not the span's characters."""
        probabilities = {"A": 0.0, "B": 0.0}
        for before, token in zip(tokens, tokens[1:], strict=False):
            if "[[" in before.token and ("A" in token.token or "B" in token.token):
                for alternative, logprob in token.top:
                    if alternative in probabilities:
                        probabilities[alternative] = math.exp(logprob)
                break
        return probabilities


def _variant(variant: str, annotators: int) -> tuple[int, bool]:
    """``a3-BA`` -> (annotator 2, swapped)."""
    head, _, order = variant.partition("-")
    if not head.startswith("a") or not head[1:].isdigit() or order not in ("AB", "BA") \
            or not 1 <= int(head[1:]) <= annotators:
        raise ValueError(f"pairwise-annotators has variants a1-AB ... a{annotators}-BA, not {variant!r}")
    return int(head[1:]) - 1, order == "BA"


def _other(label: Label) -> Label:
    return "B" if label == "A" else "A"


_TEXTS: dict[str, str] = {}


def _text(template: str) -> str:
    """A prompt text of the package, byte for byte (read once)."""
    found = _TEXTS.get(template)
    if found is None:
        found = _TEXTS[template] = (PROMPTS_DIR / template).read_bytes().decode("utf-8")
    return found


__all__ = ["AnnotatorOptions", "AnnotatorVerdict", "Example", "PairwiseAnnotators"]
