"""Calibrating a cascade of judges so that agreement with humans is guaranteed ("Trust or
Escalate", Jung, Brahman & Choi, ICLR 2025): pure statistics over arrays.

**One stage.** Calibration items carry the judge's confidence c and whether its prediction
disagrees with the human label (an error). A threshold l admits every item with c >= l (ties
included, exactly); n(l) items, k(l) errors among them. The exact one-sided Clopper-Pearson upper
bound of the error rate at level delta is the (1 - delta) quantile of Beta(k + 1, n - k)
(:func:`clopper_pearson_upper`). The distinct confidences are tested from the highest downward
(fixed-sequence testing), starting at the first whose n(l) reaches :func:`start_size`, the
fewest items with which a sample without errors could pass at all (at least ``min_items``, and
at least ln(delta) / ln(1 - alpha)); the sequence stops at the first threshold whose bound
exceeds alpha, and the threshold is the last that passed. Then P(true error rate of the items
the judge answers <= alpha) >= 1 - delta. When even the first threshold fails, the stage
answers nothing: the reference code returns that threshold instead, answering its most
confident items with no guarantee at all, and that is not copied.

**The cascade.** Stage 1 is calibrated on every item; stage k on the items every earlier stage
left below its threshold. An item a stage has no judgment for (confidence NaN) cannot be
answered by it and goes on. Each stage is tested at delta / k (Bonferroni), so that every
stage's bound holds at once with probability >= 1 - delta and the error rate over all the
answered items is <= alpha; ``rule="per_stage"`` tests each at delta, as the reference does,
which guarantees each stage on its own only (the whole cascade then holds with probability
>= 1 - k delta).

scipy's Beta quantile (``scipy.special.betaincinv``) is the one piece of scipy used here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

DeltaRule = Literal["bonferroni", "per_stage"]
DELTA_RULES: tuple[DeltaRule, ...] = ("bonferroni", "per_stage")


def clopper_pearson_upper(errors: ArrayLike, items: ArrayLike, delta: float) -> NDArray[np.float64]:
    """The exact one-sided upper bound of an error rate at level ``delta``: the r that solves
    BinomCDF(errors; items, r) = delta, i.e. the (1 - delta) quantile of Beta(errors + 1,
    items - errors). 1 when every item is an error (or there are none).

    Example: 0 errors in 30 items at delta 0.1: 1 - 0.1 ** (1 / 30) = 0.0739.
    """
    from scipy.special import betaincinv

    k = np.asarray(errors, dtype=float)
    n = np.asarray(items, dtype=float)
    full = k >= n  # Beta(n + 1, 0) is degenerate: the bound is 1
    with np.errstate(invalid="ignore", divide="ignore"):
        bound = betaincinv(k + 1.0, np.where(full, 1.0, n - k), 1.0 - delta)
    return np.asarray(np.where(full, 1.0, bound), dtype=np.float64)


def start_size(risk: float, delta: float, min_items: int) -> int:
    """The fewest items at or above a threshold with which it is tested: ``min_items``, and
    enough that a sample with no error could pass, n >= ln(delta) / ln(1 - risk) (since the
    bound of 0 errors in n items is 1 - delta ** (1 / n)).

    Example: risk 0.1, delta 0.1: ln 0.1 / ln 0.9 = 21.85, so 22; with ``min_items`` 30, 30.
    """
    ratio = math.log(delta) / math.log1p(-risk)
    n = max(1, math.ceil(ratio))
    if n > 1 and 1.0 - delta ** (1.0 / (n - 1)) <= risk:  # ratio a hair above an integer by rounding
        n -= 1
    return max(min_items, n)


def stage_delta(delta: float, stages: int, rule: DeltaRule) -> float:
    """Each stage's level: delta / stages (Bonferroni) or delta itself (per stage)."""
    return delta / stages if rule == "bonferroni" else delta


@dataclass(frozen=True, slots=True)
class Test:
    """One threshold tested: the items at or above it, their errors, their bound."""

    threshold: float
    items: int
    errors: int
    bound: float


