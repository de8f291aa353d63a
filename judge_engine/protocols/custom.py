"""``protocol: custom``: a judge defined in the config, with no Python: your rubric's prompt, the
fields the judge writes, and how they make a score.

```yaml
protocol: custom
protocol_options:
  template_file: rubric.j2        # or template: "inline Jinja text"; optional system: "..."
  fields:
    reasoning: text
    score: {type: integer, min: 1, max: 5}
  score: score                    # a field, or an expression: "mean(a, b) - 0.5 * count(errors)"
  output: json                    # json, or text read by a marker ([RESULT] by default) or a regex
```

**Prompt.** The template is rendered in the package's sandbox (:func:`judge_engine.protocols.templating.
render_source`: strict undefined variables, no includes, read-only variables, a bounded render)
with every item field as a variable
(and the item as ``item``, the shown ``candidates``, the ``variant``); dataset text only ever
enters as a variable. The answer format is generated from the declared fields
(``prompts/custom/answer_format.j2``) and appended to the user message, unless the template
places ``{{ answer_format }}`` itself or ``answer_format: none``. The template's text is hashed
into the run id and the cache keys, like a built-in protocol's template files.

**Answers.** ``output: json`` sends a JSON schema built from the fields (:attr:`judge_model`)
and reads a JSON object; ``output: text`` reads ``<text> [RESULT] <value>`` (one value field,
and at most one text field before the marker: ``marker`` sets another marker) or, with
``regex``, the named groups of its last match (one group per field). Every field is then read
and checked (:mod:`.custom_fields`); each problem names its field, and a missing field is
``incomplete``, an unreadable one ``unreadable``, a value out of range ``out_of_range``: the
engine re-asks with the problems stated, then records the task unscored. Nothing unreadable
ever becomes a score.

**Candidates and order.** ``candidates: <item field>`` (a list of texts or ``{id, text}``)
shows them as ``A``, ``B``...; a ``candidate`` field names one by its label and is stored with
the candidate's id. ``orders: N`` judges each item N times, rotating the order (``order0`` is
the dataset's order; a Latin square when N = the number of candidates), as BWS does, so
position effects can be measured (``stats``: position consistency).
"""

from __future__ import annotations

import json
import random
import re
from abc import ABCMeta
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self, cast

from pydantic import BaseModel, ConfigDict

from judge_engine.errors import ConfigError, DatasetError, ReasonCode, VerdictError
from judge_engine.protocols import templating
from judge_engine.protocols.base import (
    Item,
    Message,
    Protocol,
    ProtocolOptions,
    Score,
    VoteScale,
    json_error_code,
    stable_seed,
    strip_code_fence,
)
from judge_engine.protocols.custom_fields import (
    LABELS,
    CandidateField,
    FieldProblem,
    IntegerField,
    LabelField,
    SpansField,
    TextField,
)
from judge_engine.protocols.custom_options import CustomOptions, declared_models
from judge_engine.protocols.verdict_spans import VerdictSpan, json_value_span, scale_values
from judge_engine.util.jsonio import text_hash

ANSWER_FORMAT = "custom/answer_format.j2"
DEFAULT_MARKER = "[RESULT]"
MAX_CANDIDATES = len(LABELS)
TEMPLATE_VARIABLES = frozenset({"item", "candidates", "answer_format", "variant"})
"""Variables every custom template gets besides the item's fields (which they shadow)."""
_CODE_ORDER = (ReasonCode.INCOMPLETE, ReasonCode.UNREADABLE, ReasonCode.OUT_OF_RANGE)
"""When an answer has several problems, the first of these codes present is the outcome's:
a missing part first (the answer stopped), then an unreadable one, then a value out of range."""


