"""prometheus-relative: the library's parser fixtures, both orders, position consistency, fakes."""

from __future__ import annotations

from typing import Any

import pytest

from judge_engine.errors import DatasetError, VerdictError
from judge_engine.fake.writers.prometheus import write_relative
from judge_engine.protocols.base import stable_seed
from judge_engine.protocols.prometheus import (
    PrometheusRelative,
    criteria_line,
    position_consistency,
)
from judge_engine.protocols.prometheus_parse import library_parse_relative
from judge_engine.protocols.prometheus_rubrics import HELPFULNESS

# The library's tests/test_parser.py, relative mode, plus the two cases the reference file adds.
LIBRARY_RELATIVE_FIXTURES: list[tuple[str, str | None]] = [
    ("[Response B is not better. [RESULT] A", "A"),
    ("Result A or B, not results", None),
    ("Response A is better. [RESULT] A", "A"),
    ("Prefer Response B. [RESULT] B", "B"),
    ("Feedback: Both responses are similar... [Response B]", "B"),
    ("Feedback: Both responses are clear... [Result] Response B", "B"),
    ("Feedback: Both responses are clear... Response B Response A", None),
    ("Feedback: Both responses are clear... [RESULT: B]", "B"),
    ("Feedback: Both responses are clear... [Result: B]", "B"),
    ("Feedback: Both responses are clear...Response A. [RESULT] B", "B"),
    ("After careful consideration, I select Response B.", None),
    ("Both responses have their merits.", None),
    ("Response C is clearly superior.", None),
    ("The better response is obviously B... or is it A? It's hard to decide.", None),
]

ITEM: dict[str, Any] = {
    "id": "p1",
    "instruction": "Name a colour.",
    "response_a": "Blue.",
    "response_b": "A colour.",
    "criteria": "Is the answer specific?",
}


@pytest.mark.parametrize(("output", "expected"), LIBRARY_RELATIVE_FIXTURES)
def test_library_parser_parity(output: str, expected: str | None) -> None:
    assert library_parse_relative(output) == ((output, expected) if expected else (None, None))


@pytest.mark.parametrize(("output", "expected"), LIBRARY_RELATIVE_FIXTURES)
def test_protocol_parse_accepts_exactly_the_library_fixtures(output: str, expected: str | None) -> None:
    protocol = PrometheusRelative()
    if expected is None:
        with pytest.raises(VerdictError):
            protocol.parse(output, ITEM)
    else:
        assert protocol.parse(output, ITEM).winner == expected


def test_library_parser_on_empty_and_none() -> None:
    assert library_parse_relative("") == (None, None)
    assert library_parse_relative(None) == (None, None)
    with pytest.raises(VerdictError):
        PrometheusRelative().parse("", ITEM)


def test_score_is_one_when_the_items_a_wins() -> None:
    protocol = PrometheusRelative()
    assert protocol.score(protocol.parse("x [RESULT] A", ITEM), ITEM).score == 1.0
    assert protocol.score(protocol.parse("x [RESULT] B", ITEM), ITEM).score == 0.0
    assert protocol.score_range() == (0.0, 1.0)


def test_both_orders_swap_the_prompt_and_map_the_verdict_back() -> None:
    protocol = PrometheusRelative.from_options({"both_orders": True})
    assert protocol.variants(ITEM) == ("AB", "BA")
    assert PrometheusRelative().variants(ITEM) == ("",)
    ab = protocol.render(ITEM, "AB")[-1]["content"]
    ba = protocol.render(ITEM, "BA")[-1]["content"]
    assert "###Response A:\nBlue.\n\n###Response B:\nA colour.\n" in ab
    assert "###Response A:\nA colour.\n\n###Response B:\nBlue.\n" in ba
    # The judge prefers "Blue." both times: it says A, then B; both mean the item's A.
    assert protocol.parse("Specific. [RESULT] A", ITEM, "AB").winner == "A"
    assert protocol.parse("Specific. [RESULT] B", ITEM, "BA").winner == "A"
    assert protocol.parse('{"feedback": "f", "winner": "B"}', ITEM, "BA").winner == "A"
    with pytest.raises(ValueError):
        protocol.render(ITEM, "CD")


