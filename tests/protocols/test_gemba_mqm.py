"""GEMBA-MQM: the conversation byte for byte, and the reference parser's fixtures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from judge_engine.errors import VerdictError
from judge_engine.protocols.gemba_mqm import GembaMQM, gemba_score, legacy_parse

ITEM = {"id": "1", "source": "a", "target": "b", "source_lang": "English", "target_lang": "German"}


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
        ("Minor:\n" + "\n".join(f'fluency/grammar - "w{i}"' for i in range(6)), -5.0),  # first five count
        ('Minor:\nnon-translation - "abc"', -25.0),  # non-translation is critical
        ("Critical:\nno-error\nMajor:\nno-error\nMinor:\nno-error", 0.0),
        ('Critical: no-error\nMajor: accuracy/mistranslation - "x"\nMinor: fluency/grammar - "y"', -6.0),  # inline read
        ('**Critical:**\naccuracy/addition - "x"', -25.0),  # markdown read
        ('Here is my annotation.\nMajor:\n- accuracy/omission - "the"', -5.0),
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
        ('Major:\naccuracy/omission - "the acc', "cut off"),
        ('Major:\nbanana/split - "x"', "unknown error category"),
        ("Major:\nthis line is prose without any structure", "is not 'category/subcategory"),
    ],
)
def test_strict_parser_rejects_unreadable_answers(answer: str, problem: str) -> None:
    with pytest.raises(VerdictError, match=re.escape(problem)):
        GembaMQM().parse(answer, ITEM)


def test_json_mode_answers() -> None:
    protocol = GembaMQM.from_options({"output": "json"})
    answer = '{"errors": [{"severity": "major", "category": "Accuracy/Omission", "span": "b"}]}'
    verdict = protocol.parse(answer, ITEM)
    assert protocol.score(verdict, ITEM).score == -5.0
    assert verdict.errors[0].span_found == "target"
    with pytest.raises(VerdictError):
        protocol.parse('{"errors": [{"severity": "fatal", "category": "accuracy", "span": "b"}]}', ITEM)
    assert protocol.response_format()["type"] == "json_schema"


def test_fake_answers_parse_in_both_modes() -> None:
    for mode in ("text", "json"):
        protocol = GembaMQM.from_options({"output": mode})
        messages = protocol.render(ITEM)
        for seed in range(50):
            for temperature in (0.0, 0.5, 1.0):
                answer = protocol.fake_answer(messages, seed=seed, temperature=temperature, json_mode=mode == "json")
                assert answer is not None
                score = protocol.score(protocol.parse(answer, ITEM), ITEM).score
                assert score is not None and -25 <= score <= 0