class _Undeclared(BaseModel):
    """The verdict of ``custom`` before a config declares its fields (never produced)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class CustomJudge(Protocol):
    """A judge whose prompt, fields and score come from its config (see the module docstring).

    ``CustomJudge(options)`` returns an instance of a class made for those options, whose
    :attr:`output_model` (the stored verdict) and :attr:`judge_model` (the JSON schema sent) hold
    the declared fields, and whose :attr:`required_fields` are the item fields the template reads.
    """

    name: ClassVar[str] = "custom"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "your own judge: a Jinja template, declared fields, a score (protocol_options)"
    required_fields: ClassVar[tuple[str, ...]] = ()
    output_model: ClassVar[type[BaseModel]] = _Undeclared
    options_model: ClassVar[type[ProtocolOptions]] = CustomOptions
    output_per_config: ClassVar[bool] = True

    options: CustomOptions

    def __new__(cls, options: ProtocolOptions | None = None) -> Self:
        target: type[CustomJudge] = cls
        if cls is CustomJudge:
            if not isinstance(options, CustomOptions):
                raise ConfigError("protocol custom: the judge is defined by its protocol_options: a template "
                                  "(or template_file) and fields")
            target = _declared_class(options)
        return cast(Self, object.__new__(target))

    # --- what the engine asks ------------------------------------------------------------------

    def templates(self) -> Sequence[str]:
        names = [ANSWER_FORMAT, self.options.template_name]
        return (*names, "system") if self.options.system is not None else tuple(names)

    def template_hashes(self) -> list[str]:
        hashes = [templating.template_hash(ANSWER_FORMAT), text_hash(self.options._text.encode())]
        if self.options.system is not None:
            hashes.append(text_hash(self.options.system.encode()))
        return hashes

    def score_range(self) -> tuple[float, float] | None:
        return self.options.rule.bounds

    def field_reader(self, field: str) -> str | None:
        return self.options.reader(field)

    def check_item(self, item: Item) -> list[str]:
        problems = []
        if self.options.candidates is not None:
            try:
                candidates_of(item, self.options.candidates)
            except DatasetError as exc:
                problems.append(str(exc))
        for name, spec in self.options.fields.items():
            if isinstance(spec, SpansField) and not isinstance(item.get(spec.of), str):
                problems.append(f"field {name} quotes the item field {spec.of!r}, which is not a text here")
        return problems

    def variants(self, item: Item) -> Sequence[str]:
        if self.options.candidates is None or self.options.orders == 1:
            return ("",)
        return tuple(f"order{k}" for k in range(self.options.orders))

    def vote_scale(self) -> VoteScale | None:
        return self.options.rule.scale

    def vote(self, verdict: Mapping[str, Any] | None, score: float | None) -> str | float | None:
        return self.options.rule.vote(verdict or {}, score)

    # --- rendering -----------------------------------------------------------------------------

    def shown(self, item: Item, variant: str = "") -> list[tuple[str, str]] | None:
        """``(candidate id, text)`` in the order shown under ``variant`` (``A`` first), or None
        without candidates. Order k rotates the dataset's order by k; orders past the number of
        candidates are shuffles seeded by the item id and k."""
        if self.options.candidates is None:
            return None
        candidates = candidates_of(item, self.options.candidates)
        k = int(variant.removeprefix("order") or 0)
        if k < len(candidates):
            return candidates[k:] + candidates[:k]
        random.Random(stable_seed("custom-order", item.get("id"), k)).shuffle(candidates)
        return candidates

    def render(self, item: Item, variant: str = "") -> list[Message]:
        shown = self.shown(item, variant)
        labels = tuple(LABELS[: len(shown)]) if shown is not None else ()
        answer_format = self.answer_format(labels)
        variables: dict[str, Any] = {**item, "item": item, "variant": variant, "answer_format": answer_format}
        if shown is not None:
            variables["candidates"] = [{"label": label, "id": cid, "text": text}
                                       for label, (cid, text) in zip(labels, shown, strict=True)]
        options = self.options
        user = templating.render_source(options._text, name=options.template_key, **variables)
        if options.answer_format == "append" and "answer_format" not in options._variables:
            user = f"{user.rstrip()}\n\n{answer_format}"
        messages: list[Message] = []
        if options.system is not None:
            messages.append({"role": "system", "content": templating.render_source(
                options.system, name="protocol_options.system", **variables)})
        return [*messages, {"role": "user", "content": user}]

    def answer_format(self, labels: tuple[str, ...] = ()) -> str:
        """The answer format generated from the fields (what ``{{ answer_format }}`` holds)."""
        options = self.options
        described = [{"name": name, "kind": _phrase(spec, options.output == "json", labels),
                      "description": spec.description} for name, spec in options.fields.items()]
        value = next((n for n, f in options.fields.items() if not isinstance(f, TextField)), "")
        return templating.render(ANSWER_FORMAT, layout=options.layout, fields=described,
                                 marker=options.marker or DEFAULT_MARKER, value=value).rstrip()

    # --- reading -------------------------------------------------------------------------------

    def parse(self, answer: str, item: Item, variant: str = "") -> BaseModel:
        shown = self.shown(item, variant)
        labels = tuple(LABELS[: len(shown)]) if shown is not None else ()
        raw, problems = self._extract(answer)
        if problems:  # not in the format at all: its fields are not the problem
            raise VerdictError([p[0] for p in problems], raw=answer, code=problems[0][1])
        values: dict[str, Any] = {}
        for name, spec in self.options.fields.items():
            try:
                values[name] = self._read(spec, raw, name, item, labels)
            except FieldProblem as problem:
                problems.append((f"{name}: {problem}", problem.code))
        if problems:
            code = next(c for c in _CODE_ORDER if any(p[1] is c for p in problems))
            raise VerdictError([p[0] for p in problems], raw=answer, code=code)
        if shown is not None:
            order = [cid for cid, _ in shown]
            for name, spec in self.options.fields.items():
                if isinstance(spec, CandidateField):
                    values[f"{name}_id"] = order[labels.index(values[name])]
            values["order"] = order
        return self.output_model.model_validate(values)

    def _read(self, spec: Any, raw: Mapping[str, Any], name: str, item: Item, labels: tuple[str, ...]) -> Any:
        value = raw.get(name)
        if value is None or (isinstance(value, str) and not value.strip() and not isinstance(spec, TextField)):
            if isinstance(spec, TextField) and not spec.required:
                return None
            phrase = _phrase(spec, self.options.output == "json", labels)
            raise FieldProblem(f"missing ({phrase})", ReasonCode.INCOMPLETE)
        if isinstance(spec, SpansField):
            return spec.read(value, str(item.get(spec.of) or ""))
        if isinstance(spec, CandidateField):
            return spec.read(value, labels)
        return spec.read(value)

    def _extract(self, answer: str) -> tuple[dict[str, Any], list[tuple[str, ReasonCode]]]:
        """The raw value of each field found in the answer, and the problems of the answer as a
        whole (not JSON, no marker, no match)."""
        match self.options.layout:
            case "json":
                return _json_values(answer)
            case "marker":
                return self._marker_values(answer)
            case "lines":
                return self._regex_values(answer)

    def _marker_values(self, answer: str) -> tuple[dict[str, Any], list[tuple[str, ReasonCode]]]:
        marker = self.options.marker or DEFAULT_MARKER
        value_field = next(n for n, f in self.options.fields.items() if not isinstance(f, TextField))
        text_field = next((n for n, f in self.options.fields.items() if isinstance(f, TextField)), None)
        at = answer.casefold().rfind(marker.casefold())
        if at == -1:
            end = answer.rstrip().casefold()
            shortest = min(3, len(marker))  # stopped inside the marker: "... [RES"
            ended = any(end.endswith(marker[:k].casefold()) for k in range(shortest, len(marker)))
            code = ReasonCode.INCOMPLETE if ended else ReasonCode.UNREADABLE
            return {}, [(f"no {marker!r} found: end the answer with '{marker} <{value_field}>'", code)]
        found: dict[str, Any] = {value_field: answer[at + len(marker):].strip().rstrip(".").strip()}
        if text_field is not None:
            found[text_field] = re.sub(rf"^\W*{re.escape(text_field)}\W*:\s*", "", answer[:at].strip(),
                                       flags=re.IGNORECASE).strip()
        return found, []

    def _regex_values(self, answer: str) -> tuple[dict[str, Any], list[tuple[str, ReasonCode]]]:
        matches = list(re.finditer(str(self.options.regex), answer))
        if not matches:
            return {}, [("the answer does not follow the answer format: write every part as asked", ReasonCode.UNREADABLE)]
        return {name: value for name, value in matches[-1].groupdict().items() if value is not None}, []

    # --- confidence: where each closed field's value is ------------------------------------------

    def verdict_spans(self, answer: str, item: Item, variant: str = "") -> tuple[VerdictSpan, ...]:
        """Each closed field's value where the parser reads it (an integer field with ``min``
        and ``max``, a label field): the JSON field, the value after the marker, or the regex's
        group."""
        spans = []
        for name, spec in self.options.fields.items():
            values = closed_values(spec)
            span = self._value_span(answer, name) if values is not None else None
            if values is not None and span is not None and span[1] > span[0]:
                spans.append(VerdictSpan(name, *span, values))
        return tuple(spans)

    def locates_verdict(self) -> bool:
        return any(closed_values(spec) is not None for spec in self.options.fields.values())

    def weighs_scores(self) -> bool:
        """The score is made of closed integer fields only (a field, or an expression over them)."""
        rule, fields = self.options.rule, self.options.fields
        names = [rule.field] if rule.field is not None else sorted(rule.expression.names) if rule.expression else []
        return bool(names) and all(isinstance(fields[n], IntegerField) and closed_values(fields[n]) is not None
                                   for n in names if n is not None)

    def weighted_score(self, verdict: BaseModel, expected: Mapping[str, float], item: Item,
                       variant: str = "") -> float | None:
        if not self.weighs_scores():
            return None
        try:
            return self.options.rule.compute({**verdict.model_dump(), **expected})
        except VerdictError:
            return None

    def _value_span(self, answer: str, name: str) -> tuple[int, int] | None:
        match self.options.layout:
            case "json":
                return json_value_span(answer, name)
            case "marker":
                marker = self.options.marker or DEFAULT_MARKER
                at = answer.casefold().rfind(marker.casefold())
                if at == -1:
                    return None
                rest = answer[at + len(marker):]
                value = rest.strip().rstrip(".").strip()
                start = at + len(marker) + (len(rest) - len(rest.lstrip()))
                return start, start + len(value)
            case "lines":
                found = list(re.finditer(str(self.options.regex), answer))
                return found[-1].span(name) if found and found[-1].group(name) is not None else None

    # --- scoring -------------------------------------------------------------------------------

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        values = verdict.model_dump()
        breakdown: dict[str, float] = {}
        for name, spec in self.options.fields.items():
            value = values[f"{name}_id"] if isinstance(spec, CandidateField) else values[name]
            if spec.numeric:
                try:
                    breakdown[name] = spec.number(value)
                except FieldProblem:
                    continue  # a candidate without a number: only a score reading it fails
            if isinstance(spec, CandidateField):
                breakdown.update({f"{name}.{cid}": float(cid == value) for cid in values["order"]})
        return Score(self.options.rule.compute(values), breakdown)


# --- candidates ------------------------------------------------------------------------------------


def candidates_of(item: Item, field: str) -> list[tuple[str, str]]:
    """An item's candidates as ``(id, text)`` in dataset order: a list of texts (ids ``1``..) or
    of ``{id, text}``, or that list as JSON text (a CSV cell).

    Raises:
        DatasetError: not such a list, fewer than 2 or more than 26, or repeated ids.
    """
    raw: Any = item.get(field)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raw = None
    candidates: list[tuple[str, str]] = []
    for number, entry in enumerate(raw if isinstance(raw, list) else [], start=1):
        if isinstance(entry, str):
            candidates.append((str(number), entry))
        elif isinstance(entry, dict) and isinstance(entry.get("text"), str):
            candidates.append((str(entry.get("id", number)), entry["text"]))
        else:
            raise DatasetError(f"item {item.get('id')!r}: {field}[{number - 1}] is neither a text nor {{id, text}}")
    ids = [cid for cid, _ in candidates]
    if not 2 <= len(candidates) <= MAX_CANDIDATES or len(set(ids)) != len(ids):
        raise DatasetError(f"item {item.get('id')!r}: {field} must hold 2-{MAX_CANDIDATES} candidates with distinct "
                           f"ids (a list of texts or of {{id, text}}), got {len(candidates)}")
    return candidates


def closed_values(spec: Any) -> dict[str, str | int] | None:
    """A field's accepted values as written -> as stored, when they are a closed set: an
    integer field with ``min`` and ``max`` (a scale), a label field (its choices)."""
    if isinstance(spec, IntegerField) and spec.min is not None and spec.max is not None:
        return dict(scale_values(spec.min, spec.max))
    if isinstance(spec, LabelField):
        return {choice: choice for choice in spec.choices}
    return None


def _phrase(spec: Any, json_mode: bool, labels: tuple[str, ...]) -> str:
    if isinstance(spec, SpansField):
        return spec.phrase(json_mode)
    if isinstance(spec, CandidateField):
        return spec.phrase(labels)
    return str(spec.phrase())


def _json_values(answer: str) -> tuple[dict[str, Any], list[tuple[str, ReasonCode]]]:
    text = strip_code_fence(answer)
    if not text.startswith("{") and "{" in text:  # a JSON object inside a sentence or a fence
        end = text.rfind("}")
        text = text[text.index("{"):end + 1 if end > text.index("{") else None]
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, [(f"the answer is not valid JSON: {exc}", json_error_code(exc, text))]
    if not isinstance(raw, dict):
        return {}, [("the answer is not a JSON object", ReasonCode.UNREADABLE)]
    return raw, []


def _declared_class(options: CustomOptions) -> type[CustomJudge]:
    """The protocol class of one configuration: its verdict models and the item fields it needs."""
    fields = options.fields
    verdict, answer = declared_models(options)
    item_fields = {spec.of for spec in fields.values() if isinstance(spec, SpansField)}
    if options.candidates is not None:
        item_fields.add(options.candidates)
    item_fields |= set(options._variables) - TEMPLATE_VARIABLES - ({"candidates"} if options.candidates else set())
    tokens = 10 + sum(60 if isinstance(s, TextField) else 30 if isinstance(s, SpansField) else 6 for s in fields.values())
    namespace = {"output_model": verdict, "judge_model": answer, "required_fields": tuple(sorted(item_fields)),
                 "typical_completion_tokens": tokens, "__module__": __name__, "__doc__": CustomJudge.__doc__}
    return cast(type[CustomJudge], ABCMeta("CustomJudge", (CustomJudge,), namespace))
