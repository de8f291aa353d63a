"""An item's decision over its requests (:func:`judge_engine.trust.decisions.decide_item`), on
hand-made outcome lines: the reference's average for simulated annotators, an unreadable
annotator left out with both its requests and counted, an item with none left unscored, and
agreement across repeats. Expected values are worked out in the comments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judge_engine.errors import ReasonCode
from judge_engine.inputs.config import JudgeConfig
from judge_engine.planning.plan import build_protocol
from judge_engine.rundir.records import OutcomeRecord
from judge_engine.trust.decisions import decide_item, item_record, item_rule


def annotator_judge(tmp_path: Path) -> JudgeConfig:
    pool = tmp_path / "pool.jsonl"
    pool.write_text('{"instruction": "q", "outputs": ["a", "b"], "preferences": {"human": 2}}\n' * 9)
    return JudgeConfig(name="ann", model="openai/gpt-4o-mini", protocol="pairwise-annotators",
                       protocol_options={"examples_file": str(pool)},
                       confidence={"method": "logprobs"})  # type: ignore[arg-type]


def part(variant: str, p_a: float | None = None, *, code: str | None = None, repeat: int = 0,
         score: float | None = None) -> OutcomeRecord:
    """A request's outcome: scored with p(item A) = ``p_a`` (and p(B) = 1 - p_a), or unscored."""
    if code is not None:
        return OutcomeRecord(task_id=f"t-{variant}-{repeat}", item_id="i", judge="ann", protocol="p",
                             protocol_version="1", model="m", temperature=0.0, repeat=repeat, variant=variant,
                             status="unscored", reason="r", reason_code=code, row_tasks=6)
    assert p_a is not None
    label = "A" if p_a >= 0.5 else "B"
    return OutcomeRecord(task_id=f"t-{variant}-{repeat}", item_id="i", judge="ann", protocol="p", protocol_version="1",
                         model="m", temperature=0.0, repeat=repeat, variant=variant, status="scored",
                         score=score if score is not None else float(label == "A"),
                         verdict={"shown": label, "preferred": label}, row_tasks=6,
                         confidence={"method": "logprobs", "value": max(p_a, 1 - p_a),
                                     "probs": {"A": p_a, "B": round(1 - p_a, 6)}})


def test_the_reference_average_of_p_output1_and_p_output2(tmp_path: Path) -> None:
    judge = annotator_judge(tmp_path)
    rule = item_rule(judge, build_protocol(judge))
    assert rule is not None and rule.method == "logprobs"
    parts = [part("a1-AB", 0.9), part("a1-BA", 0.7), part("a2-AB", 0.4), part("a2-BA", 0.6), part("a3-AB", 0.8),
             part("a3-BA", 0.2)]
    decided = decide_item(parts, rule)
    # p(A) = (.9 + .7 + .4 + .6 + .8 + .2) / 6 = 3.6 / 6 = .6; p(B) = .4: A, confidence .6
    assert decided.prediction == "A" and decided.confidence == pytest.approx(0.6)
    assert decided.probs == pytest.approx({"A": 0.6, "B": 0.4}) and decided.used == 6 and not decided.left_out


def test_an_annotator_unreadable_in_one_order_is_left_out_with_both_requests_and_counted(tmp_path: Path) -> None:
    judge = annotator_judge(tmp_path)
    rule = item_rule(judge, build_protocol(judge))
    assert rule is not None
    parts = [part("a1-AB", 0.9), part("a1-BA", 0.7), part("a2-AB", 0.1), part("a2-BA", code="unreadable"),
             part("a3-AB", 0.3), part("a3-BA", 0.5)]
    decided = decide_item(parts, rule)
    # a2 out, its readable .1 too: p(A) = (.9 + .7 + .3 + .5) / 4 = .6 (with a2's .1 it would be .5)
    assert decided.prediction == "A" and decided.confidence == pytest.approx(0.6)
    assert decided.used == 4 and decided.groups_left_out == 1
    assert decided.left_out == {"unreadable": 1, "with_group": 1}
    record = item_record(judge, rule, "i", 0.0, parts)
    assert record.judge == "ann:item" and record.scored and record.score == 1.0
    assert record.verdict is not None and record.verdict["left_out"] == {"unreadable": 1, "with_group": 1}
    assert record.confidence == {"method": "logprobs", "value": 0.6, "probs": {"A": 0.6, "B": 0.4}}


