"""Prediction-powered means (judge_engine.stats.ppi): the same numbers as the authors' ppi_py on
identical inputs, and intervals that cover the truth as often as they say, over many draws from
populations whose mean is known: heavy-tailed and binary labels, useless, biased, rescaled and
anti-correlated judges, and labels drawn with a plan's unequal probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge_engine.stats import ppi

ALPHA = 0.1


def _population(rng: np.random.Generator, kind: str, size: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """(human labels, judge predictions) of a finite population of ``size`` items."""
    if kind == "binary":
        p = rng.beta(2, 2, size)
        y = (rng.random(size) < p).astype(float)
        return y, (p > 0.5).astype(float)
    # MQM-like: mostly small penalties and a long tail of large ones (skewness about -2.6; LitEval's
    # systems range from -1.3 to -5.6)
    y = -rng.gamma(0.6, 3.0, size)
    noise = rng.normal(0, 1.0, size)
    judge = {
        "good": y + noise,
        "useless": rng.normal(-3, 2, size),
        "biased": y + noise + 7.0,              # a constant shift
        "rescaled": 100 + 4.0 * (y + noise),   # another scale, as GEMBA's 0-100 against MQM
        "anti": -(y + noise),
    }[kind]
    return y, judge


def _coverage(kind: str, *, n: int = 100, draws: int = 1500, lam: float | None = None, seed: int = 0
              ) -> tuple[float, float, float, list[float]]:
    """(coverage, mean width, the labels alone's mean width, λs) over draws of n uniform labels."""
    rng = np.random.default_rng(seed)
    y, f = _population(rng, kind)
    truth = y.mean()
    hits, widths, classical_widths, lams = 0, [], [], []
    for _ in range(draws):
        labelled = np.zeros(y.size, dtype=bool)
        labelled[rng.choice(y.size, n, replace=False)] = True
        fit = ppi.ppi_mean(y[labelled], f[labelled], f[~labelled], alpha=ALPHA, lam=lam)
        hits += fit.ci[0] <= truth <= fit.ci[1]
        widths.append(fit.ci[1] - fit.ci[0])
        alone = ppi.classical_mean(y[labelled], alpha=ALPHA)
        classical_widths.append(alone.ci[1] - alone.ci[0])
        lams.append(fit.lam)
    return hits / draws, float(np.mean(widths)), float(np.mean(classical_widths)), lams


# 1,500 draws: the coverage's standard error at 0.9 is 0.008; 0.03 below nominal is ~4 of them.
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["good", "binary", "useless", "biased", "rescaled", "anti"])
def test_ppi_plus_plus_covers_the_mean_as_often_as_it_says(kind: str) -> None:
    coverage, width, classical, lams = _coverage(kind)
    assert coverage >= 1 - ALPHA - 0.03, (kind, coverage)
    assert coverage <= 1 - ALPHA + 0.04, (kind, coverage)  # not by being needlessly wide
    assert width <= classical * 1.01, (kind, width, classical)  # never wider than the labels alone
    if kind in ("good", "rescaled", "biased"):
        assert width < 0.75 * classical, (kind, width / classical)  # an informative judge narrows it
    if kind == "useless":
        assert np.median(lams) < 0.1 and width > 0.97 * classical
    if kind == "anti":
        assert max(lams) == 0.0 and width == pytest.approx(classical)  # clipped at 0: the labels alone


def test_plain_ppi_pays_for_a_judge_on_another_scale_where_ppi_plus_plus_does_not() -> None:
    coverage, width, classical, _ = _coverage("rescaled", lam=1.0, draws=300)
    assert coverage >= 1 - ALPHA - 0.05
    assert width > 2 * classical  # λ = 1 carries the judge's 4x scale into the rectifier
    assert _coverage("rescaled", draws=300)[1] < 0.75 * classical


def test_the_same_numbers_as_ppi_py_on_identical_inputs() -> None:
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(3)
    for trial in range(40):
        n, big_n = int(rng.integers(5, 60)), int(rng.integers(20, 400))
        kind = ["good", "binary", "rescaled", "useless", "anti"][trial % 5]
        y_all, f_all = _population(rng, kind, n + big_n)
        y, f, fu = y_all[:n], f_all[:n], f_all[n:]
        for lam in (None, 1.0, 0.0, 0.37):
            ours = ppi.ppi_mean(y, f, fu, alpha=ALPHA, lam=lam)
            lo, hi = ppi_py.ppi_mean_ci(y, f, fu, alpha=ALPHA, lam=lam)
            point = ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam)
            assert ours.ci == pytest.approx((float(np.ravel(lo)[0]), float(np.ravel(hi)[0])), rel=1e-9, abs=1e-9)
            assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), rel=1e-9, abs=1e-9)
        lo, hi = ppi_py.classical_mean_ci(y, alpha=ALPHA)
        assert ppi.classical_mean(y, alpha=ALPHA).ci == pytest.approx((lo, hi), rel=1e-9, abs=1e-9)


