"""``stats --plots`` and ``meta --plots`` on real runs (every example, with ``--demo``): no
traceback, no empty table, every absent section explained once, every plot written named, and no
plot drawn from empty or NaN-only data (issue 13, item 9)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.protocols.embeddings import minilm_problem
from tests.harness import make_job
from tests.stats.fixtures import outcome, write_run

pytestmark = pytest.mark.slow  # see tests/conftest.py: python -m pytest --all runs it

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.parent.name for p in (REPO / "examples").glob("*/config.yaml"))

# What each run must show. "absent" maps a section to the words its explanation must hold;
# "plots" is the exact set of PNGs written. Derived from the configs: one repeat everywhere but
# ttct-mini (3) and the repeats run; BWS verdicts score candidates, not items; close_reading's
# nonprag-zero alone runs at T=1.
EXPECTED: dict[str, dict[str, Any]] = {
    "cdat": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                        "gate": "needs the Random baseline",
                        "cdat_score": "needs the gate", "elbow": "needs both baselines",
                        "judge_agreement": "generation run (cdat, dat): each model is scored on lists it wrote",
                        "temperatures": "generation run (cdat, dat): a list at another temperature is a new answer"},
             "notes": {"pareto": "Random, Common not given"},
             "plots": {"distributions.png", "cdat_plane.png"}},
    "bws": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                       "temperatures": "needs 2+ temperatures", "distribution": "no per-item score",
                       "judge_agreement": "no per-item score"},
            "plots": set()},
    "custom_rubric": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                                 "temperatures": "needs 2+ temperatures",
                                 "verbosity": "custom: no judged text to measure (--length-of FIELD"},
                      "shown": {"self_preference"},
                      "plots": {"distributions.png", "judge_agreement.png"}},
    "close_reading": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats"},
                      "notes": {"judge_agreement": "T=1 (only nonprag-zero has per-item scores)",
                                "temperatures": "novel-few (1 temperature)"},
                      "plots": {"distributions.png", "judge_agreement.png"}},
    "literary_mt": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                       "temperatures": "needs 2+ temperatures", "judge_agreement": "needs 2+ judges"},
                    "plots": {"distributions.png"}},
    "literary_systems": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                                    "temperatures": "needs 2+ temperatures", "judge_agreement": "needs 2+ judges"},
                         "shown": {"self_preference"},  # its items name their systems
                         "plots": {"distributions.png"}},
    "overnight": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                             "temperatures": "needs 2+ temperatures", "judge_agreement": "needs 2+ judges"},
                  "plots": {"distributions.png"}},
    "literary_mt_lit": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                                   "temperatures": "needs 2+ temperatures"},
                        "plots": {"distributions.png", "judge_agreement.png"}},
    "cascade": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                           "temperatures": "needs 2+ temperatures"},
                "notes": {"cascade": "coverage"},
                "plots": {"distributions.png", "judge_agreement.png"}},
    "pairwise_annotators": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats",
                                       "temperatures": "needs 2+ temperatures"},
                            "plots": {"distributions.png", "judge_agreement.png"}},
    "prometheus_absolute": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats", "temperatures": "needs 2+ temperatures"},
                            "plots": {"distributions.png", "judge_agreement.png"}},
    "prometheus_relative": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats", "judge_agreement": "needs 2+ judges"},
                            "plots": {"distributions.png"}},
    "ttct": {"absent": {"temperatures": "needs 2+ temperatures"},
             "notes": {"consistency": "ttct-mini-json T=1 (needs 2+ repeats",
                       "dimensions": "ttct-mini-json T=1 (1 repeat per item)"},
             "plots": {"consistency.png", "distributions.png", "judge_agreement.png"}},
    "repeats_x_temperatures": {"absent": {"judge_agreement": "needs 2+ judges"},
                               "plots": {"consistency.png", "distributions.png"}},
    "two_judges": {"absent": {"consistency": "needs 2+ repeats", "dimensions": "needs 2+ repeats", "temperatures": "needs 2+ temperatures"},
                   "plots": {"distributions.png", "judge_agreement.png"}},
}  # fmt: skip
NO_LENGTH = "no judge with a length to measure"
for _name in ("cdat", "bws", "close_reading", "prometheus_relative", "pairwise_annotators", "cascade"):
    EXPECTED[_name]["absent"]["verbosity"] = NO_LENGTH
for _name in ("bws", "prometheus_relative"):  # labels (best/worst, winner), but fewer than 3 judges
    EXPECTED[_name]["absent"]["panel_agreement"] = "needs 3+ judges writing the same categorical field"
COMMON_ABSENT = {"self_preference": "the items have no 'system' field"}
"""Most examples' datasets do not name the system that produced each judged text ("shown" lists
the sections an example shows although they are here)."""


def _demo_run(config: Path, out: Path) -> Path:
    # A CDAT list with too few nouns is data (too_few_valid), not a failure of the run.
    allow = ["--allow-unscored"] if config.parent.name == "cdat" else []
    code = main(["run", str(config), "--demo", "--no-live", "--output", str(out / "runs"),
                 "--cache-dir", str(out / "cache"), *allow])  # fmt: skip
    assert code == 0
    (run,) = [p for p in (out / "runs").iterdir() if p.is_dir() and not p.is_symlink()]
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every example, a gemba-mqm run with 2 repeats at 2 temperatures, and one with two judges."""
    out = {name: _demo_run(REPO / "examples" / name / "config.yaml", tmp_path_factory.mktemp(name))
           for name in EXAMPLES if not (name == "cdat" and minilm_problem())}  # fmt: skip
    repeats = tmp_path_factory.mktemp("repeats")
    job = make_job(repeats, None, items=6, judge={"repeats": 2, "temperatures": [0.0, 1.0]})
    out["repeats_x_temperatures"] = _demo_run(job.config, repeats)
    two = tmp_path_factory.mktemp("two")
    base = {"model": "openai/gpt-4o-mini", "protocol": "gemba-mqm", "max_tokens": 300}
    job = make_job(two, None, items=6, judges=[{"name": "a", **base}, {"name": "b", **base,
                                               "protocol": "gemba-mqm-literary"}])  # fmt: skip
    out["two_judges"] = _demo_run(job.config, two)
    return out


