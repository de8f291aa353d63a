"""GEMBA-MQM (Kocmi & Federmann 2023): error spans with severities, scored as the reference does.

Prompt: the original 8-message conversation (system, three few-shot pairs, the item), rendered
byte for byte from ``prompts/gemba_mqm/``. Answers come in the GEMBA text format::

    Critical:
    no-error
    Major:
    accuracy/mistranslation - "involvement"
    Minor:
    fluency/grammar - "wäre"

or, in JSON mode, as :class:`MQMVerdict`. Score: ``-min(25, sum of the first five errors weighted
critical 25, major 5, minor 1)``, with ``non-translation`` always critical.

Two parsers:

* ``strict`` (default): reads headers in any case, with Markdown emphasis, and inline
  (``Major: accuracy/omission - "x"``). The format always has all three sections (``no-error``
  under an empty one) and every error line its span (``category/subcategory - "span"``), so an
  answer with a section missing or empty, or a last line cut off (inside its span's quotes, or
  after the category: ``fluency/grammar -``, ``other``), is ``incomplete``; prose, an unreadable
  line (a category with no span before the last line too) or an unknown category is
  ``unreadable``. Either is a
  :class:`VerdictError` (re-asked, then unscored), never a score from partial information.
* ``legacy-gemba`` (opt-in): the reference ``parse_mqm_answer`` rules exactly, quirks included:
  anything unreadable scores 0. Use it only to reproduce published numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from judge_engine.errors import ReasonCode, VerdictError
from judge_engine.protocols import templating
from judge_engine.protocols.base import (
    Item,
    Message,
    Protocol,
    ProtocolOptions,
    Score,
    strip_code_fence,
)
from judge_engine.util import text

Severity = Literal["critical", "major", "minor"]
SEVERITIES: tuple[Severity, ...] = ("critical", "major", "minor")
WEIGHTS: dict[str, int] = {"critical": 25, "major": 5, "minor": 1}


class MQMError(BaseModel):
    """One annotated error."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    severity: Severity
    """critical, major or minor (``non-translation`` is always critical)."""
    category: str
    """``category/subcategory`` as the judge wrote it, lower-cased, e.g. ``accuracy/mistranslation``."""
    span: str
    """The quoted text the error is about (``""`` only when the judge wrote it so: every error of
    the GEMBA format has its span, so an error without one is an incomplete answer)."""
    span_found: Literal["target", "source", "none"] | None = None
    """Where the span occurs, the target first (:func:`judge_engine.util.text.locate`: exact, else with
    case, quote marks and spacing folded); filled in by the protocol, not by the judge."""


