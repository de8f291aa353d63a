"""PNG charts from report sections (matplotlib, an optional extra: imported lazily).

Each function writes one file and returns its path. Call :func:`available` first to find out
whether matplotlib is installed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def available() -> bool:
    """True when matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def consistency_chart(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Mean pairwise Spearman and |delta| shares against temperature, one line per judge."""
    plt = _pyplot()
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        label = r["judge"] + (f" [{r['variant']}]" if r.get("variant") else "")
        series[label].append(r)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for label, rs in series.items():
        rs = sorted(rs, key=lambda r: r["temperature"])
        temps = [r["temperature"] for r in rs]
        left.plot(temps, [r["mean_spearman"] for r in rs], marker="o", label=label)
        right.plot(temps, [r["share_small"] for r in rs], marker="o", label=f"{label} small")
        right.plot(
            temps, [r["share_large"] for r in rs], marker="x", ls="--", label=f"{label} large"
        )
    left.set(xlabel="temperature", ylabel="mean pairwise Spearman", title="Repeat correlation")
    right.set(xlabel="temperature", ylabel="share of pairs", title="|delta| between repeats")
    left.legend(fontsize="small")
    right.legend(fontsize="small")
    return _save(fig, plt, path)


def distribution_chart(scores: dict[str, dict[float, list[float]]], path: Path) -> Path:
    """Histograms of scores: one panel per judge, one outline per temperature."""
    plt = _pyplot()
    judges = sorted(scores)
    fig, axes = plt.subplots(1, max(1, len(judges)), figsize=(4 * max(1, len(judges)), 3.5))
    axes = axes if hasattr(axes, "__len__") else [axes]
    for ax, judge in zip(axes, judges, strict=False):
        for temp, values in sorted(scores[judge].items()):
            finite = [v for v in values if math.isfinite(v)]
            if finite:
                ax.hist(finite, bins=min(30, max(5, len(set(finite)))), histtype="step",
                        label=f"T={temp:g}")  # fmt: skip
        ax.set(title=judge, xlabel="score", ylabel="count")
        ax.legend(fontsize="small")
    return _save(fig, plt, path)


def heatmap(
    rows: Sequence[dict[str, Any]], *, row_key: str, col_key: str, value_key: str, path: Path,
    title: str,
) -> Path:  # fmt: skip
    """A labelled heatmap of ``value_key`` over ``row_key`` x ``col_key`` (e.g. tau per pair)."""
    plt = _pyplot()
    row_labels = list(dict.fromkeys(str(r[row_key]) for r in rows))
    col_labels = list(dict.fromkeys(str(r[col_key]) for r in rows))
    grid = [[math.nan] * len(col_labels) for _ in row_labels]
    for r in rows:
        value = r.get(value_key)
        grid[row_labels.index(str(r[row_key]))][col_labels.index(str(r[col_key]))] = (
            math.nan if value is None else float(value)
        )
    fig, ax = plt.subplots(figsize=(1.2 * len(col_labels) + 3, 0.5 * len(row_labels) + 2))
    image = ax.imshow(grid, cmap="Blues", aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(row_labels)), row_labels)
    for i, line in enumerate(grid):
        for j, v in enumerate(line):
            if math.isfinite(v):
                ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize="small")
    fig.colorbar(image, ax=ax)
    ax.set_title(title)
    return _save(fig, plt, path)


def _save(fig: Any, plt: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
