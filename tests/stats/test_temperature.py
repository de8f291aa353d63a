"""Consistency across temperatures: hand-derived rows, the diagonal equals the repeat
consistency, symmetry, the section on a run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from judge_engine.stats.consistency import delta_shares, mean_pairwise_spearman
from judge_engine.stats.temperature import compare_temperatures, query_pairs, temperature_table
from tests.stats.fixtures import outcome, sample_records, write_run
from tests.stats.test_cli import rows_by, run_json


def test_docstring_example() -> None:
    # One item, T1 [0, 0], T2 [-1, -6]: pairs give |delta| 1, 6, 1, 6 -> (0.5, 0, 0.5);
    # every pair flips; mean difference (-1 - 6 - 1 - 6) / 4 = -3.5.
    row = compare_temperatures(0.0, {"i": [0, 0]}, 1.0, {"i": [-1, -6]})
    assert (row.share_small, row.share_medium, row.share_large) == (0.5, 0.0, 0.5)
    assert (row.flip_rate, row.mean_diff, row.n_pairs, row.n_items) == (1.0, -3.5, 4, 1)
    assert math.isnan(row.mean_spearman)  # one item: no correlation


def test_query_pairs() -> None:
    assert query_pairs(2, 3, same=False) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert query_pairs(3, 3, same=True) == [(0, 1), (0, 2), (1, 2)]


def test_section_on_a_run_hand_derived(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", sample_records())
    s = run_json(["stats", str(run)], tmp_path)["temperatures"]
    cross = rows_by(s, judge="a", t1=0.0, t2=1.0)[0]
    # A_T0 vs A_T1, 3 x 3 query pairs; deltas T1 - T0 per item:
    #   i1 T1 [-1, -6, -1]: 0, -5, 0 against each of 3 T0 queries -> six 0, three -5
    #   i2 T0 [-5, -5, -6], T1 [-5, -5, None]: 0, 0, 1 twice -> four 0, two 1
    #   i3 T1 [0, -25, 0]: six 0, three -25;  i4 T1 [-10, -11, -10]: six 0, three -1
    # 33 deltas: |d| <= 1: 6 + 6 + 6 + 9 = 27; (1, 5]: 3; > 5: 3. Sum -15 + 2 - 75 - 3 = -91.
    assert (cross["n_items"], cross["n_pairs"]) == (4, 9)
    assert (cross["share_small"], cross["share_medium"], cross["share_large"]) == pytest.approx(
        (27 / 33, 3 / 33, 3 / 33)
    )
    assert cross["mean_diff"] == pytest.approx(-91 / 33)
    # Flips per pair: T1 repeat 0 differs from T0 repeat 2 on i2 only (1/4); T1 repeat 1 differs
    # on 3, 3 and 4 of 4 items; T1 repeat 2 (3 items) on none: (0.25 + 0.75 + 0.75 + 1) / 9.
    assert cross["flip_rate"] == pytest.approx(2.75 / 9)
    # Spearman: pairs with T1 repeat 0 or 2 rank the items as T0 does (1.0, six pairs); T1
    # repeat 1 ranks i1..i4 3, 4, 1, 2 against T0's 3, 2, 4, 1: sum d^2 = 14,
    # rho = 1 - 6 * 14 / (4 * 15) = -0.4 (three pairs). Mean (6 - 1.2) / 9.
    assert cross["mean_spearman"] == pytest.approx(4.8 / 9)
    diagonal = rows_by(s, judge="a", t1=0.0, t2=0.0)[0]
    # T0 repeats (0,1), (0,2), (1,2): only i2 moves, by 1, in the last two: flips 0, 1/4, 1/4.
    assert diagonal["flip_rate"] == pytest.approx(1 / 6) and diagonal["share_small"] == 1.0
    assert diagonal["mean_diff"] is None  # NaN: the order of two repeats means nothing
    assert s["notes"] == ["not shown: b (1 temperature)"]


def test_absent_with_one_temperature(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [outcome("i1", "a", 0.0, 0, -1.0)])
    s = run_json(["stats", str(run)], tmp_path)["temperatures"]
    assert s["rows"] == [] and s["absent"].startswith("needs 2+ temperatures of one judge")


def test_verdict_field_flips(tmp_path: Path) -> None:
    records = [
        outcome(i, "a", t, 0, 1.0, verdict={"winner": w})
        for i, t, w in [("i1", 0.0, "A"), ("i2", 0.0, "B"), ("i1", 1.0, "A"), ("i2", 1.0, "A")]
    ]
    s = run_json(["stats", str(write_run(tmp_path / "run", records)), "--verdict-field", "winner"],
                 tmp_path)["temperatures"]  # fmt: skip
    assert rows_by(s, t1=0.0, t2=1.0)[0]["flip_rate"] == 0.5  # i2 flips B -> A, i1 does not


scores = st.one_of(st.none(), st.integers(-10, 0))
queries = st.dictionaries(st.sampled_from(["i1", "i2", "i3", "i4", "i5"]),
                          st.lists(scores, min_size=3, max_size=3), min_size=2)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(queries)
def test_the_diagonal_is_the_repeat_consistency(q: dict[str, list[int | None]]) -> None:
    row = temperature_table({0.5: q})[0]
    matrix = [[math.nan if v is None else v for v in r] for r in q.values()]
    want = delta_shares(matrix)
    got = (row.share_small, row.share_medium, row.share_large)
    assert got == pytest.approx(want, nan_ok=True)
    assert row.mean_spearman == pytest.approx(mean_pairwise_spearman(matrix), nan_ok=True)


@settings(max_examples=40, deadline=None)
@given(queries, queries)
def test_symmetric_in_the_two_temperatures(
    a: dict[str, list[int | None]], b: dict[str, list[int | None]]
) -> None:
    ab, ba = compare_temperatures(0.0, a, 1.0, b), compare_temperatures(1.0, b, 0.0, a)
    for name in ("n_items", "n_pairs", "mean_spearman", "share_small", "share_large",
                 "alpha_ordinal", "alpha_interval", "flip_rate"):  # fmt: skip
        assert getattr(ab, name) == pytest.approx(getattr(ba, name), nan_ok=True), name
    assert ab.mean_diff == pytest.approx(-ba.mean_diff, nan_ok=True)
    assert math.isnan(ab.mean_spearman) or -1 - 1e-9 <= ab.mean_spearman <= 1 + 1e-9
    assert math.isnan(ab.alpha_interval) or ab.alpha_interval <= 1 + 1e-9