class MQMVerdict(BaseModel):
    """A GEMBA-MQM annotation: every error found, in the order the judge listed them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    errors: list[MQMError]
    """All errors; an empty list means the judge found none (``no-error`` everywhere). Required:
    ``{}`` is an answer that stopped (or never started), not a perfect translation."""


class GembaOptions(ProtocolOptions):
    """Options of ``gemba-mqm``."""

    parser: Literal["strict", "legacy-gemba"] = "strict"
    """``legacy-gemba`` reproduces the reference parser, including scoring garbage as 0."""


_HEADER = re.compile(r"^(critical|major|minor)\s*:\s*(.*)$")
# A dash separates only with a space beside it or a quote after it, so "non-translation" and
# "mistranslation (too-literal)" stay whole categories while 'grammar-"wäre"' still splits.
_ERROR_LINE = re.compile(
    r'^(?P<category>[^"“”]+?)(?:\s+[-–—]\s*|\s*[-–—]\s+|\s*[-–—:]\s*(?=["“])|\s*:\s+)(?P<span>.*)$'
)
_DECORATION = re.compile(r"^(?:[#>*_`]+|\d+[.)]|[-•])\s*")
_DECORATION_STARTS = frozenset("#>*_`-•")
"""The characters :data:`_DECORATION` can start with, besides a digit."""

# The answer exactly as the prompt's format and its few-shot answers write it: the three sections
# in order, each "no-error" or lines of ``category - "span"``. Most answers are this, and reading
# one with two regexes instead of a pass per line keeps a paced request's CPU down (issue 23.6).
# It is a shortcut, never a second dialect: the category and span are restricted to what the line
# parser reads the same way (no dash beside a space, no "**"/"__", no line breaks of any kind, a
# lower-case category), and anything else goes to the line parser (`tests/protocols/
# test_gemba_mqm.py` checks both give the same verdict or error on thousands of answers).
_CANON_CATEGORY = r"[a-z](?:[a-z/()\-]*[a-z/()])?(?: [a-z/(](?:[a-z/()\-]*[a-z/()])?)*"
_CANON_SPAN = '[^"\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029*_]+'
_CANON_ERROR = rf'{_CANON_CATEGORY} - "{_CANON_SPAN}"'
_CANON_BODY = rf"(no-error|{_CANON_ERROR}(?:\n{_CANON_ERROR})*)"
_CANONICAL = re.compile(rf"(?i:critical):\n{_CANON_BODY}\n(?i:major):\n{_CANON_BODY}\n(?i:minor):\n{_CANON_BODY}")
_CANON_ERROR_LINE = re.compile(rf'^({_CANON_CATEGORY}) - "({_CANON_SPAN})"$', re.MULTILINE)


class GembaMQM(Protocol):
    """GEMBA-MQM, original prompt and scoring."""

    name: ClassVar[str] = "gemba-mqm"
    # 2: strict parsing never scores an answer missing its errors list or an error's span, nor a
    # last line cut before its span (version 1 scored them).
    version: ClassVar[str] = "2"
    description: ClassVar[str] = "MQM error spans with severities (Kocmi & Federmann 2023); score -25..0"
    required_fields: ClassVar[tuple[str, ...]] = ("source", "target", "source_lang", "target_lang")
    output_model: ClassVar[type[BaseModel]] = MQMVerdict
    options_model: ClassVar[type[ProtocolOptions]] = GembaOptions
    # The reference's few-shot answers are 37-46 tokens (o200k), the literary ones 34-42; the
    # fake server's answers have a median of 30 (text) and 48 (JSON).
    typical_completion_tokens: ClassVar[int] = 50

    template_dir: ClassVar[str] = "gemba_mqm"
    categories: ClassVar[tuple[str, ...]] = (
        "accuracy",
        "fluency",
        "style",
        "terminology",
        "non-translation",
        "other",
        "locale convention",
    )
    """Top-level categories a strict parse accepts (matched as a prefix of the category text)."""

    options: GembaOptions

    # --- rendering --------------------------------------------------------------------------

    def templates(self) -> Sequence[str]:
        return (
            f"{self.template_dir}/system.j2",
            f"{self.template_dir}/user.j2",
            f"{self.template_dir}/few_shot.json",
        )

    @cached_property
    def _few_shot(self) -> list[dict[str, str]]:
        path = Path(templating.PROMPTS_DIR, self.template_dir, "few_shot.json")
        shots: list[dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))
        return shots

    @cached_property
    def _prefix(self) -> list[Message]:
        """System prompt and few-shot pairs: identical for every item, so rendered once."""
        messages: list[Message] = [
            {"role": "system", "content": templating.render(f"{self.template_dir}/system.j2")}
        ]
        for shot in self._few_shot:
            messages.append({"role": "user", "content": self._user_turn(shot)})
            messages.append({"role": "assistant", "content": shot["answer"]})
        return messages

    def _user_turn(self, fields: dict[str, Any]) -> str:
        return templating.render(
            f"{self.template_dir}/user.j2",
            source_lang=fields["source_lang"],
            source_seg=fields["source_seg"],
            target_lang=fields["target_lang"],
            target_seg=fields["target_seg"],
        )

    def render(self, item: Item, variant: str = "") -> list[Message]:
        final = self._user_turn(
            {
                "source_lang": item["source_lang"],
                "source_seg": item["source"],
                "target_lang": item["target_lang"],
                "target_seg": item["target"],
            }
        )
        return [*self._prefix, {"role": "user", "content": final}]

    # --- reading ----------------------------------------------------------------------------

    def parse(self, answer: str, item: Item, variant: str = "") -> MQMVerdict:
        if self.options.parser == "legacy-gemba":
            return legacy_parse(answer)
        stripped = strip_code_fence(answer)
        if stripped.startswith("{"):
            verdict = self.verdict_from_json(stripped)
            assert isinstance(verdict, MQMVerdict)
            errors = [self._checked(e.model_copy(update={"category": e.category.lower()})) for e in verdict.errors]
            problems = [p for e in errors if (p := self._category_problem(e.category))]
            if problems:
                raise VerdictError(problems, raw=answer)
        elif (canonical := self._parse_canonical(answer, item)) is not None:
            return MQMVerdict(errors=canonical)
        else:
            errors = self._parse_text(answer)
        return MQMVerdict(errors=[self._locate(e, item) for e in errors])

    def _parse_canonical(self, answer: str, item: Item) -> list[MQMError] | None:
        """The located errors of an answer written exactly in the prompt's format (see
        :data:`_CANONICAL`), or None for any other answer (:meth:`_parse_text` reads those)."""
        match = _CANONICAL.fullmatch(answer.strip())
        if match is None:
            return None
        bodies = match.groups()
        lowered = answer.lower()
        if lowered.count("no-error") + lowered.count("no error") != bodies.count("no-error"):
            return None  # "no error" inside an error line: the line parser skips such a line
        errors = []
        for severity, body in zip(SEVERITIES, bodies, strict=True):
            if body == "no-error":
                continue
            for category, span in _CANON_ERROR_LINE.findall(body):
                if self._category_problem(category) is not None:
                    return None
                error = MQMError(severity=severity, category=category, span=span,
                                 span_found=_span_found(span, item))
                errors.append(self._checked(error))
        return errors

    def _checked(self, error: MQMError) -> MQMError:
        if "non-translation" in error.category and error.severity != "critical":
            return error.model_copy(update={"severity": "critical"})
        return error

    def _category_problem(self, category: str) -> str | None:
        if category.startswith(self.categories):  # a tuple: any of them, in one call
            return None
        return f"unknown error category {category!r} (use one of: {', '.join(self.categories)})"

    def _starts_an_error(self, line: str) -> bool:
        """Whether a line is a known category, or the start of one's name (``locale``)."""
        return self._category_problem(line) is None or any(c.startswith(line) for c in self.categories)

    def _parse_text(self, answer: str) -> list[MQMError]:
        severity: Severity | None = None
        # Lines under each section header seen so far: the format always writes all three
        # sections, with "no-error" under an empty one, so a missing or empty section means the
        # answer stopped early (or never followed the format) and must not be scored.
        sections: dict[Severity, int] = {}
        errors: list[MQMError] = []
        problems: list[str] = []
        stopped_short = False
        lines = [ln.strip() for ln in answer.strip().splitlines()]
        for number, raw_line in enumerate(lines, start=1):
            line = _undecorate(raw_line)
            if not line:
                continue
            header = _HEADER.match(line.lower())
            if header:
                severity = header.group(1)  # type: ignore[assignment]
                assert severity is not None
                sections.setdefault(severity, 0)
                line = _undecorate(line[len(line) - len(header.group(2)) :])
                if not line:
                    continue
            if severity is None:
                continue  # preamble before the first section ("Here are the errors:")
            sections[severity] += 1
            if "no-error" in line.lower() or "no error" in line.lower():
                continue
            error = self._error_from_line(line, severity)
            if error is None and number < len(lines) and line.lower().strip(" .:*") == "non-translation":
                # The one category that needs no span: the whole segment is not a translation.
                # Alone on the last line it could be a line cut before its span: re-asked below.
                error = self._checked(MQMError(severity=severity, category="non-translation", span=""))
            if error is None:
                if number == len(lines) and self._starts_an_error(line.lower()):
                    stopped_short = True  # "fluency/grammar -", "other", "locale": no span yet
                    continue
                problems.append(f"line {number} is not 'category/subcategory - \"span\"': {raw_line!r}")
                continue
            if (problem := self._category_problem(error.category)) is not None:
                problems.append(f"line {number}: {problem}")
                continue
            errors.append(error)
        if not sections:
            raise VerdictError(["no 'Critical:', 'Major:' or 'Minor:' section found", *problems], raw=answer)
        if problems:
            raise VerdictError(problems, raw=answer)
        incomplete = _missing_parts(sections, lines[-1] if lines else "", stopped_short=stopped_short)
        if incomplete:
            raise VerdictError(incomplete, raw=answer, code=ReasonCode.INCOMPLETE)
        return errors

    def _error_from_line(self, line: str, severity: Severity) -> MQMError | None:
        """The error a line states, or None when it is not ``category - span``: every error line of
        the format (the few-shot answers, the reference's fixtures) has its span, so a category
        alone (``other``, ``fluency``) or one followed by a dash and nothing is a line cut short."""
        match = _ERROR_LINE.match(line)
        if match is None:
            return None
        category = match.group("category").strip(" .:*").lower()
        span = match.group("span").strip().strip("*").strip()
        if not span:
            return None
        if len(span) >= 2 and span[0] in "\"“'" and span[-1] in "\"”'":
            span = span[1:-1]
        return self._checked(MQMError(severity=severity, category=category, span=span))

    def _locate(self, error: MQMError, item: Item) -> MQMError:
        if not error.span:
            return error
        return error.model_copy(update={"span_found": _span_found(error.span, item)})

    # --- scoring ----------------------------------------------------------------------------

    def score_range(self) -> tuple[float, float] | None:
        return (-25.0, 0.0)

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, MQMVerdict)
        return Score(gemba_score(verdict.errors))


