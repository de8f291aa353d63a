"""ttct: the CPers rubric prompt, the reversed Q2, strict parsing of both answer formats."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judge_engine.errors import ConfigError, VerdictError
from judge_engine.fake.writers.ttct import write_ttct
from judge_engine.protocols import get_protocol
from judge_engine.protocols.ttct import QUESTIONS, TTCT, TTCTVerdict, ttct_score

ITEM = {
    "id": "t1",
    "text": "The moon folded its light like a letter never sent.",
    "topic": "longing",
}
ALL_THREES = "".join(f"Q{n}: 3\n" for n in range(1, 13))


def _protocol(**options: object) -> TTCT:
    protocol = get_protocol("ttct").from_options(options)
    assert isinstance(protocol, TTCT)
    return protocol


def _answer(**ratings: int) -> str:
    values = {f"q{n}": 3 for n in range(1, 13)} | ratings
    return "".join(f"Q{q[1:]}: {r}\n" for q, r in values.items())


# --- prompt ----------------------------------------------------------------------------------


def test_prompt_has_every_rubric_question_of_the_paper(shared_reference: Path) -> None:
    """Each of the 12 questions of ttct.md appears verbatim (Persian by default), numbered."""
    rubric = (shared_reference / "ttct.md").read_text(encoding="utf-8")
    questions = re.findall(r"^- (.+\?)$", rubric, re.MULTILINE)
    assert len(questions) == 12
    (message,) = _protocol().render(ITEM)
    assert message["role"] == "user"
    for number, question in enumerate(questions, start=1):
        assert f"Q{number}. {question}\n" in message["content"]


def test_language_and_culture_come_from_options_without_forking_the_template() -> None:
    (persian,) = _protocol().render(ITEM)
    (french,) = _protocol(language="French").render(ITEM)
    (mixed,) = _protocol(language="English", culture="Irish").render(ITEM)
    assert "natural to a Persian reader" in persian["content"]
    assert "or Persian proverbs?" in persian["content"]
    assert (
        "natural to a French reader" in french["content"] and "French proverbs" in french["content"]
    )
    assert (
        "natural to a English reader" in mixed["content"] and "Irish proverbs" in mixed["content"]
    )
    assert "Persian" not in french["content"]
    assert _protocol().templates() == _protocol(language="French").templates() == ("ttct/user.j2",)


def test_prompt_states_the_reverse_scored_question_and_the_format() -> None:
    (text_mode,) = _protocol().render(ITEM)
    (json_mode,) = _protocol(output="json").render(ITEM)
    for message in (text_mode, json_mode):
        assert "Q2 is reverse-scored (6 minus your rating)" in message["content"]
        assert "topic: longing" in message["content"]
    assert text_mode["content"].endswith("Q1: <rating>\nQ2: <rating>\n...\nQ12: <rating>\n")
    assert '"q1" to "q12"' in json_mode["content"]
    (no_topic,) = _protocol().render({"text": "x"})
    assert "topic" not in no_topic["content"].split("Text:")[0].split("TTCT")[1]


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="protocol_options.lang"):
        _protocol(lang="Persian")


# --- scoring and the reversed question ---------------------------------------------------------


def test_q2_is_reversed_by_the_scorer() -> None:
    protocol = _protocol()
    similar = protocol.parse(_answer(q2=5), ITEM)  # very similar to famous sayings
    novel = protocol.parse(_answer(q2=1), ITEM)  # not similar at all
    assert similar.q2 == 5 and novel.q2 == 1  # the verdict keeps the judge's raw answer
    assert protocol.score(similar, ITEM).scores["q2"] == 1.0
    assert protocol.score(novel, ITEM).scores["q2"] == 5.0
    # originality = (3 + (6 - 5) + 3) / 3 = 7/3 vs (3 + 5 + 3) / 3 = 11/3
    assert protocol.score(similar, ITEM).scores["originality"] == pytest.approx(7 / 3)
    assert protocol.score(novel, ITEM).scores["originality"] == pytest.approx(11 / 3)


def test_dimension_and_overall_scores() -> None:
    ratings = {
        f"q{n}": r for n, r in zip(range(1, 13), [5, 2, 4, 5, 5, 4, 3, 2, 1, 4, 5, 3], strict=True)
    }
    score = ttct_score(ratings)
    # originality (5 + (6-2) + 4)/3 = 13/3; fluency 14/3; flexibility 6/3 = 2; elaboration 12/3 = 4
    assert score.scores["originality"] == pytest.approx(13 / 3)
    assert score.scores["fluency"] == pytest.approx(14 / 3)
    assert score.scores["flexibility"] == pytest.approx(2.0)
    assert score.scores["elaboration"] == pytest.approx(4.0)
    assert score.score == pytest.approx((13 / 3 + 14 / 3 + 2 + 4) / 4)  # 15/4 = 3.75
    assert set(score.scores) == {"originality", "fluency", "flexibility", "elaboration", *QUESTIONS}
    assert _protocol().score_range() == (1.0, 5.0)


# --- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        ALL_THREES,
        ALL_THREES.replace(": ", ". "),
        "Here are my ratings.\n\nOriginality\n" + ALL_THREES.replace("3\n", "3/5\n"),
        "".join(f"**Q{n}:** 3 - reason\n" for n in range(1, 13)),
        "".join(f"- Question {n} (short): 3\n" for n in range(1, 13)),
        "".join(f"Q{n}. Is the sentence good? 3/5\n" for n in range(1, 13)),
        "```\n" + ALL_THREES + "```",
        json.dumps({f"q{n}": 3 for n in range(1, 13)}),
        "```json\n" + json.dumps({f"Q{n}": 3 for n in range(1, 13)}) + "\n```",
    ],
)
def test_formats_real_models_produce(answer: str) -> None:
    verdict = _protocol().parse(answer, ITEM)
    assert verdict == TTCTVerdict(**{q: 3 for q in QUESTIONS})


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (ALL_THREES.replace("Q7: 3\n", ""), "no rating for Q7"),
        (ALL_THREES.replace("Q7: 3", "Q7: 6"), "Q7: '6' is not an integer from 1 to 5"),
        (ALL_THREES.replace("Q7: 3", "Q7: 0"), "Q7: '0' is not an integer from 1 to 5"),
        (ALL_THREES.replace("Q7: 3", "Q7: 3.5"), "Q7: '3.5' is not an integer"),
        (ALL_THREES.replace("Q7: 3", "Q7: high"), "Q7: 'high' is not an integer"),
        (ALL_THREES.replace("Q7: 3", "Q7. Does it use multiple ideas?"), "Q7: 'Does' is not"),
        (ALL_THREES.replace("Q7: 3", "Q7: <rating>"), "Q7: '<rating' is not an integer"),
        (ALL_THREES + "Q7: 4\n", "Q7 is rated twice, differently"),
        (ALL_THREES + "Q13: 4\n", "there is no question Q13"),
        ("I cannot rate this text.", "no rating for Q1, Q2"),
        (json.dumps({f"q{n}": 3 for n in range(1, 12)}), "q12: Field required"),
        (
            json.dumps({f"q{n}": 3 for n in range(1, 13)} | {"q4": 7}),
            "q4: Input should be less than or equal to 5",
        ),
        ("{not json", "not valid JSON"),
    ],
)
def test_missing_or_out_of_range_is_a_verdict_error(answer: str, problem: str) -> None:
    with pytest.raises(VerdictError) as caught:
        _protocol().parse(answer, ITEM)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_unreadable_rating_is_not_also_reported_missing() -> None:
    with pytest.raises(VerdictError) as caught:
        _protocol().parse(ALL_THREES.replace("Q1: 3", "Q1: 9"), ITEM)
    assert caught.value.problems == ["Q1: '9' is not an integer from 1 to 5"]


# --- fake server -----------------------------------------------------------------------------


@pytest.mark.parametrize("json_mode", [False, True])
def test_fake_answers_parse_in_both_modes(json_mode: bool) -> None:
    protocol = _protocol(output="json" if json_mode else "text")
    messages = protocol.render(ITEM)
    seen = set()
    for seed in range(60):
        for temperature in (0.0, 0.5, 1.0, 1.5):
            answer = write_ttct(
                messages, seed=seed, temperature=temperature, json_mode=json_mode
            )
            assert answer is not None
            assert answer == write_ttct(
                messages, seed=seed, temperature=temperature, json_mode=json_mode
            )
            score = protocol.score(protocol.parse(answer, ITEM), ITEM)
            assert score.score is not None and 1.0 <= score.score <= 5.0
            seen.add(answer)
    assert len(seen) > 60
    cold = [
        write_ttct(messages, seed=s, temperature=0.0, json_mode=json_mode)
        for s in range(20)
    ]
    hot = [
        write_ttct(messages, seed=s, temperature=1.0, json_mode=json_mode)
        for s in range(20)
    ]
    assert cold != hot


def test_fake_ignores_other_prompts() -> None:
    assert (
        write_ttct(
            [{"role": "user", "content": "Rate this."}], seed=1, temperature=0, json_mode=False
        )
        is None
    )
