"""gemba-mqm-literary: LitEval's prompt texts, the GEMBA parser fixtures, LitEval scoring, sentences."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from judge_engine.errors import VerdictError
from judge_engine.fake.writers.mqm import write_gemba_mqm_literary
from judge_engine.protocols.base import stable_seed
from judge_engine.protocols.gemba_mqm import GembaMQM, MQMError, gemba_score
from judge_engine.protocols.gemba_mqm_literary import (
    ASPECTS,
    GembaMQMLiterary,
    aspect_of,
    count_sentences,
    language_code,
    literary_score,
)

ITEM: dict[str, Any] = {
    "id": "l1",
    "source": "Er schwieg. Dann ging er hinaus in den Regen.",
    "target": "He kept silent. Then he went out into the rain.",
    "source_lang": "German",
    "target_lang": "English",
}
STRICT = GembaMQMLiterary()
LEGACY = GembaMQMLiterary.from_options({"parser": "legacy-gemba"})


# --- the prompt, against the reference file ------------------------------------------------------


def _literary_section(reference: Path) -> str:
    text = (reference / "gemba_mqm.md").read_text(encoding="utf-8")
    return text.split("## The literary variant")[1].split("\n## ")[0]


def test_system_and_task_prompts_are_literevals(shared_reference: Path) -> None:
    quotes = re.findall(r"^> (.*)$", _literary_section(shared_reference), re.MULTILINE)
    system, task = quotes
    messages = STRICT.render(ITEM)
    assert messages[0] == {"role": "system", "content": system}
    assert messages[-1]["content"] == (
        "German source:\n```Er schwieg. Dann ging er hinaus in den Regen.```\n"
        "English translation:\n```He kept silent. Then he went out into the rain.```\n\n" + task
    )
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]


def test_few_shot_examples_are_literevals(shared_reference: Path) -> None:
    section = _literary_section(shared_reference)
    messages = STRICT.render(ITEM)
    shots = re.findall(r"^\d\. (\w\w)-(\w\w)\. source: (.*?) target: \"(.*?)\" answer: (.*)$", section, re.MULTILINE)
    assert len(shots) == 2
    names = {"En": "English", "De": "German", "Zh": "Chinese"}
    for (src, tgt, source, target, answer), user, assistant in zip(shots, messages[1::2], messages[2::2], strict=False):
        assert user["content"].startswith(f"{names[src]} source:\n```")
        assert f"{names[tgt]} translation:\n```{target}```\n\n" in user["content"]
        if source.startswith('"'):
            assert f"```{source.strip(chr(34))}```" in user["content"]
        expected = []
        for part in answer.rstrip(".").split("; "):
            header, _, body = part.partition(": ")
            expected += [f"{header}:", body]
        assert assistant["content"] == "\n".join(expected) + "\n"
    # The lost Chinese source has a documented stand-in that the English target renders.
    assert "太阳他有脚啊，轻轻悄悄地挪移了" in messages[3]["content"]


def test_few_shot_answers_parse_and_score(shared_reference: Path) -> None:
    messages = STRICT.render(ITEM)
    en_de = STRICT.parse(messages[2]["content"], {"target": "x"})
    assert [(e.severity, e.category, e.span) for e in en_de.errors] == [
        ("critical", "accuracy/mistranslation (too-literal)", "studierte"),
        ("major", "accuracy/omission", "das Aussehen"),
    ]
    zh_en = STRICT.parse(messages[4]["content"], {"target": "x"})
    assert literary_score(zh_en.errors, 1).scores["style"] == -25.0  # critical style/awkward


# --- the GEMBA reference fixtures, read by this protocol's parsers -----------------------------


def _original_shot_answers() -> list[str]:
    messages = GembaMQM().render(ITEM)
    return [messages[i]["content"] for i in (2, 4, 6)]


# (answer, legacy GEMBA score, errors the legacy rules find, LitEval penalty of those errors)
def _legacy_fixtures() -> list[tuple[str, float, int, int]]:
    en_de, en_cs, zh_en = _original_shot_answers()
    six_minor = "Minor:\n" + "\n".join(f'fluency/grammar - "w{i}"' for i in range(6))
    return [
        (en_de, -12.0, 4, 12),
        (en_cs, -11.0, 3, 11),
        (zh_en, -25.0, 3, 31),  # GEMBA caps 31 at 25; LitEval does not
        ('Critical: no-error\nMajor: accuracy/mistranslation - "x"\nMinor: fluency/grammar - "y"', 0.0, 0, 0),
        (six_minor, -5.0, 6, 6),  # GEMBA counts five errors; LitEval counts all
        ('Minor:\nnon-translation - "abc"', -25.0, 1, 25),
        ('accuracy/mistranslation - "x"', 0.0, 0, 0),  # no header
        ("Critical:\nno-error\nMajor:\nno-error\nMinor:\nno-error", 0.0, 0, 0),
        ('**Critical:**\naccuracy/mistranslation - "x"', 0.0, 0, 0),
    ]


@pytest.mark.parametrize(("answer", "gemba", "count", "penalty"), _legacy_fixtures())
def test_reference_fixtures_with_the_legacy_parser(answer: str, gemba: float, count: int, penalty: int) -> None:
    verdict = LEGACY.parse(answer, ITEM)
    assert len(verdict.errors) == count
    assert gemba_score(verdict.errors) == gemba
    assert LEGACY.score(verdict, {**ITEM, "target": "One sentence."}).score == -penalty


@pytest.mark.parametrize(("answer", "gemba", "count", "penalty"), _legacy_fixtures())
def test_reference_fixtures_with_the_strict_parser(answer: str, gemba: float, count: int, penalty: int) -> None:
    if "\n" not in answer and answer.startswith("accuracy"):
        with pytest.raises(VerdictError, match="no 'Critical:'"):
            STRICT.parse(answer, ITEM)
        return
    if not all(header in answer.lower() for header in ("critical:", "major:", "minor:")):
        # The strict parser never scores an answer with a section missing (issue 13, item 1).
        with pytest.raises(VerdictError, match="section"):
            STRICT.parse(answer, ITEM)
        return
    verdict = STRICT.parse(answer, ITEM)
    strict_penalty = {"Critical: no-error": 6, "**Critical:**": 25}.get(answer.split("\n")[0], penalty)
    assert STRICT.score(verdict, {**ITEM, "target": "One."}).score == -strict_penalty


def test_hyphenated_categories_stay_whole() -> None:
    answer = (
        'Critical:\nnon-translation - "abc well-known"\nMajor:\naccuracy/mistranslation (too-literal) - "well-known"\n'
        'Minor:\nnon-translation - "abc"\nstyle/unidiomatic – "ah"'
    )
    errors = STRICT.parse(answer, {"target": "abc well-known"}).errors
    assert [(e.severity, e.category, e.span) for e in errors] == [
        ("critical", "non-translation", "abc well-known"),
        ("major", "accuracy/mistranslation (too-literal)", "well-known"),
        ("critical", "non-translation", "abc"),
        ("minor", "style/unidiomatic", "ah"),
    ]


# --- scoring ---------------------------------------------------------------------------------


def test_literary_score_is_uncapped_per_sentence_with_aspects() -> None:
    errors = [
        MQMError(severity="critical", category="accuracy/mistranslation (too-literal)", span="a"),
        MQMError(severity="critical", category="accuracy/omission", span="b"),
        MQMError(severity="major", category="fluency/coherence", span="c"),
        MQMError(severity="minor", category="style/register", span="d"),
        MQMError(severity="minor", category="terminology/inconsistent use", span="e"),
        MQMError(severity="critical", category="non-translation", span="f"),
        MQMError(severity="minor", category="locale convention", span="g"),
    ]
    score = literary_score(errors, 4)
    # accuracy 25+25=50, fluency 5, style 1, terminology 1, other 25+1=26: total 83 over 4 sentences.
    assert score.score == pytest.approx(-83 / 4)
    assert dict(score.scores) == pytest.approx(
        {"accuracy": -12.5, "fluency": -1.25, "style": -0.25, "terminology": -0.25, "other": -6.5, "sentences": 4}
    )
    assert sum(score.scores[a] for a in ASPECTS) == pytest.approx(score.score)
    assert literary_score([], 3).score == 0.0
    with pytest.raises(ValueError):
        literary_score(errors, 0)


def test_score_counts_the_sentences_of_the_translation() -> None:
    verdict = STRICT.parse('Critical:\nno-error\nMajor:\nfluency/grammar - "went"\nMinor:\nno-error', ITEM)
    score = STRICT.score(verdict, ITEM)
    assert (score.score, score.scores["sentences"]) == (-2.5, 2.0)
    assert STRICT.score_range() is None


@pytest.mark.parametrize(
    ("category", "aspect"),
    [
        ("accuracy/mistranslation (temporal effect)", "accuracy"),
        ("accuracy/misnomer", "accuracy"),
        ("fluency/coherence", "fluency"),
        ("style/unidiomatic", "style"),
        ("terminology/inappropriate for context", "terminology"),
        ("non-translation", "other"),
        ("other", "other"),
        ("locale convention/date format", "other"),
        ('accuracy/mistranslation - "terminology"', "accuracy"),  # a legacy line: first aspect named
        ("**critical:**", "other"),
    ],
)
def test_aspect_of(category: str, aspect: str) -> None:
    assert aspect_of(category) == aspect


# --- the sentence splitter (sentencex) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ('Mr. Smith arrived at 3 p.m. on Jan. 5. "Is it late?" she asked. Yes.', "English", 3),
        ("He kept silent. Then he went out into the rain.", "en", 2),
        ("Dr. Müller kam am 3. Mai nach Berlin. Er sagte z. B. nichts. Warum? Das weiß niemand.", "German", 4),
        ("„Kommst du?“, fragte sie. Er schwieg.", "German", 2),
        ("太阳他有脚啊，轻轻悄悄地挪移了。我也茫茫然跟着旋转！于是洗手的时候，日子从水盆里过去；", "Chinese", 3),
        ("窗外下着雨。天色渐暗", "zh", 2),
        ("No full stop at all", "English", 1),
        ("", "English", 1),
        ("   ", "German", 1),
    ],
)
def test_count_sentences(text: str, language: str, expected: int) -> None:
    assert count_sentences(text, language) == expected


def test_language_code() -> None:
    assert [language_code(n) for n in ("English", "German", "Chinese", "de", "zh-Hans")] == ["en", "de", "zh", "de", "zh"]
    assert language_code("???") == "en"


# --- JSON mode and the fake server ---------------------------------------------------------------


def test_json_mode() -> None:
    protocol = GembaMQMLiterary.from_options({"output": "json"})
    assert protocol.response_format() is not None
    answer = '{"errors": [{"severity": "minor", "category": "style/unidiomatic", "span": "kept silent"}]}'
    verdict = protocol.parse(answer, ITEM)
    assert verdict.errors[0].span_found == "target"
    assert protocol.score(verdict, ITEM).scores["style"] == -0.5


@pytest.mark.parametrize("json_mode", [False, True])
@pytest.mark.parametrize("parser", ["strict", "legacy-gemba"])
def test_fake_answers_parse_and_vary_with_temperature(json_mode: bool, parser: str) -> None:
    protocol = GembaMQMLiterary.from_options({"output": "json" if json_mode else "text", "parser": parser})
    targets = ["He kept silent. Then he went out into the well-known rain.", "他沉默了。然后他走进雨中。"]
    by_temperature: dict[float, list[float]] = {0.0: [], 1.0: []}
    for n in range(80):
        item = {**ITEM, "target": targets[n % 2], "target_lang": ["English", "Chinese"][n % 2]}
        messages = protocol.render(item)
        for temperature in by_temperature:
            seed = stable_seed(n)
            answer = write_gemba_mqm_literary(messages, seed=seed, temperature=temperature, json_mode=json_mode)
            assert answer is not None
            assert answer == write_gemba_mqm_literary(messages, seed=seed, temperature=temperature, json_mode=json_mode)
            if parser == "legacy-gemba" and json_mode:
                continue  # the legacy rules read only the text format
            verdict = protocol.parse(answer, item)
            if json_mode:
                assert len(verdict.errors) == len(json.loads(answer)["errors"])
            by_temperature[temperature].append(protocol.score(verdict, item).score or 0.0)
    if not (parser == "legacy-gemba" and json_mode):
        assert by_temperature[0.0] != by_temperature[1.0]
        assert len(set(by_temperature[0.0])) > 3


def test_fake_answer_ignores_the_original_gemba_prompt() -> None:
    messages = GembaMQM().render(ITEM)
    assert write_gemba_mqm_literary(messages, seed=1, temperature=0.0, json_mode=False) is None