def test_effective_labels_are_the_label_count_the_same_width_needs_alone() -> None:
    rng = np.random.default_rng(5)
    y, f = _population(rng, "good")
    fit = ppi.ppi_mean(y[:80], f[:80], f[80:], alpha=ALPHA)
    alone = ppi.classical_mean(y[:80], alpha=ALPHA)
    assert fit.effective_labels == pytest.approx(80 * alone.se**2 / fit.se**2)
    assert fit.effective_labels > 150  # a good judge is worth more than its 80 labels
    # and drawing that many labels alone gives about that width
    widths = []
    for _ in range(400):
        idx = rng.choice(y.size, round(fit.effective_labels), replace=False)
        c = ppi.classical_mean(y[idx], alpha=ALPHA)
        widths.append(c.se)
    assert np.mean(widths) == pytest.approx(fit.se, rel=0.12)


def test_labels_needed_reach_the_target_width_when_drawn() -> None:
    rng = np.random.default_rng(8)
    y, f = _population(rng, "good")
    pilot = rng.choice(y.size, 300, replace=False)  # a large pilot: the formula, not a small pilot's luck
    mask = np.zeros(y.size, dtype=bool)
    mask[pilot] = True
    need = ppi.labels_needed(y[mask], f[mask], f[~mask], alpha=ALPHA, width=0.3)
    assert need.ppi is not None and 2 <= need.ppi < need.classical
    for count, alone in ((need.ppi, False), (need.classical, True)):
        widths = []
        for _ in range(200):
            m = np.zeros(y.size, dtype=bool)
            m[rng.choice(y.size, min(count, y.size), replace=False)] = True
            fit = ppi.classical_mean(y[m], alpha=ALPHA) if alone else ppi.ppi_mean(y[m], f[m], f[~m], alpha=ALPHA)
            widths.append(fit.ci[1] - fit.ci[0])
        assert np.mean(widths) == pytest.approx(0.3, rel=0.1), (count, alone)
    assert ppi.labels_needed(y[mask], f[mask], f[~mask], alpha=ALPHA, width=1e-6).ppi is None


def _active_coverage(kind: str, uncertainty: str, *, budget: int = 150, draws: int = 800, floor: float = 0.2,
                     max_cost: float | None = 1.05, seed: int = 1) -> tuple[float, float, float]:
    """(coverage, mean width, uniform labelling's mean width at the same budget)."""
    rng = np.random.default_rng(seed)
    y, f = _population(rng, kind, 1000)
    truth = y.mean()
    error = np.abs(y - f)
    u = {"informative": error + 0.2 * error.mean(), "none": np.ones(y.size),
         "noise": rng.exponential(1.0, y.size)}[uncertainty]
    pi = ppi.inclusion_probabilities(u, budget, floor=floor, max_cost=max_cost)
    assert pi.sum() == pytest.approx(budget) and pi.min() >= floor * budget / y.size - 1e-12 and pi.max() <= 1
    if max_cost is not None:
        # Poisson draws: the IPW variance goes as mean((1 - π)/π), against (1 - π̄)/π̄ for uniform π̄.
        mean_pi = budget / y.size
        assert (np.mean(1 / pi) - 1) / (1 / mean_pi - 1) <= max_cost + 1e-9
    hits, widths, uniform = 0, [], []
    for _ in range(draws):
        drawn = rng.random(y.size) < pi
        fit = ppi.active_mean(f, np.where(drawn, y, np.nan), pi, alpha=ALPHA)
        hits += fit.ci[0] <= truth <= fit.ci[1]
        widths.append(fit.ci[1] - fit.ci[0])
        m = np.zeros(y.size, dtype=bool)
        m[rng.choice(y.size, budget, replace=False)] = True
        u_fit = ppi.ppi_mean(y[m], f[m], f[~m], alpha=ALPHA)
        uniform.append(u_fit.ci[1] - u_fit.ci[0])
    return hits / draws, float(np.mean(widths)), float(np.mean(uniform))


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "uncertainty"), [("good", "informative"), ("binary", "informative"),
                                                   ("good", "none"), ("binary", "noise"), ("good", "noise")])