def test_position_consistency() -> None:
    outcomes = [
        ("1", "AB", "A"), ("1", "BA", "A"),  # consistent
        ("2", "AB", "A"), ("2", "BA", "B"),  # position-driven
        ("3", "AB", "B"), ("3", "BA", "B"),  # consistent
        ("4", "AB", "B"), ("4", "BA", None),  # unscored in one order: not compared
        ("5", "AB", "A"),  # only one order judged
    ]
    assert position_consistency(outcomes) == pytest.approx(2 / 3)
    assert position_consistency([]) is None
    assert position_consistency([(("1", 0.0, 0), "AB", "A"), (("1", 0.0, 1), "AB", "B")]) is None
    with pytest.raises(ValueError, match="two AB"):
        position_consistency([("1", "AB", "A"), ("1", "AB", "A")])
    with pytest.raises(ValueError, match="variant"):
        position_consistency([("1", "", "A")])


def test_criteria_from_every_shape() -> None:
    expected = f"[{HELPFULNESS.criteria}]"
    assert criteria_line("helpfulness") == expected
    assert criteria_line(HELPFULNESS.render()) == expected
    assert criteria_line(HELPFULNESS) == expected
    assert criteria_line({"criteria": HELPFULNESS.criteria}) == expected
    assert criteria_line(f'{{"criteria": "{HELPFULNESS.criteria}"}}') == expected
    assert criteria_line(HELPFULNESS.criteria) == expected


def test_criteria_precedence_and_absence() -> None:
    protocol = PrometheusRelative.from_options({"rubric": "helpfulness"})
    assert protocol.criteria_for(ITEM) == "[Is the answer specific?]"
    bare = {k: v for k, v in ITEM.items() if k != "criteria"}
    assert protocol.criteria_for(bare) == f"[{HELPFULNESS.criteria}]"
    with pytest.raises(DatasetError, match="no criteria"):
        PrometheusRelative().render(bare)


def test_reference_modes() -> None:
    auto = PrometheusRelative()
    assert "###Reference Answer:\nBlue." in auto.render({**ITEM, "reference_answer": "Blue."})[-1]["content"]
    assert "###Reference Answer" not in auto.render(ITEM)[-1]["content"]
    with pytest.raises(DatasetError):
        PrometheusRelative.from_options({"reference": "with"}).render(ITEM)


def test_json_mode() -> None:
    protocol = PrometheusRelative.from_options({"output": "json"})
    fmt = protocol.response_format()
    assert fmt is not None and set(fmt["json_schema"]["schema"]["properties"]) == {"feedback", "winner"}
    assert protocol.parse('{"feedback": "f", "winner": "B"}', ITEM).winner == "B"
    with pytest.raises(VerdictError):
        protocol.parse('{"feedback": "f", "winner": "C"}', ITEM)


@pytest.mark.parametrize("json_mode", [False, True])
def test_fake_answers_parse_and_are_position_consistent_when_greedy(json_mode: bool) -> None:
    protocol = PrometheusRelative.from_options(
        {"both_orders": True, "output": "json" if json_mode else "text"}
    )
    outcomes: dict[float, list[tuple[str, str, str | None]]] = {0.0: [], 1.0: []}
    for n in range(80):
        item = {**ITEM, "id": str(n), "response_a": f"Blue {n}.", "response_b": f"Red {n}."}
        for variant in protocol.variants(item):
            messages = protocol.render(item, variant)
            for temperature in outcomes:
                seed = stable_seed(n, variant)
                answer = write_relative(messages, seed=seed, temperature=temperature, json_mode=json_mode)
                assert answer is not None and answer.startswith("{") == json_mode
                verdict = protocol.parse(answer, item, variant)
                outcomes[temperature].append((item["id"], variant, verdict.winner))
    assert position_consistency(outcomes[0.0]) == 1.0
    assert 0.3 < position_consistency(outcomes[1.0]) < 0.95  # type: ignore[operator]
    winners = {w for _, _, w in outcomes[0.0]}
    assert winners == {"A", "B"}