@dataclass(frozen=True, slots=True)
class StageFit:
    """One stage's calibration on the items it was given."""

    threshold: float | None
    """The lowest confidence it answers at (every item with c >= threshold); None: it answers
    nothing."""
    judged: int
    """Items it was calibrated on (those offered to it with a confidence)."""
    answered: int
    errors: int
    bound: float | None
    """The Clopper-Pearson bound at the threshold (None when it answers nothing)."""
    delta: float
    start: int
    """Items needed at or above a threshold before it is tested (:func:`start_size`)."""
    tested: int
    """Thresholds tested, the failing one included."""
    stopped_at: Test | None
    """The test that ended the sequence (the highest one, when the stage answers nothing);
    None when no threshold had enough items or every one passed."""


def fit_stage(confidence: ArrayLike, error: ArrayLike, *, risk: float, delta: float, min_items: int) -> StageFit:
    """One judge's threshold by fixed-sequence testing (module docstring).

    Args:
        confidence: the judge's confidence per item (finite; NaN items are not its to answer and
            must be left out by the caller).
        error: whether its prediction disagrees with the human label, per item.
        risk: alpha, the error rate to guarantee at most.
        delta: the level of this stage's test.
        min_items: the fewest items at or above a threshold before it is tested.

    Example: confidences 0.9 x 30 (1 error) and 0.8 x 10 (5 errors), risk 0.2, delta 0.1,
    ``min_items`` 30: 0.9 is tested first (30 items, 1 error: bound 0.124 <= 0.2, passes), then
    0.8 (40 items, 6 errors: bound 0.248 > 0.2, stops): the threshold is 0.9, answering 30.
    """
    c = np.asarray(confidence, dtype=float)
    e = np.asarray(error, dtype=bool)
    if c.shape != e.shape or c.ndim != 1 or not np.isfinite(c).all():
        raise ValueError("confidence and error must be one value per item, every confidence finite")
    start = start_size(risk, delta, min_items)
    order = np.argsort(-c, kind="stable")
    c, e = c[order], e[order]
    # The last position of each run of tied confidences: n(l) counts every item tied at l.
    last = np.flatnonzero(np.r_[c[1:] != c[:-1], True]) if c.size else np.empty(0, dtype=int)
    n_at = last + 1
    k_at = np.cumsum(e)[last] if c.size else np.empty(0, dtype=int)
    candidates = np.flatnonzero(n_at >= start)
    passed, bounds = _sequence(k_at[candidates], n_at[candidates], risk=risk, delta=delta)
    stop = None
    if passed < candidates.size:
        at = candidates[passed]
        stop = Test(float(c[last[at]]), int(n_at[at]), int(k_at[at]), bounds[passed])
    tested = min(passed + 1, int(candidates.size))
    if passed == 0:
        return StageFit(None, int(c.size), 0, 0, None, delta, start, tested, stop)
    chosen = candidates[passed - 1]
    return StageFit(float(c[last[chosen]]), int(c.size), int(n_at[chosen]), int(k_at[chosen]),
                    bounds[passed - 1], delta, start, tested, stop)


def _sequence(errors: NDArray[np.int_], items: NDArray[np.int_], *, risk: float, delta: float
              ) -> tuple[int, dict[int, float]]:
    """Fixed-sequence testing over thresholds in order: how many pass before the first failure,
    and the bounds computed (by position). The bounds are computed a block at a time, doubling,
    since the sequence usually ends long before the lowest threshold (the Beta quantile is most
    of calibration's time)."""
    done, block = 0, 16
    while done < errors.size:
        part = slice(done, done + block)
        bounds = clopper_pearson_upper(errors[part], items[part], delta)
        failing = np.flatnonzero(bounds > risk)
        ends = done + (int(failing[0]) if failing.size else bounds.size)
        if failing.size or ends == errors.size:
            kept = {done + i: float(b) for i, b in enumerate(bounds) if done + i in (ends - 1, ends)}
            if ends and ends - 1 < done:  # the last pass was the previous block's last
                kept[ends - 1] = float(clopper_pearson_upper(errors[ends - 1], items[ends - 1], delta))
            return ends, kept
        done, block = ends, block * 2
    return 0, {}


