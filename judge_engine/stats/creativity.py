"""Analysis of generation runs (CDAT, DAT): pure functions over per-list scores.

Following "Beyond Divergent Creativity" (``../shared/reference/cdat.md`` and the paper's
notebook), per model and temperature:

* the **valid-response rate**: lists with at least seven valid nouns over all answers (Wilson
  interval);
* mean **novelty** and **appropriateness** with 95% intervals, ``mean +- 1.96 SEM`` as the paper
  computes them;
* the **gate**: a two-sided Welch t-test of the model's per-cue appropriateness against the Random
  baseline's, after removing values beyond 3 SD of each group's mean; Benjamini-Hochberg over the
  models of one temperature at alpha = 0.001; a model passes when its adjusted p is at most alpha
  and its mean is above Random's;
* the **CDAT score** of a model that passes: its mean novelty (with its interval);
* the **elbow distance**: the signed perpendicular distance of a point (appropriateness, novelty)
  from the line through the Common and Random means (positive: beyond the trivial trade-off);
* the **Pareto front**: per temperature, the models no other model beats on both axes (the
  reference's "Pareto front of non-dominated models"; the baselines are not candidates, and a
  model that a baseline beats says so instead of dropping off the front).

Conventions as in the rest of :mod:`judge_engine.stats`: undefined statistics are NaN, malformed
input raises ``ValueError``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

Point = tuple[float, float]
"""(appropriateness, novelty): x and y of the paper's plane."""

GATE_ALPHA = 0.001
OUTLIER_SD = 3.0


@dataclass(frozen=True, slots=True)
class MeanCI:
    """A mean with a normal-approximation interval (``mean +- z * sd / sqrt(n)``)."""

    mean: float
    low: float
    high: float
    sem: float
    n: int


@dataclass(frozen=True, slots=True)
class Rate:
    """A proportion with its Wilson interval."""

    rate: float
    low: float
    high: float
    count: int
    total: int


@dataclass(frozen=True, slots=True)
class GateResult:
    """One model's appropriateness against the Random baseline, within one temperature."""

    n: int
    mean: float
    random_mean: float
    t: float
    df: float
    """Welch-Satterthwaite degrees of freedom (not ``n + n_random - 2``: the variances differ)."""
    p: float
    p_adjusted: float
    passed: bool


def mean_ci(values: Sequence[float], *, z: float = 1.96) -> MeanCI:
    """Mean and ``mean +- z * SEM`` (SEM with ``ddof=1``); the interval is NaN below two values."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return MeanCI(math.nan, math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    sem = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan
    return MeanCI(mean, mean - z * sem, mean + z * sem, sem, int(x.size))


def valid_response_rate(valid: int, total: int, *, z: float = 1.96) -> Rate:
    """Share of answers whose lists were scored, with the Wilson score interval."""
    if total < 0 or not 0 <= valid <= total:
        raise ValueError(f"need 0 <= valid <= total, got {valid} of {total}")
    if total == 0:
        return Rate(math.nan, math.nan, math.nan, valid, total)
    p = valid / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return Rate(p, max(0.0, centre - half), min(1.0, centre + half), valid, total)


def remove_outliers(values: Sequence[float], *, sd: float = OUTLIER_SD) -> np.ndarray:
    """The values within ``sd`` standard deviations (ddof=1) of their mean, in order. With fewer
    than two values or no spread nothing is an outlier."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return x
    spread = x.std(ddof=1)
    if not spread > 0:
        return x
    kept: np.ndarray = x[np.abs(x - x.mean()) <= sd * spread]
    return kept


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (as ``statsmodels`` ``fdr_bh``), in input order."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def appropriateness_gate(models: Mapping[str, Sequence[float]], random: Sequence[float], *,
                         alpha: float = GATE_ALPHA, sd: float = OUTLIER_SD) -> dict[str, GateResult]:
    """The gate for the models of one temperature (BH runs over exactly these models)."""
    reference = remove_outliers(random, sd=sd)
    if reference.size < 2:
        raise ValueError("the Random baseline needs at least two appropriateness values")
    tests = {}
    for name, values in models.items():
        x = remove_outliers(values, sd=sd)
        if x.size < 2:
            tests[name] = (x, math.nan, math.nan, math.nan)
            continue
        result = sps.ttest_ind(x, reference, equal_var=False, alternative="two-sided")
        tests[name] = (x, float(result.statistic), float(result.df), float(result.pvalue))
    names = [n for n, (_, _, _, p) in tests.items() if not math.isnan(p)]
    adjusted = dict(zip(names, benjamini_hochberg([tests[n][3] for n in names]), strict=True))
    random_mean = float(reference.mean())
    gate = {}
    for name, (x, t, df, p) in tests.items():
        q = float(adjusted.get(name, math.nan))
        mean = float(x.mean()) if x.size else math.nan
        gate[name] = GateResult(int(x.size), mean, random_mean, t, df, p, q, bool(q <= alpha and mean > random_mean))
    return gate


