"""Span agreement: the close-reading matcher and pooled counting, MQM span agreement."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.stats import (
    expressions_match,
    mqm_span_agreement,
    span_char_kappa,
    span_prf,
)
from judge_engine.stats.mqm_spans import mqm_errors
from tests.stats.fixtures import outcome, write_run
from tests.stats.test_cli import rows_by, run_json


def test_matcher() -> None:
    assert expressions_match("red sky", "a red sky at night")  # substring, either way
    assert expressions_match("a red sky at night", "red sky")
    assert not expressions_match("Red sky", "a red sky")  # case-sensitive substring...
    assert expressions_match("café au lait", "cafe au lait")  # ...after unidecode
    # indel similarity: "the old man" vs "the olde man": 1 - 1/23 = 0.957 >= 0.9
    assert expressions_match("the old man", "the olde man")
    # "abcdefghij" vs "abcdefxyz": LCS 6 -> indel distance 4 + 3 = 7, 1 - 7/19 = 0.63 < 0.9
    assert not expressions_match("abcdefghij", "abcdefxyz")


def test_span_prf_pooled_counting() -> None:
    # p1: preds "a red sky" (TP), "zzz" (FP); refs "red sky" (matched), "blue sea" (FN).
    # p2: pred "the storm" (TP), "a storm" (FP: not substring, ratio 0.75);
    #     refs "the storm" twice (two annotators, not de-duplicated; both matched).
    # p3: no predictions; ref "quiet" -> FN.  p4 (not predicted on) is ignored.
    preds = {"p1": ["a red sky", "zzz"], "p2": ["the storm", "a storm"], "p3": []}
    refs = {"p1": ["red sky", "blue sea"], "p2": ["the storm", "the storm"], "p3": ["quiet"],
            "p4": ["ignored"]}  # fmt: skip
    s = span_prf(preds, refs)
    assert (s.tp, s.fp, s.fn) == (2, 2, 2)
    assert (s.precision, s.recall, s.f1) == (0.5, 0.5, 0.5)
    assert s.precision_ci[0] < 0.5 < s.precision_ci[1]


def test_span_prf_edges() -> None:
    s = span_prf({}, {"p": ["x"]})
    assert (s.tp, s.fp, s.fn) == (0, 0, 0)
    assert math.isnan(s.precision) and math.isnan(s.recall) and math.isnan(s.f1)
    s = span_prf({"p": ["x"]}, {})
    assert (s.precision, s.f1) == (0.0, 0.0) and math.isnan(s.recall)


def test_mqm_span_agreement() -> None:
    # A: dog/major, cat/minor; B: "the dog"/minor -> one match of 3 spans: 2/3; labels differ
    r = mqm_span_agreement(
        {"s": [("dog", "major"), ("cat", "minor")]}, {"s": [("the dog", "minor")]}
    )
    assert (r.matched, r.span_match, r.label_match) == (1, pytest.approx(2 / 3), 0.0)
    # character ranges: [0,5) overlaps [3,8); [10,12) does not overlap [12,14)
    r = mqm_span_agreement(
        {"s": [((0, 5), "acc"), ((10, 12), "flu")]}, {"s": [((3, 8), "acc"), ((12, 14), "flu")]}
    )
    assert (r.matched, r.span_match, r.label_match) == (1, 0.5, 1.0)
    empty = mqm_span_agreement({}, {})
    assert math.isnan(empty.span_match) and math.isnan(empty.label_match)


def test_span_char_kappa() -> None:
    # 10 chars, A = [0,5), B = [0,4): agree on 9 -> p_o = 0.9; p_e = .5*.4 + .5*.6 = 0.5
    # kappa = (0.9 - 0.5) / 0.5 = 0.8
    assert span_char_kappa(10, [(0, 5)], [(0, 4)]) == pytest.approx(0.8)
    assert span_char_kappa(10, [], []) == 1.0  # LitEval: both constant = agreement
    assert math.isnan(span_char_kappa(0, [], []))


def test_mqm_precision_recall_f1_hand_derived() -> None:
    # Reference A: "dog" (major), "cat" (minor); judge B: "the dog" (minor). One match of
    # n_a = 2, n_b = 1: precision 1/1, recall 1/2, F1 = 2*1 / (2 + 1) = span match 2/3.
    r = mqm_span_agreement(
        {"s": [("dog", "major"), ("cat", "minor")]}, {"s": [("the dog", "minor")]}
    )
    assert (r.precision, r.recall) == (1.0, 0.5) and r.f1 == pytest.approx(2 / 3) == r.span_match
    empty = mqm_span_agreement({"s": []}, {"s": []})
    assert math.isnan(empty.precision) and math.isnan(empty.recall) and math.isnan(empty.f1)


def test_mqm_errors_cells() -> None:
    error = {"span": "dog", "severity": "major", "category": "accuracy/mistranslation"}
    assert mqm_errors(json.dumps([error])) == [error]
    assert mqm_errors(json.dumps({"errors": [error]})) == [error]  # a whole verdict
    assert mqm_errors({"errors": [error, "junk"]}) == [error]
    assert mqm_errors("[]") == [] and mqm_errors(None) == []


def _mqm_run(tmp_path: Path) -> Path:
    dog = {"span": "dog", "severity": "major", "category": "accuracy/mistranslation"}
    cat = {"span": "cat", "severity": "minor", "category": "fluency/grammar"}
    records = [
        outcome("i1", "j", 0.0, 0, -6.0, verdict={"errors": [dog, cat]}),
        outcome("i1", "j", 0.0, 1, -1.0, verdict={"errors": [cat]}),  # a later repeat: not used
        outcome("i2", "j", 0.0, 0, 0.0, verdict={"errors": []}),
        outcome("i1", "k", 0.0, 0, -5.0, verdict={"errors": [{**dog, "severity": "minor"}]}),
        outcome("i2", "k", 0.0, 0, 0.0, verdict={"errors": []}),
    ]
    return write_run(tmp_path / "run", records)


def test_meta_spans_mqm_human_against_a_judge_hand_derived(tmp_path: Path) -> None:
    run = _mqm_run(tmp_path)
    human = tmp_path / "human.jsonl"
    rows = [
        {"id": "i1", "pair": "de-en", "errors": [{"span": "the dog", "severity": "major",
                                                  "category": "Accuracy/Omission"}]},
        {"id": "i2", "pair": "en-de", "errors": [{"span": "house", "severity": "minor",
                                                  "category": "style"}]},
        {"id": "i3", "pair": "en-de", "errors": [{"span": "x", "severity": "minor"}]},  # not judged
    ]  # fmt: skip
    human.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    s = run_json(["meta", str(run), "--human-table", str(human), "--key", "id",
                  "--spans-mqm", "errors=j", "--group", "pair"], tmp_path)["mqm_spans"]  # fmt: skip
    pooled = rows_by(s, group="all")[0]
    # Segments i1, i2 (i3 was not judged). Reference spans: "the dog" (i1), "house" (i2);
    # the judge's first answer: "dog", "cat" (i1), none (i2). "dog" is inside "the dog": one
    # match, both major, both accuracy. P = 1/2, R = 1/2, F1 = 2*1 / (2 + 2) = 0.5.
    assert (pooled["segments"], pooled["n_reference"], pooled["n_judge"], pooled["matched"]) == (
        2,
        2,
        2,
        1,
    )
    assert (pooled["precision"], pooled["recall"], pooled["f1"]) == (0.5, 0.5, 0.5)
    assert (pooled["severity_match"], pooled["category_match"]) == (1.0, 1.0)
    de_en = rows_by(s, group="de-en")[0]
    assert (de_en["precision"], de_en["recall"]) == (0.5, 1.0)
    assert rows_by(s, group="en-de")[0]["recall"] == 0.0


def test_meta_spans_mqm_between_two_judges(tmp_path: Path) -> None:
    s = run_json(["meta", str(_mqm_run(tmp_path)), "--spans-mqm", "j=k"], tmp_path)["mqm_spans"]
    row = s["rows"][0]
    # j: dog, cat; k: dog (minor). One match: P 1/1, R 1/2; severities differ (major, minor).
    assert (row["precision"], row["recall"], row["severity_match"], row["category_match"]) == (
        1.0, 0.5, 0.0, 1.0,
    )  # fmt: skip


def test_meta_spans_mqm_bad_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["meta", str(_mqm_run(tmp_path)), "--spans-mqm", "j=nobody"]) == 2
    assert "'nobody' is not a judge of" in capsys.readouterr().err
    assert main(["meta", str(_mqm_run(tmp_path)), "--spans-mqm", "j"]) == 2