def items_needed(error_rate: float, *, risk: float, delta: float, min_items: int) -> int | None:
    """The fewest items at a threshold whose error rate is ``error_rate`` with which the bound
    passes: the smallest n >= :func:`start_size` with the bound of ``error_rate * n`` errors
    in n items <= ``risk`` (the Beta quantile read with a fractional error count, so that the
    answer grows smoothly with the rate). None when no number of items can do it: the error
    rate itself is at or above ``risk``.

    Example: error rate 0.05, risk 0.1, delta 0.1, ``min_items`` 30: 75 items (the bound of
    3.75 errors in 75 is 0.0996; of 3.7 in 74, 0.1001).
    """
    if not error_rate < risk:
        return None

    def passes(n: int) -> bool:
        return bool(clopper_pearson_upper(error_rate * n, n, delta) <= risk)

    low = start_size(risk, delta, min_items)
    if passes(low):
        return low
    high = low * 2
    while not passes(high):  # the bound tends to error_rate < risk, so this ends
        low, high = high, high * 2
    while high - low > 1:  # passes(high), not passes(low)
        middle = (low + high) // 2
        low, high = (low, middle) if passes(middle) else (middle, high)
    return high


@dataclass(frozen=True, slots=True)
class Needed:
    """What a stage that answers nothing would need: at the confidence it was tested at first
    (or at its lowest, when no threshold had enough items), the error rate there and how many
    items at that rate would let the bound pass."""

    confidence: float
    error_rate: float
    items: int | None
    """Items at or above ``confidence``; None when no number can do it (error rate >= risk)."""
    calibration_items: int | None
    """A calibration set of the same make-up holding that many there: ``items`` scaled by the
    whole set over the items at ``confidence`` now."""


@dataclass(frozen=True, slots=True)
class CascadeStage:
    """One stage within the cascade: its fit, and the items that reached it."""

    fit: StageFit
    offered: int
    """Items every earlier stage left (with a judgment of this stage or not)."""
    needed: Needed | None
    """For a stage that answers nothing, what would let it answer (None otherwise, or when no
    item reached it with a judgment)."""

    @property
    def escalated(self) -> int:
        return self.offered - self.fit.answered


@dataclass(frozen=True, slots=True)
class CascadeFit:
    """The whole cascade's calibration."""

    risk: float
    delta: float
    rule: DeltaRule
    min_items: int
    items: int
    stages: tuple[CascadeStage, ...]

    @property
    def answered(self) -> int:
        return sum(s.fit.answered for s in self.stages)

    @property
    def errors(self) -> int:
        return sum(s.fit.errors for s in self.stages)

    @property
    def coverage(self) -> float:
        """Share of the items some stage answered."""
        return self.answered / self.items if self.items else math.nan


def calibrate_cascade(confidence: ArrayLike, error: ArrayLike, *, risk: float, delta: float, min_items: int = 30,
                      rule: DeltaRule = "bonferroni") -> CascadeFit:
    """Calibrate every stage of a cascade in order (module docstring).

    Args:
        confidence: items x stages, NaN where a stage has no judgment for an item.
        error: items x stages, True where the stage's prediction disagrees with the human label
            (read only where the confidence is finite).
        risk: alpha, the error rate over the answered items to guarantee at most.
        delta: the probability allowed for that guarantee to fail.
        min_items: the fewest items at or above a threshold before it is tested.
        rule: ``bonferroni`` (delta / stages each: the whole cascade guaranteed) or
            ``per_stage`` (delta each: each stage on its own, the weaker statement).
    """
    c = np.asarray(confidence, dtype=float)
    e = np.asarray(error, dtype=bool)
    if c.ndim != 2 or c.shape != e.shape or c.shape[1] == 0:
        raise ValueError(f"confidence and error must be items x stages of one shape (got {c.shape}, {e.shape})")
    level = stage_delta(delta, c.shape[1], rule)
    remaining = np.ones(c.shape[0], dtype=bool)
    stages = []
    for s in range(c.shape[1]):
        judged = remaining & np.isfinite(c[:, s])
        fit = fit_stage(c[judged, s], e[judged, s], risk=risk, delta=level, min_items=min_items)
        needed = None
        if fit.threshold is None and fit.judged:
            needed = _needed(c[judged, s], e[judged, s], fit, risk=risk, items=c.shape[0], min_items=min_items)
        stages.append(CascadeStage(fit, int(remaining.sum()), needed))
        if fit.threshold is not None:
            remaining &= ~(judged & (c[:, s] >= fit.threshold))
    return CascadeFit(risk, delta, rule, min_items, int(c.shape[0]), tuple(stages))


