"""System-level estimates on LitEval's real data (issue 33): judge_engine.estimate and label_plan
against the authors' ppi_py and the human labels alone, per system.

LitEval's ``metric_df.csv`` (../shared/data/litmt_eval) holds 10 systems' literary translations,
about 200 segments each, with the human MQM score and several metrics. The true human mean of a
system is the mean of all its MQM scores; each draw hides all but ``--labels`` of them per system
(uniformly at random), asks for a 1 - α interval, and counts whether it covers the truth.

    python benchmarks/estimates.py                      # GEMBA-MQM literary, GEMBA-MQM, Prometheus; 100 draws
    python benchmarks/estimates.py --draws 400 --labels 30 --alpha 0.1

Two parts:

1. **Uniform labels**, per judge and system: coverage and mean width of judge_engine.estimate
   (PPI++), of ``ppi_py.ppi_mean_ci`` on the very same draws, and of the labels alone; the mean λ
   and effective labels.
2. **Labels drawn with label_plan's probabilities** (budget = ``--labels`` x systems, split by
   system), against uniform labelling at the same budget: with no uncertainty (a uniform plan),
   and with the disagreement of two metrics as the uncertainty (|z(GEMBA) - z(COMET-XXL)| within the
   system: two judges that disagree on an item are unsure of it).

Needs pandas and ppi-python (the dev extra).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data" / "litmt_eval" / "metric_df.csv"
JUDGES = {"gemba_all_literary": "GEMBA-MQM literary", "gemba_all_orig": "GEMBA-MQM", "prometheus": "Prometheus"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--labels", type=int, default=30, help="human labels per system (default 30)")
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import pandas as pd
    from ppi_py import ppi_mean_ci

    from judge_engine import estimate, label_plan

    if not args.data.is_file():
        print(f"{args.data}: not found (../shared/data beside the checkout)", file=sys.stderr)
        return 2
    frame = pd.read_csv(args.data)
    started = time.perf_counter()
    print(f"LitEval metric_df.csv: {len(frame):,} rows, {frame['model_human'].nunique()} systems; "
          f"{args.labels} labels per system, {args.draws} draws, alpha {args.alpha}\n")
    for column, name in JUDGES.items():
        data = frame.dropna(subset=["mqm_score", column])
        systems = {s: (g["mqm_score"].to_numpy(float), g[column].to_numpy(float)) for s, g in data.groupby("model_human")}
        rng = np.random.default_rng(args.seed)
        stats: dict[str, dict[str, list[float]]] = {s: {k: [] for k in ("hit", "ref_hit", "alone_hit", "width",
                                                                         "ref_width", "alone_width", "lam", "eff")}
                                                    for s in systems}
        for _ in range(args.draws):
            rows, ref = [], {}
            for s, (y, f) in systems.items():
                mask = np.zeros(y.size, dtype=bool)
                mask[rng.choice(y.size, args.labels, replace=False)] = True
                lo, hi = ppi_mean_ci(y[mask], f[mask], f[~mask], alpha=args.alpha)
                ref[s] = (float(np.ravel(lo)[0]), float(np.ravel(hi)[0]))
                rows += [{"item": f"{s}/{i}", "prediction": f[i], "label": y[i] if mask[i] else None, "group": s}
                         for i in range(y.size)]
            for g in estimate(rows, alpha=args.alpha, by="group")["groups"]:
                s, truth = g["group"], systems[g["group"]][0].mean()
                cell = stats[s]
                cell["hit"].append(g["ci"][0] <= truth <= g["ci"][1])
                cell["ref_hit"].append(ref[s][0] <= truth <= ref[s][1])
                cell["alone_hit"].append(g["classical"]["ci"][0] <= truth <= g["classical"]["ci"][1])
                cell["width"].append(g["ci"][1] - g["ci"][0])
                cell["ref_width"].append(ref[s][1] - ref[s][0])
                cell["alone_width"].append(g["classical"]["ci"][1] - g["classical"]["ci"][0])
                cell["lam"].append(g["lambda"])
                cell["eff"].append(g["effective_labels"] or float("nan"))
        corr = {s: float(np.corrcoef(y, f)[0, 1]) for s, (y, f) in systems.items()}
        print(f"## {name} ({column}) as the judge\n")
        print("| system | items | r(judge, human) | coverage | ppi_py | alone | width | ppi_py | alone | "
              "width/alone | λ | effective labels |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        every: dict[str, list[float]] = {k: [] for k in next(iter(stats.values()))}
        for s, cell in stats.items():
            for k, v in cell.items():
                every[k] += v
            print(_row(s, systems[s][0].size, corr[s], cell))
        print(_row("**all**", sum(y.size for y, _ in systems.values()), float("nan"), every) + "\n")
    _active(frame, args, estimate, label_plan)
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


def _row(name: str, items: int, corr: float, cell: dict[str, list[float]]) -> str:
    m = {k: float(np.nanmean(v)) for k, v in cell.items()}
    r = "" if np.isnan(corr) else f"{corr:.2f}"
    return (f"| {name} | {items} | {r} | {m['hit']:.3f} | {m['ref_hit']:.3f} | {m['alone_hit']:.3f} | "
            f"{m['width']:.3f} | {m['ref_width']:.3f} | {m['alone_width']:.3f} | {m['width'] / m['alone_width']:.3f} | "
            f"{m['lam']:.2f} | {m['eff']:.1f} |")


def _active(frame: object, args: argparse.Namespace, estimate: object, label_plan: object) -> None:
    data = frame.dropna(subset=["mqm_score", "gemba_all_literary", "comet_xxl"]).reset_index(drop=True)  # type: ignore[attr-defined]
    z = data.groupby("model_human")[["gemba_all_literary", "comet_xxl"]].transform(lambda c: (c - c.mean()) / c.std())
    disagreement = (z["gemba_all_literary"] - z["comet_xxl"]).abs().to_numpy()
    truths = data.groupby("model_human")["mqm_score"].mean()
    labels = data["mqm_score"].to_numpy(float)
    base = [{"item": str(i), "prediction": float(r.gemba_all_literary), "group": r.model_human}
            for i, r in enumerate(data.itertuples())]
    budget = args.labels * data["model_human"].nunique()
    print(f"## Labels drawn with label_plan's probabilities (budget {budget}, by system; GEMBA-MQM literary)\n")
    print("| uncertainty | coverage | width | uniform's coverage | uniform's width | width / uniform |")
    print("|---|---:|---:|---:|---:|---:|")
    for title, extra in (("none (a uniform plan)", None), ("two metrics' disagreement", disagreement)):
        rows = [{**r, "uncertainty": float(extra[i])} if extra is not None else r for i, r in enumerate(base)]
        rng = np.random.default_rng(args.seed)
        hits, widths, u_hits, u_widths = [], [], [], []
        for draw in range(args.draws):
            plan = label_plan(rows, budget, by="group", seed=args.seed * 100_003 + draw)  # type: ignore[operator]
            out = estimate([{**r, "label": labels[i] if r["selected"] else None} for i, r in enumerate(plan)],  # type: ignore[operator]
                           alpha=args.alpha, by="group")
            uniform_rows = []
            for s, g in data.groupby("model_human"):
                chosen = set(rng.choice(g.index.to_numpy(), args.labels, replace=False).tolist())
                uniform_rows += [{"item": str(i), "prediction": float(g.at[i, "gemba_all_literary"]),
                                  "label": labels[i] if i in chosen else None, "group": s} for i in g.index]
            uniform = {g["group"]: g for g in estimate(uniform_rows, alpha=args.alpha, by="group")["groups"]}  # type: ignore[operator]
            for g in out["groups"]:
                truth, u = truths[g["group"]], uniform[g["group"]]
                hits.append(g["ci"][0] <= truth <= g["ci"][1])
                widths.append(g["ci"][1] - g["ci"][0])
                u_hits.append(u["ci"][0] <= truth <= u["ci"][1])
                u_widths.append(u["ci"][1] - u["ci"][0])
        print(f"| {title} | {np.mean(hits):.3f} | {np.mean(widths):.3f} | {np.mean(u_hits):.3f} | "
              f"{np.mean(u_widths):.3f} | {np.mean(widths) / np.mean(u_widths):.3f} |")
    print()


if __name__ == "__main__":
    sys.exit(main())
