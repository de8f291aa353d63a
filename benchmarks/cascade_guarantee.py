"""The cascade guarantee (issue 36) against the stage guarantee, on the Trust-or-Escalate authors'
real judgments and on synthetic populations whose true error rates are known.

    python benchmarks/cascade_guarantee.py --authors DIR [--splits 100] [--seed 2026] [--draws 200] [--quick]
    python benchmarks/cascade_guarantee.py --authors DIR --seeds 1,2,3,4,5

``DIR`` holds the authors' ``mistral-7b-instruct.calibration.jsonl``,
``gpt-3.5-turbo.calibration.jsonl`` and ``gpt-4-turbo.calibration.jsonl`` (the ``result/``
folder of github.com/jaehunjung1/cascaded-selective-evaluation: 500 Chatbot Arena pairs, each
judged by the three models; no licence file, so they are read from where you put them and never
copied here). Without it, the real-data table is skipped.

**Real data.** 100 random splits into 250 calibration items (labelled) and 250 items to judge
(their labels hidden from calibration: ``label: None`` rows, as a run's own items are); alpha
0.15, delta 0.1; costs 1 / 5 / 100 per item (Mistral-7B, GPT-3.5, GPT-4). Each rule's thresholds
are applied to the 250 items to judge: coverage is the share answered there, cost the expected
cost per item over asking GPT-4 about every item (a stage not asked costs nothing), error the
share of answered items that disagree with the human label (over the splits that answer).

**Synthetic.** ``--draws`` draws of 500 labelled and 500 unlabelled items from a correlated
three-stage cascade (tests/stats/calibration_populations.py ``Correlated``) and from three
judges at the edge of alpha (``SLOPE`` in tests/stats/test_whole_cascade_guarantee.py): the
share of draws whose true error rate among the answered items exceeds alpha (must stay <= delta
plus sampling slack for a valid rule), and the mean coverage.

Rules: ``stage`` (each stage at delta / 3, the default of the Python call), ``GPT-4 alone`` (the
stage rule with one stage), ``cascade`` (the product's rule: three folds, each a pilot once), and
the alternatives tried: one pilot fold (no cross-fitting), 2 and 4 folds, no cost limit, a
label-free path (one threshold shared by every stage, stepped down the unlabelled items'
quantiles, tested on all the labels at the full delta), and the flaw (a path learned on the
labels that test it).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import judge_engine  # noqa: E402
from judge_engine.stats import whole_cascade as whole  # noqa: E402
from judge_engine.stats.risk_control import calibrate_cascade, clopper_pearson_upper, start_size  # noqa: E402
from tests.stats.calibration_populations import Correlated, slack, truth  # noqa: E402
from tests.stats.test_whole_cascade_guarantee import SLOPE  # noqa: E402

MODELS = ("mistral-7b-instruct", "gpt-3.5-turbo", "gpt-4-turbo")
COSTS = np.array([1.0, 5.0, 100.0])
RISK, DELTA = 0.15, 0.1
Rule = Callable[[np.ndarray, np.ndarray, list[str], np.ndarray], tuple[float | None, ...]]


def load(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Confidence (items x 3) and error (items x 3) from the authors' files: the prediction is
    the output with the larger probability, the confidence that probability, the label the
    human's (1: A, 2: B)."""
    probs, label = [], None
    for model in MODELS:
        rows = [json.loads(line) for line in (folder / f"{model}.calibration.jsonl").read_text().splitlines() if line]
        probs.append([r["probs"] for r in rows])
        label = np.array([int(r["preferences"]["human"]) - 1 for r in rows])
    p = np.asarray(probs, dtype=float)  # models x items x 2
    confidence = p.max(axis=2).T
    error = (p.argmax(axis=2).T != label[:, None])  # type: ignore[index]
    return confidence, error


# --- the rules ----------------------------------------------------------------------------------


def stage_rule(c: np.ndarray, e: np.ndarray, keys: list[str], u: np.ndarray) -> tuple[float | None, ...]:
    fit = calibrate_cascade(c, e, risk=RISK, delta=DELTA)
    return tuple(s.fit.threshold for s in fit.stages)


def gpt4_alone(c: np.ndarray, e: np.ndarray, keys: list[str], u: np.ndarray) -> tuple[float | None, ...]:
    fit = calibrate_cascade(c[:, 2:], e[:, 2:], risk=RISK, delta=DELTA)
    return (None, None, fit.stages[0].fit.threshold)


def product(c: np.ndarray, e: np.ndarray, keys: list[str], u: np.ndarray) -> tuple[float | None, ...]:
    """The public call, as a user makes it: rows of labelled items and of items to judge."""
    names = ["mistral", "gpt35", "gpt4"]
    rows: list[dict[str, Any]] = [{"item": k, "stage": names[s], "prediction": "A" if e[i, s] else "B", "confidence": float(c[i, s]),
             "label": "B"} for i, k in enumerate(keys) for s in range(3)]
    rows += [{"item": f"u{i}", "stage": names[s], "prediction": "B", "confidence": float(u[i, s]), "label": None}
             for i in range(len(u)) for s in range(3)]
    document = judge_engine.calibrate(rows, stages=names, risk=RISK, delta=DELTA, guarantee="cascade",
                                      costs=dict(zip(names, COSTS.tolist(), strict=True)))
    return tuple(s["threshold"] for s in document["stages"])


