"""Calibrating a cascade as a whole (Learn-then-Test, Angelopoulos, Bates, Candès, Jordan & Lei
2021): one guarantee for the error rate among the items the cascade answers, tested at the full
delta, instead of one test per stage at delta / stages (:mod:`judge_engine.stats.risk_control`).
Pure statistics over arrays.

**A configuration** is a vector of thresholds, one per stage (NaN: the stage is not asked). An
item is answered by the first asked stage whose confidence reaches its threshold; the
configuration's *selective risk* is the error rate among the items it answers.

**The test.** Configurations are put in one order (a *path*) before any label that tests them
is seen. Each is tested with the exact one-sided Clopper-Pearson bound on the errors among the
test items it answers; the sequence stops at the first bound above alpha, and every
configuration before it passed. Fixed-sequence testing keeps the family-wise error at the test
level, so with probability at least 1 - level every configuration that passed has a selective
risk at most alpha: one statement about the cascade, no division by the number of stages.

**The rule: three folds, each a pilot once** (:func:`calibrate_whole`). The labelled items are
split into three folds by a hash of their ids (never by their labels). For each fold:

1. *The pilot fold learns the path.* Per stage, an error curve: the share of the pilot's items
   the stage got wrong, as a non-increasing function of its confidence (isotonic regression).
   Applied to the confidences of the unlabelled items (the run's own items) pooled with the
   pilot's, it gives each of those items' estimated error at each stage.
2. *A greedy path.* From the strictest configuration (no stage asked), each step lowers one
   stage's threshold to the next 2% quantile of that stage's pooled confidences, the step with
   the fewest estimated added errors per added answered item among those that keep the
   estimated cost per item within ``max_cost`` times the last stage's (a stage whose threshold
   is NaN costs nothing; one with a threshold costs its price on every item that reaches it;
   with one stage there is no limit: the cascade is the last stage). So the path goes through
   the configurations the pilot expects to be the most accurate for their coverage, cheap
   enough, in order of coverage.
3. *Where the test starts* (:func:`_first_tested`). Among the configurations expected to answer
   at least :func:`~judge_engine.stats.risk_control.start_size` test items (the fewest with which
   any could pass), the one with
   the most ``coverage x P(pass)``, P(pass) read from the pilot's errors under it; the ones
   before it are left out. A sequence started at the strictest end would stop at once on the
   handful of items every judge gets confidently wrong, which sit at the top of every ordering.
4. *The test.* The other two folds test the path from there at delta / 3.

The cascade takes the configuration that passed with the highest coverage of the pooled items
(the unlabelled and every labelled item's confidences; cheaper on a tie) among the three folds'
last passing ones. Each fold's path depends
only on its pilot and on the unlabelled items, never on the labels that test it, so each fold's
test holds at delta / 3 and, by the union bound, all three hold at once with probability at
least 1 - delta: the configuration used keeps the guarantee. Cross-fitting (each fold a pilot
once) gives the procedure three chances to pass where one pilot split gives one, at the price of
delta / 3 per test.

**Why not the calibration items' own confidences, or one path tested on all labels.** The path
may not depend on the labels that test it: a path chosen on them follows their luck (tests/
stats/test_whole_cascade_guarantee.py shows the guarantee breaking). It does not use the test
items' confidences either: a threshold placed just below a cluster of test items chosen from
their confidences would shape which of them are answered.

Errors among the answered items are independent but not identically distributed given the items'
confidences; the binomial bound stays valid for such sums in the rejection region used (Hoeffding
1956 on Poisson-binomial tails).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import isotonic_regression
from scipy.special import betainc

from judge_engine.stats.risk_control import clopper_pearson_upper, items_needed, start_size

FOLDS = 3
"""The labelled items' folds: each is a pilot once and tests the other folds' paths' at
delta / FOLDS."""
LEVELS = 50
"""Threshold levels per stage: its unlabelled confidences' quantiles, every 2%."""
PATH_ITEMS = 20_000
"""Unlabelled items the path is learned on at most (a deterministic sample beyond)."""
COST_GROWTH = 10.0
"""Without costs, each stage is taken to cost this many times the one before it."""

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]


