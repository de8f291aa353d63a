"""A custom judge's options (``protocol_options`` of ``protocol: custom``), checked as a whole
when the config is read, and the verdict models made from them.

Every problem is a ``ValueError`` naming the option, which :meth:`Protocol.from_options
<judge_engine.protocols.base.Protocol.from_options>` turns into a config error naming the judge
and the key (``judges[mine].protocol_options.regex: ...``). The template is read and compiled
here (a syntax error, an ``include``, a file that cannot be read are config errors), the regex
compiled against the fields, the score parsed.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    create_model,
    field_validator,
    model_validator,
)

from judge_engine.errors import TemplateError
from judge_engine.protocols import templating
from judge_engine.protocols.base import ProtocolOptions
from judge_engine.protocols.custom_fields import (
    FIELD_NAME,
    RESERVED_NAMES,
    BooleanField,
    CandidateField,
    FieldSpec,
    IntegerField,
    LabelField,
    NumberField,
    SpansField,
    TextField,
)
from judge_engine.protocols.custom_score import ScoreRule

MAX_INLINE_CHARS = 50_000
"""The longest ``template`` or ``system`` written in the config (~12,500 tokens, ~1,000 lines of
YAML); a longer prompt goes in a file. Past it, a prompt of ~25,000 tokens per item waits on a
judge's tokens-per-minute limit for minutes, which looks like a hang."""
MAX_FILE_CHARS = 1_000_000
"""The longest ``template_file`` (~250,000 tokens, past any model's context window)."""