def cdat_score(novelty: Sequence[float], gate: GateResult) -> MeanCI | None:
    """The model's mean novelty with its interval if it passed the gate, else None."""
    return mean_ci(novelty) if gate.passed else None


def elbow_distance(point: Point, common: Point, random: Point) -> float:
    """Signed distance from ``point`` to the line through ``common`` and ``random``:
    ``((y2-y1)(x0-x1) - (x2-x1)(y0-y1)) / |p2 - p1|`` with p1 = Common, p2 = Random."""
    (x0, y0), (x1, y1), (x2, y2) = point, common, random
    length = math.hypot(x2 - x1, y2 - y1)
    if length == 0:
        raise ValueError("the Common and Random means coincide: the line is undefined")
    return ((y2 - y1) * (x0 - x1) - (x2 - x1) * (y0 - y1)) / length


def dominates(a: Point, b: Point) -> bool:
    """``a`` is at least as high as ``b`` on both axes and higher on one."""
    return a[0] >= b[0] and a[1] >= b[1] and (a[0] > b[0] or a[1] > b[1])


def pareto_front(points: Mapping[str, Point]) -> list[str]:
    """Names of the points that no other point dominates, in input order. Equal points are all
    on the front."""
    return [name for name, point in points.items()
            if not any(dominates(other, point) for key, other in points.items() if key != name)]


# --- one table for a run ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListScore:
    """One answer of one model: its scores, or None for a list that was not scored."""

    model: str
    temperature: float
    novelty: float | None
    appropriateness: float | None
    valid: bool | None = None
    """The list had at least seven valid nouns. None: valid exactly when it was scored; give
    True for a valid list left unscored (``not_embedded``), so it counts in the valid-response
    rate but in no mean."""
    cue: str | None = None
    """The item (cue) the list answers. The gate tests per-cue appropriateness: several lists
    for one cue (``repeats``) are averaged first, so repeats do not pass for more cues. None:
    every list is its own cue."""

    @property
    def is_valid(self) -> bool:
        return self.novelty is not None if self.valid is None else self.valid


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """One model at one temperature. ``gate`` and ``cdat`` are None without the Random
    baseline; ``elbow`` is NaN without both baselines."""

    model: str
    temperature: float
    valid: Rate
    novelty: MeanCI
    appropriateness: MeanCI
    gate: GateResult | None
    cdat: MeanCI | None
    elbow: MeanCI
    pareto: bool
    """On the Pareto front of the temperature's models (baselines are not candidates)."""
    unscored_valid: int = 0
    """Valid lists without scores (``not_embedded``): in ``valid``, in no mean."""
    beaten_by: tuple[str, ...] = ()
    """Whose mean point dominates this model's at its temperature: the other models (in input
    order), then the baselines (``Random``, ``Common``). A model on the front is beaten by no
    model, only perhaps by a baseline."""