def _span_found(span: str, item: Item) -> Literal["target", "source", "none"]:
    """Where a span occurs in the item: the target first (:func:`judge_engine.util.text.locate`)."""
    if text.locate(span, str(item.get("target", ""))) is not None:
        return "target"
    if text.locate(span, str(item.get("source", ""))) is not None:
        return "source"
    return "none"


def gemba_score(errors: Sequence[MQMError]) -> float:
    """The GEMBA score: first five errors (critical, then major, then minor), capped at -25."""
    ordered = [e for sev in SEVERITIES for e in errors if e.severity == sev][:5]
    return float(-min(25, sum(WEIGHTS[e.severity] for e in ordered)))


def legacy_parse(answer: str | None) -> MQMVerdict:
    """The reference ``parse_mqm_answer`` line rules, quirks included (opt-in only).

    Lines are lower-cased and stripped; a line containing ``no-error``/``no error`` or empty is
    skipped; a line that is exactly ``critical:``/``major:``/``minor:`` sets the severity; lines
    before any header are dropped; ``non-translation`` lines go to critical. Unreadable answers
    therefore come out as zero errors (a perfect score), exactly like the reference.
    """
    severity: Severity | None = None
    errors: list[MQMError] = []
    for line in (answer or "").lower().split("\n"):
        line = line.strip()
        if "no-error" in line or "no error" in line or not line:
            continue
        if line in ("critical:", "major:", "minor:"):
            severity = line[:-1]  # type: ignore[assignment]
            continue
        if severity is None:
            continue
        if "non-translation" in line:
            errors.append(MQMError(severity="critical", category=line, span=""))
        else:
            errors.append(MQMError(severity=severity, category=line, span=""))
    return MQMVerdict(errors=errors)