def fold_of(keys: Sequence[str], folds: int = FOLDS) -> NDArray[np.int_]:
    """Each item's fold, from a hash of its id: fixed before any label is read, the same on
    every machine and for every order of the rows."""
    return np.array([int.from_bytes(hashlib.blake2b(str(k).encode(), digest_size=8).digest(), "big") % folds
                     for k in keys], dtype=int)


def default_costs(stages: int) -> list[float]:
    """The costs assumed when none are given: each stage :data:`COST_GROWTH` times the one
    before (the cascade's order is cheapest first)."""
    return [COST_GROWTH ** s for s in range(stages)]


# --- configurations ------------------------------------------------------------------------------


def answered_by(thresholds: Floats, confidence: Floats) -> NDArray[np.int_]:
    """Per item, the stage that answers it under ``thresholds`` (-1: none). A NaN confidence
    (no judgment) or a NaN threshold (the stage not asked) never answers."""
    with np.errstate(invalid="ignore"):
        takes = confidence >= np.where(np.isnan(thresholds), np.inf, thresholds)
    first = np.argmax(takes, axis=1)
    return np.where(takes.any(axis=1), first, -1)


def reach(thresholds: Floats, who: NDArray[np.int_], stages: int) -> Floats:
    """Per stage, the share of the items it is asked about: those no earlier asked stage
    answered, or 0 when the stage is not asked."""
    n = max(len(who), 1)
    left = np.array([np.sum((who < 0) | (who >= s)) / n for s in range(stages)])
    return np.where(np.isnan(thresholds), 0.0, left)


def cost_per_item(thresholds: Floats, who: NDArray[np.int_], costs: Floats) -> float:
    """The expected cost per item of a configuration: each asked stage's cost times the share
    of the items it is asked about."""
    return float(np.dot(reach(thresholds, who, len(costs)), costs))


def error_curve(confidence: Floats, error: Bools) -> tuple[Floats, Floats]:
    """A stage's error rate as a non-increasing step function of its confidence, fitted on
    labelled items (isotonic regression): the sorted confidences and the fitted rate at each."""
    order = np.argsort(confidence, kind="stable")
    fitted = isotonic_regression(error[order].astype(float), increasing=False).x
    return confidence[order], np.asarray(fitted, dtype=float)


def estimated_errors(curve: tuple[Floats, Floats], confidence: Floats) -> Floats:
    """The curve read at ``confidence`` (the nearest fitted point below, or the lowest; NaN
    confidence: 1, never answered anyway)."""
    xs, ys = curve
    if xs.size == 0:
        return np.ones_like(confidence)
    at = np.clip(np.searchsorted(xs, np.nan_to_num(confidence, nan=-1.0), side="right") - 1, 0, xs.size - 1)
    return np.where(np.isnan(confidence), 1.0, ys[at])


def greedy_path(confidence: Floats, estimated: Floats, costs: Floats, max_cost: float | None,
                levels: int = LEVELS) -> Floats:
    """The path (module docstring, step 2): configurations x stages, strictest first, each
    answering more of the unlabelled items than the one before.

    Args:
        confidence: unlabelled items x stages (NaN: no judgment).
        estimated: each item's estimated error at each stage.
        costs: each stage's cost per item.
        max_cost: the highest expected cost per item allowed, as a share of asking the last
            stage about every item (None: no limit).
    """
    stages = confidence.shape[1]
    ladders = []
    for s in range(stages):
        seen = confidence[:, s][np.isfinite(confidence[:, s])]
        ladders.append(np.unique(np.quantile(seen, np.linspace(0, 1, levels + 1)))[::-1] if seen.size
                       else np.empty(0))
    limit = math.inf if max_cost is None else max_cost * float(costs[-1])
    at = [0] * stages  # per stage: how many of its levels are open (0: not asked)
    answered, errors = 0, 0.0
    path: list[Floats] = []
    while True:
        best: tuple[float, float, list[int], int, int] | None = None
        for s in range(stages):
            if at[s] >= ladders[s].size:
                continue
            step = [*at]
            step[s] += 1
            thresholds = _thresholds(step, ladders)
            who = answered_by(thresholds, confidence)
            if cost_per_item(thresholds, who, costs) > limit:
                continue
            taken = who >= 0
            count = int(taken.sum())
            wrong = float(estimated[taken, who[taken]].sum())
            gained, added = count - answered, wrong - errors
            ratio = added / gained if gained > 0 else (-math.inf if added <= 0 else math.inf)
            if best is None or (ratio, s) < (best[0], best[3]):
                best = (ratio, wrong, step, s, count)
        if best is None:
            return np.array(path, dtype=float).reshape(len(path), stages)
        _, wrong, at, _, count = best
        if count > answered:
            path.append(_thresholds(at, ladders))
        answered, errors = count, wrong


