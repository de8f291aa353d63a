"""Span agreement: the close-reading matcher and pooled counting, MQM span agreement."""

from __future__ import annotations

import math

import pytest

from judge_engine.stats import (
    expressions_match,
    mqm_span_agreement,
    span_char_kappa,
    span_prf,
)


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
