"""Adequacy (LitEval): hand-derived rates and edges."""

from __future__ import annotations

import math

import pytest

from judge_engine.stats import adequacy, human_preferred

ITEMS = ["s1", "s1", "s1", "s2", "s2", "s2", "s3", "s3"]
SYSTEMS = ["translator", "gpt4o", "m2m", "translator", "gpt4o", "m2m", "gpt4o", "m2m"]
SCORES = [3.0, 2.0, 1.0, 2.0, 2.0, 5.0, 1.0, 2.0]


def test_adequacy_hand_derived() -> None:
    # s1: human 3 > gpt4o 2 -> preferred; s2: human 2 vs gpt4o 2, a tie -> not preferred;
    # s3 has no human translation -> not counted. vs top: 1/2.
    res = adequacy(ITEMS, SYSTEMS, SCORES, human={"translator"}, against={"gpt4o"})
    assert (res.preferred, res.n_items, res.rate) == (1, 2, 0.5)
    assert res.ci_low < 0.5 < res.ci_high
    # vs m2m: s1 3 > 1 preferred; s2 2 < 5 not -> 1/2
    assert human_preferred(ITEMS, SYSTEMS, SCORES, human={"translator"}, against={"m2m"}) == {
        "s1": True,
        "s2": False,
    }


def test_adequacy_best_human_and_missing_scores() -> None:
    # two human translations: the best one counts; a missing score is ignored
    res = adequacy(
        ["a", "a", "a", "a"], ["translator", "translator", "deepl", "deepl"],
        [1.0, 4.0, 3.0, math.nan], human={"translator"}, against={"deepl"},
    )  # fmt: skip
    assert res.rate == 1.0


def test_adequacy_edges() -> None:
    empty = adequacy([], [], [], human={"h"}, against={"m"})
    assert empty.n_items == 0 and math.isnan(empty.rate)
    with pytest.raises(ValueError, match="same length"):
        adequacy(["a"], ["h", "m"], [1.0], human={"h"}, against={"m"})
