"""Calibration of a cascade's thresholds (judge_engine.stats.risk_control) on hand-computed cases.

Notation: n items at or above a threshold, k errors among them, u(k, n, delta) the one-sided
Clopper-Pearson upper bound (the (1 - delta) quantile of Beta(k + 1, n - k)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from judge_engine.stats.risk_control import (
    calibrate_cascade,
    cascade_cost,
    clopper_pearson_upper,
    fit_stage,
    items_needed,
    stage_delta,
    start_size,
)


def _group(confidence: float, items: int, errors: int) -> tuple[list[float], list[bool]]:
    return [confidence] * items, [True] * errors + [False] * (items - errors)


def _stage(*groups: tuple[float, int, int]) -> tuple[np.ndarray, np.ndarray]:
    c: list[float] = []
    e: list[bool] = []
    for group in groups:
        gc, ge = _group(*group)
        c += gc
        e += ge
    return np.array(c), np.array(e)


# --- the bound ----------------------------------------------------------------------------------


def test_clopper_pearson_zero_errors_by_hand() -> None:
    # 0 errors in n: BinomCDF(0; n, u) = (1 - u)^n = delta, so u = 1 - delta^(1/n).
    # n = 30, delta = 0.1: 1 - exp(ln(0.1) / 30) = 1 - exp(-0.0767528) = 0.0738813.
    assert clopper_pearson_upper(0, 30, 0.1) == pytest.approx(0.0738813, abs=1e-7)


def test_clopper_pearson_solves_the_binomial_equation() -> None:
    # 1 error in 30 at delta 0.1: (1 - u)^30 + 30 u (1 - u)^29 = 0.1 at u = 0.12357.
    u = float(clopper_pearson_upper(1, 30, 0.1))
    assert u == pytest.approx(0.12357, abs=1e-5)
    assert (1 - u) ** 30 + 30 * u * (1 - u) ** 29 == pytest.approx(0.1, abs=1e-12)


def test_clopper_pearson_matches_scipy_beta_ppf() -> None:
    rng = np.random.default_rng(7)
    n = rng.integers(1, 2000, size=300)
    k = (rng.random(300) * n).astype(int)
    for delta in (0.01, 0.05, 0.1, 0.3):
        ours = clopper_pearson_upper(k, n, delta)
        assert np.allclose(ours, stats.beta.ppf(1 - delta, k + 1, n - k), rtol=1e-10, atol=1e-12)
        # and it is the r with BinomCDF(k; n, r) = delta
        assert np.allclose(stats.binom.cdf(k, n, ours), delta, atol=1e-9)


def test_clopper_pearson_all_errors_is_one() -> None:
    assert clopper_pearson_upper(5, 5, 0.1) == 1.0
    assert list(clopper_pearson_upper([0, 3], [3, 3], 0.1)) == pytest.approx([1 - 0.1 ** (1 / 3), 1.0])


def test_start_size() -> None:
    # ln(0.1) / ln(0.9) = -2.302585 / -0.1053605 = 21.85: 22 items (u(0, 21) = 0.1038 > 0.1,
    # u(0, 22) = 0.0994 <= 0.1).
    assert start_size(0.1, 0.1, 1) == 22
    assert clopper_pearson_upper(0, 21, 0.1) > 0.1 >= clopper_pearson_upper(0, 22, 0.1)
    assert start_size(0.1, 0.1, 30) == 30  # min_items is the larger
    # ln(0.05) / ln(0.95) = 58.4: 59; ln(0.1/3) / ln(0.85) = 20.93: 21.
    assert start_size(0.05, 0.05, 30) == 59
    assert start_size(0.15, 0.1 / 3, 1) == 21
    # an exact integer ratio: ln(0.25) / ln(0.5) = 2, and 0 errors in 2 gives u = 0.5 exactly
    assert start_size(0.5, 0.25, 1) == 2


def test_stage_delta() -> None:
    assert stage_delta(0.3, 3, "bonferroni") == pytest.approx(0.1)
    assert stage_delta(0.3, 3, "per_stage") == 0.3


# --- one stage ----------------------------------------------------------------------------------


def test_the_highest_threshold_already_failing_answers_nothing() -> None:
    # risk 0.1, delta 0.1, min_items 30: start 30. The highest threshold 0.95 holds 30 items
    # with 1 error: u(1, 30, 0.1) = 0.1236 > 0.1, the sequence stops before anything passed.
    # The 70 items at 0.6 with no error would pass (u(1, 100) = 0.038), but fixed-sequence
    # testing never reaches them; the reference would answer at 0.95 with no guarantee.
    c, e = _stage((0.95, 30, 1), (0.6, 70, 0))
    fit = fit_stage(c, e, risk=0.1, delta=0.1, min_items=30)
    assert fit.threshold is None and fit.answered == 0 and fit.errors == 0 and fit.bound is None
    assert fit.tested == 1 and fit.judged == 100
    assert fit.stopped_at is not None
    assert (fit.stopped_at.threshold, fit.stopped_at.items, fit.stopped_at.errors) == (0.95, 30, 1)
    assert fit.stopped_at.bound == pytest.approx(0.12357, abs=1e-5)


def test_the_sequence_stops_at_the_first_failure() -> None:
    # 0.9: 30 items, 1 error, u = 0.1236 <= 0.2 passes; 0.8: 40 items, 6 errors, u = 0.2485 > 0.2
    # stops; 0.7 (60 items, 6 errors, u = 0.169) would pass again but is never tested.
    c, e = _stage((0.9, 30, 1), (0.8, 10, 5), (0.7, 20, 0))
    fit = fit_stage(c, e, risk=0.2, delta=0.1, min_items=30)
    assert (fit.threshold, fit.answered, fit.errors) == (0.9, 30, 1)
    assert fit.bound == pytest.approx(0.12357, abs=1e-5)
    assert fit.stopped_at is not None and fit.stopped_at.threshold == 0.8
    assert fit.stopped_at.bound == pytest.approx(0.24845, abs=1e-5)
    assert fit.tested == 2


def test_ties_in_confidence_admit_every_tied_item() -> None:
    # start 30 (risk 0.1, delta 0.1: 22 < min_items 30). 0.9 holds 25 items: below the start,
    # not tested. 0.8 admits every item with c >= 0.8: 25 + 10 = 35 (a cut at 30 items would
    # split the tie), 0 errors: u = 1 - 0.1^(1/35) = 0.0637 <= 0.1 passes. 0.7: 40 items, 2
    # errors, u = 0.1276 > 0.1 stops. The threshold is 0.8, answering all 35.
    c, e = _stage((0.9, 25, 0), (0.8, 10, 0), (0.7, 5, 2))
    rng = np.random.default_rng(0)
    order = rng.permutation(c.size)  # the input order does not matter
    fit = fit_stage(c[order], e[order], risk=0.1, delta=0.1, min_items=30)
    assert (fit.threshold, fit.answered, fit.errors) == (0.8, 35, 0)
    assert fit.bound == pytest.approx(0.0636708, abs=1e-6)
    assert fit.stopped_at is not None and (fit.stopped_at.items, fit.stopped_at.errors) == (40, 2)


def test_errors_inside_a_tie_all_count() -> None:
    # 29 correct at 0.95 and a tie of 6 at 0.9 holding 3 errors: 0.95 is below the start (29 <
    # 30); 0.9 admits 35 items with 3 errors: u(3, 35, 0.1) = 0.1810 > 0.15, so nothing is
    # answered, although the first 30 items by any tie-break that put the correct ones first
    # would hold 0 errors (u = 0.074, a pass).
    c, e = _stage((0.95, 29, 0), (0.9, 6, 3))
    fit = fit_stage(c, e, risk=0.15, delta=0.1, min_items=30)
    assert fit.threshold is None
    assert fit.stopped_at is not None and (fit.stopped_at.items, fit.stopped_at.errors) == (35, 3)
    assert fit.stopped_at.bound == pytest.approx(float(stats.beta.ppf(0.9, 4, 32)))


def test_the_start_point_comes_from_ln_delta_over_ln_one_minus_alpha() -> None:
    # min_items 1, risk 0.1, delta 0.1: start 22. 0.99 holds 21 items (0 errors): u(0, 21) =
    # 0.1038 > 0.1, so starting there would end the sequence before it began; it is skipped.
    # 0.98 holds 22 (0 errors): u = 0.0994 passes. 0.5 (100 items, 39 errors) fails.
    c, e = _stage((0.99, 21, 0), (0.98, 1, 0), (0.5, 78, 39))
    fit = fit_stage(c, e, risk=0.1, delta=0.1, min_items=1)
    assert fit.start == 22
    assert (fit.threshold, fit.answered, fit.errors) == (0.98, 22, 0)
    assert fit.bound == pytest.approx(1 - 0.1 ** (1 / 22))


def test_fewer_items_than_the_start_answers_nothing_untested() -> None:
    c, e = _stage((0.99, 20, 0))
    fit = fit_stage(c, e, risk=0.1, delta=0.1, min_items=30)
    assert fit.threshold is None and fit.tested == 0 and fit.stopped_at is None and fit.judged == 20
    empty = fit_stage([], [], risk=0.1, delta=0.1, min_items=30)
    assert empty.threshold is None and empty.judged == 0


def test_every_threshold_passing_answers_everything() -> None:
    c, e = _stage((0.9, 40, 0), (0.7, 40, 1))
    fit = fit_stage(c, e, risk=0.1, delta=0.1, min_items=30)
    assert (fit.threshold, fit.answered, fit.errors, fit.stopped_at) == (0.7, 80, 1, None)


# --- items needed -------------------------------------------------------------------------------


def test_items_needed() -> None:
    # error rate 0.05, risk 0.1, delta 0.1: the bound of 3.75 errors in 75 is 0.0996, of 3.7 in
    # 74 0.1001: 75.
    assert items_needed(0.05, risk=0.1, delta=0.1, min_items=30) == 75
    assert clopper_pearson_upper(0.05 * 75, 75, 0.1) <= 0.1 < clopper_pearson_upper(0.05 * 74, 74, 0.1)
    # a rate of 0 needs the start only; a rate at or above the risk can never pass
    assert items_needed(0.0, risk=0.1, delta=0.1, min_items=30) == 30
    assert items_needed(0.0, risk=0.1, delta=0.1, min_items=1) == 22
    assert items_needed(0.1, risk=0.1, delta=0.1, min_items=30) is None
    assert items_needed(0.2, risk=0.1, delta=0.1, min_items=30) is None
    # close to the risk, many: the bound ~ rate + z sqrt(rate (1 - rate) / n)
    many = items_needed(0.09, risk=0.1, delta=0.1, min_items=30)
    assert many is not None and 1000 < many < 20000


# --- the cascade --------------------------------------------------------------------------------


def _cascade(stage1: tuple[np.ndarray, np.ndarray], stage2: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
    return np.column_stack([stage1[0], stage2[0]]), np.column_stack([stage1[1], stage2[1]])


def test_a_later_stage_is_calibrated_on_the_items_left() -> None:
    # Stage 1 (delta 0.1 / 2 = 0.05, start max(30, ln 0.05 / ln 0.9 = 28.4 -> 29) = 30): 0.9
    # holds items 0-39, 0 errors: u(0, 40, 0.05) = 0.0722 passes; 0.5 (all 100, 50 errors) fails.
    # Items 40-99 go on: stage 2 has 0.95 on items 40-79 (0 errors: u(0, 40) passes) and 0.2 on
    # the rest and on items 0-39 (which it never sees).
    c1, e1 = _stage((0.9, 40, 0), (0.5, 60, 50))
    c2, e2 = _stage((0.2, 40, 40), (0.95, 40, 0), (0.2, 20, 10))
    fit = calibrate_cascade(*_cascade((c1, e1), (c2, e2)), risk=0.1, delta=0.1, min_items=30)
    first, second = fit.stages
    assert (first.fit.threshold, first.fit.answered, first.offered, first.fit.delta) == (0.9, 40, 100, 0.05)
    assert (second.offered, second.fit.judged) == (60, 60)
    assert (second.fit.threshold, second.fit.answered, second.fit.errors) == (0.95, 40, 0)
    assert second.fit.stopped_at is not None and second.fit.stopped_at.items == 60  # 40 + the 20 left
    assert fit.answered == 80 and fit.coverage == 0.8 and fit.errors == 0
    assert first.escalated == 60 and second.escalated == 20


def test_an_item_a_stage_has_no_judgment_for_goes_on() -> None:
    # Stage 1 has no confidence (NaN) for items 0-9: they cannot be answered by it whatever its
    # threshold (here 0.9 over items 10-49), and reach stage 2 with the 50 it leaves.
    c1 = np.r_[np.full(10, np.nan), np.full(40, 0.9), np.full(50, 0.1)]
    e1 = np.r_[np.zeros(10, bool), np.zeros(40, bool), np.ones(50, bool)]
    c2 = np.full(100, 0.99)
    e2 = np.zeros(100, bool)
    fit = calibrate_cascade(np.column_stack([c1, c2]), np.column_stack([e1, e2]), risk=0.1, delta=0.1,
                            min_items=30)
    first, second = fit.stages
    assert (first.fit.judged, first.fit.threshold, first.fit.answered) == (90, 0.9, 40)
    assert (second.offered, second.fit.answered) == (60, 60)
    assert fit.coverage == 1.0


def test_a_stage_with_fewer_than_min_items_left_answers_nothing_and_says_what_it_needs() -> None:
    # Stage 1 answers 80 of 100 (0.9, 0 errors); stage 2 gets the 20 left, fewer than the 30
    # a threshold is tested with: no test, no threshold. Its error rate over those 20 is 2/20
    # = 0.1; at delta 0.05 the bound of 0.1 n errors in n falls to <= 0.15 at some n, and the
    # calibration set would need that many x 100 / 20.
    c1, e1 = _stage((0.9, 80, 0), (0.3, 20, 20))
    c2, e2 = _stage((0.9, 80, 0), (0.8, 18, 0), (0.7, 2, 2))
    fit = calibrate_cascade(*_cascade((c1, e1), (c2, e2)), risk=0.15, delta=0.1, min_items=30)
    second = fit.stages[1]
    assert second.offered == 20 and second.fit.threshold is None and second.fit.tested == 0
    assert second.needed is not None
    assert second.needed.error_rate == pytest.approx(0.1) and second.needed.confidence == 0.7
    need = items_needed(0.1, risk=0.15, delta=0.05, min_items=30)
    assert need is not None and second.needed.items == need
    assert second.needed.calibration_items == math.ceil(need * 100 / 20)


def test_a_stage_whose_error_rate_is_at_the_risk_can_never_answer() -> None:
    c, e = _stage((0.9, 30, 6), (0.5, 70, 35))
    fit = calibrate_cascade(c[:, None], e[:, None], risk=0.15, delta=0.1, min_items=30)
    needed = fit.stages[0].needed
    assert needed is not None and needed.error_rate == pytest.approx(0.2) and needed.items is None
    assert needed.calibration_items is None


def test_bonferroni_against_per_stage_delta() -> None:
    # Three stages, delta 0.3. Stage 1: 30 items at 0.9 with 1 error, 20 at 0.5 with 10.
    # Bonferroni tests it at 0.3 / 3 = 0.1: u(1, 30, 0.1) = 0.1236 > 0.1, nothing answered.
    # Per stage, at 0.3: u(1, 30, 0.3) = 0.0794 <= 0.1, the 30 items are answered.
    c, e = _stage((0.9, 30, 1), (0.5, 20, 10))
    confidence = np.column_stack([c, np.full(50, np.nan), np.full(50, np.nan)])
    error = np.column_stack([e, np.zeros(50, bool), np.zeros(50, bool)])
    strict = calibrate_cascade(confidence, error, risk=0.1, delta=0.3, min_items=30)
    weak = calibrate_cascade(confidence, error, risk=0.1, delta=0.3, min_items=30, rule="per_stage")
    assert strict.stages[0].fit.delta == pytest.approx(0.1) and strict.stages[0].fit.threshold is None
    assert strict.stages[0].fit.stopped_at is not None
    assert strict.stages[0].fit.stopped_at.bound == pytest.approx(0.12357, abs=1e-5)
    assert weak.stages[0].fit.delta == 0.3 and weak.stages[0].fit.threshold == 0.9
    assert weak.stages[0].fit.bound == pytest.approx(0.07938, abs=1e-5)
    assert (strict.coverage, weak.coverage) == (0.0, 0.6)


def test_cascade_cost() -> None:
    # Stage 1 (cost 1) is asked about all 100 items and answers 40; stage 2 (cost 3) answers
    # nothing, so it is not asked; stage 3 (cost 10) is asked about the 60 left:
    # 1 x 1.0 + 3 x 0 + 10 x 0.6 = 7 per item, against 10 for stage 3 alone: 0.7.
    c1, e1 = _stage((0.9, 40, 0), (0.5, 60, 50))
    c2, e2 = _stage((0.9, 40, 0), (0.95, 30, 5), (0.5, 30, 30))
    c3, e3 = _stage((0.9, 40, 0), (0.99, 60, 0))
    fit = calibrate_cascade(np.column_stack([c1, c2, c3]), np.column_stack([e1, e2, e3]), risk=0.1, delta=0.1,
                            min_items=30)
    assert [s.fit.threshold for s in fit.stages] == [0.9, None, 0.99]
    cost = cascade_cost(fit, [1.0, 3.0, 10.0])
    assert cost.reach == (1.0, 0.0, 0.6)
    assert cost.per_item == pytest.approx(7.0) and cost.last_stage_alone == 10.0 and cost.ratio == pytest.approx(0.7)
    with pytest.raises(ValueError, match="2 costs for 3 stages"):
        cascade_cost(fit, [1.0, 2.0])


def test_cascade_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="items x stages"):
        calibrate_cascade(np.zeros(5), np.zeros(5, bool), risk=0.1, delta=0.1)


# --- the rule read directly -------------------------------------------------------------------


def _naive(c: np.ndarray, e: np.ndarray, risk: float, delta: float, min_items: int) -> tuple[float | None, int, int]:
    """The rule as written: distinct confidences from the highest down, skipping those with fewer
    than the start's items, stopping at the first bound above risk; one threshold at a time."""
    start = max(min_items, math.ceil(math.log(delta) / math.log(1 - risk) - 1e-9))
    chosen: tuple[float | None, int, int] = (None, 0, 0)
    for level in sorted(set(c.tolist()), reverse=True):
        n = int((c >= level).sum())
        k = int(e[c >= level].sum())
        if n < start:
            continue
        bound = float(stats.beta.ppf(1 - delta, k + 1, n - k)) if k < n else 1.0
        if bound > risk:
            break
        chosen = (level, n, k)
    return chosen