def folds(n: int, max_cost: float | None = 0.5) -> Rule:
    def rule(c: np.ndarray, e: np.ndarray, keys: list[str], u: np.ndarray) -> tuple[float | None, ...]:
        return whole.calibrate_whole(c, e, keys, risk=RISK, delta=DELTA, unlabelled=u, costs=COSTS.tolist(), folds=n,
                                     max_cost=max_cost).thresholds
    return rule


def one_pilot(c: np.ndarray, e: np.ndarray, keys: list[str], u: np.ndarray) -> tuple[float | None, ...]:
    """One fold of three as the pilot, the other two testing at the full delta (no cross-fitting)."""
    fold = whole.fold_of(keys)
    fit = whole._fold(0, c[fold == 0], e[fold == 0], c[fold != 0], e[fold != 0], u, COSTS, 0.5, risk=RISK,
                      level=DELTA, start=start_size(RISK, DELTA, 30))
    return fit.passed.thresholds if fit.passed else (None, None, None)


def label_free(c: np.ndarray, e: np.ndarray, keys: list[str], u: np.ndarray) -> tuple[float | None, ...]:
    """One threshold shared by every stage, down the unlabelled items' quantiles, within the cost
    limit, tested on every label at the full delta (valid: the path reads no label)."""
    levels = np.unique(np.quantile(u.ravel(), np.linspace(0, 1, 201)))[::-1]
    last: tuple[float | None, ...] = (None, None, None)
    for t in levels:
        thresholds = np.full(3, t)
        if whole.cost_per_item(thresholds, whole.answered_by(thresholds, u), COSTS) > 0.5 * COSTS[-1]:
            continue
        who = whole.answered_by(thresholds, c)
        taken = who >= 0
        if taken.sum() < 30:
            continue
        if clopper_pearson_upper(int(e[taken, who[taken]].sum()), int(taken.sum()), DELTA) > RISK:
            break
        last = (float(t),) * 3
    return last


def on_the_test_labels(c: np.ndarray, e: np.ndarray, keys: list[str], u: np.ndarray) -> tuple[float | None, ...]:
    """The flaw: the path learned on the labels that test it."""
    fit = whole._fold(0, c, e, c, e, u, COSTS, 0.5, risk=RISK, level=DELTA, start=start_size(RISK, DELTA, 30))
    return fit.passed.thresholds if fit.passed else (None, None, None)


RULES: dict[str, Rule] = {
    "stage (delta / 3 per stage)": stage_rule, "GPT-4 alone (stage rule)": gpt4_alone,
    "**cascade (product: 3 folds)**": product, "one pilot fold, no cross-fitting": one_pilot,
    "2 folds": folds(2), "4 folds": folds(4), "3 folds, no cost limit": folds(3, None),
    "label-free shared threshold": label_free, "flaw: path on the test labels": on_the_test_labels,
}


# --- real data ----------------------------------------------------------------------------------


