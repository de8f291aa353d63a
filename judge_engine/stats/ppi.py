"""Prediction-powered inference for a mean: a judge's score on every item, corrected by its error
on the items humans labelled, gives an unbiased estimate of the human mean with a valid interval.

Three estimators, all normal (z) intervals:

- :func:`classical_mean`: the human labels alone (what the other two are measured against);
- :func:`ppi_mean`: PPI (λ = 1; Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, *Science* 2023) and
  PPI++ (λ tuned for power; Angelopoulos, Duchi & Zrnic 2023) for labels drawn uniformly at random.
  It is ``ppi_py.ppi_mean_ci`` to the digit, conventions included: standard deviations divide by the
  count, λ̂ = Cov(Y, f) / ((1 + n/Ñ) Var(f)) with the covariance over the labelled items (÷ n) and
  the variance over all items (÷ N - 1), clipped to [0, 1];
- :func:`active_mean`: labels drawn item by item with known probabilities π (active statistical
  inference, Zrnic & Candès, ICML 2024): the mean over every item of ``g_i + (ξ_i/π_i)(Y_i - g_i)``
  with ``g = λ f + c``. The published estimator has c = 0; here (λ, c) are tuned together (λ
  clipped to [0, 1]) because the weights ξ/π multiply the residual's *second moment*: a judge on
  another scale (GEMBA's 0-100 against MQM's penalties) would otherwise pay for its offset in
  width, where PPI++ pays nothing. Any c keeps the estimator unbiased, as any λ does.

:func:`labels_needed` turns a pilot into a label count for a target interval width;
:func:`differences` and :func:`rank_ranges` compare groups whose items are disjoint (independent
estimates), with Bonferroni-corrected simultaneous intervals.

Pure numpy/scipy: the rows, groups and run directories are :mod:`judge_engine.trust.estimates`'.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm, t as student_t

from judge_engine.stats._arrays import FloatArray


@dataclass(frozen=True, slots=True)
class MeanEstimate:
    """One mean with its normal interval."""

    estimate: float
    se: float
    ci: tuple[float, float]
    lam: float
    """The weight on the judge's predictions: 0 = labels alone, 1 = PPI."""
    n_labelled: int
    n_unlabelled: int
    label_variance: float
    """The variance of the human labels (÷ count; inverse-probability weighted for active labels):
    what a uniform sample of labels alone would pay per label."""
    df: int | None = None
    """The degrees of freedom of a t interval (the active estimator's), None for a normal one."""

    def interval(self, alpha: float) -> tuple[float, float]:
        """The interval at another level (simultaneous intervals), with this estimate's quantile."""
        half = quantile(alpha, self.df) * self.se
        return (self.estimate - half, self.estimate + half)

    @property
    def effective_labels(self) -> float:
        """How many uniformly drawn human labels, alone, would give an interval this narrow."""
        if self.se <= 0 or not math.isfinite(self.se):
            return math.inf if self.se == 0 else math.nan
        return self.label_variance / self.se**2


def z_value(alpha: float) -> float:
    """The two-sided normal quantile z(1 - α/2)."""
    check_alpha(alpha)
    return float(norm.ppf(1 - alpha / 2))


def quantile(alpha: float, df: int | None = None) -> float:
    """z(1 - α/2), or Student's t(1 - α/2) with ``df`` degrees of freedom."""
    if df is None:
        return z_value(alpha)
    check_alpha(alpha)
    return float(student_t.ppf(1 - alpha / 2, df))


