"""Consistency across repeats: hand-derived values and edges."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from judge_engine.stats import (
    consistency_table,
    delta_shares,
    flip_rate,
    item_spread,
    mean_pairwise_spearman,
    repeat_consistency,
)
from judge_engine.stats.consistency import run_spread
from judge_engine.stats.runs import read_run
from judge_engine.stats.sections import dimension_section
from tests.stats.fixtures import outcome, write_run


def test_delta_shares_hand_derived() -> None:
    # one item [0, 1, 7]: |deltas| 1, 7, 6 -> (1/3, 0, 2/3)
    assert delta_shares([[0, 1, 7]]) == pytest.approx((1 / 3, 0, 2 / 3))
    # [0, 3] -> 3 in (1, 5]; [2, None, 2] -> one pair, 0
    assert delta_shares([[0, 3, None], [2, None, 2]]) == pytest.approx((0.5, 0.5, 0.0))
    assert delta_shares([[0, 2]], small=2, large=3) == (1.0, 0.0, 0.0)
    assert all(math.isnan(v) for v in delta_shares([[1, None]]))
    assert all(math.isnan(v) for v in delta_shares([]))


def test_mean_pairwise_spearman() -> None:
    # repeats r0 = [1,2,3], r1 = [1,2,3], r2 = [1,3,2]: rho(r0,r1) = 1, rho(r0,r2) = 0.5,
    # rho(r1,r2) = 0.5 -> mean 2/3
    m = [[1, 1, 1], [2, 2, 3], [3, 3, 2]]
    assert mean_pairwise_spearman(m) == pytest.approx(2 / 3)
    assert math.isnan(mean_pairwise_spearman([[1, 1], [1, 1]]))  # constant
    assert math.isnan(mean_pairwise_spearman([[1], [2]]))  # a single repeat


def test_item_spread_and_flip_rate() -> None:
    means, sds = item_spread([[1, 3], [2, None], [None, None]])
    assert means[:2].tolist() == [2.0, 2.0] and math.isnan(means[2])
    assert sds[:2].tolist() == [1.0, 0.0] and math.isnan(sds[2])  # population SD
    _, sds1 = item_spread([[1, 3], [2, None]], ddof=1)
    assert sds1[0] == pytest.approx(math.sqrt(2)) and math.isnan(sds1[1])
    assert flip_rate([["A", "A"], ["A", "B"], ["B", "B"]]) == pytest.approx(1 / 3)
    assert flip_rate([["A", None], ["B", "B"]]) == 0.0  # first item skipped
    assert math.isnan(flip_rate([]))
    with pytest.raises(ValueError):
        flip_rate([["A"], ["A", "B"]])


def test_repeat_consistency_and_table() -> None:
    m = [[1, 1, 1], [2, 2, 3], [3, 3, 2], [4, 4, 4]]
    rc = repeat_consistency(m)
    assert rc.n_items == 4 and rc.n_repeats == 3
    # deltas: item1 0,0,0; item2 0,1,1; item3 0,1,1; item4 0,0,0 -> all <= 1
    assert (rc.share_small, rc.share_medium, rc.share_large) == (1.0, 0.0, 0.0)
    assert rc.alpha_ordinal <= 1 and rc.alpha_interval <= 1
    table = consistency_table({1.0: m, 0.0: [[1, 1], [2, 2]]})
    assert [r["temperature"] for r in table] == [0.0, 1.0]
    assert table[0]["mean_spearman"] == pytest.approx(1.0) and table[0]["mean_sd"] == 0
    empty = repeat_consistency([])
    assert empty.n_items == 0 and math.isnan(empty.mean_spearman)


def test_run_spread_hand_derived() -> None:
    # Items [1, 2], [3, 3], [5, 4]: run means (1+3+5)/3 = 3 and (2+3+4)/3 = 3 -> SD 0; item
    # SDs (ddof 0) 0.5, 0, 0.5 -> mean 1/3.
    s = run_spread([[1, 2], [3, 3], [5, 4]])
    assert (s.n_items, s.n_repeats, s.mean, s.sd_runs) == (3, 2, 3.0, 0.0)
    assert s.mean_item_sd == pytest.approx(1 / 3) and (s.min_run, s.max_run) == (3.0, 3.0)
    # Run means 2 and 4 over the complete items only (the NaN row is left out):
    # SD (ddof 1) = sqrt(((2 - 3)^2 + (4 - 3)^2) / 1) = sqrt(2).
    s = run_spread([[1, 3], [3, 5], [9, None]])
    assert (s.n_items, s.mean, s.sd_runs) == (2, 3.0, pytest.approx(math.sqrt(2)))
    assert run_spread([[None, 1]]).n_items == 0 and math.isnan(run_spread([[1], [2]]).sd_runs)


def test_dimension_section_follows_sub_scores_across_repeats(tmp_path: Path) -> None:
    # ttct-like: originality i1 4 then 5, i2 2 then 3 -> run means 3 and 4: mean 3.5,
    # SD sqrt(0.5) = 0.7071; within-item SDs 0.5 and 0.5.
    records = [
        outcome(item, "j", 1.0, rep, 3.0, protocol="ttct", scores={"originality": value})
        for item, values in {"i1": [4, 5], "i2": [2, 3]}.items()
        for rep, value in enumerate(values)
    ]
    run = read_run(write_run(tmp_path / "run", records))
    section = dimension_section(run, {"ttct": ("originality", "fluency")})
    rows = {r["dimension"]: r for r in section.rows}
    assert list(rows) == ["score", "originality"]  # fluency was never scored: no row
    assert rows["originality"]["mean"] == 3.5
    assert rows["originality"]["sd_runs"] == pytest.approx(math.sqrt(0.5))
    assert rows["originality"]["mean_item_sd"] == 0.5 and rows["score"]["sd_runs"] == 0.0
    only = dimension_section(run, {}, only=["originality"])
    assert [r["dimension"] for r in only.rows] == ["score", "originality"]
