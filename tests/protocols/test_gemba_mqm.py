"""GEMBA-MQM: the conversation byte for byte, and the reference parser's fixtures."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from judge_engine.errors import ReasonCode, VerdictError
from judge_engine.fake.writers.mqm import write_gemba_mqm
from judge_engine.protocols.gemba_mqm import GembaMQM, MQMVerdict, gemba_score, legacy_parse
from judge_engine.protocols.gemba_mqm_literary import GembaMQMLiterary

ITEM = {"id": "1", "source": "a", "target": "b", "source_lang": "English", "target_lang": "German"}
EMPTY_ABOVE_MINOR = "Critical:\nno-error\nMajor:\nno-error\nMinor:\n"


def _reference_messages(shared_reference: Path) -> list[tuple[str, str]]:
    text = (shared_reference / "gemba_mqm.md").read_text(encoding="utf-8")
    found = re.findall(r"--- message (\d+) role=(\w+) ---\n````text\n(.*?)\n````", text, re.S)
    assert len(found) == 8
    return [(role, content) for _, role, content in found]


def test_conversation_is_byte_exact(shared_reference: Path) -> None:
    reference = _reference_messages(shared_reference)
    item = {"id": "x", "source_lang": "{source_lang}", "source": "{source_seg}",
            "target_lang": "{target_lang}", "target": "{target_seg}"}
    rendered = GembaMQM().render(item)
    assert [(m["role"], m["content"]) for m in rendered] == reference


def test_dataset_text_is_never_template_source() -> None:
    rendered = GembaMQM().render({**ITEM, "target": "{{ 7*7 }} {% if x %}"})
    assert "```{{ 7*7 }} {% if x %}```" in rendered[-1]["content"]


@pytest.mark.parametrize(("shot", "expected"), [(0, -12.0), (1, -11.0), (2, -25.0)])
def test_few_shot_answers_score_as_the_reference(shot: int, expected: float) -> None:
    protocol = GembaMQM()
    answer = protocol._few_shot[shot]["answer"]
    assert protocol.score(protocol.parse(answer, ITEM), ITEM).score == expected
    assert gemba_score(legacy_parse(answer).errors) == expected


LEGACY_FIXTURES = [
    ('Critical: no-error\nMajor: accuracy/mistranslation - "x"\nMinor: fluency/grammar - "y"', 0.0),
    ("Minor:\n" + "\n".join(f'fluency/grammar - "w{i}"' for i in range(6)), -5.0),
    ('Minor:\nnon-translation - "abc"', -25.0),
    ('accuracy/mistranslation - "x"', 0.0),
    ("Critical:\nno-error\nMajor:\nno-error\nMinor:\nno-error", 0.0),
    ('**Critical:**\naccuracy/addition - "x"', 0.0),
    ("The translation is quite good.", 0.0),
]


@pytest.mark.parametrize(("answer", "expected"), LEGACY_FIXTURES)
def test_legacy_parser_reproduces_reference_fixtures(answer: str, expected: float) -> None:
    protocol = GembaMQM.from_options({"parser": "legacy-gemba"})
    assert protocol.score(protocol.parse(answer, ITEM), ITEM).score == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (EMPTY_ABOVE_MINOR + "\n".join(f'fluency/grammar - "w{i}"' for i in range(6)), -5.0),  # first five count
        (EMPTY_ABOVE_MINOR + 'non-translation - "abc"', -25.0),  # non-translation is critical
        ("Critical:\nno-error\nMajor:\nno-error\nMinor:\nno-error", 0.0),
        ('Critical: no-error\nMajor: accuracy/mistranslation - "x"\nMinor: fluency/grammar - "y"', -6.0),  # inline read
        ('**Critical:**\naccuracy/addition - "x"\n**Major:**\nno-error\n**Minor:**\nno-error', -25.0),  # markdown read
        ('Here is my annotation.\nCritical:\nno-error\nMajor:\n- accuracy/omission - "the"\nMinor:\nno-error', -5.0),
        ('Critical:\naccuracy/addition - "a"\nMajor:\naccuracy/omission - "b"\nMinor:\nstyle/awkward - "c"', -25.0),  # capped
    ],
)
def test_strict_parser_reads_what_models_write(answer: str, expected: float) -> None:
    protocol = GembaMQM()
    assert protocol.score(protocol.parse(answer, ITEM), ITEM).score == expected


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("The translation is quite good.", "no 'Critical:'"),
        ("", "no 'Critical:'"),
        ('Critical:\nno-error\nMajor:\nno-error\nMinor:\naccuracy/omission - "the acc', "cut off"),
        ('Major:\nbanana/split - "x"', "unknown error category"),
        ("Major:\nthis line is prose without any structure", "is not 'category/subcategory"),
    ],
)
def test_strict_parser_rejects_unreadable_answers(answer: str, problem: str) -> None:
    with pytest.raises(VerdictError, match=re.escape(problem)):
        GembaMQM().parse(answer, ITEM)


@pytest.mark.parametrize("protocol", [GembaMQM(), GembaMQMLiterary()], ids=["gemba-mqm", "gemba-mqm-literary"])
@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        # Issue 13, item 1: cut off cleanly after the Major section; it used to score -5.
        ('Critical:\nno-error\nMajor:\naccuracy/mistranslation - "x"', "no 'Minor:' section"),
        ('Critical:\nno-error\nMinor:\nfluency/grammar - "y"', "no 'Major:' section"),
        ('Major:\nno-error\nMinor:\nno-error', "no 'Critical:' section"),
        ('Critical:\nno-error\nMajor:\nno-error\nMinor:', "'Minor:' section is empty"),
        ('Critical:\nno-error\nMajor:\nno-error\nMinor:\nfluency/grammar - "wä', "cut off"),
    ],
)
def test_an_answer_missing_a_section_is_incomplete_never_scored(protocol: GembaMQM, answer: str, problem: str) -> None:
    with pytest.raises(VerdictError, match=re.escape(problem)) as caught:
        protocol.parse(answer, ITEM)
    assert caught.value.code == ReasonCode.INCOMPLETE


def test_an_answer_stopped_at_any_section_boundary_is_rejected() -> None:
    """Whichever section an answer stops before (or inside, before its first line), what it has
    is never scored as if it were all. (A stop between two error lines of the last section
    cannot be told from a complete answer; the provider's finish reason is the only sign.)"""
    protocol = GembaMQM()
    for seed in range(40):
        answer = write_gemba_mqm(protocol.render(ITEM), seed=seed, temperature=0.0, json_mode=False)
        assert answer is not None
        lines = answer.strip().splitlines()
        protocol.parse(answer, ITEM)
        headers = [n for n, line in enumerate(lines) if line.endswith(":")]
        for stop in [*headers[1:], *(n + 1 for n in headers)]:
            with pytest.raises(VerdictError):
                protocol.parse("\n".join(lines[:stop]), ITEM)


def test_json_answer_codes() -> None:
    protocol = GembaMQM.from_options({"output": "json"})
    with pytest.raises(VerdictError) as cut:
        protocol.parse('{"errors": [{"severity": "major", "category": "accuracy", "sp', ITEM)
    assert cut.value.code == ReasonCode.INCOMPLETE
    with pytest.raises(VerdictError) as bad:
        protocol.parse('{"errors": [{"severity": "fatal", "category": "accuracy", "span": "b"}]}', ITEM)
    assert bad.value.code == ReasonCode.OUT_OF_RANGE


def test_json_mode_answers() -> None:
    protocol = GembaMQM.from_options({"output": "json"})
    answer = '{"errors": [{"severity": "major", "category": "Accuracy/Omission", "span": "b"}]}'
    verdict = protocol.parse(answer, ITEM)
    assert protocol.score(verdict, ITEM).score == -5.0
    assert verdict.errors[0].span_found == "target"
    with pytest.raises(VerdictError):
        protocol.parse('{"errors": [{"severity": "fatal", "category": "accuracy", "span": "b"}]}', ITEM)
    assert protocol.response_format()["type"] == "json_schema"


def test_spans_are_found_as_judges_quote_them() -> None:
    """A judge copies a span with other quote marks, case or spacing: it is still found (the
    target first, then the source). A lower-case substring search found none of the first three."""
    item = {**ITEM, "source": "Er sagte: „Nein“ und ging.", "target": "He said: “No” and left\n the room."}
    spans = ['said: "no"', "LEFT THE ROOM", '"nein" und', "a silver whale"]
    answer = json.dumps({"errors": [{"severity": "minor", "category": "other", "span": s} for s in spans]})
    verdict = GembaMQM().parse(answer, item)
    assert [e.span_found for e in verdict.errors] == ["target", "target", "source", "none"]
    assert [e.span for e in verdict.errors] == spans  # the judge's own words are kept


def test_fake_answers_parse_in_both_modes() -> None:
    for mode in ("text", "json"):
        protocol = GembaMQM.from_options({"output": mode})
        messages = protocol.render(ITEM)
        for seed in range(50):
            for temperature in (0.0, 0.5, 1.0):
                answer = write_gemba_mqm(messages, seed=seed, temperature=temperature, json_mode=mode == "json")
                assert answer is not None
                score = protocol.score(protocol.parse(answer, ITEM), ITEM).score
                assert score is not None and -25 <= score <= 0


@pytest.mark.parametrize("cls", [GembaMQM, GembaMQMLiterary], ids=["gemba-mqm", "gemba-mqm-literary"])
@pytest.mark.parametrize("mode", ["text", "json"])  # a text-mode judge's JSON answer is read as JSON too
@pytest.mark.parametrize(
    "answer",
    [
        "{}",
        "```json\n{}\n```",
        '{"errors": [{"severity": "minor", "category": "fluency/grammar"}]}',  # an error without its span
    ],
)
def test_a_json_answer_missing_a_part_is_incomplete_not_a_perfect_score(
    cls: type[GembaMQM], mode: str, answer: str
) -> None:
    """``{}`` used to score 0, the best score there is: ``errors`` defaulted to an empty list."""
    with pytest.raises(VerdictError) as caught:
        cls.from_options({"output": mode}).parse(answer, ITEM)
    assert caught.value.code == ReasonCode.INCOMPLETE


@pytest.mark.parametrize("cls", [GembaMQM, GembaMQMLiterary], ids=["gemba-mqm", "gemba-mqm-literary"])
def test_only_an_explicit_empty_error_list_is_no_error(cls: type[GembaMQM]) -> None:
    protocol = cls.from_options({"output": "json"})
    assert protocol.score(protocol.parse('{"errors": []}', ITEM), ITEM).score == 0.0


def test_the_json_schema_sent_requires_every_part_of_the_answer() -> None:
    response_format = GembaMQM.from_options({"output": "json"}).response_format()
    assert response_format is not None
    schema = response_format["json_schema"]["schema"]
    assert schema["required"] == ["errors"]
    assert set(schema["$defs"]["MQMError"]["required"]) == {"severity", "category", "span"}


ABOVE_MINOR = 'Critical:\nno-error\nMajor:\naccuracy/addition - "nach"\n'


@pytest.mark.parametrize("protocol", [GembaMQM(), GembaMQMLiterary()], ids=["gemba-mqm", "gemba-mqm-literary"])
@pytest.mark.parametrize(
    "last_line",
    [
        "terminology/inappropriate for context -",  # cut before the span: it scored -6 (the full answer -8)
        "terminology/inappropriate for context",  # cut before the dash
        "terminology/inappropriate",  # cut inside the category
        "accuracy/mistranslation (too-literal) -",
        "fluency",  # a category cut before its subcategory and span
        "other",
        "locale convention",
        "locale",  # cut inside a category's name
        "non-translation",
        'terminology/inappropriate for context - "Zim',  # inside the span's quotes
        '**Minor:** style/awkward -',  # an inline header, with Markdown
    ],
)
def test_a_last_error_line_cut_short_is_incomplete(protocol: GembaMQM, last_line: str) -> None:
    full = ABOVE_MINOR + 'Minor:\nterminology/inappropriate for context - "Zimmer"\n'
    assert protocol.score(protocol.parse(full, ITEM), ITEM).score == -6.0
    answer = ABOVE_MINOR + ("" if "Minor:" in last_line else "Minor:\n") + last_line
    with pytest.raises(VerdictError) as caught:
        protocol.parse(answer, ITEM)
    assert caught.value.code == ReasonCode.INCOMPLETE, caught.value.problems


@pytest.mark.parametrize("protocol", [GembaMQM(), GembaMQMLiterary()], ids=["gemba-mqm", "gemba-mqm-literary"])
@pytest.mark.parametrize("line", ["other", "fluency/grammar -"])
def test_an_error_line_without_its_span_is_unreadable_anywhere(protocol: GembaMQM, line: str) -> None:
    """Every error line of the format has its span (the few-shot answers, the reference's
    fixtures); before the last line, a category alone is not a cut but a line off the format."""
    answer = f'Critical:\nno-error\nMajor:\n{line}\nMinor:\nfluency/grammar - "wäre"'
    with pytest.raises(VerdictError, match="is not 'category/subcategory") as caught:
        protocol.parse(answer, ITEM)
    assert caught.value.code == ReasonCode.UNREADABLE


@pytest.mark.parametrize("protocol", [GembaMQM(), GembaMQMLiterary()], ids=["gemba-mqm", "gemba-mqm-literary"])
def test_a_bare_non_translation_line_before_the_last_is_a_critical_error(protocol: GembaMQM) -> None:
    """non-translation names the whole segment: it needs no span (the reference reads any line
    holding it as critical). Only as the answer's last line could it be a line cut short."""
    answer = "Critical:\nnon-translation\nMajor:\nno-error\nMinor:\nno-error"
    verdict = protocol.parse(answer, ITEM)
    assert [(e.severity, e.category, e.span) for e in verdict.errors] == [("critical", "non-translation", "")]


def test_an_explicitly_empty_span_is_a_span() -> None:
    verdict = GembaMQM().parse('Critical:\nno-error\nMajor:\naccuracy/omission - ""\nMinor:\nno-error', ITEM)
    assert [(e.category, e.span) for e in verdict.errors] == [("accuracy/omission", "")]


# --- the canonical-answer shortcut reads every answer as the line parser does ------------------

_CATEGORIES = ["accuracy/mistranslation", "fluency/grammar", "style/awkward", "terminology/inappropriate for context",
               "non-translation", "accuracy/mistranslation (too-literal)", "other", "locale convention/currency format",
               "Accuracy/Omission", "unknown/thing", "accuracy - x", "accuracy-x", "fluency/too- literal",
               "accuracy/no error", "minor", "fluency/punctuation.", "style/ awkward", "accuracy/addition/", "(other)"]
_SEPARATORS = [" - ", " - ", " - ", "-", " – ", ": ", " -", "- ", " — "]
_SPANS = ["Hund", "the cat", "He said no error", "a*b", "a**b", "snake_case", "ö", '"quoted"', " ", "", "line\rbreak",
          "end-", "Katze sitzt", "dog", "x\u2028y", "trailing ", "`code`"]


def _random_answer(rng: random.Random) -> str:
    """An answer in the prompt's format with, at each piece, a small chance of a way off it."""

    def pick(usual: str, others: list[str]) -> str:
        return usual if rng.random() < 0.93 else rng.choice(others)

    def header(name: str) -> str:
        form = pick(name.capitalize(), [name, name.upper(), f"**{name.capitalize()}**", f"{name.capitalize()} "])
        return form + pick(":", [": ", " :", ":**", ""])

    def body() -> list[str]:
        if rng.random() < 0.45:
            return [pick("no-error", ["No-error", "no error", "no-error.", "- no-error"])]
        lines = []
        for _ in range(rng.randint(1, 3)):
            span = pick(rng.choice(_SPANS[:3] + _SPANS[12:14]), _SPANS)
            quoted = pick('"{}"', ["“{}”", "{}", '"{}', "'{}'", '*"{}"*']).format(span)
            lines.append(pick(rng.choice(_CATEGORIES[:8]), _CATEGORIES) + pick(" - ", _SEPARATORS) + quoted)
        return lines

    sections = [[header(name), *body()] for name in ("critical", "major", "minor")]
    if rng.random() < 0.05:
        rng.shuffle(sections)
    if rng.random() < 0.05:
        sections.pop(rng.randrange(3))
    lines = [line for section in sections for line in section]
    if rng.random() < 0.05:
        lines.insert(0, "Here are the errors:")
    if rng.random() < 0.05:
        lines[-1] = lines[-1][: rng.randrange(len(lines[-1]) + 1)]
    text = pick("\n", ["\r\n", "\n\n", "\n "]).join(lines)
    return pick("", [" ", "\n"]) + text + pick("", ["\n", "  "])


def _outcome(read: Callable[[], object]) -> object:
    try:
        return read()
    except VerdictError as exc:
        return ("error", exc.code, exc.problems)


@pytest.mark.parametrize("protocol", [GembaMQM(), GembaMQMLiterary()], ids=["gemba-mqm", "literary"])
def test_canonical_answers_read_the_same_by_the_shortcut_and_the_line_parser(protocol: GembaMQM) -> None:
    """``parse`` reads an answer in the prompt's exact format with one regex (a paced run's CPU,
    issue 23.6); on 4,000 answers, most near that format but perturbed the ways models write,
    it must give what the line parser gives (verdict, or error and its problems), and it must be
    taken for a good share of them (else this checks nothing)."""
    item = {"id": "1", "source": "The dog and the cat", "target": "Der Hund und die Katze sitzt",
            "source_lang": "English", "target_lang": "German"}
    rng = random.Random(23)
    taken = differ = 0
    for _ in range(4000):
        answer = _random_answer(rng)
        taken += protocol._parse_canonical(answer, item) is not None
        by_lines = _outcome(lambda a=answer: MQMVerdict(errors=[protocol._locate(e, item) for e in protocol._parse_text(a)]))
        if _outcome(lambda a=answer: protocol.parse(a, item)) != by_lines:
            differ += 1
    assert differ == 0
    assert 500 < taken < 3600
