"""PNG charts from report sections (matplotlib, an optional extra: imported lazily).

Each function writes one file and returns its path, or returns None and writes nothing when its
data holds no finite value (a chart of nothing would look like a result). Call :func:`available`
first to find out whether matplotlib is installed. Figures are laid out by matplotlib's
constrained layout, so labels, titles and colour bars are inside the image, never cut at its edge;
a count axis has whole-number ticks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from judge_engine.stats.runs import Outcome
    from judge_engine.stats.sections import Section

INSTALL_HINT = "pip install 'judge-engine[plots]'"
"""How to get matplotlib, the ``plots`` extra."""


def available() -> bool:
    """True when matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):  # None, text
        return False


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def integer_ticks(axis: Any) -> None:
    """Whole-number ticks on ``axis`` (a count: 2.5 scores do not happen)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _bins(values: Sequence[float]) -> Any:
    """Histogram bins: one per whole number, centred on it, when every value is whole (a 1-5
    grade gets five bars, not bins straddling 3.5); else up to 30 equal bins."""
    if all(float(v).is_integer() for v in values) and max(values) - min(values) <= 100:
        low, high = int(min(values)), int(max(values))
        return [k - 0.5 for k in range(low, high + 2)]
    return min(30, max(5, len(set(values))))


def consistency_chart(rows: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Mean pairwise Spearman and |delta| shares against temperature, one line per judge
    (None: no finite value to draw)."""
    keys = ("mean_spearman", "share_small", "share_large")
    if not any(_finite(r.get(k)) for r in rows for k in keys):
        return None
    plt = _pyplot()
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        label = r["judge"] + (f" [{r['variant']}]" if r.get("variant") else "")
        series[label].append(r)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
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


def distribution_chart(scores: dict[str, dict[float, list[float]]], path: Path) -> Path | None:
    """Histograms of scores: one panel per judge with finite scores, one outline per
    temperature (None: no judge has one)."""
    finite = {
        judge: {t: f for t, values in by_temp.items() if (f := [v for v in values if _finite(v)])}
        for judge, by_temp in scores.items()
    }
    judges = sorted(j for j, by_temp in finite.items() if by_temp)
    if not judges:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(judges), figsize=(4 * len(judges), 3.5), layout="constrained")
    axes = axes if hasattr(axes, "__len__") else [axes]
    for ax, judge in zip(axes, judges, strict=True):
        for temp, values in sorted(finite[judge].items()):
            ax.hist(values, bins=_bins(values), histtype="step", label=f"T={temp:g}")
        ax.set(title=judge, xlabel="score", ylabel="count")
        integer_ticks(ax.yaxis)
        if all(float(v).is_integer() for values in finite[judge].values() for v in values):
            integer_ticks(ax.xaxis)  # whole-number scores: a tick per grade, not 2.5
        ax.legend(fontsize="small")
    return _save(fig, plt, path)


def heatmap(
    rows: Sequence[dict[str, Any]], *, row_key: str, col_key: str, value_key: str, path: Path,
    title: str,
) -> Path | None:  # fmt: skip
    """A labelled heatmap of ``value_key`` over ``row_key`` x ``col_key`` (e.g. tau per pair);
    None when no row has a finite value."""
    if not any(_finite(r.get(value_key)) for r in rows):
        return None
    plt = _pyplot()
    row_labels = list(dict.fromkeys(str(r[row_key]) for r in rows))
    col_labels = list(dict.fromkeys(str(r[col_key]) for r in rows))
    grid = [[math.nan] * len(col_labels) for _ in row_labels]
    for r in rows:
        value = r.get(value_key)
        grid[row_labels.index(str(r[row_key]))][col_labels.index(str(r[col_key]))] = (
            math.nan if value is None else float(value)
        )
    # Wide enough for the row labels (~0.09 in a character), the cells, the colour bar and the title.
    label_in = 0.09 * max(len(label) for label in row_labels)
    width = max(label_in + 1.2 * len(col_labels) + 1.8, 0.09 * len(title) + 1.0)
    fig, ax = plt.subplots(figsize=(width, 0.5 * len(row_labels) + 2), layout="constrained")
    image = ax.imshow(grid, cmap="Blues", aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(row_labels)), row_labels)
    for i, line in enumerate(grid):
        for j, v in enumerate(line):
            if math.isfinite(v):
                ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize="small",
                        color="white" if image.norm(v) > 0.6 else "black")  # legible on the dark cells
    fig.colorbar(image, ax=ax, format="%.2f")
    ax.set(xlabel=col_key, ylabel=row_key)
    fig.suptitle(title)  # over the whole figure: long row labels leave the axes too narrow for it
    return _save(fig, plt, path)


