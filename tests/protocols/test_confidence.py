"""Reading a verdict's confidence from token log-probs: at the parser's position, never a digit
elsewhere; numbers written as several tokens; a value absent from the top log-probs is 0;
the probability-weighted score (G-Eval) of a closed scale. Every expected value is computed by
hand in the comment beside it."""

from __future__ import annotations

import math
from typing import Any

import pytest

from judge_engine.protocols.annotators import AnnotatorOptions, PairwiseAnnotators
from judge_engine.protocols.confidence import read_task_confidence
from judge_engine.protocols.custom import CustomJudge
from judge_engine.protocols.prometheus import PrometheusAbsolute, PrometheusRelative
from judge_engine.protocols.ttct import TTCT
from judge_engine.protocols.verdict_spans import json_value_span
from judge_engine.providers.base import ProviderResponse
from judge_engine.util.logprobs import kept_tokens, token_logprobs


def entries(*tokens: tuple[str, list[tuple[str, float]]]) -> list[dict[str, Any]]:
    """OpenAI's ``logprobs.content`` for tokens given as (token, [(alternative, probability)]);
    a token's own log-prob is its alternative's, or log 0.9 when it lists none."""
    out = []
    for token, top in tokens:
        own = next((p for alt, p in top if alt == token), 0.9)
        out.append({"token": token, "logprob": math.log(own), "bytes": list(token.encode()),
                    "top_logprobs": [{"token": alt, "logprob": math.log(p)} for alt, p in top]})
    return out


def plain(*tokens: str) -> list[tuple[str, list[tuple[str, float]]]]:
    return [(t, []) for t in tokens]


ABSOLUTE = PrometheusAbsolute.from_options({"rubric": "helpfulness"})
ITEM = {"id": "1", "instruction": "q", "response": "r"}


def test_the_score_is_read_after_result_not_at_a_digit_earlier_in_the_feedback() -> None:
    answer = "Feedback: It meets 3 of the 5 points well. [RESULT] 4"
    tokens = token_logprobs(answer, entries(
        *plain("Feedback", ":", " It", " meets"),
        (" 3", [(" 3", 0.95), (" 2", 0.05)]),  # a digit in the feedback, sure of itself: never read
        *plain(" of", " the"),
        (" 5", [(" 5", 0.99), (" 4", 0.01)]),
        *plain(" points", " well", ".", " [", "RESULT", "]"),
        (" 4", [(" 4", 0.5), (" 5", 0.3), (" 3", 0.1), (" four", 0.1)]),
    ))
    assert tokens is not None and "".join(t.token for t in tokens) == answer
    verdict = ABSOLUTE.parse(answer, ITEM)
    read = read_task_confidence(ABSOLUTE, verdict, answer, tokens, ITEM)
    assert read.record["verdict"] == 4 and read.record["value"] == 0.5
    assert read.record["probs"] == {"1": 0.0, "2": 0.0, "3": 0.1, "4": 0.5, "5": 0.3}
    # G-Eval, renormalised over the scale: (3 * .1 + 4 * .5 + 5 * .3) / (.1 + .5 + .3) = 3.8 / .9
    assert read.weighted == pytest.approx(3.8 / 0.9, abs=1e-6)
    assert read.record["mass"] == pytest.approx(0.9)


def test_only_the_tokens_at_the_verdict_are_kept_and_still_read_the_same() -> None:
    answer = "Feedback: It meets 3 of the 5 points well. [RESULT] 4"
    tokens = token_logprobs(answer, entries(
        *plain("Feedback", ":", " It", " meets", " 3", " of", " the", " 5", " points", " well", ".", " [", "RESULT",
               "]"), (" 4", [(" 4", 0.5), (" 5", 0.3), (" 3", 0.1)])))
    assert tokens is not None
    span = ABSOLUTE.verdict_spans(answer, ITEM)[0]
    kept = kept_tokens(tokens, [(span.start, span.end)])
    assert [t.token for t in kept] == ["]", " 4"]  # the token before the verdict, and the verdict
    back = ProviderResponse.from_record(ProviderResponse(answer, "stop", 1, 1, 0.0, logprobs=kept).to_record())
    verdict = ABSOLUTE.parse(answer, ITEM)
    assert read_task_confidence(ABSOLUTE, verdict, answer, back.logprobs or (), ITEM).record["value"] == 0.5


def ten_point_judge() -> CustomJudge:
    return CustomJudge.from_options({"template": "Rate {{ text }}", "output": "text",
                                     "fields": {"reasoning": "text", "score": {"type": "integer", "min": 1, "max": 10}},
                                     "score": "score"})