def is_real(value: object) -> bool:
    """A real number (numpy's included), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def check_alpha(alpha: float) -> None:
    if not (is_real(alpha) and 0 < alpha < 1):
        raise ValueError(f"alpha: expected a number in (0, 1), got {alpha!r}")


def _interval(estimate: float, se: float, alpha: float) -> tuple[float, float]:
    half = z_value(alpha) * se
    return (estimate - half, estimate + half)


def classical_mean(labels: Sequence[float] | FloatArray, *, alpha: float) -> MeanEstimate:
    """The human labels alone: their mean ± z · sd/√n (sd ÷ n, as ``ppi_py.classical_mean_ci``)."""
    y = np.asarray(labels, dtype=float)
    n = y.size
    if n < 2:
        raise ValueError(f"a mean's interval needs 2 or more labels, got {n}")
    estimate, var = float(y.mean()), float(y.var())
    se = math.sqrt(var / n)
    return MeanEstimate(estimate, se, _interval(estimate, se, alpha), 0.0, n, 0, var)


def tuned_lambda(labels: FloatArray, labelled: FloatArray, unlabelled: FloatArray) -> float:
    """PPI++'s power-tuned λ for a mean, clipped to [0, 1] (``ppi_py``'s ``_calc_lam_glm``)."""
    n, big_n = labels.size, unlabelled.size
    if big_n == 0:
        return 0.0  # every item labelled: the judge adds nothing
    cov = float(np.mean((labels - labels.mean()) * (labelled - labelled.mean())))
    var = float(np.var(np.concatenate([labelled, unlabelled]), ddof=1))
    if var <= 0:
        return 0.0  # a constant judge: nothing to learn from it
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(labels: Sequence[float] | FloatArray, labelled: Sequence[float] | FloatArray,
             unlabelled: Sequence[float] | FloatArray, *, alpha: float, lam: float | None = None) -> MeanEstimate:
    """PPI (``lam=1``) or PPI++ (``lam=None``: tuned) for labels drawn uniformly at random.

    Args:
        labels: the human labels Y of the labelled items.
        labelled: the judge's predictions f on the same items, in the same order.
        unlabelled: the judge's predictions on the items nobody labelled.
        alpha: 1 - the interval's coverage.
        lam: the weight on the predictions; None tunes it (PPI++), 0 is the labels alone.
    """
    y = np.asarray(labels, dtype=float)
    f = np.asarray(labelled, dtype=float)
    fu = np.asarray(unlabelled, dtype=float)
    if y.shape != f.shape:
        raise ValueError(f"labels and their predictions differ in length ({y.size} and {f.size})")
    n, big_n = y.size, fu.size
    if n < 2:
        raise ValueError(f"a mean's interval needs 2 or more labels, got {n}")
    if big_n == 0:
        lam = 0.0  # every item labelled: the estimate is the labels' mean whatever λ, and so is its variance
    elif lam is None:
        lam = tuned_lambda(y, f, fu)
    rectifier = y - lam * f
    if big_n:
        estimate = float(lam * fu.mean() + rectifier.mean())
        var = (lam**2) * float(fu.var()) / big_n + float(rectifier.var()) / n
    else:
        estimate, var = float(y.mean()), float(y.var()) / n
    se = math.sqrt(var)
    return MeanEstimate(estimate, se, _interval(estimate, se, alpha), float(lam), n, big_n, float(y.var()))


def active_mean(predictions: Sequence[float] | FloatArray, labels: Sequence[float] | FloatArray,
                probabilities: Sequence[float] | FloatArray, *, alpha: float,
                lam: float | None = None, shift: float | None = None) -> MeanEstimate:
    """The active-inference estimate of the mean label over every item.

    Args:
        predictions: the judge's prediction for every item.
        labels: the human label of every item, NaN where it was not drawn for labelling.
        probabilities: the probability π_i with which each item was to be labelled, fixed before
            any label was seen, in (0, 1].
        lam: the weight on the predictions (None: tuned, clipped to [0, 1]; 1 with ``shift=0`` is
            Zrnic & Candès' estimator as published).
        shift: the constant c of ``g = λ f + c`` (None: tuned with λ).

    The standard error is the sample standard deviation (÷ N - 1) of the N summands over √N, and
    the interval is Student's t with n - 1 degrees of freedom (n: the labels), not normal: the
    variance is carried by the n weighted residuals, and with a few dozen heavy-tailed labels
    (MQM) under unequal weights the normal interval covers visibly less than it says
    (benchmarks/estimates.py measures both).
    """
    f = np.asarray(predictions, dtype=float)
    y = np.asarray(labels, dtype=float)
    pi = np.asarray(probabilities, dtype=float)
    if not (f.shape == y.shape == pi.shape):
        raise ValueError("predictions, labels and probabilities differ in length")
    if np.any(~(pi > 0)) or np.any(pi > 1):
        raise ValueError("sampling probabilities must be in (0, 1]")
    xi = ~np.isnan(y)
    n, big_n = int(xi.sum()), f.size
    if n < 2:
        raise ValueError(f"a mean's interval needs 2 or more labels, got {n}")
    w = np.where(xi, 1.0 / pi, 0.0)
    a = w * np.where(xi, y, 0.0)          # the labels' part of each summand
    b = (w - 1.0) * f                     # minus λ times this
    d = w - 1.0                           # minus c times this
    lam, shift = _tune(a, b, d, lam, shift)
    summands = a - lam * b - shift * d
    estimate = float(summands.mean())
    se = float(summands.std(ddof=1)) / math.sqrt(big_n)
    mean_y = float(np.sum(a) / np.sum(w))
    label_variance = float(np.sum(w * np.where(xi, (y - mean_y) ** 2, 0.0)) / np.sum(w))
    half = quantile(alpha, n - 1) * se
    return MeanEstimate(estimate, se, (estimate - half, estimate + half), lam, n, big_n - n, label_variance, n - 1)


def _tune(a: FloatArray, b: FloatArray, d: FloatArray, lam: float | None, shift: float | None) -> tuple[float, float]:
    """(λ, c) minimising the variance of ``a - λ b - c d`` (a least-squares fit with an intercept),
    λ clipped to [0, 1]."""
    def best_shift(lam_: float) -> float:
        var_d = float(np.var(d))
        if var_d <= 0:
            return 0.0
        return float(np.mean((d - d.mean()) * ((a - lam_ * b) - (a - lam_ * b).mean())) / var_d)

    if lam is not None:
        return float(lam), best_shift(lam) if shift is None else float(shift)
    if shift is not None:
        var_b = float(np.var(b))
        resid = a - shift * d
        lam_ = float(np.mean((b - b.mean()) * (resid - resid.mean())) / var_b) if var_b > 0 else 0.0
        return float(np.clip(lam_, 0.0, 1.0)), float(shift)
    x = np.stack([b - b.mean(), d - d.mean()], axis=1)
    gram = x.T @ x
    if np.linalg.matrix_rank(gram) < 2:
        lam_ = 0.0
    else:
        lam_ = float(np.linalg.solve(gram, x.T @ (a - a.mean()))[0])
    lam_ = float(np.clip(lam_, 0.0, 1.0))
    return lam_, best_shift(lam_)


@dataclass(frozen=True, slots=True)
class LabelsNeeded:
    """How many uniformly drawn labels an interval of ``width`` needs, from a pilot."""

    width: float
    ppi: int | None
    """With the judge (PPI++ at its best λ for that count); None: this group's items are too few."""
    classical: int
    """The labels alone (may exceed the items there are)."""


def labels_needed(labels: Sequence[float] | FloatArray, labelled: Sequence[float] | FloatArray,
                  unlabelled: Sequence[float] | FloatArray, *, alpha: float, width: float) -> LabelsNeeded:
    """The smallest label count n whose interval (hi - lo) is at most ``width``, at the variances and
    judge-human covariance of the pilot (the labels so far): PPI++'s
    z² (Var(Y - λ f)/n + λ² Var(f)/(N - n)) ≤ (width/2)² with λ tuned for each n, and the labels
    alone's z² Var(Y)/n ≤ (width/2)²."""
    if not (is_real(width) and width > 0 and math.isfinite(width)):
        raise ValueError(f"target width: expected a positive number, got {width!r}")
    y = np.asarray(labels, dtype=float)
    f = np.asarray(labelled, dtype=float)
    fu = np.asarray(unlabelled, dtype=float)
    if y.size < 2:
        raise ValueError(f"a pilot needs 2 or more labels, got {y.size}")
    bound = (width / (2 * z_value(alpha))) ** 2
    var_y = float(y.var())
    classical = max(2, math.ceil(var_y / bound)) if var_y > 0 else 2
    big_n = y.size + fu.size
    counts = np.arange(2, big_n, dtype=float)  # n = N leaves no unlabelled item: the labels alone
    var_f = float(np.var(np.concatenate([f, fu]), ddof=1)) if big_n > 1 else 0.0
    cov = float(np.mean((y - y.mean()) * (f - f.mean())))
    if counts.size and var_f > 0:
        rest = big_n - counts
        lam = np.clip(cov / ((1 + counts / rest) * var_f), 0.0, 1.0)
        var_r = var_y - 2 * lam * cov + lam**2 * float(f.var())
        total = var_r / counts + lam**2 * var_f / rest
    else:
        total = var_y / counts
    fits = np.nonzero(total <= bound)[0]
    if fits.size:
        ppi: int | None = int(counts[fits[0]])
    else:
        ppi = big_n if var_y / big_n <= bound else None
    return LabelsNeeded(float(width), ppi, classical)


@dataclass(frozen=True, slots=True)
class Difference:
    """``a`` minus ``b`` with its interval at α and its simultaneous (Bonferroni) interval."""

    a: str
    b: str
    difference: float
    se: float
    ci: tuple[float, float]
    simultaneous_ci: tuple[float, float]
    p_value: float


def differences(estimates: Sequence[tuple[str, MeanEstimate]], *, alpha: float) -> list[Difference]:
    """Every pair's difference (a before b in the given order), for estimates over disjoint items:
    SE = √(SE_a² + SE_b²); simultaneous intervals at α / the number of pairs."""
    pairs = [(i, j) for i in range(len(estimates)) for j in range(i + 1, len(estimates))]
    out = []
    for i, j in pairs:
        (name_a, a), (name_b, b) = estimates[i], estimates[j]
        diff, se = a.estimate - b.estimate, math.hypot(a.se, b.se)
        dfs = [x.df for x in (a, b) if x.df is not None]
        df = min(dfs) if dfs else None  # Welch's df lies between the smaller and the sum: the safe side
        tail = student_t.sf(abs(diff) / se, df) if df is not None else norm.sf(abs(diff) / se) if se > 0 else 0.0
        p = float(2 * tail) if se > 0 else (0.0 if diff else 1.0)
        one, many = quantile(alpha, df) * se, quantile(alpha / len(pairs), df) * se
        out.append(Difference(name_a, name_b, diff, se, (diff - one, diff + one), (diff - many, diff + many), p))
    return out


def rank_ranges(estimates: Sequence[tuple[str, MeanEstimate]], *, alpha: float) -> dict[str, tuple[int, int]]:
    """Each group's possible ranks (1 = the highest mean) that hold together with probability at
    least 1 - α: a group is surely above another when their Bonferroni-corrected difference
    interval (α / the number of pairs) lies above 0."""
    names = [name for name, _ in estimates]
    above = {name: 0 for name in names}   # groups surely above this one
    below = {name: 0 for name in names}
    for d in differences(estimates, alpha=alpha):
        lo, hi = d.simultaneous_ci
        if lo > 0:
            above[d.b] += 1
            below[d.a] += 1
        elif hi < 0:
            above[d.a] += 1
            below[d.b] += 1
    k = len(names)
    return {name: (1 + above[name], k - below[name]) for name in names}


def inclusion_probabilities(uncertainty: Sequence[float] | FloatArray, budget: float, *,
                            floor: float, max_cost: float | None = None) -> FloatArray:
    """Probabilities of drawing each item for labelling: proportional to ``uncertainty`` (the
    judge's expected error on the item), scaled to sum to ``budget`` with none above 1, then mixed
    with a uniform floor: π = (1 - τ) π_uncertain + τ · budget / N, so no weight 1/π explodes
    (Zrnic & Candès' advice).

    ``floor`` is the least τ. With ``max_cost``, τ is raised until the plan would cost at most that
    factor of uniform labelling's variance if the uncertainty turned out to say nothing: items drawn
    independently with probabilities π give the inverse-probability-weighted residuals a variance
    proportional to the mean of (1 - π)/π, against (1 - π̄)/π̄ for uniform labelling (π̄ = budget/N),
    so the cost is (mean(1/π) - 1) / (1/π̄ - 1).
    """
    u = np.asarray(uncertainty, dtype=float)
    big_n = u.size
    if big_n == 0:
        return u
    if not (is_real(budget) and 0 < budget <= big_n):
        raise ValueError(f"budget: expected a number in (0, {big_n}] (the items there are), got {budget!r}")
    if not (0 <= floor <= 1):
        raise ValueError(f"floor: expected a share in [0, 1], got {floor!r}")
    if max_cost is not None and not max_cost >= 1:
        raise ValueError(f"max_cost: expected a factor >= 1, got {max_cost!r}")
    if np.any(~np.isfinite(u)) or np.any(u < 0):
        raise ValueError("uncertainty: expected finite numbers >= 0")
    mean_pi = budget / big_n
    uniform = np.full(big_n, mean_pi)
    shaped = _capped_proportional(u, budget) if u.sum() > 0 else uniform

    def mixed(tau: float) -> FloatArray:
        return np.minimum((1 - tau) * shaped + tau * uniform, 1.0)

    def cost(tau: float) -> float:
        pi = mixed(tau)
        if not np.all(pi > 0):
            return math.inf
        return float((np.mean(1 / pi) - 1) / (1 / mean_pi - 1)) if mean_pi < 1 else 1.0

    tau = float(floor)
    if max_cost is not None and cost(tau) > max_cost:
        lo, hi = tau, 1.0  # the cost falls as τ grows, to 1 at τ = 1
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if cost(mid) <= max_cost else (mid, hi)
        tau = hi
    return mixed(tau)


def _capped_proportional(weights: FloatArray, total: float) -> FloatArray:
    """``weights`` scaled to sum to ``total`` with no entry above 1: entries that would pass 1 are
    set to 1 and the rest rescaled, until none does (water-filling)."""
    pi = np.zeros_like(weights)
    capped = np.zeros(weights.size, dtype=bool)
    for _ in range(weights.size + 1):
        free = ~capped
        remaining = total - capped.sum()
        mass = weights[free].sum()
        if mass <= 0:  # the uncertain items are all capped: spread what is left evenly
            pi[free] = remaining / max(free.sum(), 1)
            break
        pi[free] = weights[free] * remaining / mass
        over = free & (pi > 1)
        if not over.any():
            break
        capped |= over
        pi[capped] = 1.0
    return np.minimum(pi, 1.0)