def _missing_parts(sections: dict[Severity, int], last_line: str, *, stopped_short: bool) -> list[str]:
    """What a text answer lacks: a section, a section's line, or the end of its last line.

    The last line is where a cut-off answer stops: inside its span's quotes, or after the category
    before any span (``stopped_short``). A stop exactly at a line break between two complete error
    lines of the last section leaves a well-formed answer that no parser can tell from a complete
    one (the provider's finish reason is the only sign), and so does a stop inside an unquoted span.
    """
    missing = [f"no '{s.capitalize()}:' section: write all three sections, with 'no-error' under one "
               "that has no errors" for s in SEVERITIES if s not in sections]
    missing += [f"the '{s.capitalize()}:' section is empty: write 'no-error' when it has no errors"
                for s, count in sections.items() if count == 0]
    if last_line.count('"') % 2 == 1:
        missing.append("the last line has an unclosed quote: the answer looks cut off")
    if stopped_short:
        missing.append(f"the last line stops before its span: {last_line!r}; every error is "
                       "'category/subcategory - \"span\"'")
    return missing


def _undecorate(line: str) -> str:
    """Drop Markdown emphasis, bullets and numbering around a line (``**Major:**`` -> ``Major:``)."""
    if (line and line[0] not in _DECORATION_STARTS and not line[0].isdigit() and line[-1] not in "*_`"
            and "**" not in line and "__" not in line and line == line.strip()):
        return line  # most lines of an answer: nothing to drop, and no regex run twice to find that out
    previous = None
    while previous != line:
        previous = line
        line = _DECORATION.sub("", line).strip()
        line = line.rstrip("*_`").strip()
    return line.replace("**", "").replace("__", "")