def test_an_item_with_no_annotator_left_is_unscored_with_its_code(tmp_path: Path) -> None:
    judge = annotator_judge(tmp_path)
    rule = item_rule(judge, build_protocol(judge))
    assert rule is not None
    parts = [part("a1-AB", 0.9), part("a1-BA", code="unreadable"), part("a2-AB", code="incomplete"),
             part("a2-BA", 0.8), part("a3-AB", code="provider_rejected"), part("a3-BA", code="unreadable")]
    decided = decide_item(parts, rule)
    assert decided.prediction is None and decided.code is ReasonCode.NONE_READABLE
    assert decided.left_out == {"incomplete": 1, "provider_rejected": 1, "unreadable": 2, "with_group": 2}
    record = item_record(judge, rule, "i", 0.0, parts)
    assert not record.scored and record.reason_code == "none_readable" and record.score is None


def test_a_request_lost_to_an_outage_leaves_the_item_undecided_not_decided_without_it(tmp_path: Path) -> None:
    judge = annotator_judge(tmp_path)
    rule = item_rule(judge, build_protocol(judge))
    assert rule is not None
    parts = [part(v, 0.9) for v in ("a1-AB", "a1-BA", "a2-AB", "a2-BA", "a3-AB")]
    decided = decide_item([*parts, part("a3-BA", code="transport_exhausted")], rule)
    assert decided.code is ReasonCode.ITEM_INCOMPLETE and "transport_exhausted" in (decided.reason or "")


def repeats_judge(protocol: str, options: dict[str, Any]) -> JudgeConfig:
    return JudgeConfig(name="r", model="anthropic/claude-3-5-haiku-latest", protocol=protocol,
                       protocol_options=options, repeats=5, confidence="agreement")  # type: ignore[arg-type]


def test_agreement_across_repeats_is_the_share_agreeing_with_the_majority() -> None:
    judge = repeats_judge("prometheus-relative", {"rubric": "helpfulness"})
    rule = item_rule(judge, build_protocol(judge))
    assert rule is not None and rule.method == "agreement"
    votes = ["A", "A", "B", "A", "A"]
    parts = [OutcomeRecord(task_id=f"t{n}", item_id="i", judge="r", protocol="prometheus-relative",
                           protocol_version="1", model="m", temperature=0.0, repeat=n, variant="", status="scored",
                           score=float(v == "A"), verdict={"feedback": "f", "winner": v}, row_tasks=5)
             for n, v in enumerate(votes)]
    decided = decide_item(parts, rule)
    assert decided.prediction == "A" and decided.confidence == pytest.approx(4 / 5)  # 4 of 5 say A
    tie = decide_item([parts[0], parts[2], parts[2], parts[1]], rule)
    assert tie.code is ReasonCode.ITEM_TIE  # A, B, B, A: two and two, never broken by order


def test_agreement_of_scores_on_a_closed_scale_is_one_minus_their_spread() -> None:
    judge = repeats_judge("custom", {"template": "Rate {{ text }}", "output": "json",
                                     "fields": {"score": {"type": "number", "min": 1, "max": 5}}, "score": "score"})
    rule = item_rule(judge, build_protocol(judge))
    assert rule is not None and rule.scale.kind == "interval"
    parts = [OutcomeRecord(task_id=f"t{n}", item_id="i", judge="r", protocol="custom", protocol_version="1",
                           model="m", temperature=0.0, repeat=n, variant="", status="scored", score=v,
                           verdict={"score": v}, row_tasks=4) for n, v in enumerate([1.0, 3.0, 1.0, 3.0])]
    decided = decide_item(parts, rule)
    # mean 2, population sd 1, half the scale's width (5 - 1) / 2 = 2: confidence 1 - 1/2
    assert decided.prediction == 2.0 and decided.confidence == pytest.approx(0.5)