def test_a_score_written_as_two_tokens_is_read_along_the_answers_tokens() -> None:
    judge = ten_point_judge()
    answer = "Clear and correct. [RESULT] 10"
    item = {"id": "1", "text": "t"}
    tokens = token_logprobs(answer, entries(
        *plain("Clear", " and", " correct", ".", " [", "RESULT", "]"),
        (" 1", [(" 1", 0.7), (" 9", 0.2), (" 8", 0.1)]),   # Gemini writes 10 as 1 then 0
        ("0", [("0", 0.8), ("\n", 0.15), ("1", 0.05)]),
    ))
    assert tokens is not None
    verdict = judge.parse(answer, item)
    read = read_task_confidence(judge, verdict, answer, tokens, item)
    probs = read.record["probs"]
    assert read.record["verdict"] == 10
    assert probs["10"] == pytest.approx(0.7 * 0.8)            # 1, then 0
    assert probs["1"] == pytest.approx(0.7 * (1 - 0.8 - 0.05))  # 1, then no digit: .7 x .15
    assert probs["9"] == pytest.approx(0.2) and probs["8"] == pytest.approx(0.1)
    assert read.record["value"] == pytest.approx(0.56)
    # (10 x .56 + 1 x .105 + 9 x .2 + 8 x .1) / (.56 + .105 + .2 + .1) = 8.305 / .965
    assert read.weighted == pytest.approx(8.305 / 0.965, abs=1e-5)


def test_a_label_absent_from_the_top_logprobs_has_probability_zero() -> None:
    relative = PrometheusRelative.from_options({"rubric": "helpfulness", "both_orders": True})
    answer = "Feedback: Response A is clearer. [RESULT] A"
    item = {"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}
    tokens = token_logprobs(answer, entries(
        *plain("Feedback", ":", " Response", " A", " is", " clearer", ".", " [", "RESULT", "]"),
        (" A", [(" A", 0.9), (" The", 0.05)]),
    ))
    assert tokens is not None
    verdict = relative.parse(answer, item, "AB")
    assert read_task_confidence(relative, verdict, answer, tokens, item, "AB").record["probs"] == {"A": 0.9, "B": 0.0}
    # Shown swapped, the judge's A is the item's B.
    swapped = relative.parse(answer, item, "BA")
    record = read_task_confidence(relative, swapped, answer, tokens, item, "BA").record
    assert record["verdict"] == "B" and record["probs"] == {"B": 0.9, "A": 0.0}


def annotators(tmp_path: Any) -> PairwiseAnnotators:
    pool = tmp_path / "pool.jsonl"
    pool.write_text('{"instruction": "q", "outputs": ["a", "b"], "preferences": {"human": 1}}\n' * 9)
    return PairwiseAnnotators(AnnotatorOptions(examples_file=pool))


def test_the_annotators_read_the_reference_token_only_exact_labels(tmp_path: Any) -> None:
    protocol = annotators(tmp_path)
    item = {"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}
    answer = "[[A]]"
    # " B" (with a space) is not exactly "B": the reference reads only exact tokens, so p(B) = 0.
    tokens = token_logprobs(answer, entries(("[[", []), ("A", [("A", 0.7), (" B", 0.2)]), ("]]", [])))
    assert tokens is not None
    verdict = protocol.parse(answer, item, "a1-AB")
    assert read_task_confidence(protocol, verdict, answer, tokens, item, "a1-AB").record["probs"] == {"A": 0.7, "B": 0.0}
    swapped = protocol.parse(answer, item, "a1-BA")
    record = read_task_confidence(protocol, swapped, answer, tokens, item, "a1-BA").record
    assert record["verdict"] == "B" and record["value"] == 0.7 and record["probs"] == {"B": 0.7, "A": 0.0}


def test_a_json_fields_value_is_found_by_its_key_not_by_a_quote_of_it() -> None:
    answer = '{"feedback": "I would not say \\"score\\": 2 here", "score": 4}'
    start, end = json_value_span(answer, "score") or (0, 0)
    assert answer[start:end] == "4"
    assert json_value_span('{"winner": "B"}', "winner") == (12, 13)


def test_ttct_reads_each_rating_after_its_question_with_q2_reversed_in_the_weighted_score() -> None:
    ttct = TTCT()
    lines = [f"Q{n}: 4" for n in range(1, 13)]
    answer = "\n".join(lines)
    spans = ttct.verdict_spans(answer, {"id": "1", "text": "t"})
    assert [answer[s.start:s.end] for s in spans] == ["4"] * 12 and spans[9].field == "q10"
    pieces: list[tuple[str, list[tuple[str, float]]]] = []
    for n in range(1, 13):
        pieces += [("\n" if n > 1 else "", []), ("Q", []), (str(n), []), (":", []),
                   (" 4", [(" 4", 0.5), (" 5", 0.5)] if n == 2 else [(" 4", 1.0)])]
    tokens = token_logprobs(answer, entries(*[p for p in pieces if p[0]]))
    assert tokens is not None
    verdict = ttct.parse(answer, {"id": "1", "text": "t"})
    read = read_task_confidence(ttct, verdict, answer, tokens, {"id": "1", "text": "t"})
    assert read.record["value"] == 0.5 and read.record["fields"]["q2"]["weighted"] == 4.5
    # Q2 reversed: 6 - 4.5 = 1.5; originality (4 + 1.5 + 4) / 3; the others 4; overall their mean.
    assert read.weighted == pytest.approx(((4 + 1.5 + 4) / 3 + 4 + 4 + 4) / 4)