def real(folder: Path, splits: int, seed: int = 2026) -> None:
    confidence, error = load(folder)
    n = len(confidence)
    keys = [f"pair-{i}" for i in range(n)]
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(n) for _ in range(splits)]
    print(f"\n### The authors' {n} judgments, {splits} splits of {n // 2} + {n - n // 2} (seed {seed}; alpha {RISK}, "
          f"delta {DELTA})\n")
    print("| rule | coverage | cost / GPT-4 on all | answers in | error on answered | s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rule in RULES.items():
        started = time.perf_counter()
        covered, costs, errors, answering = [], [], [], 0
        for order in orders:
            cal, test = order[: n // 2], order[n // 2:]
            thresholds = np.array([math.nan if t is None else t for t in
                                   rule(confidence[cal], error[cal], [keys[i] for i in cal], confidence[test])])
            who = whole.answered_by(thresholds, confidence[test])
            taken = who >= 0
            covered.append(float(taken.mean()))
            costs.append(whole.cost_per_item(thresholds, who, COSTS) / COSTS[-1] if taken.any() else 0.0)
            if taken.any():
                answering += 1
                errors.append(float(error[test][taken, who[taken]].mean()))
        print(f"| {name} | {np.mean(covered):.3f} | {np.mean(costs):.3f} | {answering / splits:.0%} | "
              f"{np.mean(errors) if errors else math.nan:.3f} | {time.perf_counter() - started:.0f} |", flush=True)


def across_seeds(folder: Path, splits: int, seeds: list[int]) -> None:
    """The three rules a user compares, over several sets of splits: how much of the spread is
    the splits'."""
    confidence, error = load(folder)
    n = len(confidence)
    keys = [f"pair-{i}" for i in range(n)]
    print(f"\n### Across sets of {splits} splits (coverage / cost over GPT-4 on all)\n")
    print("| seed | stage | GPT-4 alone | cascade | cascade / stage coverage |")
    print("|---:|---:|---:|---:|---:|")
    for seed in seeds:
        rng = np.random.default_rng(seed)
        orders = [rng.permutation(n) for _ in range(splits)]
        cells, coverages = [], []
        for rule in (stage_rule, gpt4_alone, product):
            covered, costs = [], []
            for order in orders:
                cal, test = order[: n // 2], order[n // 2:]
                thresholds = np.array([math.nan if t is None else t for t in
                                       rule(confidence[cal], error[cal], [keys[i] for i in cal], confidence[test])])
                who = whole.answered_by(thresholds, confidence[test])
                covered.append(float((who >= 0).mean()))
                costs.append(whole.cost_per_item(thresholds, who, COSTS) / COSTS[-1] if (who >= 0).any() else 0.0)
            coverages.append(float(np.mean(covered)))
            cells.append(f"{np.mean(covered):.3f} / {np.mean(costs):.3f}")
        print(f"| {seed} | {' | '.join(cells)} | {coverages[2] / coverages[0]:.1f} |", flush=True)


# --- synthetic ----------------------------------------------------------------------------------


def synthetic(draws: int) -> None:
    print(f"\n### Synthetic: {draws} draws of 500 labelled + 500 unlabelled items (alpha {RISK}, delta {DELTA}; "
          f"a valid rule stays <= {DELTA + slack(DELTA, draws):.3f})\n")
    print("| population | rule | violations | answers in | coverage | s |")
    print("|---|---|---:|---:|---:|---:|")
    for label, population in (("correlated cascade", Correlated()), ("three at the edge", SLOPE)):
        for name, rule in RULES.items():
            if rule is product:  # the same rule as 3 folds through the rows: the stats call is faster here
                rule = folds(3)
            started = time.perf_counter()
            rng = np.random.default_rng(36)
            chosen = []
            for draw in range(draws):
                c, e = population.draw(rng, 500)
                u = population.draw(rng, 500)[0]
                thresholds = rule(c, e, [f"d{draw}-{i}" for i in range(500)], u)
                chosen.append([math.nan if t is None else t for t in thresholds])
            risks, coverage = truth(population, np.asarray(chosen, dtype=float))
            answering = ~np.isnan(risks)
            rate = float((risks[answering] > RISK).sum() / draws)
            print(f"| {label} | {name} | {rate:.3f} | {answering.mean():.0%} | {coverage.mean():.3f} | "
                  f"{time.perf_counter() - started:.0f} |", flush=True)


def sizes(draws: int) -> None:
    """Coverage and cost against the calibration set's size, on the correlated cascade."""
    print(f"\n### Calibration set size: the correlated cascade, {draws} draws each (500 unlabelled items; cost: of "
          f"the last stage alone, costs 1 / 5 / 100)\n")
    print("| labelled items | stage: coverage | stage: cost | cascade: coverage | cascade: cost | cascade: violations |")
    print("|---:|---:|---:|---:|---:|---:|")
    population = Correlated()
    held = population._held()[0].astype(float)[:20_000]
    for n in (100, 200, 500, 1000):
        rng = np.random.default_rng(n)
        rows: dict[str, list[list[float]]] = {"stage": [], "cascade": []}
        for draw in range(draws):
            c, e = population.draw(rng, n)
            u = population.draw(rng, 500)[0]
            keys = [f"d{draw}-{i}" for i in range(n)]
            for name, rule in (("stage", stage_rule), ("cascade", folds(3))):
                rows[name].append([math.nan if t is None else t for t in rule(c, e, keys, u)])
        cells = []
        for name in ("stage", "cascade"):
            chosen = np.asarray(rows[name], dtype=float)
            risks, coverage = truth(population, chosen)
            cost = np.mean([whole.cost_per_item(t, whole.answered_by(t, held), COSTS) / COSTS[-1]
                            if not np.isnan(t).all() else 0.0 for t in chosen])
            cells += [f"{coverage.mean():.3f}", f"{cost:.3f}"]
            if name == "cascade":
                cells.append(f"{float((risks[~np.isnan(risks)] > RISK).sum() / draws):.3f}")
        print(f"| {n:,} | " + " | ".join(cells) + " |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--authors", type=Path, help="the authors' result/ folder (see above)")
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026, help="the real data's splits (default 2026)")
    parser.add_argument("--seeds", help="instead of the tables: stage, GPT-4 alone and cascade over these sets of "
                                        "splits (e.g. 1,2,3)")
    parser.add_argument("--quick", action="store_true", help="20 splits and 40 draws")
    args = parser.parse_args()
    splits, draws = (20, 40) if args.quick else (args.splits, args.draws)
    if args.seeds and args.authors is not None:
        across_seeds(args.authors, splits, [int(x) for x in args.seeds.split(",")])
        return 0
    if args.authors is not None:
        if not all((args.authors / f"{m}.calibration.jsonl").exists() for m in MODELS):
            print(f"{args.authors}: no {', '.join(m + '.calibration.jsonl' for m in MODELS)}", file=sys.stderr)
            return 2
        real(args.authors, splits, args.seed)
    else:
        print("no --authors folder: the real-data table is skipped", file=sys.stderr)
    synthetic(draws)
    sizes(max(draws // 2, 20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