def _needed(c: NDArray[np.float64], e: NDArray[np.bool_], fit: StageFit, *, risk: float, items: int,
            min_items: int) -> Needed:
    if fit.stopped_at is not None:
        at, n, k = fit.stopped_at.threshold, fit.stopped_at.items, fit.stopped_at.errors
    else:  # too few items for any test: read the rate over all of them
        at, n, k = float(c.min()), int(c.size), int(e.sum())
    rate = k / n
    need = items_needed(rate, risk=risk, delta=fit.delta, min_items=min_items)
    scaled = None if need is None else max(items, math.ceil(need * items / n))
    return Needed(at, rate, need, scaled)


@dataclass(frozen=True, slots=True)
class CascadeCost:
    """Expected cost per item of the cascade against its last stage alone."""

    per_item: float
    """Sum over the stages that answer something of their per-item cost x the share of items
    that reach them (a stage that answers nothing is not asked)."""
    last_stage_alone: float
    reach: tuple[float, ...]
    """Per stage, the share of items it is asked about (0 for a stage that is not asked)."""

    @property
    def ratio(self) -> float:
        return self.per_item / self.last_stage_alone if self.last_stage_alone else math.nan


def cascade_cost(fit: CascadeFit, costs: Sequence[float]) -> CascadeCost:
    """The expected cost per item of running ``fit``'s cascade, from each stage's cost per item
    (in stage order), with the calibration items' escalation rates as the estimate."""
    if len(costs) != len(fit.stages):
        raise ValueError(f"{len(costs)} costs for {len(fit.stages)} stages")
    reach = tuple(s.offered / fit.items if fit.items and s.fit.threshold is not None else 0.0 for s in fit.stages)
    per_item = float(sum(cost * share for cost, share in zip(costs, reach, strict=True)))
    return CascadeCost(per_item, float(costs[-1]), reach)


def agreement_key(value: Any) -> Any:
    """What a prediction or label is compared as: a number (``"1"``, ``1`` and ``1.0`` agree),
    else its text without surrounding blanks."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


GUARANTEES = ("stage", "cascade")
"""What a calibration guarantees: ``stage`` (each stage's threshold tested on its own, here) or
``cascade`` (the thresholds tested together, :mod:`judge_engine.stats.whole_cascade`)."""


def guarantee(risk: float, delta: float, rule: str, stages: int, kind: str = "stage") -> str:
    """The guarantee in words, e.g. ``agreement with humans >= 85% on answered items, with
    probability >= 90%, over the whole cascade (stage guarantee: each stage tested at delta / 3,
    Bonferroni)``; ``kind`` is ``stage`` or ``cascade`` (:data:`GUARANTEES`)."""
    head = f"agreement with humans >= {_percent(1 - risk)} on answered items, with probability >= {_percent(1 - delta)}"
    if kind == "cascade":
        return f"{head}, over the whole cascade (cascade guarantee: its thresholds tested together)"
    if stages == 1:
        return f"{head} (one stage)"
    if rule == "bonferroni":
        return f"{head}, over the whole cascade (stage guarantee: each stage tested at delta / {stages}, Bonferroni)"
    whole = 1 - stages * delta
    return (f"{head} for each stage on its own (stage guarantee, per-stage delta, the weaker statement); over the "
            f"whole cascade only " + (f">= {_percent(whole)}" if whole > 0 else "nothing"))


def _percent(share: float) -> str:
    return f"{100 * share:.2f}".rstrip("0").rstrip(".") + "%"