def test_active_labels_cover_the_mean_and_spend_labels_where_the_judge_errs(kind: str, uncertainty: str) -> None:
    coverage, width, uniform = _active_coverage(kind, uncertainty)
    assert coverage >= 1 - ALPHA - 0.03, (kind, uncertainty, coverage)
    if uncertainty == "informative":
        assert width < 0.95 * uniform, (kind, width / uniform)
    else:  # an uncertainty that says nothing costs little
        assert width < 1.04 * uniform, (kind, uncertainty, width / uniform)


def test_without_a_cost_limit_a_noisy_uncertainty_costs_width_and_an_informative_one_saves_more() -> None:
    _, noisy, uniform = _active_coverage("binary", "noise", max_cost=None, draws=400)
    assert noisy > 1.06 * uniform  # what the cost limit prevents
    _, informative, uniform = _active_coverage("binary", "informative", max_cost=None, draws=400)
    assert informative < 0.85 * uniform  # what it gives up


def test_zrnic_candes_as_published_pays_for_an_offset_that_the_tuned_shift_removes() -> None:
    rng = np.random.default_rng(2)
    y, f = _population(rng, "biased", 1000)
    pi = np.full(y.size, 0.15)
    published, tuned = [], []
    for _ in range(200):
        labels = np.where(rng.random(y.size) < pi, y, np.nan)
        published.append(ppi.active_mean(f, labels, pi, alpha=ALPHA, lam=1.0, shift=0.0).se)
        tuned.append(ppi.active_mean(f, labels, pi, alpha=ALPHA).se)
    assert np.mean(tuned) < 0.6 * np.mean(published)


def test_bonferroni_intervals_hold_together() -> None:
    """Five groups with known means: every difference's simultaneous interval and every group's
    rank range hold at once in at least 1 - α of draws."""
    rng = np.random.default_rng(4)
    pops = []
    for shift in (0.0, 0.5, 0.5, 1.5, 3.0):
        y, f = _population(rng, "good", 600)
        pops.append((y + shift, f + shift))
    truths = [y.mean() for y, _ in pops]
    true_rank = {str(i): r + 1 for r, i in enumerate(np.argsort([-t for t in truths]))}
    held = 0
    draws = 400
    for _ in range(draws):
        fits = []
        for i, (y, f) in enumerate(pops):
            m = np.zeros(y.size, dtype=bool)
            m[rng.choice(y.size, 60, replace=False)] = True
            fits.append((str(i), ppi.ppi_mean(y[m], f[m], f[~m], alpha=ALPHA)))
        ok = all(d.simultaneous_ci[0] <= truths[int(d.a)] - truths[int(d.b)] <= d.simultaneous_ci[1]
                 for d in ppi.differences(fits, alpha=ALPHA))
        ranges = ppi.rank_ranges(fits, alpha=ALPHA)
        ok &= all(lo <= true_rank[name] <= hi for name, (lo, hi) in ranges.items())
        held += ok
    assert held / draws >= 1 - ALPHA - 0.02
    assert ranges["4"] == (1, 1)  # the clear winner is ranked alone


def test_inclusion_probabilities_follow_the_uncertainty_within_the_floor_and_the_cap() -> None:
    u = np.array([0.0, 0.0, 1.0, 2.0, 50.0, 1.0, 1.0, 1.0])
    pi = ppi.inclusion_probabilities(u, 3, floor=0.2)
    assert pi.sum() == pytest.approx(3) and pi.max() <= 1
    assert pi[4] == pytest.approx(0.8 * 1.0 + 0.2 * 3 / 8)  # capped at 1 before the floor, its excess spread
    assert pi[0] == pytest.approx(0.2 * 3 / 8)  # the floor alone
    assert pi[3] > pi[2] > pi[0]
    assert np.allclose(ppi.inclusion_probabilities(np.ones(8), 3, floor=0.2), 3 / 8)
    for bad in (0, 9, math.nan):
        with pytest.raises(ValueError, match="budget"):
            ppi.inclusion_probabilities(u, bad, floor=0.2)
    with pytest.raises(ValueError, match="uncertainty"):
        ppi.inclusion_probabilities(np.array([1.0, -1.0]), 1, floor=0.2)