def _thresholds(at: Sequence[int], ladders: Sequence[Floats]) -> Floats:
    return np.array([ladders[s][i - 1] if i else np.nan for s, i in enumerate(at)], dtype=float)


# --- the test ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PathTest:
    """One configuration tested: the test items it answered, their errors, the bound."""

    thresholds: tuple[float | None, ...]
    coverage: float
    """Its share of the pooled items answered: the unlabelled items and the labelled ones'
    confidences (what the path is ordered by)."""
    answered: int
    errors: int
    bound: float


@dataclass(frozen=True, slots=True)
class FoldFit:
    """One fold as the pilot: its path, tested on the other folds."""

    fold: int
    pilot_items: int
    test_items: int
    configurations: int
    """Configurations on the path."""
    skipped: int
    """Of them, the first ones left out, before where the test starts (module docstring, step 3)."""
    tested: int
    passed: PathTest | None
    """The last configuration that passed (None: the first one tested failed, or none was)."""
    stopped_at: PathTest | None
    """The one that failed and ended the sequence (None: every one passed)."""


@dataclass(frozen=True, slots=True)
class WholeFit:
    """The cascade calibrated as a whole: the configuration used and each fold's test."""

    risk: float
    delta: float
    level: float
    """Each fold's test level: delta / folds."""
    start: int
    thresholds: tuple[float | None, ...]
    """Per stage (None: not asked); all None when no fold passed."""
    chosen: int | None
    """The fold whose path gave the configuration used."""
    folds: tuple[FoldFit, ...]
    unlabelled: int
    """Unlabelled items the paths were learned on (0: each pilot's own confidences)."""
    costs: tuple[float, ...]
    costs_given: bool
    max_cost: float | None
    """The cost limit the paths kept to, a share of the last stage alone (None: none, as with one
    stage)."""

    @property
    def test(self) -> PathTest | None:
        """The test the guarantee rests on."""
        return None if self.chosen is None else self.folds[self.chosen].passed


def calibrate_whole(confidence: Any, error: Any, keys: Sequence[str], *, risk: float, delta: float,
                    min_items: int = 30, unlabelled: Any = None, costs: Sequence[float] | None = None,
                    max_cost: float | None = 0.5, folds: int = FOLDS) -> WholeFit:
    """The cascade's thresholds with one guarantee for its selective risk (module docstring).

    Args:
        confidence: labelled items x stages (NaN: the stage has no judgment of the item).
        error: labelled items x stages, True where the stage's prediction differs from the label.
        keys: the labelled items' ids (their folds come from these).
        risk: alpha.
        delta: the guarantee holds with probability >= 1 - delta.
        min_items: the fewest answered test items a configuration is tested with.
        unlabelled: the items to judge, items x stages confidences (no labels), which shape the
            paths; None or empty: each pilot's own confidences do.
        costs: each stage's cost per item (None: :func:`default_costs`).
        max_cost: the highest expected cost per item, as a share of the last stage alone (None:
            no limit).
        folds: how many folds (each a pilot once).
    """
    c = np.asarray(confidence, dtype=float)
    e = np.asarray(error, dtype=bool)
    if c.ndim != 2 or c.shape != e.shape or c.shape[1] == 0 or len(keys) != c.shape[0]:
        raise ValueError(f"confidence and error must be items x stages of one shape, a key per item "
                         f"(got {c.shape}, {e.shape}, {len(keys)} keys)")
    stages = c.shape[1]
    u = _unlabelled(unlabelled, stages)
    price = np.asarray(default_costs(stages) if costs is None else costs, dtype=float)
    limit = None if stages == 1 else max_cost  # one stage is the last stage alone: no saving to keep
    level = delta / folds
    start = start_size(risk, level, min_items)
    fold = fold_of(keys, folds)
    fits = []
    for f in range(folds):
        pilot, test = fold == f, fold != f
        # The pilot's own confidences join the unlabelled items': a few unlabelled items alone would
        # make coarse quantiles. Neither is ever tested on.
        shape = _sample(np.vstack([u, c[pilot]]))
        fits.append(_fold(f, c[pilot], e[pilot], c[test], e[test], shape, price, limit, risk=risk, level=level,
                          start=start))
    passing = [(f.passed, f.fold) for f in fits if f.passed is not None]
    chosen: int | None = None
    thresholds: tuple[float | None, ...] = (None,) * stages
    if passing:
        everything = _sample(np.vstack([u, c]))
        best, chosen = max(passing, key=lambda p: (p[0].coverage, -_cost(p[0], everything, price), -p[1]))
        thresholds = best.thresholds
    return WholeFit(risk, delta, level, start, thresholds, chosen, tuple(fits), len(u),
                    tuple(float(x) for x in price), costs is not None, limit)