@given(st.sampled_from([12, 400]), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 9)), max_size=400),
       st.sampled_from([0, 1, 3, 5]), st.sampled_from([0.05, 0.1, 0.2, 0.3]), st.sampled_from([0.05, 0.1, 0.3]),
       st.sampled_from([1, 5, 30]))
@settings(max_examples=300, deadline=None)
def test_fit_stage_is_the_rule_read_directly(grid: int, items: list[tuple[int, int]], wrong: int, risk: float,
                                             delta: float, min_items: int) -> None:
    # confidences on a coarse grid (many ties) or a fine one (sequences long enough to cross the
    # blocks fit_stage computes bounds in); errors at a rate of wrong / 10
    c = np.array([(level % (grid + 1)) / grid for level, _ in items])
    e = np.array([draw < wrong for _, draw in items], dtype=bool)
    fit = fit_stage(c, e, risk=risk, delta=delta, min_items=min_items)
    assert (fit.threshold, fit.answered, fit.errors) == _naive(c, e, risk, delta, min_items)
    if fit.threshold is not None:
        assert fit.bound is not None and fit.bound <= risk
        assert fit.answered == int((c >= fit.threshold).sum())
    if fit.stopped_at is not None:
        n = int((c >= fit.stopped_at.threshold).sum())
        k = int(e[c >= fit.stopped_at.threshold].sum())
        assert (fit.stopped_at.items, fit.stopped_at.errors) == (n, k)
        assert fit.stopped_at.bound == pytest.approx(float(clopper_pearson_upper(k, n, delta))) and \
            fit.stopped_at.bound > risk


