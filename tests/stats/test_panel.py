"""Agreement within a panel (``stats``): Fleiss' and Randolph's kappa across 3+ judges writing one
label, hand-derived, from the literature, on runs written by hand and on a demo run."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from judge_engine.cli import main
from judge_engine.stats.bootstrap import Randolph, bootstrap_values
from judge_engine.stats.panel import CategoricalField, panel_coefficients
from tests.stats.fixtures import outcome, write_run
from tests.stats.test_agreement import FLEISS_TABLE
from tests.stats.test_cli import rows_by, run_json

REPO = Path(__file__).resolve().parents[2]

# --- the coefficients --------------------------------------------------------------------------

# Three judges, four units: AAA (P_u = 3*2/(3*2) = 1), AAB (2*1/6 = 1/3), BBB (1), ABB (1/3).
# P-bar = (1 + 1/3 + 1 + 1/3) / 4 = 2/3. Labels: A 3+2+0+1 = 6, B 6 of 12, so P_e = 1/4 + 1/4 = 1/2.
# Fleiss = (2/3 - 1/2) / (1 - 1/2) = 1/3; Randolph, k = 2: the same; k = 3: (2/3 - 1/3) / (2/3) = 1/2.
THREE = [["A", "A", "A"], ["A", "A", "B"], ["B", "B", "B"], ["A", "B", "B"]]


def test_panel_coefficients_hand_derived() -> None:
    r = panel_coefficients(THREE)
    assert r["agreement"]["value"] == pytest.approx(2 / 3)
    assert r["fleiss_kappa"]["value"] == pytest.approx(1 / 3)
    assert r["randolph_kappa"]["value"] == pytest.approx(1 / 3)
    assert r["fleiss_kappa"]["n"] == 4 and math.isnan(r["fleiss_kappa"]["ci_low"])
    assert panel_coefficients(THREE, k=3)["randolph_kappa"]["value"] == pytest.approx(1 / 2)


def test_fleiss_1971_table_as_a_panel_of_fourteen_judges() -> None:
    # Fleiss (1971) as reproduced on Wikipedia: 10 items, 14 raters, 5 categories: P-bar 0.378,
    # P_e 0.213, kappa 0.210; Randolph (0.37802 - 1/5) / (4/5) = 0.2225.
    r = panel_coefficients(_labels_of(FLEISS_TABLE), k=5)
    assert r["agreement"]["value"] == pytest.approx(0.37802, abs=1e-5)
    assert r["fleiss_kappa"]["value"] == pytest.approx(0.20993, abs=1e-5)
    assert r["randolph_kappa"]["value"] == pytest.approx(0.2225, abs=1e-4)


def test_candidate_picks_with_a_number_of_candidates_per_unit() -> None:
    # u1: 4 candidates shown, all three pick x: P = 1; u2: 5 shown, x x y: P = 2/6 = 1/3. P-bar 2/3.
    # Randolph's chance: the mean of 1/k = (1/4 + 1/5) / 2 = 9/40, so
    # (2/3 - 9/40) / (1 - 9/40) = (53/120) / (31/40) = 53/93.
    # Fleiss: x 5 of 6, y 1: P_e = 25/36 + 1/36 = 13/18, so (12/18 - 13/18) / (5/18) = -1/5.
    r = panel_coefficients([["x", "x", "x"], ["x", "x", "y"]], k=[4, 5])
    assert r["randolph_kappa"]["value"] == pytest.approx(53 / 93)
    assert r["fleiss_kappa"]["value"] == pytest.approx(-1 / 5)


def test_the_bootstrap_resamples_items_with_their_units() -> None:
    # Item X holds units AAA (P 1) and AAB (1/3), item Y holds ABB (1/3). Drawing two items:
    # XX (1/4): P-bar (1 + 1/3 + 1 + 1/3) / 4 = 2/3; XY or YX (1/2): (1 + 1/3 + 1/3) / 3 = 5/9;
    # YY (1/4): 1/3. Randolph, k = 2: 2 P-bar - 1 = 1/3, 1/9, -1/3 with those chances.
    table = [[3, 0], [2, 1], [1, 2]]
    values = bootstrap_values(Randolph(table, n_categories=2, groups=["X", "X", "Y"]), n_resamples=4000, seed=3)
    counts = Counter(round(float(v), 6) for v in values)
    assert set(counts) == {round(1 / 3, 6), round(1 / 9, 6), round(-1 / 3, 6)}
    assert counts[round(1 / 9, 6)] / 4000 == pytest.approx(0.5, abs=0.03)
    assert counts[round(1 / 3, 6)] / 4000 == pytest.approx(0.25, abs=0.03)
    # Units drawn one by one would give other values (three draws of three units: 1/3 x 3 ...).
    loose = bootstrap_values(Randolph(table, n_categories=2), n_resamples=200, seed=3)
    assert any(round(float(v), 6) not in counts for v in loose)


def test_incomplete_rows_are_refused() -> None:
    with pytest.raises(ValueError, match="every unit needs a label"):
        panel_coefficients([["A", None, "A"]])
    with pytest.raises(ValueError, match="n_categories"):
        panel_coefficients(THREE, k=[2, 2])


def _labels_of(table: list[list[int]]) -> list[list[str]]:
    """A count table as one row of labels per item (rater j gives the j-th label in order)."""
    return [[f"c{c}" for c, n in enumerate(row) for _ in range(n)] for row in table]


@st.composite
def panels(draw: st.DrawFn) -> tuple[list[list[str]], list[int]]:
    judges = draw(st.integers(3, 6))
    k = draw(st.integers(2, 4))
    rows = draw(st.lists(st.lists(st.integers(0, k - 1), min_size=judges, max_size=judges), min_size=2, max_size=12))
    groups = draw(st.lists(st.integers(0, 3), min_size=len(rows), max_size=len(rows)))
    return [[f"l{v}" for v in r] for r in rows], groups


@given(panels(), st.permutations(range(6)), st.randoms(use_true_random=False))
@settings(max_examples=60, deadline=None)
def test_panel_properties(panel: tuple[list[list[str]], list[int]], relabel: list[int], rng: Any) -> None:
    rows, groups = panel
    k = 4
    base = panel_coefficients(rows, k=k)
    values = {name: r["value"] for name, r in base.items()}
    assert 0 <= values["agreement"] <= 1
    assert -1 / (k - 1) - 1e-12 <= values["randolph_kappa"] <= 1 + 1e-12
    assert math.isnan(values["fleiss_kappa"]) or values["fleiss_kappa"] <= 1 + 1e-12
    # Same figures whatever the labels are called, the judges' order, the units' order, and
    # whichever items the units belong to (grouping moves intervals, never the point).
    renamed = [[f"m{relabel[int(v[1:])]}" for v in r] for r in rows]
    columns = list(range(len(rows[0])))
    rng.shuffle(columns)
    swapped = [[r[c] for c in columns] for r in rows]
    shuffled = rows[:]
    rng.shuffle(shuffled)
    for other in (renamed, swapped, shuffled):
        _same(values, panel_coefficients(other, k=k))
    _same(values, panel_coefficients(rows, k=k, groups=groups))


def _same(expected: dict[str, float], got: dict[str, dict[str, float]]) -> None:
    for name, value in expected.items():
        assert (math.isnan(value) and math.isnan(got[name]["value"])) or got[name]["value"] == pytest.approx(value)


# --- stats on runs written by hand ----------------------------------------------------------------


def _custom_run(root: Path, labels: dict[str, dict[str, Any]], *, choices: list[str], juries: Any = (),
                field: str = "verdict") -> Path:
    """A run of custom judges writing one label field: ``labels[judge][item]`` (None: unscored)."""
    records = []
    for judge, by_item in labels.items():
        for item, label in by_item.items():
            record = outcome(item, judge, 0.0, 0, None if label is None else 0.0, protocol="custom",
                             verdict=None if label is None else {field: label})
            records.append(record)
    write_run(root, records)
    manifest = json.loads((root / "run.json").read_text(encoding="utf-8"))
    for entry in manifest["judges"]:
        entry |= {"protocol": "custom", "protocol_options": {"fields": {field: {"type": "label", "choices": choices},
                                                                         "why": {"type": "text"}}}}
    manifest["config"] = {"juries": [{"name": n, "judges": j} for n, j in juries]}
    (root / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root


def test_stats_reports_the_fleiss_1971_panel_from_a_run(tmp_path: Path) -> None:
    raters = [f"r{j:02d}" for j in range(14)]
    rows = _labels_of(FLEISS_TABLE)
    labels = {r: {f"item{i:02d}": rows[i][j] for i in range(10)} for j, r in enumerate(raters)}
    run = _custom_run(tmp_path / "run", labels, choices=[f"c{c}" for c in range(5)])
    s = run_json(["stats", str(run), "--bootstrap", "300"], tmp_path)
    got = {r["statistic"]: r for r in s["panel_agreement"]["rows"]}
    assert got["fleiss_kappa"]["value"] == pytest.approx(0.20993, abs=1e-5)
    assert got["randolph_kappa"]["value"] == pytest.approx(0.2225, abs=1e-4)  # k = 5 choices
    assert got["randolph_kappa"]["k"] == 5 and got["fleiss_kappa"]["units"] == 10
    assert got["fleiss_kappa"]["ci_low"] < 0.20993 < got["fleiss_kappa"]["ci_high"]
    assert got["fleiss_kappa"]["judges"] == ", ".join(raters) and got["fleiss_kappa"]["field"] == "verdict"


def test_units_a_judge_left_without_a_label_are_left_out_and_counted(tmp_path: Path) -> None:
    labels = {
        "a": {"i1": "A", "i2": "A", "i3": "B", "i4": "A", "i5": "A", "i6": "B"},
        "b": {"i1": "A", "i2": "A", "i3": "B", "i4": "B", "i5": None, "i6": "B"},  # i5 unscored
        "c": {"i1": "A", "i2": "B", "i3": "B", "i4": "B", "i6": "B"},  # i5 never judged
        "d": {"i1": "B", "i2": "B"},  # two judges share nothing: no panel of its own
    }
    run = _custom_run(tmp_path / "run", labels, choices=["A", "B", "C"], juries=[("trio", ["a", "b", "c"])])
    s = run_json(["stats", str(run)], tmp_path)
    section = s["panel_agreement"]
    everyone = rows_by(section, jury="")
    trio = {r["statistic"]: r for r in rows_by(section, jury="trio")}
    # All four: only i1, i2 have four labels (AAAB: P = 2*3/12 = 1/2; ABBB: 1/2); P-bar 1/2.
    assert {r["units"] for r in everyone} == {2} and {r["incomplete"] for r in everyone} == {4}
    # The jury a, b, c: i5 left out. i1 AAA 1, i2 AAB 1/3, i3 BBB 1, i4 ABB 1/3, i6 BBB 1:
    # P-bar = (3 + 2/3) / 5 = 11/15; A 3+2+0+1+0 = 6, B 9 of 15: P_e = (4 + 9) / 25 = 13/25.
    # Fleiss = (11/15 - 13/25) / (12/25) = (55/75 - 39/75) / (36/75) = 4/9; Randolph, k = 3
    # choices: (11/15 - 1/3) / (2/3) = (6/15) * (3/2) = 3/5.
    assert trio["agreement"]["value"] == pytest.approx(11 / 15)
    assert trio["fleiss_kappa"]["value"] == pytest.approx(4 / 9)
    assert trio["randolph_kappa"]["value"] == pytest.approx(3 / 5)
    assert (trio["fleiss_kappa"]["units"], trio["fleiss_kappa"]["incomplete"], trio["fleiss_kappa"]["k"]) == (5, 1, 3)
    assert trio["fleiss_kappa"]["judges"] == "a, b, c (jury trio)"
    assert any("incomplete" in note for note in section["notes"])


def test_a_jury_of_every_judge_names_the_one_panel(tmp_path: Path) -> None:
    labels = {j: {"i1": "A", "i2": "B", "i3": "B"} for j in ("a", "b", "c")}
    run = _custom_run(tmp_path / "run", labels, choices=["A", "B"], juries=[("all3", ["a", "b", "c"])])
    rows = run_json(["stats", str(run)], tmp_path)["panel_agreement"]["rows"]
    assert {r["jury"] for r in rows} == {"all3"} and len(rows) == 3
    assert {r["statistic"]: r["value"] for r in rows} == {"agreement": 1.0, "fleiss_kappa": 1.0, "randolph_kappa": 1.0}


def test_fewer_than_three_judges_on_a_label_say_so_and_numbers_have_no_panel(tmp_path: Path) -> None:
    labels = {j: {"i1": "A", "i2": "B"} for j in ("a", "b")}
    s = run_json(["stats", str(_custom_run(tmp_path / "two", labels, choices=["A", "B"]))], tmp_path)
    assert s["panel_agreement"]["absent"].startswith("needs 3+ judges writing the same categorical field")
    assert "verdict: a, b" in s["panel_agreement"]["absent"]
    # Scores only (gemba-mqm): no categorical field, no section.
    scores = [outcome(f"i{i}", j, 0.0, 0, -float(i)) for i in range(3) for j in ("a", "b", "c")]
    assert "panel_agreement" not in run_json(["stats", str(write_run(tmp_path / "mqm", scores))], tmp_path)


def test_judges_share_a_field_only_with_the_same_labels(tmp_path: Path) -> None:
    from judge_engine.protocols.reports import categorical_fields
    from judge_engine.stats.runs import read_run

    labels = {j: {"i1": "A", "i2": "B"} for j in ("a", "b", "c")}
    run = _custom_run(tmp_path / "run", labels, choices=["B", "A"])
    manifest = read_run(run).manifest
    assert categorical_fields(manifest)["a"] == [CategoricalField("verdict", "verdict", ("A", "B"))]
    assert manifest is not None
    manifest.judges[2].protocol_options["fields"]["verdict"]["choices"] = ["A", "B", "C"]
    fields = categorical_fields(manifest)
    assert fields["a"] == fields["b"] != fields["c"]


# --- stats on a demo run -------------------------------------------------------------------------

DEMO = """
dataset: {path: items.jsonl, fields: {id: id}}
judges:
%s
output: {dir: runs}
cache: {dir: cache}
"""
JUDGE = """  - name: %s
    model: openai/gpt-4o-mini
    protocol: prometheus-relative
    protocol_options: {rubric: %s, both_orders: true}
    temperatures: [0.0, 0.7]
    max_tokens: 500
