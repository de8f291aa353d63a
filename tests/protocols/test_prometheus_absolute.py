"""prometheus-absolute: the library's parser fixtures, rubric scales, options, JSON mode, fake answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from judge_engine.errors import ConfigError, DatasetError, VerdictError
from judge_engine.fake.writers.prometheus import write_absolute
from judge_engine.protocols.prometheus import PrometheusAbsolute
from judge_engine.protocols.prometheus_parse import library_parse_absolute, read_score
from judge_engine.protocols.prometheus_rubrics import (
    HELPFULNESS,
    LITERARY_SQM,
    Rubric,
    coerce_rubric,
    parse_rubric_text,
)

# The library's tests/test_parser.py, absolute mode, plus the two cases the reference file adds.
LIBRARY_ABSOLUTE_FIXTURES: list[tuple[str, int | None]] = [
    ("Reference (Score 5) two results [RESULT] 3", 3),
    ("Reference (Score 5) not results", None),
    ("Excellent. [RESULT] 5 out of 5", 5),
    ("Poor performance. [RESULT] score of 1", 1),
    ("Good job. [Result] 3", 3),
    ("Needs improvement. [Result] Score: 2", 2),
    ("Well done. [Result] Result: 4", 4),
    ("Average. [Result] 4/5", 4),
    ("Excellent. [Result] 5 out of 5", 5),
    ("Poor performance. [Result] score of 1", 1),
    ("Good job. (Score 5)", 5),
    ("Good job. [Score 4]", 4),
    ("Good job. score: 3", 3),
    ("Good job. Score: 3", 3),
    ("Good job. score of 1", 1),
    ("Good job. [RESULT] (5)", 5),
    ("The score is definitely not 3.", None),
    ("I rate this a perfect 10!", None),
    ("Score: 2.5", None),
    ("Result: A", None),
]

ITEM: dict[str, Any] = {"id": "i1", "instruction": "Say hi.", "response": "Hi!"}


@pytest.mark.parametrize(("output", "expected"), LIBRARY_ABSOLUTE_FIXTURES)
def test_library_parser_parity(output: str, expected: int | None) -> None:
    assert library_parse_absolute(output) == ((output, expected) if expected else (None, None))


@pytest.mark.parametrize(("output", "expected"), LIBRARY_ABSOLUTE_FIXTURES)
def test_protocol_parse_accepts_exactly_the_library_fixtures(output: str, expected: int | None) -> None:
    protocol = PrometheusAbsolute.from_options({"rubric": "helpfulness"})
    if expected is None:
        with pytest.raises(VerdictError):
            protocol.parse(output, ITEM)
    else:
        assert protocol.parse(output, ITEM).score == expected


def test_library_parser_on_empty_and_none() -> None:
    assert library_parse_absolute("") == (None, None)
    assert library_parse_absolute(None) == (None, None)


def test_feedback_is_the_text_before_the_marker() -> None:
    verdict = read_score("Feedback: Clear and kind. [RESULT] 4", 1, 5)
    assert (verdict.feedback, verdict.score) == ("Clear and kind.", 4)


@pytest.mark.parametrize("answer", ["Fine. [RESULT] 6", "Fine. [RESULT] 0", "Fine. [RESULT] 9 out of 5"])
def test_out_of_range_is_a_verdict_error_never_clamped(answer: str) -> None:
    protocol = PrometheusAbsolute.from_options({"rubric": "helpfulness"})
    with pytest.raises(VerdictError, match="outside the rubric's scale"):
        protocol.parse(answer, ITEM)


def test_literary_scale_is_0_to_6_and_rejects_8() -> None:
    protocol = PrometheusAbsolute.from_options({"rubric": "literary-sqm"})
    assert protocol.score_range() == (0.0, 6.0)
    assert protocol.parse("Lively. [RESULT] 0", ITEM).score == 0
    assert protocol.parse("Lively. [RESULT] 6 out of 6", ITEM).score == 6
    assert protocol.parse("Lively. [RESULT] 5/6", ITEM).score == 5
    with pytest.raises(VerdictError, match="between 0 and 6"):
        protocol.parse("Lively. [RESULT] 8", ITEM)
    score = protocol.score(protocol.parse("x [RESULT] 3", ITEM), ITEM)
    assert (score.score, score.scores["normalized"]) == (3.0, 0.5)


def test_scale_words_follow_the_rubric() -> None:
    protocol = PrometheusAbsolute.from_options({"rubric": "literary-sqm", "reference": "with"})
    prompt = protocol.render({**ITEM, "reference_answer": "Hello!"})[-1]["content"]
    assert "a reference answer that gets a score of 6," in prompt
    assert "write a score that is an integer between 0 and 6." in prompt
    assert "[RESULT] (an integer number between 0 and 6)" in prompt
    assert "###Reference Answer (Score 6):\nHello!" in prompt
    assert "\nScore 0: Nonsense" in prompt and "Score 1:" not in prompt


def test_system_prompt_follows_the_rubric_unless_chosen() -> None:
    literary = PrometheusAbsolute.from_options({"rubric": "literary-sqm"}).render(ITEM)
    assert literary[0]["content"].startswith("As a literary translation critic")
    library = PrometheusAbsolute.from_options({"rubric": "helpfulness"}).render(ITEM)
    assert library[0]["content"].startswith("You are a fair judge assistant tasked")
    none = PrometheusAbsolute.from_options({"rubric": "literary-sqm", "system_prompt": "none"})
    assert [m["role"] for m in none.render(ITEM)] == ["user"]


def test_reference_modes() -> None:
    with_ref = {**ITEM, "reference_answer": "Hello there!"}
    auto = PrometheusAbsolute.from_options({"rubric": "helpfulness"})
    assert "###Reference Answer (Score 5):" in auto.render(with_ref)[-1]["content"]
    assert "###Reference Answer" not in auto.render({**ITEM, "reference_answer": " "})[-1]["content"]
    without = PrometheusAbsolute.from_options({"rubric": "helpfulness", "reference": "without"})
    assert "###Reference Answer" not in without.render(with_ref)[-1]["content"]
    required = PrometheusAbsolute.from_options({"rubric": "helpfulness", "reference": "with"})
    with pytest.raises(DatasetError, match="reference_answer"):
        required.render(ITEM)


def test_wording_option() -> None:
    library = PrometheusAbsolute.from_options({"rubric": "helpfulness"}).render(ITEM)[-1]["content"]
    assert 'look as follows: "(write a feedback for criteria)' in library
    eval_ = PrometheusAbsolute.from_options({"rubric": "helpfulness", "wording": "eval"})
    assert 'look as follows: "Feedback: (write a feedback' in eval_.render(ITEM)[-1]["content"]


def test_item_rubric_wins_over_the_option_in_every_shape() -> None:
    protocol = PrometheusAbsolute.from_options({"rubric": "helpfulness"})
    ours = {"criteria": "Is it funny?", "descriptions": {1: "No.", 3: "Somewhat.", 10: "Very."}}
    library = {"criteria": "Is it funny?", **{f"score{k}_description": f"d{k}" for k in range(1, 6)}}
    for shape in (ours, library, json.dumps(ours), LITERARY_SQM.render(), "literary-sqm"):
        rubric = coerce_rubric(shape)
        prompt = protocol.render({**ITEM, "rubric": shape})[-1]["content"]
        assert rubric.render() in prompt
    assert protocol.parse("ha [RESULT] 10 out of 10", {**ITEM, "rubric": ours}).score == 10


def test_missing_or_bad_rubric() -> None:
    with pytest.raises(DatasetError, match="no rubric"):
        PrometheusAbsolute().render(ITEM)
    with pytest.raises(DatasetError, match="rubric"):
        PrometheusAbsolute().render({**ITEM, "rubric": "no-such-rubric"})
    with pytest.raises(ConfigError, match="protocol_options.rubric"):
        PrometheusAbsolute.from_options({"rubric": "no-such-rubric"})
    with pytest.raises(ConfigError, match="outside the scale"):
        PrometheusAbsolute.from_options(
            {"rubric": {"criteria": "c", "descriptions": {1: "a", 7: "b"}, "scale": [1, 5]}}
        )


def test_rubric_scale_and_text_round_trip() -> None:
    assert LITERARY_SQM.bounds == (0, 6)
    assert Rubric(criteria="c", descriptions={2: "x"}, scale=(0, 4)).bounds == (0, 4)
    assert parse_rubric_text(HELPFULNESS.render()) == HELPFULNESS
    assert parse_rubric_text(LITERARY_SQM.render()) == LITERARY_SQM


def test_json_mode() -> None:
    protocol = PrometheusAbsolute.from_options({"rubric": "literary-sqm", "output": "json"})
    fmt = protocol.response_format()
    assert fmt is not None and set(fmt["json_schema"]["schema"]["properties"]) == {"feedback", "score"}
    assert protocol.parse('```json\n{"feedback": "ok", "score": 4}\n```', ITEM).score == 4
    assert protocol.parse("ok [RESULT] 2", ITEM).score == 2  # text still accepted
    with pytest.raises(VerdictError, match="outside"):
        protocol.parse('{"feedback": "ok", "score": 7}', ITEM)
    with pytest.raises(VerdictError):
        protocol.parse('{"feedback": "ok"}', ITEM)


@pytest.mark.parametrize("rubric", ["helpfulness", "literary-sqm"])
@pytest.mark.parametrize("json_mode", [False, True])
@pytest.mark.parametrize("wording", ["library", "eval"])
def test_fake_answers_parse_and_vary_with_temperature(rubric: str, json_mode: bool, wording: str) -> None:
    protocol = PrometheusAbsolute.from_options(
        {"rubric": rubric, "output": "json" if json_mode else "text", "wording": wording}
    )
    low, high = protocol.options.rubric.bounds  # type: ignore[union-attr]
    seen = set()
    for seed in range(60):
        item = {**ITEM, "response": f"Hi number {seed}!"}
        messages = protocol.render(item)
        for temperature in (0.0, 0.3, 1.0):
            answer = write_absolute(messages, seed=seed, temperature=temperature, json_mode=json_mode)
            assert answer is not None
            assert answer == write_absolute(messages, seed=seed, temperature=temperature, json_mode=json_mode)
            assert answer.startswith("{") == json_mode
            if not json_mode:
                assert answer.startswith("Feedback: ") == (wording == "eval")
            verdict = protocol.parse(answer, item)
            assert low <= verdict.score <= high
            seen.add((seed, temperature, verdict.score))
    scores_at = {t: [s for (_, tt, s) in sorted(seen) if tt == t] for t in (0.0, 1.0)}
    assert scores_at[0.0] != scores_at[1.0]
    assert len(set(scores_at[0.0])) > 2


def test_fake_answer_ignores_other_prompts() -> None:
    assert write_absolute([{"role": "user", "content": "hello"}], seed=1, temperature=0, json_mode=False) is None