@pytest.mark.parametrize("failing", [0, 1, 15, 16, 17, 47, 48, 49, 111, 112, 113, None])
def test_the_first_failure_anywhere_in_the_sequence(failing: int | None) -> None:
    # risk 0.5, delta 0.1, min_items 1: start ceil(ln 0.1 / ln 0.5 = 3.32) = 4. Four correct
    # items at 1.0 (the first candidate, n = 4), then one correct item per lower level (candidate
    # j holds 4 + j items, 0 errors: every bound < 0.5), except candidate `failing`, a tie of 300
    # errors (bound > 0.5). The threshold is the candidate before it (fit_stage computes bounds in
    # blocks of 16, 32, 64...: a failure at a block's first position is the case to get right).
    levels = 130
    c, e = [1.0] * 4, [False] * 4
    for j in range(1, levels):
        wrong = j == failing
        c += [1.0 - j / 1000] * (300 if wrong else 1)
        e += [wrong] * (300 if wrong else 1)
    if failing == 0:
        e[:4] = [True] * 4
    fit = fit_stage(np.array(c), np.array(e), risk=0.5, delta=0.1, min_items=1)
    assert fit.start == 4
    if failing == 0:
        assert fit.threshold is None and fit.stopped_at is not None and fit.stopped_at.items == 4
        return
    last = (levels if failing is None else failing) - 1
    assert fit.threshold == 1.0 - last / 1000 and (fit.answered, fit.errors) == (4 + last, 0)
    assert fit.bound == pytest.approx(1 - 0.1 ** (1 / (4 + last)))
    if failing is None:
        assert fit.stopped_at is None
    else:
        assert fit.stopped_at is not None and (fit.stopped_at.items, fit.stopped_at.errors) == (4 + last + 300, 300)
        assert fit.tested == failing + 1


def test_fit_stage_refuses_what_the_cascade_leaves_out() -> None:
    with pytest.raises(ValueError, match="every confidence finite"):
        fit_stage([0.9, np.nan], [False, False], risk=0.1, delta=0.1, min_items=1)
    with pytest.raises(ValueError, match="one value per item"):
        fit_stage([0.9, 0.8], [False], risk=0.1, delta=0.1, min_items=1)
