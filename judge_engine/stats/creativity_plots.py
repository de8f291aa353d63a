"""The appropriateness-novelty plane of a CDAT run (matplotlib, imported lazily through
:mod:`judge_engine.stats.plots`; call ``plots.available()`` first)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from judge_engine.stats.creativity import ModelSummary, Point, baseline_mean
from judge_engine.stats.plots import _pyplot, _save


def creativity_plane(summaries: Sequence[ModelSummary], *, random: Sequence[Point] | None,
                     common: Sequence[Point] | None, path: Path,
                     title: str = "CDAT: appropriateness and novelty") -> Path:
    """One panel per temperature: the baselines' lists (faint) and means (diamonds), the line
    through the two means (the trivial trade-off the elbow distance is measured from), each model's
    mean with its 95% intervals, and the Pareto front of the models (each model on it ringed, the
    rings joined by a dashed line when there are two or more; the baselines are drawn, not
    candidates). A baseline that is None is left out (and the line with it)."""
    plt = _pyplot()
    panels: list[float | None] = [*sorted({s.temperature for s in summaries})] or [None]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.5), squeeze=False, layout="constrained")
    baselines = [(name, pts, colour) for name, pts, colour in
                 (("Random", random, "tab:gray"), ("Common", common, "tab:brown")) if pts]
    means = {name: baseline_mean(pts) for name, pts, _ in baselines}
    for ax, temperature in zip(axes[0], panels, strict=True):
        rows = [s for s in summaries if s.temperature == temperature]
        for name, pts, colour in baselines:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=6, alpha=0.15, color=colour, edgecolors="none")
            ax.scatter(*means[name], marker="D", s=70, color=colour, edgecolors="black", label=name, zorder=3)
        if len(means) == 2:
            ax.axline(means["Common"], means["Random"], ls=":", color="black", lw=1, label="Common-Random line")
        for row in rows:
            ax.errorbar(row.appropriateness.mean, row.novelty.mean, fmt="o", ms=7, capsize=3, zorder=4,
                        xerr=[[row.appropriateness.mean - row.appropriateness.low], [row.appropriateness.high - row.appropriateness.mean]],
                        yerr=[[row.novelty.mean - row.novelty.low], [row.novelty.high - row.novelty.mean]],
                        label=f"{row.model}{'' if row.gate is None or row.gate.passed else ' (gate: fail)'}")
        front = sorted(((r.appropriateness.mean, r.novelty.mean) for r in rows if r.pareto), key=lambda p: p[0])
        # Ringed, so that a front of one model is drawn too (a dashed line through one point is
        # not), and its legend entry points at something.
        ax.plot([p[0] for p in front], [p[1] for p in front], ls="--", color="black", lw=1.5, marker="o", ms=16,
                mfc="none", mec="black", mew=1.5, zorder=5, label="Pareto front (models)")
        ax.set(xlabel="appropriateness", ylabel="novelty",
               title=title if temperature is None else f"{title} (T={temperature:g})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="lower left")
    return _save(fig, plt, path)