def _unlabelled(unlabelled: Any, stages: int) -> Floats:
    if unlabelled is None:
        return np.empty((0, stages))
    u = np.asarray(unlabelled, dtype=float)
    if u.size == 0:
        return np.empty((0, stages))
    if u.ndim != 2 or u.shape[1] != stages:
        raise ValueError(f"unlabelled must be items x {stages} stages (got {u.shape})")
    return u


def _sample(u: Floats) -> Floats:
    """At most :data:`PATH_ITEMS` unlabelled items (every k-th beyond): the path's quantiles and
    estimated coverage need no more."""
    if len(u) <= PATH_ITEMS:
        return u
    return np.asarray(u[np.linspace(0, len(u) - 1, PATH_ITEMS).astype(int)], dtype=float)


def _cost(test: PathTest, shape: Floats, price: Floats) -> float:
    thresholds = np.array([np.nan if t is None else t for t in test.thresholds], dtype=float)
    return cost_per_item(thresholds, answered_by(thresholds, shape), price)


def fold_path(pc: Floats, pe: Bools, shape: Floats, price: Floats, max_cost: float | None
              ) -> tuple[Floats, Floats]:
    """A pilot's path (module docstring, steps 1 and 2) and each configuration's share of the
    pooled items ``shape`` answered."""
    stages = pc.shape[1]
    estimated = np.column_stack([
        estimated_errors(error_curve(pc[np.isfinite(pc[:, s]), s], pe[np.isfinite(pc[:, s]), s]), shape[:, s])
        for s in range(stages)]) if len(pc) else np.ones_like(shape)
    path = greedy_path(shape, estimated, price, max_cost) if len(shape) else np.empty((0, stages))
    coverage = np.array([np.mean(answered_by(t, shape) >= 0) for t in path]) if len(path) else np.empty(0)
    return path, coverage


def _fold(fold: int, pc: Floats, pe: Bools, tc: Floats, te: Bools, shape: Floats, price: Floats,
          max_cost: float | None, *, risk: float, level: float, start: int) -> FoldFit:
    path, coverage = fold_path(pc, pe, shape, price, max_cost)
    first = _first_tested(path, coverage, pc, pe, len(tc), risk=risk, level=level, start=start)
    passed = stopped = None
    tested = 0
    for i in range(first, len(path)):
        who = answered_by(path[i], tc)
        taken = who >= 0
        answered = int(taken.sum())
        errors = int(te[taken, who[taken]].sum())
        bound = float(clopper_pearson_upper(errors, answered, level)) if answered else 1.0
        test = PathTest(tuple(None if math.isnan(t) else float(t) for t in path[i]), float(coverage[i]), answered,
                        errors, bound)
        tested += 1
        if bound > risk:
            stopped = test
            break
        passed = test
    return FoldFit(fold, len(pc), len(tc), len(path), first, tested, passed, stopped)


