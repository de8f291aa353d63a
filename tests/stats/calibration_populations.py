"""Synthetic populations with a known confidence-accuracy curve, for testing calibration's
guarantee (tests/stats/test_risk_control_guarantee.py) and measuring it (benchmarks/calibration.py).

Each population draws calibration sets (confidence, error) and gives the *true* error rate of
the items a set of thresholds answers: in closed form, or on a large held-out sample using each
item's error probability (not a drawn error), so the only noise left is which confidences the
held-out sample holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from judge_engine.stats.risk_control import CascadeFit, DeltaRule, calibrate_cascade

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Linear:
    """One judge: c ~ Uniform(0.5, 1), P(error | c) = floor + slope (1 - c). The true error rate
    of the items with c >= l is floor + slope (1 - l) / 2, and they are 2 (1 - l) of all items."""

    slope: float
    floor: float = 0.0

    def draw(self, rng: np.random.Generator, n: int) -> tuple[Array, NDArray[np.bool_]]:
        c = rng.uniform(0.5, 1.0, (n, 1))
        return c, rng.random((n, 1)) < self.floor + self.slope * (1 - c)

    def risk(self, thresholds: Sequence[float | None]) -> float:
        (t,) = thresholds
        return float("nan") if t is None else self.floor + self.slope * (1 - t) / 2

    def coverage(self, thresholds: Sequence[float | None]) -> float:
        (t,) = thresholds
        return 0.0 if t is None else 2 * (1 - t)


@dataclass(frozen=True)
class Levels:
    """Judges whose confidence takes a few values (a verbalised confidence, a rounded score):
    per stage, independently, level j with probability ``shares[j]``, whose error rate is
    ``errors[j]``. The true error rate of what a cascade answers is in closed form."""

    levels: tuple[float, ...]
    shares: tuple[float, ...]
    errors: tuple[float, ...]
    stages: int = 1

    def draw(self, rng: np.random.Generator, n: int) -> tuple[Array, NDArray[np.bool_]]:
        j = rng.choice(len(self.levels), size=(n, self.stages), p=self.shares)
        return np.asarray(self.levels)[j], rng.random((n, self.stages)) < np.asarray(self.errors)[j]

    def _answered(self, thresholds: Sequence[float | None]) -> tuple[float, float]:
        """(share of items answered, share answered wrongly): a stage answers the levels at or
        above its threshold among the items that reach it (the stages are independent)."""
        levels, shares, errors = map(np.asarray, (self.levels, self.shares, self.errors))
        reach, answered, wrong = 1.0, 0.0, 0.0
        for t in thresholds:
            if t is None:
                continue
            taken = levels >= t
            answered += reach * shares[taken].sum()
            wrong += reach * (shares[taken] * errors[taken]).sum()
            reach *= 1 - shares[taken].sum()
        return answered, wrong

    def risk(self, thresholds: Sequence[float | None]) -> float:
        answered, wrong = self._answered(thresholds)
        return wrong / answered if answered else float("nan")

    def coverage(self, thresholds: Sequence[float | None]) -> float:
        return self._answered(thresholds)[0]


@dataclass(frozen=True)
class Correlated:
    """A cascade of judges that find the same items easy: an item's easiness z ~ N(0, 1); stage s
    is confident as c_s = 0.5 + 0.5 sigmoid(weight z + noise e_s + shift_s), e_s ~ N(0, 1), and
    wrong with probability P(error | c_s) = overconfidence_s (1 - c_s). The true error rate of
    what the cascade answers is read on a held-out sample (its expected errors)."""

    shifts: tuple[float, ...] = (0.0, 0.5, 1.5)
    overconfidence: tuple[float, ...] = (1.6, 1.4, 1.2)
    weight: float = 1.5
    noise: float = 1.0
    held_out: int = 60_000
    seed: int = 12345

    def confidences(self, rng: np.random.Generator, n: int) -> Array:
        z = rng.standard_normal((n, 1))
        logits = self.weight * z + self.noise * rng.standard_normal((n, len(self.shifts))) + np.asarray(self.shifts)
        return 0.5 + 0.5 / (1 + np.exp(-logits))

    def draw(self, rng: np.random.Generator, n: int) -> tuple[Array, NDArray[np.bool_]]:
        c = self.confidences(rng, n)
        return c, rng.random(c.shape) < np.asarray(self.overconfidence) * (1 - c)

    def _held(self) -> tuple[Array, Array]:
        if self not in _HELD:
            c = self.confidences(np.random.default_rng(self.seed), self.held_out)
            _HELD[self] = c.astype(np.float32), (np.asarray(self.overconfidence) * (1 - c)).astype(np.float32)
        return _HELD[self]

    def evaluate(self, thresholds: Array) -> tuple[Array, Array]:
        """Per draw (a row of thresholds, NaN for none): the true error rate of the answered
        items and the coverage, on the held-out sample, a block of draws at a time."""
        c, p = self._held()
        risks, coverages = [], []
        for block in np.array_split(thresholds, max(1, len(thresholds) // 25)):
            left = np.ones((len(block), c.shape[0]), dtype=bool)
            count = np.zeros(len(block))
            wrong = np.zeros(len(block))
            for s in range(c.shape[1]):
                t = block[:, s : s + 1]
                take = left & (c[:, s] >= np.where(np.isnan(t), np.inf, t))
                count += take.sum(axis=1)
                wrong += take.astype(np.float32) @ p[:, s]
                left &= ~take
            with np.errstate(invalid="ignore"):
                risks.append(wrong / count)
            coverages.append(count / c.shape[0])
        return np.concatenate(risks), np.concatenate(coverages)


_HELD: dict[Correlated, tuple[Array, Array]] = {}

Population = Linear | Levels | Correlated


def _evaluate(population: Population, thresholds: Array) -> tuple[Array, Array]:
    if isinstance(population, Correlated):
        return population.evaluate(thresholds)
    rows = [[None if np.isnan(t) else float(t) for t in row] for row in thresholds]
    return (np.array([population.risk(r) if any(t is not None for t in r) else np.nan for r in rows]),
            np.array([population.coverage(r) for r in rows]))
def truth(population: Population, thresholds: Array) -> tuple[Array, Array]:
    """Per row of thresholds (NaN: the stage not asked), the true error rate among the items
    answered (NaN: none) and the coverage."""
    return _evaluate(population, thresholds)


Calibrator = Callable[..., CascadeFit]


@dataclass(frozen=True)
class Violations:
    """Over many calibration draws: how often the true error rate of the answered items exceeds
    the risk (a draw that answers nothing cannot), the mean coverage, and how often something
    is answered."""

    draws: int
    violations: int
    mean_coverage: float
    answering: float

    @property
    def rate(self) -> float:
        return self.violations / self.draws


def violations(population: Population, *, draws: int, n: int, risk: float, delta: float, min_items: int = 30,
               rule: DeltaRule = "bonferroni", seed: int = 0,
               thresholds: Callable[[CascadeFit], list[float | None]] | None = None) -> Violations:
    """Calibrate ``draws`` calibration sets of ``n`` items drawn from ``population`` and count
    the draws whose true error rate among answered items exceeds ``risk``. ``thresholds`` reads
    a fit's thresholds (a flawed reading can be passed in)."""
    rng = np.random.default_rng(seed)
    read = thresholds or (lambda fit: [s.fit.threshold for s in fit.stages])
    chosen = []
    for _ in range(draws):
        c, e = population.draw(rng, n)
        fit = calibrate_cascade(c, e, risk=risk, delta=delta, min_items=min_items, rule=rule)
        chosen.append([np.nan if t is None else t for t in read(fit)])
    risks, coverages = _evaluate(population, np.asarray(chosen, dtype=float))
    answering = ~np.isnan(risks)
    return Violations(draws, int((risks[answering] > risk).sum()), float(coverages.mean()),
                      float(answering.mean()))


def slack(delta: float, draws: int, standard_errors: float = 3.0) -> float:
    """``standard_errors`` binomial standard errors of a share whose true value is ``delta``."""
    return standard_errors * float(np.sqrt(delta * (1 - delta) / draws))