def test_every_protocol_example_is_covered() -> None:
    assert set(EXAMPLES) <= set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_stats_plots_on_a_demo_run_explains_every_absent_section_and_names_every_plot(
    name: str, runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if name not in runs:
        pytest.skip(minilm_problem() or name)
    run, expected = runs[name], EXPECTED[name]
    plots = tmp_path / "plots"
    report = tmp_path / "report.json"
    assert main(["stats", str(run), "--plots", str(plots), "--json", str(report)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "Warning" not in err
    # No empty table: a rich table whose header rule is followed at once by its bottom rule.
    lines = out.splitlines()
    assert not any(a.startswith("┡") and b.startswith("└") for a, b in zip(lines, lines[1:], strict=False))
    sections = json.loads(report.read_text(encoding="utf-8"))["sections"]
    absent = {n: s["absent"] for n, s in sections.items() if s["absent"]}
    expected_absent = {name: words for name, words in {**COMMON_ABSENT, **expected["absent"]}.items()
                       if name not in expected.get("shown", ())}  # fmt: skip
    assert set(absent) == set(expected_absent)
    for section, words in expected_absent.items():
        assert words in absent[section]
        assert not sections[section]["rows"]
        title = sections[section]["title"]
        assert out.count(f"{title}: not shown: {absent[section]}") == 1  # with the tables
        assert out.count(title) == 1  # and nowhere else (no plot message repeats it)
    for section, note in expected.get("notes", {}).items():
        assert any(note in n for n in sections[section]["notes"]) and note in out
    assert all(s["rows"] for n, s in sections.items() if n not in absent)
    written = {p.name for p in plots.iterdir()} if plots.exists() else set()
    assert written == expected["plots"]
    assert sorted(re.findall(r"^plot: (.+)$", out, re.M)) == sorted(str(plots / p) for p in written)
    if not written:
        assert "no plots: no section with a chart has data" in out


def test_consistency_chart_is_not_drawn_from_nan_only_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # BWS-like: scored outcomes with no per-item score, compared on verdict["best_id"] across 2
    # repeats. The flip rate exists (item x1 changes: 1/2); every score-based figure is NaN.
    order = ["sysA", "sysB", "sysC"]
    records = []
    for item, picks in {"x1": ["sysA", "sysB"], "x2": ["sysC", "sysC"]}.items():
        for repeat, best in enumerate(picks):
            worst = next(c for c in order if c != best)
            verdict = {"best_id": best, "worst_id": worst, "order": order,
                       "best": "ABC"[order.index(best)], "worst": "ABC"[order.index(worst)]}  # fmt: skip
            scores = {c: float(c == best) - float(c == worst) for c in order}
            record = outcome(item, "bws-judge", 0.0, repeat, 0.0, protocol="bws", verdict=verdict, scores=scores)
            records.append(record | {"score": None})
    run = write_run(tmp_path / "run", records)
    report = tmp_path / "report.json"
    assert main(["stats", str(run), "--verdict-field", "best_id", "--plots", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    (row,) = json.loads(report.read_text(encoding="utf-8"))["sections"]["consistency"]["rows"]
    assert row["flip_rate"] == 0.5 and row["mean_spearman"] is None
    assert "no plot consistency.png: every consistency figure is undefined" in out
    assert not (run / "plots" / "consistency.png").exists()
    assert not (run / "plots" / "distributions.png").exists()  # no finite score either


def test_pairwise_judging_in_one_order_says_position_consistency_needs_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [outcome(f"p{i}", "pairs", 0.0, 0, 1.0, protocol="prometheus-relative", verdict={"winner": "A"})
               for i in range(3)]  # fmt: skip
    assert main(["stats", str(write_run(tmp_path / "run", records))]) == 0
    assert "A/B position consistency: same winner in both orders: not shown: needs both orders" in capsys.readouterr().out


def test_without_matplotlib_stats_says_how_to_install_the_extra(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from judge_engine.stats import plots

    monkeypatch.setattr(plots, "available", lambda: False)
    assert main(["stats", str(runs["ttct"]), "--plots", str(tmp_path / "plots")]) == 0
    _, err = capsys.readouterr()
    assert "matplotlib is not installed" in err and "pip install 'judge-engine[plots]'" in err
    assert not (tmp_path / "plots").exists()


def test_meta_on_a_run_without_item_scores_shows_no_empty_table_and_no_plot(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [json.loads(line)["id"] for line in (REPO / "examples/bws/items.jsonl").read_text().splitlines()]
    human = tmp_path / "human.csv"
    human.write_text("id,human\n" + "".join(f"{i},{n % 5}\n" for n, i in enumerate(items)), encoding="utf-8")
    code = main(["meta", str(runs["bws"]), "--human-table", str(human), "--human-key", "id", "--human", "human",
                 "--agreement", "--plots", str(tmp_path / "plots")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    assert out.count("Correlation with human scores: not shown: no row has both a human score") == 1
    assert out.count("Agreement with human scores: not shown: no row has both a human score") == 1
    assert "no plots: no section with a chart has data" in out
    assert not (tmp_path / "plots").exists()


def test_meta_adequacy_draws_no_heatmap_for_a_comparison_with_no_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Against the top system "t": item i1 human 5 > t 3 (preferred), i2 human 1 < t 2 (not):
    # rate 1/2. No item has an "other" system, so that rate is NaN and its heatmap is not drawn.
    table = tmp_path / "t.csv"
    table.write_text("item,system,m\ni1,translator,5\ni1,t,3\ni2,translator,1\ni2,t,2\n", encoding="utf-8")
    report = tmp_path / "r.json"
    assert main(["meta", str(table), "--adequacy", "--item", "item", "--system", "system", "--pred", "m",
                 "--top-systems", "t", "--plots", str(tmp_path / "plots"), "--json", str(report)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    rows = json.loads(report.read_text(encoding="utf-8"))["sections"]["adequacy"]["rows"]
    assert next(r for r in rows if r["versus"] == "top")["rate"] == 0.5
    assert f"plot: {tmp_path / 'plots' / 'adequacy_top.png'}" in out
    assert "no plot adequacy_other.png: no item compares the human translation with other systems" in out
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {"adequacy_top.png"}


@pytest.mark.parametrize("name", EXAMPLES)
def test_show_of_every_protocols_demo_run_reads_at_80_columns(
    name: str, runs: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``show``'s first look at each example (issue 26, item 6): nothing wider than 80 columns,
    costs in dollars, verdicts field by field (no dict), the shared turns folded."""
    from rich.cells import cell_len

    if name not in runs:
        pytest.skip(minilm_problem() or name)
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert main(["show", str(runs[name])]) == 0
    out = capsys.readouterr().out
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    costs = re.findall(r"cost (\S+)", out)
    assert costs and all(re.fullmatch(r"\$(0|0\.\d+|[\d,]+\.\d\d)", c) for c in costs), costs
    assert not re.search(r"\de-\d", out) and "{'" not in out and "╭─ verdict" in out  # no 2.955e-05, no dict
    assert "─ sent: system ─" not in out  # a system prompt is folded, with the few-shot turns