def _first_tested(path: Floats, coverage: Floats, pc: Floats, pe: Bools, tests: int, *, risk: float, level: float,
                  start: int) -> int:
    """Where the fold's test starts (module docstring, step 3): among the path's configurations
    expected to answer at least ``start`` test items, the one with the most ``coverage x
    P(pass)``, P(pass) read from the pilot's errors under it (with one error and one success
    added, so that a handful of pilot items promise nothing). Before it, a test would end the
    sequence for lack of items or on a handful of items every judge gets wrong."""
    best, at = -1.0, len(path)
    for i in range(len(path)):
        who = answered_by(path[i], pc)
        taken = who >= 0
        # The test items it is expected to answer: by the lower of the pooled items' share and the
        # pilot's (labelled items missing more judgments than the unlabelled answer fewer).
        share = min(float(coverage[i]), float(taken.mean()) if len(pc) else float(coverage[i]))
        expected = int(round(share * tests))
        if expected < start:
            continue
        rate = (float(pe[taken, who[taken]].sum()) + 1.0) / (float(taken.sum()) + 2.0)
        score = coverage[i] * pass_probability(expected, rate, risk=risk, level=level)
        if score > best:
            best, at = score, int(i)
    return at


def pass_probability(items: int, rate: float, *, risk: float, level: float) -> float:
    """The probability that a configuration whose error rate is ``rate`` passes a test at
    ``level`` on ``items`` answered items: P(Binomial(items, rate) <= the most errors that pass)."""
    k = np.arange(items + 1)
    passing = np.flatnonzero(clopper_pearson_upper(k, np.full(k.shape, items), level) <= risk)
    if not passing.size:
        return 0.0
    most = int(passing[-1])
    return 1.0 if most >= items else float(betainc(items - most, most + 1, 1.0 - rate))


# --- what more data would buy -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MoreData:
    """What a larger calibration set would let the cascade answer, at the error rates measured."""

    coverage: float
    """The share of the items to answer (of the pooled items: unlabelled and labelled)."""
    error_rate: float
    """The error rate there: of the folds' configurations that answer that share, on their test
    items."""
    calibration_items: int | None
    """Labelled items in all with which that configuration, or one answering a larger share,
    would pass (None: the error rate is at or above the risk there and at every larger share)."""


def more_data(fit: WholeFit, confidence: Any, error: Any, keys: Sequence[str], *, unlabelled: Any = None,
              min_items: int = 30, targets: Sequence[float] = (0.1, 0.2, 0.3, 0.5, 0.7, 0.9)) -> list[MoreData]:
    """For each target share above what the cascade answers: the error rate at the
    configurations the folds' paths reach that share with, read on each fold's test items (out
    of the pilot that chose them, so not flattered by it), and how many labelled items would let
    a fold's test pass there (the test folds hold (folds - 1) / folds of them, and the
    configuration answers its share of those). An estimate for planning, not a guarantee."""
    c = np.asarray(confidence, dtype=float)
    e = np.asarray(error, dtype=bool)
    stages = c.shape[1]
    u = _unlabelled(unlabelled, stages)
    fold = fold_of(keys, len(fit.folds))
    price = np.asarray(fit.costs)
    paths = []
    for f in range(len(fit.folds)):
        pilot = fold == f
        path, coverage = fold_path(c[pilot], e[pilot], _sample(np.vstack([u, c[pilot]])), price, fit.max_cost)
        paths.append((path, coverage, ~pilot))
    reached = 0.0 if fit.test is None else fit.test.coverage
    share_tested = (len(fit.folds) - 1) / len(fit.folds)
    found = []
    for target in targets:
        if target <= reached:
            continue
        wrong = answered = 0
        shares = []
        for path, coverage, test in paths:
            at = np.flatnonzero(coverage >= target)
            if not at.size:
                continue
            who = answered_by(path[at[0]], c[test])
            taken = who >= 0
            wrong += int(e[test][taken, who[taken]].sum())
            answered += int(taken.sum())
            shares.append(float(coverage[at[0]]))
        if not answered:
            continue
        covered, rate = float(np.mean(shares)), wrong / answered
        need = items_needed(rate, risk=fit.risk, delta=fit.level, min_items=max(min_items, fit.start))
        total = None if need is None else math.ceil(need / (covered * share_tested))
        found.append(MoreData(covered, rate, total))
    # A larger share that passes with fewer items answers this share too: say the fewer.
    fewest: int | None = None
    for i in range(len(found) - 1, -1, -1):
        total = found[i].calibration_items
        if total is not None and (fewest is None or total < fewest):
            fewest = total
        if fewest is not None and (total is None or fewest < total):
            found[i] = MoreData(found[i].coverage, found[i].error_rate, fewest)
    return found