def _save(fig: Any, plt: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


class Chart(NamedTuple):
    """One chart a command meant to draw."""

    path: Path
    written: bool
    why_not: str = ""
    """Why nothing was written (empty when ``written``)."""


def _chart(path: Path | None, intended: Path, why_not: str) -> Chart:
    return Chart(intended, True) if path else Chart(intended, False, why_not)


def run_charts(
    sections: Sequence[Section], outcomes: Iterable[Outcome], plot_dir: Path
) -> list[Chart]:
    """The charts of ``stats RUN_DIR``: consistency, score distributions, agreement between
    judges, each drawn only when its section has rows (an absent section gets no chart)."""
    shown = {s.name: s for s in sections if not s.absent}
    charts = []
    if "consistency" in shown:
        path = plot_dir / "consistency.png"
        drawn = consistency_chart(shown["consistency"].rows, path)
        charts.append(_chart(drawn, path, "every consistency figure is undefined"))
    if "distribution" in shown:
        scores: dict[str, dict[float, list[float]]] = {}
        for o in outcomes:
            if o.status == "scored":
                scores.setdefault(o.judge, {}).setdefault(o.temperature, []).append(o.score)
        path = plot_dir / "distributions.png"
        charts.append(_chart(distribution_chart(scores, path), path, "no finite score"))
    if "judge_agreement" in shown:
        path = plot_dir / "judge_agreement.png"
        # Kendall's tau compares two judges: the table's "all judges" row has none to draw.
        pairs = [r for r in shown["judge_agreement"].rows if r["judges"] != "all judges"]
        drawn = heatmap(pairs, row_key="judges", col_key="temperature", value_key="kendall", path=path,
                        title="Kendall's tau between two judges (item means)")
        charts.append(_chart(drawn, path, "every Kendall tau between judges is undefined"))
    return charts


def meta_charts(sections: Sequence[Section], plot_dir: Path) -> list[Chart]:
    """The charts of ``meta``: correlation and adequacy heatmaps, for sections with rows."""
    charts = []
    for s in sections:
        if s.absent:
            continue
        if s.name == "correlation":
            rows = [{**r, "pair": f"{r['human']} ~ {r['judge']}"}
                    for r in s.rows if r["level"] == "segment"]  # fmt: skip
            method = next(m for m in ("kendall", "spearman", "pearson") if m in s.columns)
            path = plot_dir / "correlation.png"
            drawn = heatmap(rows, row_key="group", col_key="pair", value_key=method, path=path,
                            title=f"{method} with human scores")  # fmt: skip
            charts.append(_chart(drawn, path, f"every segment-level {method} is undefined"))
        if s.name == "adequacy":
            for versus in ("top", "other"):
                rows = [r for r in s.rows if r["versus"] == versus]
                path = plot_dir / f"adequacy_{versus}.png"
                drawn = heatmap(rows, row_key="group", col_key="metric", value_key="rate",
                                path=path, title=f"human preferred over {versus} systems")  # fmt: skip
                why = f"no item compares the human translation with {versus} systems"
                charts.append(_chart(drawn, path, why))
    return charts