def test_a_verdict_of_several_values_averages_its_requests_confidences() -> None:
    judge = JudgeConfig(name="t", model="openai/gpt-4o", protocol="ttct", repeats=2,
                        confidence="logprobs")  # type: ignore[arg-type]
    rule = item_rule(judge, build_protocol(judge))
    assert rule is not None
    parts = [OutcomeRecord(task_id=f"t{n}", item_id="i", judge="t", protocol="ttct", protocol_version="1", model="m",
                           temperature=0.0, repeat=n, variant="", status="scored", score=score, row_tasks=2,
                           confidence={"method": "logprobs", "value": value, "weighted": score + 0.5,
                                       "fields": {"q1": {"value": value}}})
             for n, (score, value) in enumerate([(3.0, 0.6), (4.0, 0.8)])]
    decided = decide_item(parts, rule)
    # twelve ratings, no one distribution: the mean score, the mean confidence (.6 + .8) / 2
    assert decided.prediction == 3.5 and decided.confidence == pytest.approx(0.7) and decided.weighted == 4.0


def test_the_collector_decides_an_item_when_its_last_request_is_written(tmp_path: Path) -> None:
    from judge_engine.inputs.config import JobConfig
    from judge_engine.trust.decisions import ItemCollector

    judge = annotator_judge(tmp_path)
    config = JobConfig.model_validate({"dataset": {"path": "items.jsonl"}, "judges": [judge.model_dump()]})
    collector = ItemCollector(config, {judge.name: build_protocol(judge)})
    parts = [part(v, 0.8) for v in ("a1-AB", "a1-BA", "a2-AB", "a2-BA", "a3-AB")]
    assert [collector.offer(p) for p in parts] == [None] * 5  # five of six: not yet
    assert collector.offer(parts[0]) is None  # a request written again (--retry) is one request
    item = collector.offer(part("a3-BA", 0.2))
    assert item is not None and item.judge == "ann:item" and item.confidence is not None
    assert item.confidence["value"] == pytest.approx((0.8 * 5 + 0.2) / 6)  # A: (5 x .8 + .2) / 6 = .7
    assert collector.offer(item) is None  # its own lines are not requests


def test_a_judge_of_one_request_per_item_is_decided_by_its_outcome_and_writes_no_item_lines() -> None:
    from judge_engine.trust.decisions import decides_items

    judge = JudgeConfig(name="rel", model="openai/gpt-4o-mini", protocol="prometheus-relative",
                        protocol_options={"rubric": "helpfulness"}, confidence="logprobs")  # type: ignore[arg-type]
    protocol = build_protocol(judge)
    rule = item_rule(judge, protocol)
    assert rule is not None and decides_items(judge, protocol) is None
    decided = decide_item([part("", 0.3)], rule)  # p(A) .3, p(B) .7: B, as sure as that request
    assert decided.prediction == "B" and decided.confidence == pytest.approx(0.7)


def test_a_jurys_outcome_is_decided_by_the_share_of_its_jurors_that_gave_its_value() -> None:
    from judge_engine.protocols import VoteScale
    from judge_engine.trust.decisions import ItemRule

    jurors = {name: {"vote": vote, "score": None, "status": "scored", "reason_code": None, "task_id": name}
              for name, vote in (("a", "A"), ("b", "A"), ("c", "B"))}
    line = OutcomeRecord(task_id="j", item_id="i", judge="panel", protocol="jury", protocol_version="1", model="m",
                         temperature=0.0, repeat=0, variant="", status="scored", score=1.0,
                         verdict={"value": "A", "jurors": jurors})
    decided = decide_item([line], ItemRule("jury", VoteScale("categorical", ("A", "B"))))
    assert decided.prediction == "A" and decided.confidence == pytest.approx(2 / 3)  # two of three jurors
