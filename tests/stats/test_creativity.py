"""Generation-run statistics on hand-derived values (the arithmetic is in the comments)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import stats as sps

from judge_engine.stats.creativity import (
    ListScore,
    appropriateness_gate,
    benjamini_hochberg,
    cdat_score,
    elbow_distance,
    mean_ci,
    pareto_front,
    remove_outliers,
    summarize,
    valid_response_rate,
)


def test_mean_ci_is_mean_plus_minus_1_96_sem() -> None:
    # [1, 2, 3, 4]: mean 2.5; sd = sqrt((2.25 + 0.25 + 0.25 + 2.25) / 3) = sqrt(5/3) = 1.29099;
    # sem = 1.29099 / 2 = 0.645497; 1.96 * sem = 1.265174.
    ci = mean_ci([1, 2, 3, 4])
    assert (ci.mean, ci.sem, ci.n) == (2.5, pytest.approx(0.645497, abs=1e-6), 4)
    assert (ci.low, ci.high) == (pytest.approx(1.234826, abs=1e-6), pytest.approx(3.765174, abs=1e-6))
    assert math.isnan(mean_ci([5.0]).low) and mean_ci([5.0]).mean == 5.0
    assert mean_ci([]).n == 0 and math.isnan(mean_ci([]).mean)


def test_valid_response_rate_has_the_wilson_interval() -> None:
    # 8 of 10, z = 1.96: centre = (0.8 + 3.8416/20) / (1 + 3.8416/10) = 0.99208 / 1.38416 = 0.716738;
    # half = 1.96 * sqrt(0.8*0.2/10 + 3.8416/400) / 1.38416 = 1.96 * 0.160012 / 1.38416 = 0.226581.
    rate = valid_response_rate(8, 10)
    assert rate.rate == 0.8
    assert (rate.low, rate.high) == (pytest.approx(0.490157, abs=1e-5), pytest.approx(0.943319, abs=1e-5))
    assert valid_response_rate(10, 10).high == 1.0 and math.isnan(valid_response_rate(0, 0).rate)
    with pytest.raises(ValueError):
        valid_response_rate(11, 10)


def test_outliers_beyond_three_sd_are_removed() -> None:
    # twenty 0s and one 10: mean 0.476, sd 2.182, 3 sd = 6.547 < 10 - 0.476 = 9.524: removed.
    assert remove_outliers([0.0] * 20 + [10.0]).tolist() == [0.0] * 20
    # five 0s and one 10: mean 1.667, sd 4.082, 3 sd = 12.25 > 8.33: kept (with n values no
    # point can be more than (n - 1) / sqrt(n) = 2.04 sd away).
    assert remove_outliers([0.0] * 5 + [10.0]).size == 6
    assert remove_outliers([3.0, 3.0, 3.0]).size == 3 and remove_outliers([1.0]).size == 1


def test_benjamini_hochberg_matches_the_step_up_by_hand() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4/rank: 0.02, 0.02, 0.04, 0.04 -> running min from the top.
    adjusted = benjamini_hochberg([0.01, 0.04, 0.03, 0.005])
    assert adjusted.tolist() == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjusted.tolist() == pytest.approx(sps.false_discovery_control([0.01, 0.04, 0.03, 0.005]).tolist())


def test_the_gate_passes_a_model_above_random_only() -> None:
    # Each group: offsets -2..2 ten times around its centre; var = 10 * 10 / 49 = 100/49, so the
    # Welch standard error is sqrt(2 * (100/49) / 50) = 2/7 and a 10-point gap gives t = 35.
    spread = [float(i % 5 - 2) for i in range(50)]
    random = [120 + s for s in spread]
    gate = appropriateness_gate(
        {"above": [130 + s for s in spread], "same": list(random), "below": [110 + s for s in spread]}, random
    )
    assert gate["above"].t == pytest.approx(35.0) and gate["above"].passed
    assert gate["above"].p_adjusted == pytest.approx(min(1.0, 3 / 2 * gate["above"].p))  # rank 1 of 3 ties with "below"
    assert gate["below"].t == pytest.approx(-35.0) and not gate["below"].passed  # significant, but below Random
    assert gate["same"].p == pytest.approx(1.0) and not gate["same"].passed
    assert gate["same"].random_mean == 120.0


def test_the_gate_is_welchs_t_test_not_students_when_sizes_and_variances_differ() -> None:
    # Model (122, 124, 126): n1 = 3, mean 124, SS 8, s1^2 = 4, s1^2/n1 = 4/3.
    # Random (119, 119, 121, 121): n2 = 4, mean 120, SS 4, s2^2 = 4/3, s2^2/n2 = 1/3.
    # Welch: SE^2 = 4/3 + 1/3 = 5/3, t = 4 / sqrt(5/3) = 4 sqrt(3/5) = 3.098387;
    #   df = (5/3)^2 / ((4/3)^2 / 2 + (1/3)^2 / 3) = (25/9) / (8/9 + 1/27) = (25/9) / (25/27) = 3.
    #   Student t, 3 df, two-sided: p = 1 - (2/pi)(th + sin th cos th), tan th = t / sqrt(3) = 4 / sqrt(5),
    #   cos^2 th = 5/21, sin th cos th = (4 / sqrt(5))(5/21) = 4 sqrt(5) / 21 = 0.425918,
    #   th = atan(1.788854) = 1.061057: p = 1 - 0.636620 * 1.486974 = 0.053363.
    # Student's (equal variances): pooled s^2 = (8 + 4) / 5 = 2.4, SE^2 = 2.4 (1/3 + 1/4) = 1.4,
    #   t = 4 / sqrt(1.4) = 3.380617 on 5 df; tan th = 4 / sqrt(7), cos^2 th = 7/23, sin th cos th =
    #   4 sqrt(7) / 23 = 0.460131, th = 0.986422: p = 1 - (2/pi)(th + sin th cos th (1 + (2/3) cos^2 th))
    #   = 1 - 0.636620 * 1.539913 = 0.019661.
    # At alpha 0.05 Student's test would pass the model; Welch's does not.
    (result,) = appropriateness_gate({"m": [122.0, 124.0, 126.0]}, [119.0, 119.0, 121.0, 121.0], alpha=0.05).values()
    assert (result.n, result.mean, result.random_mean) == (3, 124.0, 120.0)
    assert result.t == pytest.approx(4 * math.sqrt(3 / 5)) and result.df == pytest.approx(3.0)
    theta = math.atan(4 / math.sqrt(5))
    assert result.p == pytest.approx(1 - 2 / math.pi * (theta + 4 * math.sqrt(5) / 21), rel=1e-9)
    assert result.p == pytest.approx(0.053363, abs=1e-6) and result.p_adjusted == result.p  # BH over one model
    assert not result.passed


def test_the_gate_uses_alpha_0_001_after_bh_within_the_temperature() -> None:
    # A gap of 1 point: t = 1 / (2/7) = 3.5 on ~98 df, p ~ 7e-4 < 0.001; with a second, null model
    # BH gives 7e-4 * 2 / 1 = 1.4e-3 > 0.001: the same data fails once another model is tested.
    spread = [float(i % 5 - 2) for i in range(50)]
    random = [120 + s for s in spread]
    alone = appropriateness_gate({"m": [121 + s for s in spread]}, random)["m"]
    assert alone.p < 0.001 and alone.passed
    together = appropriateness_gate({"m": [121 + s for s in spread], "null": list(random)}, random)["m"]
    assert together.p_adjusted == pytest.approx(2 * alone.p) and not together.passed


def test_the_cdat_score_is_the_mean_novelty_of_a_model_that_passes() -> None:
    spread = [float(i % 5 - 2) for i in range(50)]
    random = [120 + s for s in spread]
    gate = appropriateness_gate({"a": [130 + s for s in spread], "b": [110 + s for s in spread]}, random)
    assert cdat_score([70.0, 80.0], gate["a"]) == mean_ci([70.0, 80.0])
    assert cdat_score([70.0, 80.0], gate["b"]) is None


def test_elbow_distance_is_signed_perpendicular_distance_to_the_baseline_line() -> None:
    # Common (140, 60), Random (120, 80): the line x + y = 200. (140, 80) has x + y = 220, at
    # 20 / sqrt(2) = 14.142 beyond it; the formula: ((80-60)(140-140) - (120-140)(80-60)) / sqrt(800)
    # = 400 / 28.284 = 14.142.
    common, random = (140.0, 60.0), (120.0, 80.0)
    assert elbow_distance((140.0, 80.0), common, random) == pytest.approx(20 / math.sqrt(2))
    assert elbow_distance((130.0, 70.0), common, random) == pytest.approx(0.0)
    assert elbow_distance((120.0, 60.0), common, random) == pytest.approx(-20 / math.sqrt(2))
    with pytest.raises(ValueError):
        elbow_distance((1.0, 1.0), common, common)


def test_pareto_front_keeps_points_nothing_beats_on_both_axes() -> None:
    points = {"A": (130.0, 70.0), "B": (140.0, 60.0), "C": (125.0, 65.0), "D": (130.0, 70.0), "E": (150.0, 50.0),
              "F": (130.0, 69.0)}
    # C is beaten by A on both; F ties A on x and loses on y; A and D are equal: both stay.
    assert pareto_front(points) == ["A", "B", "D", "E"]


@given(st.dictionaries(st.text(min_size=1, max_size=3),
                       st.tuples(st.integers(0, 20).map(float), st.integers(0, 20).map(float)), min_size=1, max_size=12))
def test_pareto_front_members_are_undominated_and_everyone_else_is_dominated(points: dict[str, tuple[float, float]]) -> None:
    def beats(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] >= b[0] and a[1] >= b[1] and a != b

    front = pareto_front(points)
    assert front
    for name, point in points.items():
        dominated = any(beats(other, point) for other in points.values())
        assert (name in front) == (not dominated)


def test_summarize_one_temperature_against_both_baselines() -> None:
    spread = [float(i % 5 - 2) for i in range(50)]
    random = [(120 + s, 80.0 + s) for s in spread]
    common = [(140 + s, 60.0 + s) for s in spread]
    # "good": appropriateness 135, novelty 75 (x + y = 210: 10/sqrt(2) beyond the line); 50 lists
    # plus 10 dropped ones. "trivial": on the line, at Random's appropriateness + 5.
    lists = [ListScore("good", 1.0, 75.0 + s, 135.0 + s) for s in spread]
    lists += [ListScore("good", 1.0, None, None)] * 10
    lists += [ListScore("trivial", 1.0, 75.0 + s, 125.0 + s) for s in spread]
    rows = {r.model: r for r in summarize(lists, random=random, common=common)}
    good, trivial = rows["good"], rows["trivial"]
    assert (good.valid.count, good.valid.total) == (50, 60)
    assert good.novelty.mean == pytest.approx(75.0) and good.appropriateness.mean == pytest.approx(135.0)
    assert good.gate is not None and good.gate.passed and good.cdat == good.novelty
    assert good.elbow.mean == pytest.approx(10 / math.sqrt(2))
    assert trivial.elbow.mean == pytest.approx(0.0) and trivial.gate is not None and trivial.gate.passed
    # (135, 75) beats (125, 75); Random (120, 80) and Common (140, 60) are not beaten by it.
    assert good.pareto and not trivial.pareto
    assert np.isclose(good.novelty.high - good.novelty.mean, 1.96 * good.novelty.sem)


def test_the_front_is_the_models_and_a_baseline_that_beats_a_model_is_named() -> None:
    # Common (140 +- 2, 60 +- 2), Random (120 +- 2, 80 +- 2). "under" at (138, 58) is beaten by
    # Common on both axes, "wide" at (125, 70) by nothing, and neither model beats the other:
    # both are the models' front. Random beats neither (x 120 < 125 < 138).
    spread = [float(i % 5 - 2) for i in range(50)]
    random = [(120 + s, 80.0 + s) for s in spread]
    common = [(140 + s, 60.0 + s) for s in spread]
    lists = [ListScore("under", 1.0, 58.0 + s, 138.0 + s) for s in spread]
    lists += [ListScore("wide", 1.0, 70.0 + s, 125.0 + s) for s in spread]
    rows = {r.model: r for r in summarize(lists, random=random, common=common)}
    assert (rows["under"].pareto, rows["under"].beaten_by) == (True, ("Common",))
    assert (rows["wide"].pareto, rows["wide"].beaten_by) == (True, ())


def test_the_plane_is_drawn_with_baselines_models_and_front(tmp_path: Path) -> None:
    from judge_engine.stats import plots
    from judge_engine.stats.creativity_plots import creativity_plane

    if not plots.available():
        pytest.skip("matplotlib is not installed")
    spread = [float(i % 5 - 2) for i in range(50)]
    random = [(120 + s, 80.0 + s) for s in spread]
    common = [(140 + s, 60.0 + s) for s in spread]
    lists = [ListScore(m, t, n + s, a + s) for m, n, a in (("good", 75.0, 135.0), ("meh", 66.0, 126.0))
             for t in (0.5, 1.0) for s in spread]
    path = creativity_plane(summarize(lists, random=random, common=common), random=random, common=common,
                            path=tmp_path / "plane.png")
    assert path.stat().st_size > 10_000 and path.read_bytes()[:4] == b"\x89PNG"


def test_summarize_without_baselines_leaves_gate_and_elbow_out_and_fronts_the_models() -> None:
    # (135, 75) beats (125, 70) on both axes; no baseline to beat or be beaten by.
    lists = [ListScore("good", 0.5, 75.0 + s, 135.0 + s) for s in (-1.0, 0.0, 1.0)]
    lists += [ListScore("meh", 0.5, 70.0 + s, 125.0 + s) for s in (-1.0, 0.0, 1.0)]
    rows = {r.model: r for r in summarize(lists, random=None, common=None)}
    assert rows["good"].gate is None and rows["good"].cdat is None and math.isnan(rows["good"].elbow.mean)
    assert rows["good"].pareto and not rows["meh"].pareto
    # Random alone: the gate, no elbow.
    random = [(120.0 + s, 80.0) for s in (-1.0, 0.0, 1.0)]
    with_random = {r.model: r for r in summarize(lists, random=random, common=None)}
    assert with_random["good"].gate is not None and math.isnan(with_random["good"].elbow.mean)


def test_a_valid_list_without_scores_counts_as_valid_and_in_no_mean() -> None:
    # 3 scored, 1 too_few_valid (invalid), 2 not_embedded (valid, no scores): 5 valid of 6.
    lists = [ListScore("m", 1.0, 70.0 + s, 130.0 + s) for s in (-1.0, 0.0, 1.0)]
    lists += [ListScore("m", 1.0, None, None, valid=False)]
    lists += [ListScore("m", 1.0, None, None, valid=True)] * 2
    (row,) = summarize(lists, random=None, common=None)
    assert (row.valid.count, row.valid.total, row.unscored_valid) == (5, 6, 2)
    assert row.novelty.n == 3 and row.novelty.mean == pytest.approx(70.0)


def test_the_gate_averages_a_cues_lists_first() -> None:
    # Three repeats of each of 4 cues: the gate tests 4 per-cue means, not 12 lists.
    lists = [ListScore("m", 1.0, 70.0, 130.0 + cue + 0.1 * r, cue=f"c{cue}") for cue in range(4) for r in range(3)]
    random = [(120.0 + s, 80.0) for s in (-2.0, -1.0, 0.0, 1.0, 2.0)]
    (row,) = summarize(lists, random=random, common=None)
    assert row.gate is not None and row.gate.n == 4 and row.gate.mean == pytest.approx(131.6)
    assert row.novelty.n == 12  # the means are over lists
