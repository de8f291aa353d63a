"""The charts of ``stats --plots`` as drawn (issue 26, item 7), read back from matplotlib's own
artists: every text inside the image (no clipped colour-bar label or title), a count axis with
whole-number ticks, no heatmap row without a value, and every legend entry of the CDAT plane
drawn (a front of one model included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judge_engine.stats import plots
from judge_engine.stats.creativity import ListScore, summarize

pytestmark = pytest.mark.skipif(not plots.available(), reason="matplotlib is not installed")


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Each figure a chart saves, kept for reading back after it was written."""
    from judge_engine.stats import creativity_plots

    kept: list[Any] = []
    original = plots._save

    def save(fig: Any, plt: Any, path: Path) -> Path:
        written = original(fig, plt, path)  # laid out and written exactly as stats writes it
        kept.append(fig)
        return written

    monkeypatch.setattr(plots, "_save", save)
    monkeypatch.setattr(creativity_plots, "_save", save)
    return kept


def _inside(fig: Any) -> bool:
    """Whether everything ``fig`` draws (labels, titles, colour bars, legends) lies within the
    image: the box ``savefig(bbox_inches="tight")`` would crop to, against the figure's own."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # closed by the chart after saving: drawn again, as it was saved
    canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())  # inches
    width, height = fig.get_size_inches()
    slack = 0.02
    return bool(drawn.x0 >= -slack and drawn.y0 >= -slack and drawn.x1 <= width + slack and drawn.y1 <= height + slack)


def test_the_agreement_heatmap_has_every_label_inside_and_no_empty_row(figures: list[Any], tmp_path: Path) -> None:
    from judge_engine.stats.sections import Section

    rows = [{"temperature": 0.0, "judges": judges, "kendall": tau} for judges, tau in
            (("helpful-json ~ helpful-marker", 0.667), ("helpful-json ~ helpful-regex", 0.64),
             ("helpful-marker ~ helpful-regex", 0.789), ("all judges", float("nan")))]
    section = Section("judge_agreement", "Agreement between judges", ["temperature", "judges", "kendall"], rows)
    (chart,) = plots.run_charts([section], [], tmp_path)
    assert chart.written and chart.path.read_bytes()[:4] == b"\x89PNG"
    (fig,) = figures
    axes, colour_bar = fig.axes
    labels = [t.get_text() for t in axes.get_yticklabels()]
    # Kendall's tau compares two judges: the "all judges" row, which has none, is not an empty row.
    assert labels == ["helpful-json ~ helpful-marker", "helpful-json ~ helpful-regex", "helpful-marker ~ helpful-regex"]
    assert [t.get_text() for t in axes.texts] == ["0.667", "0.640", "0.789"]
    bar_labels = [t.get_text() for t in colour_bar.get_yticklabels() if t.get_text()]
    assert bar_labels and all(len(label.split(".")[-1]) == 2 for label in bar_labels)
    assert _inside(fig)  # the colour bar's labels, the title, the row labels: nothing cut


def test_distribution_counts_have_whole_number_ticks_and_a_bar_per_grade(figures: list[Any], tmp_path: Path) -> None:
    # A 1-5 grade with counts 2, 4, 0, 3, 3: matplotlib's default ticks on 0..4 are 0, 0.5, ... 4.
    grades = [1.0] * 2 + [2.0] * 4 + [4.0] * 3 + [5.0] * 3
    assert plots.distribution_chart({"helpful": {0.0: grades}, "other": {0.0: [0.5, 1.25, 2.0]}}, tmp_path / "d.png")
    (fig,) = figures
    for ax in fig.axes:
        ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    helpful = next(ax for ax in fig.axes if ax.get_title() == "helpful")
    (bars,) = helpful.patches
    xs = sorted({round(float(x), 2) for x, _ in bars.get_xy()})
    assert xs == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]  # one bin per grade, centred on it
    assert all(float(t).is_integer() for t in helpful.get_xticks())
    assert _inside(fig)


def test_every_entry_of_the_planes_legend_is_drawn_a_front_of_one_model_too(figures: list[Any],
                                                                             tmp_path: Path) -> None:
    from judge_engine.stats.creativity_plots import creativity_plane

    # "best" beats "worse" on both axes at T=0.5: the front is one model. At T=1.5 neither beats
    # the other: a front of two.
    lists = [ListScore(model, 0.5, n + s, a + s) for model, n, a in (("best", 75.0, 135.0), ("worse", 66.0, 126.0))
             for s in (-1.0, 0.0, 1.0)]
    lists += [ListScore(model, 1.5, n + s, a + s) for model, n, a in (("best", 70.0, 135.0), ("worse", 76.0, 126.0))
              for s in (-1.0, 0.0, 1.0)]
    creativity_plane(summarize(lists, random=None, common=None), random=None, common=None, path=tmp_path / "p.png")
    (fig,) = figures
    for ax, front in zip(fig.axes, (1, 2), strict=True):
        handles, labels = ax.get_legend_handles_labels()
        assert "Pareto front (models)" in labels
        for handle, label in zip(handles, labels, strict=True):
            lines = [handle] if hasattr(handle, "get_marker") else [handle.lines[0]]
            line = lines[0]
            # Something is drawn: a marker at each point, or a line through two or more.
            visible = line.get_marker() not in ("None", None, "") or (
                len(line.get_xdata()) >= 2 and line.get_linestyle() not in ("None", ""))
            assert visible, label
        (pareto,) = [h for h, lab in zip(handles, labels, strict=True) if lab == "Pareto front (models)"]
        assert len(pareto.get_xdata()) == front
    assert _inside(fig)