def baseline_mean(points: Sequence[Point]) -> Point:
    """The (appropriateness, novelty) mean of a baseline's lists."""
    if not points:
        raise ValueError("a baseline needs at least one scored list")
    return float(np.mean([p[0] for p in points])), float(np.mean([p[1] for p in points]))


def summarize(lists: Sequence[ListScore], *, random: Sequence[Point] | None, common: Sequence[Point] | None,
              alpha: float = GATE_ALPHA, sd: float = OUTLIER_SD) -> list[ModelSummary]:
    """Every (model, temperature) of a CDAT run against the Random and Common baselines (their
    per-list (appropriateness, novelty) points; None when not given). A DAT run has no
    appropriateness: use :func:`mean_ci` and :func:`valid_response_rate` on its novelty.

    The gate needs Random; the elbow distance both (its interval is over per-list distances with
    outliers removed, as the paper plots it); the Pareto front is drawn per temperature over the
    models only, and each model names the models and the baselines given that beat it on both axes."""
    baselines = {name: baseline_mean(points) for name, points in (("Random", random), ("Common", common))
                 if points is not None}
    groups: dict[float, dict[str, list[ListScore]]] = defaultdict(lambda: defaultdict(list))
    for row in lists:
        groups[row.temperature][row.model].append(row)
    out = []
    for temperature, models in sorted(groups.items()):
        scored = {m: [r for r in rows if r.novelty is not None and r.appropriateness is not None]
                  for m, rows in models.items()}
        gate = (appropriateness_gate({m: _per_cue(rs) for m, rs in scored.items()}, [p[0] for p in random],
                                     alpha=alpha, sd=sd) if random is not None else {})
        means = {m: (mean_ci([r.appropriateness for r in rs if r.appropriateness is not None]).mean,
                     mean_ci([r.novelty for r in rs if r.novelty is not None]).mean) for m, rs in scored.items()}
        placed = {m: xy for m, xy in means.items() if all(map(math.isfinite, xy))}
        front = set(pareto_front(placed))
        for model, rows in models.items():
            rivals = [*((m, xy) for m, xy in placed.items() if m != model), *baselines.items()]
            beaten_by = tuple(name for name, point in rivals if model in placed and dominates(point, placed[model]))
            out.append(_summary(model, temperature, rows, scored[model], gate.get(model), baselines,
                                model in front, beaten_by, sd=sd))
    return out


def _per_cue(rows: Sequence[ListScore]) -> list[float]:
    """Appropriateness per cue: the mean of a cue's lists (each list alone when cues are None)."""
    by_cue: dict[object, list[float]] = defaultdict(list)
    for index, row in enumerate(rows):
        if row.appropriateness is not None:
            by_cue[row.cue if row.cue is not None else index].append(row.appropriateness)
    return [float(np.mean(values)) for values in by_cue.values()]


def _summary(model: str, temperature: float, rows: Sequence[ListScore], scored: Sequence[ListScore],
             gate: GateResult | None, baselines: Mapping[str, Point], pareto: bool, beaten_by: tuple[str, ...], *,
             sd: float) -> ModelSummary:
    novelty = [r.novelty for r in scored if r.novelty is not None]
    app = [r.appropriateness for r in scored if r.appropriateness is not None]
    elbow = mean_ci([])
    if {"Random", "Common"} <= baselines.keys():
        distances = [elbow_distance((a, n), baselines["Common"], baselines["Random"])
                     for a, n in zip(app, novelty, strict=True)]
        elbow = mean_ci(remove_outliers(distances, sd=sd).tolist())
    valid = sum(r.is_valid for r in rows)
    return ModelSummary(
        model, temperature, valid_response_rate(valid, len(rows)), mean_ci(novelty), mean_ci(app), gate,
        cdat_score(novelty, gate) if gate is not None else None, elbow, pareto, valid - len(scored), beaten_by,
    )
