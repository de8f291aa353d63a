"""``protocol: custom``: a judge defined in config. Prompts render item text as data, answers are
read per the declared fields (JSON, a marker, a regex), every problem names its field and has its
code, scores come from a field or a safe expression, and a candidate list can be shown in several
orders and mapped back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge_engine.errors import ConfigError, ReasonCode, VerdictError
from judge_engine.fake.writers.custom import write_custom
from judge_engine.protocols import get_protocol
from judge_engine.protocols.base import Protocol, VoteScale

ITEM = {"id": "q1", "question": "What is 2+2? {{ not a variable }}", "response": "The answer is 4, clearly.",
        "pair": [{"id": "base", "text": "four"}, {"id": "new", "text": "4"}]}
TEMPLATE = "Question: {{ question }}\nResponse:\n{{ response }}"


def custom(**options: Any) -> Protocol:
    return get_protocol("custom").from_options({"template": TEMPLATE, **options},
                                               where="judges[mine].protocol_options")


def problems_of(protocol: Protocol, answer: str, item: dict[str, Any] = ITEM, variant: str = "") -> VerdictError:
    with pytest.raises(VerdictError) as caught:
        protocol.parse(answer, item, variant)
    return caught.value


JSON_JUDGE = {"output": "json", "score": "score",
              "fields": {"reasoning": "text", "score": {"type": "integer", "min": 1, "max": 5},
                         "grade": {"type": "label", "choices": ["pass", "fail"]},
                         "quotes": {"type": "spans", "of": "response"}, "harmful": {"type": "boolean"}}}


def test_item_text_is_data_and_the_answer_format_comes_from_the_fields() -> None:
    protocol = custom(**JSON_JUDGE)
    (message,) = protocol.render(ITEM)
    assert message["role"] == "user"
    assert "{{ not a variable }}" in message["content"]  # rendered literally, never as template source
    assert message["content"].endswith(
        'Answer format: reply with one JSON object with these keys, and nothing else:\n- "reasoning" (text)\n'
        '- "score" (an integer from 1 to 5)\n- "grade" (one of: "pass", "fail")\n'
        '- "quotes" (a list of exact quotes copied from the response)\n- "harmful" (true or false)')
    assert protocol.required_fields == ("question", "response")


def test_json_mode_sends_a_schema_of_the_declared_fields() -> None:
    schema = custom(**JSON_JUDGE).response_format()["json_schema"]["schema"]  # type: ignore[index]
    properties = schema["properties"]
    assert schema["required"] == ["reasoning", "score", "grade", "quotes", "harmful"]
    assert (properties["score"]["minimum"], properties["score"]["maximum"]) == (1, 5)
    assert properties["grade"]["enum"] == ["pass", "fail"]
    assert properties["quotes"] == {"items": {"type": "string"}, "title": "Quotes", "type": "array"}
    assert schema["additionalProperties"] is False


def test_a_json_answer_is_read_field_by_field() -> None:
    protocol = custom(**JSON_JUDGE)
    answer = json.dumps({"reasoning": "Right.", "score": "4/5", "grade": "**PASS**", "quotes": ["answer is 4"],
                         "harmful": "no"})
    verdict = protocol.parse(f"Here it is:\n```json\n{answer}\n```", ITEM)
    assert verdict.model_dump() == {"reasoning": "Right.", "score": 4, "grade": "pass", "harmful": False,
                                    "quotes": [{"text": "answer is 4", "start": 4, "end": 15}]}
    score = protocol.score(verdict, ITEM)
    assert score.score == 4.0 and score.scores == {"score": 4.0, "harmful": 0.0}


@pytest.mark.parametrize(("answer", "code", "problem"), [
    ({"reasoning": "x", "grade": "pass", "quotes": [], "harmful": False}, "incomplete", "score: missing (an integer"),
    ({"reasoning": "x", "score": 7, "grade": "pass", "quotes": [], "harmful": False}, "out_of_range",
     "score: 7 is outside the range"),
    ({"reasoning": "x", "score": 4.5, "grade": "pass", "quotes": [], "harmful": False}, "out_of_range",
     "score: 4.5 is not an integer"),
    ({"reasoning": "x", "score": 4, "grade": "maybe", "quotes": [], "harmful": False}, "out_of_range",
     "grade: 'maybe' is not one of: pass, fail"),
    ({"reasoning": "x", "score": 4, "grade": "pass", "quotes": ["answer is 5"], "harmful": False}, "out_of_range",
     "quotes: not found in the response"),
    ({"reasoning": "x", "score": "four", "grade": "pass", "quotes": [], "harmful": False}, "unreadable",
     "score: 'four' is not an integer"),
    ({"reasoning": "", "score": 4, "grade": "pass", "quotes": [], "harmful": "perhaps"}, "incomplete",
     "reasoning: empty"),
])
def test_each_problem_names_its_field_and_has_its_code(answer: dict[str, Any], code: str, problem: str) -> None:
    error = problems_of(custom(**JSON_JUDGE), json.dumps(answer))
    assert error.code == ReasonCode(code)
    assert any(p.startswith(problem) for p in error.problems), error.problems


def test_an_answer_that_is_not_the_format_is_unreadable_or_incomplete_when_it_stopped() -> None:
    protocol = custom(**JSON_JUDGE)
    assert problems_of(protocol, "I think it is fine.").code is ReasonCode.UNREADABLE
    assert problems_of(protocol, '{"reasoning": "x", "score":').code is ReasonCode.INCOMPLETE
    assert problems_of(protocol, "[1, 2]").code is ReasonCode.UNREADABLE


def test_text_answers_are_read_after_the_marker() -> None:
    protocol = custom(output="text", fields={"feedback": "text", "grade": {"type": "label", "choices": ["pass", "fail"],
                                                                           "score_map": {"pass": 1, "fail": 0}}},
                      score="grade")
    assert protocol.render(ITEM)[0]["content"].endswith('End your answer with "[RESULT] <grade>".')
    verdict = protocol.parse("Feedback: fine work.\n[RESULT] Pass.", ITEM)
    assert verdict.model_dump() == {"feedback": "fine work.", "grade": "pass"}
    assert protocol.score(verdict, ITEM).score == 1.0
    assert problems_of(protocol, "Fine work. [RESULT]").code is ReasonCode.INCOMPLETE
    assert problems_of(protocol, "Fine work. [RES").code is ReasonCode.INCOMPLETE
    assert problems_of(protocol, "Fine work.").code is ReasonCode.UNREADABLE
    assert problems_of(protocol, "[RESULT] pass").code is ReasonCode.INCOMPLETE  # no feedback
    other = custom(output="text", marker="VERDICT:", fields={"grade": {"type": "label", "choices": ["A", "B"]}})
    assert other.parse("long text\nVERDICT: b", ITEM).model_dump() == {"grade": "B"}


def test_a_regex_reads_its_named_groups_from_the_last_match() -> None:
    protocol = custom(output="text", regex=r"(?m)^Score: (?P<score>\S+)$", fields={"score": {"type": "number", "min": 0,
                                                                                           "max": 1}}, score="score")
    assert protocol.parse("Score: 0.2\nOn reflection:\nScore: 0.75", ITEM).model_dump() == {"score": 0.75}
    assert problems_of(protocol, "score 0.5").code is ReasonCode.UNREADABLE
    assert problems_of(protocol, "Score: 1.5").code is ReasonCode.OUT_OF_RANGE


@pytest.mark.parametrize(("options", "words"), [
    ({"template": None}, "template (inline) or template_file"),
    ({"template": "{{ x }"}, "judges[mine].protocol_options: template: line 1"),
    ({"template": "{% include 'other.j2' %}"}, "include, import and extends are not available"),
    ({"output": "text", "regex": "(?P<score>\\d", "fields": {"score": "integer"}}, "regex: missing )"),
    ({"output": "text", "regex": "(?P<s>\\d)", "fields": {"score": "integer"}}, "no group for score"),
    ({"output": "json", "marker": "X", "fields": {"score": "integer"}}, "marker and regex read text answers"),
    ({"output": "text", "fields": {"a": "integer", "b": "integer"}}, "one value after it"),
    ({"fields": {"score": "integer"}, "score": "__import__('os')"}, "is not allowed"),
    ({"fields": {"score": "integer"}, "score": "score.real"}, "is not allowed"),
    ({"fields": {"score": "integer"}, "score": "(lambda: 1)()"}, "is not allowed"),
    ({"fields": {"score": "integer", "note": "text"}, "score": "score + note"}, "'note' is not a field with a number"),
    ({"output": "json", "fields": {"note": "text"}, "score": "note"}, "note is a text field, which has no score"),
    ({"fields": {"class": "integer"}}, "'class' cannot be a field name"),
    ({"fields": {"s": {"type": "integer", "min": 5, "max": 1}}}, "fields.s: min 5 is greater than max 1"),
    ({"fields": {"g": {"type": "label"}}}, "a label field needs choices"),
    ({"fields": {"w": "candidate"}}, "a candidate field needs the candidates option"),
    ({"fields": {"s": "integer"}, "orders": 2}, "several orders need candidates"),
])
def test_option_problems_are_config_errors_naming_the_key(options: dict[str, Any], words: str) -> None:
    raw = {"template": TEMPLATE, "fields": {"score": "integer"}, **options}
    with pytest.raises(ConfigError) as caught:
        get_protocol("custom").from_options({k: v for k, v in raw.items() if v is not None},
                                            where="judges[mine].protocol_options")
    assert words in str(caught.value)
    assert str(caught.value).startswith("protocol custom: judges[mine].protocol_options")


def test_score_expressions_are_computed_and_bounded_without_eval() -> None:
    protocol = custom(output="json", fields={"fluency": {"type": "integer", "min": 1, "max": 5},
                                             "adequacy": {"type": "integer", "min": 1, "max": 5},
                                             "errors": {"type": "spans", "of": "response"}},
                      score="mean(fluency, adequacy) - 0.5 * count(errors)")
    assert protocol.score_range() is None  # count() is unbounded above
    verdict = protocol.parse(json.dumps({"fluency": 4, "adequacy": 3, "errors": ["answer is", "clearly"]}), ITEM)
    assert protocol.score(verdict, ITEM).score == 2.5  # (4 + 3) / 2 - 0.5 * 2
    bounded = custom(output="json", fields={"a": {"type": "integer", "min": 1, "max": 5},
                                            "b": {"type": "number", "min": 0, "max": 1}}, score="-(a * b) / 2 + max(a, 2)")
    # -(a*b)/2 in [-2.5, 0]; max(a, 2) in [2, 5]: the sum in [-0.5, 5]
    assert bounded.score_range() == (-0.5, 5.0)
    ratio = custom(output="json", fields={"a": {"type": "integer", "min": 0, "max": 4},
                                          "b": {"type": "integer", "min": 0, "max": 4}}, score="a / b")
    assert ratio.score_range() is None  # the divisor's range holds 0
    verdict = ratio.parse('{"a": 2, "b": 0}', ITEM)
    with pytest.raises(VerdictError, match="divides by zero") as caught:
        ratio.score(verdict, ITEM)
    assert caught.value.code is ReasonCode.OUT_OF_RANGE


def test_candidates_are_shown_in_rotated_orders_and_mapped_back() -> None:
    protocol = custom(output="json", candidates="pair", orders=2,
                      template="{% for c in candidates %}Candidate {{ c.label }}: {{ c.text }}\n{% endfor %}",
                      fields={"better": {"type": "candidate", "score_map": {"new": 1, "base": 0}}}, score="better")
    assert protocol.variants(ITEM) == ("order0", "order1")
    assert protocol.required_fields == ("pair",)
    first, second = (protocol.render(ITEM, v)[0]["content"] for v in ("order0", "order1"))
    assert first.startswith("Candidate A: four\nCandidate B: 4\n") and second.startswith("Candidate A: 4\nCandidate B: four")
    assert '"better" (the label of one candidate: "A", "B")' in first
    # The same candidate ("new") chosen in both orders, under different labels:
    for variant, label in (("order0", "B"), ("order1", "A")):
        verdict = protocol.parse(json.dumps({"better": f"Candidate {label}"}), ITEM, variant)
        assert verdict.model_dump()["better_id"] == "new"
        assert protocol.score(verdict, ITEM, variant).scores == {"better": 1.0, "better.base": 0.0, "better.new": 1.0}
    assert problems_of(protocol, '{"better": "C"}', ITEM, "order0").code is ReasonCode.OUT_OF_RANGE
    assert protocol.check_item({**ITEM, "pair": ["only one"]}) != []


def test_the_template_hash_is_the_text_and_is_in_the_templates() -> None:
    inline = custom(**JSON_JUDGE)
    edited = get_protocol("custom").from_options({**JSON_JUDGE, "template": TEMPLATE + " "})
    assert inline.templates() == ("custom/answer_format.j2", "template")
    assert inline.template_hashes()[0] == edited.template_hashes()[0]
    assert inline.template_hashes()[1] != edited.template_hashes()[1]
    assert inline.template_hashes()[1].startswith("b2:")
    assert "template" not in inline.options.model_dump()  # the hash, not the text, names the prompt


def test_a_template_file_is_read_once_and_named_by_its_path(tmp_path: Path) -> None:
    path = tmp_path / "rubric.j2"
    path.write_text(TEMPLATE, encoding="utf-8")
    protocol = get_protocol("custom").from_options({**JSON_JUDGE, "template_file": str(path)})
    assert protocol.templates()[1] == str(path)
    assert protocol.template_hashes()[1] == custom(**JSON_JUDGE).template_hashes()[1]
    assert protocol.render(ITEM) == custom(**JSON_JUDGE).render(ITEM)


@pytest.mark.parametrize(("field", "score", "scale"), [
    ({"type": "integer", "min": 1, "max": 5}, "v", VoteScale("ordinal", bounds=(1.0, 5.0))),
    ({"type": "number", "min": 0, "max": 1}, "v", VoteScale("interval", bounds=(0.0, 1.0))),
    ({"type": "label", "choices": ["good", "bad"]}, "v", VoteScale("categorical", values=("good", "bad"))),
    ({"type": "label", "score_map": {"good": 1, "bad": 0}}, "v", VoteScale("ordinal", bounds=(0.0, 1.0))),
    ({"type": "boolean"}, "v", VoteScale("categorical", values=("false", "true"))),
    ({"type": "integer", "min": 1, "max": 5}, "v * 2", VoteScale("interval", bounds=(2.0, 10.0))),
    ({"type": "integer"}, None, None),
])
def test_a_verdict_votes_on_the_scale_of_its_score(field: dict[str, Any], score: str | None, scale: VoteScale) -> None:
    assert custom(output="json", fields={"v": field}, score=score).vote_scale() == scale


def test_the_fake_server_answers_per_the_declared_output() -> None:
    for options in (JSON_JUDGE, {"output": "text", "fields": {"feedback": "text", "score": "integer"}, "score": "score"},
                    {"output": "text", "regex": r"(?ims)^grade: (?P<grade>\w+)$.*^score: (?P<score>\d+)$",
                     "fields": {"grade": {"type": "label", "choices": ["pass", "fail"]},
                                "score": {"type": "integer", "min": 0, "max": 10}}, "score": "score"}):
        protocol = custom(**options)
        messages = protocol.render(ITEM)
        for seed in range(20):
            answer = write_custom(messages, seed=seed, temperature=1.0, json_mode=protocol.json_mode)
            assert answer is not None
            protocol.score(protocol.parse(answer, ITEM), ITEM)  # well formed, every time
    assert write_custom([{"role": "user", "content": "Rate this."}], seed=1, temperature=0, json_mode=False) is None


def test_the_fake_servers_rationale_says_what_its_score_says() -> None:
    """The demo's rationales follow the item's quality, as the scores do: a 1 of 5 no longer
    reads "stays accurate throughout" (before, a rationale was any of four, at random)."""
    from scipy.stats import spearmanr

    from judge_engine.fake.writers.custom import _SENTENCES

    protocol = custom(output="json", score="score", fields={"reasoning": "text", "score": {"type": "integer", "min": 1, "max": 5}})
    pairs = []
    for n in range(200):
        item = {**ITEM, "response": f"Answer number {n}: it is {n % 7} and some words {n * 31 % 101}."}
        answer = json.loads(write_custom(protocol.render(item), seed=n, temperature=0, json_mode=True) or "{}")
        pairs.append((_SENTENCES.index(answer["reasoning"].rstrip(".")), answer["score"]))
    rho = spearmanr([p[0] for p in pairs], [p[1] for p in pairs]).statistic
    assert rho < -0.7  # the better the words (a lower index), the higher the score
