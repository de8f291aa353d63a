"""Calibration's guarantee over many draws: violation rates and coverage for several alpha,
delta and calibration-set sizes, with and without the reference's flaws.

    python benchmarks/calibration.py [--draws 2000] [--cascade-draws 1000] [--quick]

Populations (tests/stats/calibration_populations.py, the same the test uses):

* ``one stage``: a calibrated judge, c ~ U(0.5, 1), P(error | c) = 1 - c (the items with
  c >= l err at (1 - l) / 2); the oracle threshold answers 4 alpha of the items;
* ``cascade``: three judges confident on the same items (a shared easiness), each
  overconfident, cheap to strong; true error rates on a held-out sample of 60,000 items;
* the flaws' populations: a judge worse than alpha everywhere (the reference answering its
  highest threshold when it fails), a rare-error two-level judge (a normal-approximation bound),
  three two-level judges at the edge of alpha (per-stage delta).

A row's ``violations`` is the share of draws whose true error rate among the answered items
exceeds alpha (with its binomial standard error); it must stay <= delta for the product's rows.
Prints a Markdown table (pasted into benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_engine.stats import risk_control  # noqa: E402
from judge_engine.stats.risk_control import CascadeFit  # noqa: E402
from tests.stats.calibration_populations import (  # noqa: E402
    Correlated,
    Levels,
    Linear,
    Population,
    Violations,
    violations,
)


def _highest_when_failing(fit: CascadeFit) -> list[float | None]:
    return [s.fit.threshold if s.fit.threshold is not None or s.fit.stopped_at is None
            else s.fit.stopped_at.threshold for s in fit.stages]


def _wald(errors: Any, items: Any, delta: float) -> np.ndarray:
    rate = np.asarray(errors, dtype=float) / np.asarray(items, dtype=float)
    return rate + NormalDist().inv_cdf(1 - delta) * np.sqrt(rate * (1 - rate) / np.asarray(items, dtype=float))


def row(name: str, population: Population, *, draws: int, n: int, risk: float, delta: float, rule: str = "bonferroni",
        flaw: str = "", read: Callable[[CascadeFit], list[float | None]] | None = None) -> str:
    started = time.perf_counter()
    exact = risk_control.clopper_pearson_upper
    if flaw == "normal approximation":
        risk_control.clopper_pearson_upper = _wald  # type: ignore[assignment]
    try:
        result: Violations = violations(population, draws=draws, n=n, risk=risk, delta=delta, rule=rule,  # type: ignore[arg-type]
                                        seed=zlib.crc32(repr((name, n, risk, delta, rule, flaw)).encode()), thresholds=read)
    finally:
        risk_control.clopper_pearson_upper = exact  # type: ignore[assignment]
    se = math.sqrt(max(result.rate * (1 - result.rate), 1e-12) / draws)
    verdict = "ok" if result.rate <= delta else ("flaw shown" if flaw or rule == "per_stage" else "VIOLATED")
    oracle = f"{4 * risk:.2f}" if isinstance(population, Linear) and population.floor == 0 else "-"
    return (f"| {name} | {flaw or rule} | {risk:g} | {delta:g} | {n:,} | {draws:,} | {result.rate:.3f} ± {se:.3f} "
            f"| {result.answering:.2f} | {result.mean_coverage:.3f} | {oracle} | {verdict} | "
            f"{time.perf_counter() - started:.1f} s |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=2000, help="draws per one-stage row (default 2,000)")
    parser.add_argument("--cascade-draws", type=int, default=1000, help="draws per cascade row (default 1,000)")
    parser.add_argument("--quick", action="store_true", help="a few rows, 300 draws each")
    args = parser.parse_args()
    draws, cascade_draws = (300, 300) if args.quick else (args.draws, args.cascade_draws)
    print("| population | rule or flaw | alpha | delta | n | draws | violations | answering | coverage "
          "| oracle coverage | | time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    one = Linear(slope=1.0)
    sizes = (500,) if args.quick else (200, 500, 2000)
    for risk in (0.05, 0.1, 0.15) if not args.quick else (0.1,):
        for delta in (0.05, 0.1) if not args.quick else (0.1,):
            for n in sizes:
                print(row("one stage", one, draws=draws, n=n, risk=risk, delta=delta), flush=True)
    cascade = Correlated()
    for risk in (0.1, 0.15, 0.2) if not args.quick else (0.15,):
        for n in (300, 500, 1000) if not args.quick else (500,):
            for rule in ("bonferroni", "per_stage"):
                print(row("cascade", cascade, draws=cascade_draws, n=n, risk=risk, delta=0.1, rule=rule), flush=True)
    worse = Linear(slope=1.0, floor=0.1)
    rare = Levels(levels=(0.99, 0.6), shares=(0.6, 0.4), errors=(0.0101, 0.3))
    edge = Levels(levels=(0.95, 0.6), shares=(0.55, 0.45), errors=(0.101, 0.45), stages=3)
    for name, population, n, risk, delta, flaw, rule, read in (
        ("worse than alpha", worse, 500, 0.1, 0.1, "", "bonferroni", None),
        ("worse than alpha", worse, 500, 0.1, 0.1, "highest threshold when failing", "bonferroni",
         _highest_when_failing),
        ("rare errors", rare, 1000, 0.01, 0.05, "", "bonferroni", None),
        ("rare errors", rare, 1000, 0.01, 0.05, "normal approximation", "bonferroni", None),
        ("three at the edge", edge, 1000, 0.1, 0.1, "", "bonferroni", None),
        ("three at the edge", edge, 1000, 0.1, 0.1, "", "per_stage", None),
    ):
        print(row(name, population, draws=draws, n=n, risk=risk, delta=delta, rule=rule, flaw=flaw, read=read),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