class CustomOptions(ProtocolOptions):
    """Options of ``custom``: the prompt, the declared fields and how they are read and scored."""

    template: str | None = Field(default=None, exclude=True)
    """The user message's Jinja template, inline (or ``template_file``). Not in task ids or the
    options' dump: its hash is recorded like a built-in template's (:meth:`CustomJudge.templates`)."""
    template_file: Path | None = Field(default=None, exclude=True)
    """A Jinja file holding the template, relative to the config file."""
    system: str | None = Field(default=None, exclude=True)
    """An optional system message, a Jinja template too."""
    fields: dict[str, FieldSpec] = Field(min_length=1)
    """Name -> declaration of each field the judge writes, in the order asked for
    (:mod:`judge_engine.protocols.custom_fields`). ``name: text`` is short for ``{type: text}``."""
    score: str | None = None
    """The headline score: a field (integer, number, boolean; a label or candidate with a
    ``score_map``, else the verdict is that label and the score is empty) or an expression over
    fields (:mod:`judge_engine.protocols.custom_score`). None: no headline score."""
    marker: str | None = None
    """``output: text``: the marker the value follows at the end of the answer (``[RESULT]``
    when neither it nor ``regex`` is set)."""
    regex: str | None = None
    """``output: text``: a regular expression with one named group per field; its last match
    in the answer is read (flags inline, e.g. ``(?is)``)."""
    candidates: str | None = None
    """An item field holding the candidates to show (a list of texts or ``{id, text}``)."""
    orders: int = Field(default=1, ge=1, le=24)
    """How many orders each item's candidates are judged in (variants ``order0``..)."""
    answer_format: Literal["append", "none"] = "append"
    """``append``: the answer format generated from the fields ends the user message, unless
    the template places ``{{ answer_format }}``; ``none``: the template describes it alone."""

    _text: str = PrivateAttr(default="")
    _variables: frozenset[str] = PrivateAttr(default=frozenset())
    _lines: dict[str, int] = PrivateAttr(default_factory=dict)
    """Where the template first reads each variable it reads (line from 1)."""
    _system_lines: dict[str, int] = PrivateAttr(default_factory=dict)
    _rule: ScoreRule | None = PrivateAttr(default=None)

    @field_validator("template", "system")
    @classmethod
    def _bounded(cls, value: str | None) -> str | None:
        if value is not None and len(value) > MAX_INLINE_CHARS:
            raise ValueError(f"at most {MAX_INLINE_CHARS:,} characters inline (this one has {len(value):,}); "
                             "put a longer prompt in a file: template_file")
        return value

    @field_validator("fields", mode="before")
    @classmethod
    def _short_forms(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {name: {"type": spec} if isinstance(spec, str) else spec for name, spec in value.items()}
        return value

    @model_validator(mode="after")
    def _consistent(self) -> CustomOptions:
        self._read_template()
        _check_names(self.fields)
        self._check_text_reading()
        candidate_fields = [n for n, f in self.fields.items() if isinstance(f, CandidateField)]
        if candidate_fields and self.candidates is None:
            raise ValueError(f"fields {', '.join(candidate_fields)}: a candidate field needs the candidates option "
                             "(the item field holding the candidates)")
        if self.orders > 1 and self.candidates is None:
            raise ValueError("orders: several orders need candidates (the item field holding them)")
        self._rule = ScoreRule(self.fields, self.score)
        return self

    def _read_template(self) -> None:
        if (self.template is None) == (self.template_file is None):
            raise ValueError("give the prompt as template (inline) or template_file, one of them")
        if self.template_file is not None:
            try:
                if self.template_file.exists() and not self.template_file.is_file():  # a FIFO would block forever
                    raise ValueError(f"template_file {self.template_file}: not a file")
                if (size := self.template_file.stat().st_size) > 4 * MAX_FILE_CHARS:  # not read: UTF-8 is <= 4 bytes a character
                    raise ValueError(f"template_file {self.template_file}: at most {MAX_FILE_CHARS:,} characters "
                                     f"(this file has {size:,} bytes)")
                text = self.template_file.read_text(encoding="utf-8")
                if len(text) > MAX_FILE_CHARS:
                    raise ValueError(f"template_file {self.template_file}: at most {MAX_FILE_CHARS:,} characters "
                                     f"(this one has {len(text):,})")
            except OSError as exc:
                raise ValueError(f"template_file {self.template_file}: cannot read it ({exc.strerror or exc})") from None
            except UnicodeDecodeError as exc:
                raise ValueError(f"template_file {self.template_file}: not UTF-8 text (byte {exc.start})") from None
        else:
            text = str(self.template)
        try:
            variables = templating.check_source(text, name=self.template_name)
            if self.system is not None:
                variables |= templating.check_source(self.system, name="system")
                self._system_lines = templating.variable_lines(self.system)
        except TemplateError as exc:
            raise ValueError(str(exc)) from None
        self._text, self._variables = text, frozenset(variables)
        self._lines = templating.variable_lines(text)

    def _check_text_reading(self) -> None:
        if self.output == "json":
            if self.marker is not None or self.regex is not None:
                raise ValueError("marker and regex read text answers: with output: json, drop them")
            return
        if self.marker is not None and self.regex is not None:
            raise ValueError("give marker or regex, not both")
        if self.regex is not None:
            try:
                groups = set(re.compile(self.regex).groupindex)
            except re.error as exc:
                raise ValueError(f"regex: {exc}") from None
            if groups != set(self.fields):
                missing, extra = sorted(set(self.fields) - groups), sorted(groups - set(self.fields))
                raise ValueError("regex: needs one named group per field, (?P<name>...)"
                                 + (f"; no group for {', '.join(missing)}" if missing else "")
                                 + (f"; groups that are not fields: {', '.join(extra)}" if extra else ""))
            return
        values = [n for n, f in self.fields.items() if not isinstance(f, TextField)]
        texts = [n for n, f in self.fields.items() if isinstance(f, TextField)]
        if len(values) != 1 or len(texts) > 1:
            raise ValueError(f"output: text with a marker reads one value after it and at most one text field before "
                             f"it (these fields: {', '.join(self.fields)}); use output: json or a regex")

    @property
    def template_name(self) -> str:
        """How messages and the manifest name the template: its file, or ``template`` (inline)."""
        return str(self.template_file) if self.template_file is not None else "template"

    @property
    def template_key(self) -> str:
        """How a render error names the template: the option that holds it (and its file)."""
        if self.template_file is not None:
            return f"protocol_options.template_file ({self.template_file})"
        return "protocol_options.template"

    def reader(self, field: str) -> str | None:
        """Which option reads item field ``field`` and where (``protocol_options.template_file:
        rubric.j2:14 reads the variable 'question'``), for a message about a field the items
        lack; None when no option names it."""
        if (line := self._lines.get(field)) is not None:
            where = (f"protocol_options.template_file: {self.template_file}:{line}" if self.template_file is not None
                     else f"protocol_options.template, line {line},")
            return f"{where} reads the variable {field!r}"
        if (line := self._system_lines.get(field)) is not None:
            return f"protocol_options.system, line {line}, reads the variable {field!r}"
        if field == self.candidates:
            return f"protocol_options.candidates reads the item field {field!r}"
        for name, spec in self.fields.items():
            if isinstance(spec, SpansField) and spec.of == field:
                return f"protocol_options.fields.{name}.of reads the item field {field!r}"
        return None

    @property
    def layout(self) -> Literal["json", "marker", "lines"]:
        """How the answer is laid out: JSON, ``<text> [RESULT] <value>``, or (for a regex) lines."""
        return "json" if self.output == "json" else "lines" if self.regex is not None else "marker"

    @property
    def rule(self) -> ScoreRule:
        """How a verdict becomes its score and its vote (made when the options were checked)."""
        assert self._rule is not None, "options are validated"
        return self._rule


def _check_names(fields: Mapping[str, Any]) -> None:
    for name in fields:
        if not re.match(FIELD_NAME, name) or keyword.iskeyword(name) or name in RESERVED_NAMES:
            raise ValueError(f"fields: {name!r} cannot be a field name (letters, digits and _, not starting with a "
                             f"digit, not a Python keyword nor one of {', '.join(sorted(RESERVED_NAMES))})")
    taken = {f"{name}_id" for name, spec in fields.items() if isinstance(spec, CandidateField)} & set(fields)
    if taken:
        raise ValueError(f"fields: {', '.join(sorted(taken))} is where a candidate field's id is stored; rename it")


# --- the pydantic types of the stored verdict and of the JSON schema sent ---------------------


class Span(BaseModel):
    """A quote the judge wrote, located in its item field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    """The quote as written."""
    start: int
    """Character offset of the quote's start in the field (after normalising, see ``text.locate``)."""
    end: int
    """Offset just past its end."""


def stored_type(spec: Any) -> tuple[Any, Any]:
    """``(annotation, default)`` of the field in the stored verdict model."""
    match spec:
        case IntegerField():
            return int, ...
        case NumberField():
            return float, ...
        case LabelField() | CandidateField():
            return str, ...
        case TextField():
            return (str, ...) if spec.required else (str | None, None)
        case BooleanField():
            return bool, ...
        case SpansField():
            return list[Span], ...
    raise AssertionError(type(spec))


def judge_type(spec: Any, description: str | None) -> tuple[Any, Any]:
    """``(annotation, FieldInfo)`` of the field in the JSON schema sent in JSON mode: its range,
    its closed set, what the judge writes (quotes as strings, a candidate as its label)."""
    info: dict[str, Any] = {"description": description} if description else {}
    match spec:
        case IntegerField():
            return int, Field(..., ge=spec.min, le=spec.max, **info)
        case NumberField():
            return float, Field(..., ge=spec.min, le=spec.max, **info)
        case LabelField():
            closed_set: Any = Literal
            return closed_set[spec.choices], Field(..., **info)
        case TextField():
            return (str, Field(..., **info)) if spec.required else (str | None, Field(None, **info))
        case BooleanField():
            return bool, Field(..., **info)
        case SpansField():
            return list[str], Field(..., **info)
        case CandidateField():
            return str, Field(..., pattern=r"^[A-Z]$", **info)
    raise AssertionError(type(spec))


def declared_models(options: CustomOptions) -> tuple[type[BaseModel], type[BaseModel]]:
    """``(verdict model, JSON-mode answer model)`` of the declared fields: the verdict stores
    located spans, each candidate field's id and the order shown; the answer is what the judge
    writes (quotes as strings, a candidate as its label)."""
    fields = options.fields
    stored: dict[str, Any] = {name: stored_type(spec) for name, spec in fields.items()}
    for name, spec in fields.items():
        if isinstance(spec, CandidateField):
            stored[f"{name}_id"] = (str, ...)
    if options.candidates is not None:
        stored["order"] = (list[str], ...)
    verdict = create_model("CustomVerdict", __config__=ConfigDict(frozen=True, extra="forbid"), **stored)
    verdict.__doc__ = "A custom judge's verdict: its declared fields (spans located, candidates with their ids)."
    written: dict[str, Any] = {name: judge_type(spec, spec.description) for name, spec in fields.items()}
    answer = create_model("CustomAnswer", __config__=ConfigDict(extra="forbid"), **written)
    answer.__doc__ = "What a custom judge is asked to write in JSON mode."
    return verdict, answer
