"""bws: candidate forms, seeded shuffles and orders, label mapping, BWS scores, position bias."""

from __future__ import annotations

import json
import math
import re

import pytest

from judge_engine.errors import ConfigError, DatasetError, VerdictError
from judge_engine.fake.writers.bws import write_bws
from judge_engine.protocols import get_protocol
from judge_engine.protocols.bws import (
    BestWorstScaling,
    BWSVerdict,
    bws_scores,
    candidates_of,
    position_bias,
)

CANDIDATES = [
    {"id": "human", "text": "The snow kept its own counsel that winter."},
    {"id": "sys-a", "text": "The snow kept its advice that winter."},
    {"id": "sys-b", "text": "That winter the snow said nothing."},
    {"id": "sys-c", "text": "Snow kept counsel own winter that."},
    {"id": "sys-d", "text": "In that winter, the snow was keeping its counsel."},
]
ITEM = {
    "id": "p1",
    "source": "Der Schnee behielt in jenem Winter seinen Rat für sich.",
    "source_lang": "German",
    "target_lang": "English",
    "candidates": CANDIDATES,
}


def _protocol(**options: object) -> BestWorstScaling:
    protocol = get_protocol("bws").from_options(options)
    assert isinstance(protocol, BestWorstScaling)
    return protocol


def _shown_texts(protocol: BestWorstScaling, item: dict[str, object], variant: str) -> list[str]:
    (message,) = protocol.render(item, variant)
    return re.findall(r'^Translation [A-Z]:\n"""\n(.*?)\n"""$', message["content"], re.M | re.S)


# --- items -------------------------------------------------------------------------------------


def test_candidate_forms_are_equivalent() -> None:
    expected = [(c["id"], c["text"]) for c in CANDIDATES]
    as_json = {**ITEM, "candidates": json.dumps(CANDIDATES)}
    as_columns = {"id": "p1", "source": "s"} | {
        f"candidate_{n}": c["text"] for n, c in enumerate(CANDIDATES, start=1)
    }
    assert candidates_of(ITEM) == expected
    assert candidates_of(as_json) == expected
    assert candidates_of(as_columns) == [
        (f"candidate_{n}", c["text"]) for n, c in enumerate(CANDIDATES, start=1)
    ]
    assert candidates_of({"candidates": ["x", "y"]}) == [("1", "x"), ("2", "y")]
    ten_plus = {f"candidate_{n}": f"t{n}" for n in (1, 2, 10)}  # sorted numerically, not as text
    assert [cid for cid, _ in candidates_of(ten_plus)] == [
        "candidate_1",
        "candidate_2",
        "candidate_10",
    ]


@pytest.mark.parametrize(
    "candidates",
    [
        None,
        "[not json",
        [{"id": "a", "text": "x"}],
        [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}],
        [1, 2],
    ],
)
def test_bad_candidates_are_a_dataset_error(candidates: object) -> None:
    item = {"id": "p1", "source": "s", "candidates": candidates}
    with pytest.raises(DatasetError, match="p1"):
        _protocol().render(item)
    (problem,) = _protocol().check_item(item)
    assert "p1" in problem
    assert _protocol().check_item(ITEM) == []


def test_options() -> None:
    assert _protocol(orders=3).variants(ITEM) == ("order0", "order1", "order2")
    assert _protocol().variants(ITEM) == ("order0",)
    with pytest.raises(ConfigError, match="orders"):
        _protocol(orders=0)


# --- order -------------------------------------------------------------------------------------


def test_shuffle_is_deterministic_and_depends_on_seed_and_item() -> None:
    protocol = _protocol(seed=7)
    first = _shown_texts(protocol, ITEM, "order0")
    assert first == _shown_texts(_protocol(seed=7), ITEM, "order0")
    assert _shown_texts(protocol, ITEM, "") == first
    assert sorted(first) == sorted(c["text"] for c in CANDIDATES)
    orders_by_seed = {tuple(_shown_texts(_protocol(seed=s), ITEM, "order0")) for s in range(20)}
    orders_by_item = {
        tuple(_shown_texts(protocol, {**ITEM, "id": f"p{n}"}, "order0")) for n in range(20)
    }
    assert len(orders_by_seed) > 5 and len(orders_by_item) > 5


def test_orders_are_rotations_so_each_candidate_visits_each_position() -> None:
    protocol = _protocol(orders=5)
    orders = [protocol.displayed(ITEM, v) for v in protocol.variants(ITEM)]
    for position in range(5):
        assert {order[position][0] for order in orders} == {c["id"] for c in CANDIDATES}
    extra = _protocol(orders=7)
    assert sorted(extra.displayed(ITEM, "order6")) == sorted(orders[0])


def test_prompt_shows_labels_languages_and_format() -> None:
    (message,) = _protocol().render(ITEM)
    content = message["content"]
    assert "source passage in German and 5 candidate translations into English" in content
    assert "labelled A, B, C, D, E" in content
    assert content.endswith("Best: <label>\nWorst: <label>\n")
    (json_message,) = _protocol(output="json").render(ITEM)
    assert '{"best": "<label>", "worst": "<label>"}' in json_message["content"]
    (bare,) = _protocol().render({**ITEM, "source_lang": None, "target_lang": ""})
    assert "source passage and 5 candidate translations, labelled" in bare["content"]


# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Best: B\nWorst: D",
        "best: b\nworst: d\n",
        "**Best:** B\n**Worst:** D",
        "Best translation: Translation B\nWorst translation: (D)",
        "Reasoning: B keeps the idiom, D garbles the word order.\n\nBest: B\nWorst: D",
        "- Best — B\n- Worst — D",
        '{"best": "B", "worst": "D"}',
        '```json\n{"Best": "Translation B", "Worst": "D"}\n```',
    ],
)
def test_answers_map_labels_back_to_candidate_ids(answer: str) -> None:
    protocol = _protocol()
    order = [cid for cid, _ in protocol.displayed(ITEM)]
    verdict = protocol.parse(answer, ITEM)
    assert (verdict.best, verdict.worst) == ("B", "D")
    assert (verdict.best_id, verdict.worst_id) == (order[1], order[3])
    assert verdict.order == order and verdict.seed == protocol.shuffle_seed(ITEM)
    score = protocol.score(verdict, ITEM)
    assert score.score is None
    assert score.scores == {cid: {1: 1.0, 3: -1.0}.get(i, 0.0) for i, cid in enumerate(order)}


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("Best: B", "no worst translation given"),
        ("I prefer the second one.", "no best translation given"),
        ("Best: F\nWorst: A", "best: 'F' is not one of the labels A, B, C, D, E"),
        ("Best: B\nWorst: B", "must be different"),
        ("Best: B\nWorst: D\nBest: C", "two different best translations given"),
        ('{"best": "B"}', "no worst translation given"),
        ("{best: B", "not valid JSON"),
    ],
)
def test_bad_answers_are_verdict_errors(answer: str, problem: str) -> None:
    with pytest.raises(VerdictError) as caught:
        _protocol().parse(answer, ITEM)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


# --- aggregation --------------------------------------------------------------------------------


def test_bws_scores_hand_computed() -> None:
    outcomes = [
        {"h": 1.0, "a": -1.0, "b": 0.0},
        {"h": 1.0, "a": 0.0, "b": -1.0},
        {"h": -1.0, "a": 1.0, "b": 0.0, "c": 0.0},
    ]
    # h: (2 best - 1 worst) / 3 shown = 1/3; a: (1 - 1) / 3 = 0; b: (0 - 1) / 3; c: 0 / 1
    assert bws_scores(outcomes) == pytest.approx({"a": 0.0, "b": -1 / 3, "c": 0.0, "h": 1 / 3})
    assert bws_scores([]) == {}


def test_position_bias_hand_computed() -> None:
    verdicts = [
        BWSVerdict(best="A", worst="C", order=["x", "y", "z"]),
        BWSVerdict(best="A", worst="B", order=["y", "z", "x"]),
        {"best": "B", "worst": "D", "order": ["x", "y", "z", "w"]},  # a stored verdict dict
    ]
    figure = position_bias(verdicts)
    # chance per position: 1/3 + 1/3 + 1/4 = 11/12 (D only in the last verdict: 1/4)
    assert figure["A"].shown == 3 and figure["A"].best == 2
    assert figure["A"].expected == pytest.approx(11 / 12)
    assert figure["A"].best_ratio == pytest.approx(2 / (11 / 12))
    assert figure["A"].worst_ratio == 0.0
    assert (figure["D"].shown, figure["D"].worst, figure["D"].expected) == (1, 1, 0.25)
    assert figure["D"].worst_ratio == pytest.approx(4.0)
    assert sum(p.best for p in figure.values()) == 3
    assert sum(p.expected for p in figure.values()) == pytest.approx(3.0)


def test_unbiased_judge_has_ratios_near_one_over_rotations() -> None:
    """A judge that always picks the same candidates, judged under all 5 rotations, picks each
    position exactly once: every ratio is 1.0 whatever the candidates' quality."""
    protocol = _protocol(orders=5)
    verdicts = []
    for variant in protocol.variants(ITEM):
        shown = [cid for cid, _ in protocol.displayed(ITEM, variant)]
        best, worst = "ABCDE"[shown.index("human")], "ABCDE"[shown.index("sys-c")]
        verdicts.append(protocol.parse(f"Best: {best}\nWorst: {worst}", ITEM, variant))
    assert {v.best_id for v in verdicts} == {"human"}
    figure = position_bias(verdicts)
    assert all(p.best_ratio == pytest.approx(1.0) for p in figure.values())
    assert all(p.worst_ratio == pytest.approx(1.0) for p in figure.values())
    scores = bws_scores(protocol.score(v, ITEM).scores for v in verdicts)
    assert scores["human"] == 1.0 and scores["sys-c"] == -1.0 and scores["sys-a"] == 0.0


def test_empty_position_bias() -> None:
    assert position_bias([]) == {}
    from judge_engine.protocols.bws import PositionBias

    assert math.isnan(PositionBias(0, 0, 0, 0.0).best_ratio)


# --- fake server ------------------------------------------------------------------------------


@pytest.mark.parametrize("json_mode", [False, True])
def test_fake_answers_parse_under_every_order(json_mode: bool) -> None:
    protocol = _protocol(orders=5, output="json" if json_mode else "text")
    verdicts = []
    for seed in range(40):
        for temperature in (0.0, 0.7, 1.0):
            for variant in protocol.variants(ITEM):
                messages = protocol.render(ITEM, variant)
                answer = write_bws(
                    messages, seed=seed, temperature=temperature, json_mode=json_mode
                )
                assert answer is not None
                assert answer == write_bws(
                    messages, seed=seed, temperature=temperature, json_mode=json_mode
                )
                verdicts.append(protocol.parse(answer, ITEM, variant))
    best = {v.best_id for v in verdicts if v.best_id}
    assert len(best) > 1  # temperature and the primacy bias move the pick
    figure = position_bias(verdicts)
    assert figure["A"].best_ratio > 1.2  # the fake's mild primacy bias shows in the figure


def test_fake_ignores_other_prompts() -> None:
    messages = [{"role": "user", "content": "Which translation is best?"}]
    assert write_bws(messages, seed=1, temperature=0.0, json_mode=False) is None