"""


def test_stats_on_a_demo_run_of_three_pairwise_judges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three Prometheus relative judges (one rubric each, so the fake server's sampling noise
    differs), both orders, two temperatures: the winners' panel agreement, checked against a
    plain count of the outcome lines."""
    (tmp_path / "items.jsonl").write_bytes((REPO / "examples/prometheus_relative/items.jsonl").read_bytes())
    judges = "".join(JUDGE % (name, name) for name in ("helpfulness", "harmlessness", "honesty"))
    (tmp_path / "config.yaml").write_text(DEMO % judges, encoding="utf-8")
    assert main(["run", str(tmp_path / "config.yaml"), "--demo", "--no-live", "--output", str(tmp_path / "runs"),
                 "--cache-dir", str(tmp_path / "cache")]) == 0  # fmt: skip
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and not p.is_symlink()]
    capsys.readouterr()
    s = run_json(["stats", str(run), "--bootstrap", "500"], tmp_path)
    rows = s["panel_agreement"]["rows"]
    assert {(r["field"], r["judges"], r["k"]) for r in rows} == {("winner", "harmlessness, helpfulness, honesty", 2)}
    lines = [json.loads(line) for line in (run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()]
    for temperature in (0.0, 0.7):
        expected = _fleiss_by_hand(lines, temperature)
        got = {r["statistic"]: r for r in rows if r["temperature"] == temperature}
        assert got["fleiss_kappa"]["units"] == 24 and got["fleiss_kappa"]["incomplete"] == 0  # 12 pairs x 2 orders
        for name in ("agreement", "fleiss_kappa", "randolph_kappa"):
            assert got[name]["value"] == pytest.approx(expected[name]), (temperature, name)
            assert got[name]["ci_low"] <= got[name]["value"] <= got[name]["ci_high"]
    # Greedy, one model's three rubrics agree on nearly every pair (a weak model prefers the first
    # response now and then, prompt by prompt: 0.94); sampled at 0.7 more verdicts flip.
    kappa = {t: {r["statistic"]: r["value"] for r in rows if r["temperature"] == t}["fleiss_kappa"] for t in (0.0, 0.7)}
    assert 0.8 < kappa[0.0] < 1 and 0 < kappa[0.7] < kappa[0.0], kappa
    assert main(["stats", str(run), "--bootstrap", "100"]) == 0
    assert "Agreement within a panel" in capsys.readouterr().out


def _fleiss_by_hand(lines: list[dict[str, Any]], temperature: float) -> dict[str, float]:
    """Fleiss (1971) and Randolph (2005, k = 2) from the outcome lines, written out plainly."""
    units: dict[tuple[str, str, int], list[str]] = {}
    for line in lines:
        if line["temperature"] == temperature and line["status"] == "scored":
            units.setdefault((line["item_id"], line["variant"], line["repeat"]), []).append(line["verdict"]["winner"])
    rows = [labels for labels in units.values() if len(labels) == 3]
    p_bar = float(np.mean([sum(n * (n - 1) for n in Counter(r).values()) / 6 for r in rows]))
    shares = Counter(v for r in rows for v in r)
    p_e = sum((n / (3 * len(rows))) ** 2 for n in shares.values())
    fleiss = (p_bar - p_e) / (1 - p_e) if p_e < 1 else math.nan
    return {"agreement": p_bar, "fleiss_kappa": fleiss, "randolph_kappa": (p_bar - 0.5) / 0.5}


def test_bws_picks_are_read_by_candidate_id_with_k_the_candidates_shown(tmp_path: Path) -> None:
    # Three BWS judges (seeds differ, so the orders shown differ: ids, not labels, are compared).
    # i1 shows 4 candidates, all pick best "s1": P 1; i2 shows 5, best s2 s2 s3: P 1/3. P-bar 2/3;
    # Randolph's chance (1/4 + 1/5) / 2 = 9/40: (2/3 - 9/40) / (31/40) = 53/93.
    orders = {"i1": ["s1", "s2", "s3", "s4"], "i2": ["s1", "s2", "s3", "s4", "s5"]}
    best = {"a": {"i1": "s1", "i2": "s2"}, "b": {"i1": "s1", "i2": "s2"}, "c": {"i1": "s1", "i2": "s3"}}
    records = []
    for judge, picks in best.items():
        for item, pick in picks.items():
            order = orders[item][::-1] if judge == "c" else orders[item]
            verdict = {"best": "A", "worst": "B", "best_id": pick, "worst_id": "s4", "order": order}
            records.append(outcome(item, judge, 0.0, 0, 0.0, protocol="bws", verdict=verdict) | {"score": None})
    root = write_run(tmp_path / "run", records)
    manifest = json.loads((root / "run.json").read_text(encoding="utf-8"))
    for entry in manifest["judges"]:
        entry |= {"protocol": "bws", "protocol_options": {"seed": ord(entry["name"])}}
    (root / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    section = run_json(["stats", str(root)], tmp_path)["panel_agreement"]
    got = {(r["field"], r["statistic"]): r for r in section["rows"]}
    assert got[("best", "randolph_kappa")]["value"] == pytest.approx(53 / 93)
    assert got[("best", "randolph_kappa")]["k"] is None  # 4 for one item, 5 for the other
    assert any("k varies with the candidates shown (4-5)" in note for note in section["notes"])
    # Every worst pick is s4: full agreement, and Fleiss' kappa undefined (chance agreement 1; null in JSON).
    assert got[("worst", "agreement")]["value"] == 1.0 and got[("worst", "fleiss_kappa")]["value"] is None


def test_boolean_and_candidate_fields_give_labels() -> None:
    flag = CategoricalField("flag", "flag", ("false", "true"))
    assert (flag.label({"flag": True}), flag.label({"flag": False}), flag.label({}), flag.label(None)) == ("true", "false", None, None)
    pick = CategoricalField("pick", "pick_id")
    assert pick.label({"pick": "A", "pick_id": "sysB", "order": ["sysA", "sysB"]}) == "sysB"
    assert pick.choices({"order": ["sysA", "sysB"]}) == 2 and pick.choices({}) is None and flag.choices({}) == 2
