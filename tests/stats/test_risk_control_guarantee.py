"""The guarantee, measured: over many calibration draws from a population with a known
confidence-accuracy curve, the share of draws whose true error rate among answered items exceeds
alpha stays at or below delta, for one stage and for a three-stage cascade.

Each assertion allows delta + 3 binomial standard errors of a share whose true value is delta
(:func:`slack`): 1,000 draws at delta 0.1 allow 0.1285; 500 at delta 0.1, 0.1402; 1,000 at
delta 0.05, 0.0707. The seeds are fixed, so a pass is reproducible; a calibration that breaks
the guarantee fails here, as the second half shows with the reference's flaws put back, each in
a population built where it matters (and the product itself, run on those populations, must keep
the guarantee there too). benchmarks/calibration.py runs the longer version.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from judge_engine.stats import risk_control
from judge_engine.stats.risk_control import CascadeFit
from tests.stats.calibration_populations import Correlated, Levels, Linear, slack, violations

ONE_STAGE = Linear(slope=1.0)
"""A calibrated judge: c ~ U(0.5, 1), P(error | c) = 1 - c; the items with c >= l have error
rate (1 - l) / 2, so alpha 0.1 is reached at l = 0.8, answering 40% of the items."""
CASCADE = Correlated()
"""Three judges, cheap to strong, confident on the same items (a shared easiness), each
overconfident (P(error | c) = 1.6, 1.4, 1.2 x (1 - c)); the reference's alpha 0.15, delta 0.1."""


def test_one_stage_keeps_the_guarantee() -> None:
    result = violations(ONE_STAGE, draws=1000, n=500, risk=0.1, delta=0.1, seed=1)
    assert result.rate <= 0.1 + slack(0.1, 1000)  # measured: 0.026
    assert result.answering > 0.5 and result.mean_coverage > 0.05  # and it does answer


def test_a_three_stage_cascade_keeps_the_guarantee() -> None:
    result = violations(CASCADE, draws=500, n=500, risk=0.15, delta=0.1, seed=2)
    assert result.rate <= 0.1 + slack(0.1, 500)  # measured: 0.018
    assert result.answering > 0.9 and result.mean_coverage > 0.4


# --- with the reference's flaws, the same test fails ---------------------------------------------


def _highest_when_failing(fit: CascadeFit) -> list[float | None]:
    """The reference's reading: a stage whose first test fails still answers at that threshold."""
    return [s.fit.threshold if s.fit.threshold is not None or s.fit.stopped_at is None
            else s.fit.stopped_at.threshold for s in fit.stages]


def test_answering_at_the_highest_threshold_when_it_fails_breaks_the_guarantee() -> None:
    # A judge worse than alpha everywhere: P(error | c) = 0.1 + (1 - c), so every threshold's
    # items have an error rate of 0.1 + (1 - l) / 2 > 0.1. Answering nothing is the only honest
    # outcome; the reference answers its most confident items anyway, in every draw.
    bad = Linear(slope=1.0, floor=0.1)
    honest = violations(bad, draws=1000, n=500, risk=0.1, delta=0.1, seed=3)
    flawed = violations(bad, draws=1000, n=500, risk=0.1, delta=0.1, seed=3, thresholds=_highest_when_failing)
    assert honest.rate <= 0.1 + slack(0.1, 1000)  # measured: 0.025
    assert flawed.rate > 0.1 + slack(0.1, 1000)  # measured: 1.0
    assert flawed.rate > 0.9


def _normal_approximation(errors: object, items: object, delta: float) -> np.ndarray:
    """The Wald bound k/n + z sqrt(k/n (1 - k/n) / n): too narrow when errors are few."""
    k = np.asarray(errors, dtype=float)
    n = np.asarray(items, dtype=float)
    rate = k / n
    return np.asarray(rate + NormalDist().inv_cdf(1 - delta) * np.sqrt(rate * (1 - rate) / n))


# A judge whose confidence takes two values: 60% of items at 0.99 with error rate 0.0101, just
# above alpha 0.01 (a rare-error regime, where the normal approximation is worst), the rest at
# 0.6 with 0.3. Any threshold breaks the guarantee, so a draw violates whenever it answers.
RARE_ERRORS = Levels(levels=(0.99, 0.6), shares=(0.6, 0.4), errors=(0.0101, 0.3))


def test_a_normal_approximation_bound_breaks_the_guarantee(monkeypatch: pytest.MonkeyPatch) -> None:
    exact = violations(RARE_ERRORS, draws=1000, n=1000, risk=0.01, delta=0.05, seed=4)
    monkeypatch.setattr(risk_control, "clopper_pearson_upper", _normal_approximation)
    approximate = violations(RARE_ERRORS, draws=1000, n=1000, risk=0.01, delta=0.05, seed=4)
    assert exact.rate <= 0.05 + slack(0.05, 1000)  # measured: 0.021
    assert approximate.rate > 0.05 + slack(0.05, 1000)  # measured: 0.141


# Three independent judges of the same make: 55% of items at 0.95 with error rate 0.101, just
# above alpha 0.1, the rest at 0.6 with 0.45. Whatever any stage answers has an error rate above
# alpha, so a draw violates whenever one stage answers: each stage's test at delta lets that
# happen up to delta per stage, about 3 delta over three; at delta / 3 each, delta in all.
THREE_AT_THE_EDGE = Levels(levels=(0.95, 0.6), shares=(0.55, 0.45), errors=(0.101, 0.45), stages=3)


def test_per_stage_delta_breaks_the_cascade_guarantee() -> None:
    bonferroni = violations(THREE_AT_THE_EDGE, draws=500, n=1000, risk=0.1, delta=0.1, seed=5)
    per_stage = violations(THREE_AT_THE_EDGE, draws=500, n=1000, risk=0.1, delta=0.1, seed=5, rule="per_stage")
    assert bonferroni.rate <= 0.1 + slack(0.1, 500)  # measured: 0.064
    assert per_stage.rate > 0.1 + slack(0.1, 500)  # measured: 0.180
