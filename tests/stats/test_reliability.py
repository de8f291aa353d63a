"""Coefficients by name (stats --reliability, meta --agreement --icc-forms --fleiss) with
bootstrap intervals: hand-derived values, the CLI, edges."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from judge_engine.stats.reliability import REPEATS, coefficients, count_table, statistic
from tests.stats.fixtures import sample_records, write_run
from tests.stats.test_agreement import SHROUT_FLEISS
from tests.stats.test_cli import rows_by, run_json


def test_fleiss_and_randolph_of_repeats_hand_derived() -> None:
    # Repeats [1,1], [1,2], [2,2] -> counts [[2,0],[1,1],[0,2]]: P_i = 1, 0, 1 so P-bar = 2/3;
    # shares (1/2, 1/2) so P_e = 1/2; Fleiss = (2/3 - 1/2) / (1/2) = 1/3.
    m = [[1, 1], [1, 2], [2, 2]]
    table, seen = count_table(m)
    assert table.tolist() == [[2, 0], [1, 1], [0, 2]] and seen == 2
    r = coefficients(m, ["fleiss_kappa", "randolph_kappa"])
    assert r["fleiss_kappa"]["value"] == pytest.approx(1 / 3)
    assert r["randolph_kappa"]["value"] == pytest.approx(1 / 3)  # k = 2 seen: (2/3 - 1/2) / (1/2)
    # On a 1-5 scale: (2/3 - 1/5) / (4/5) = (10/15 - 3/15) / (12/15) = 7/12.
    five = coefficients(m, ["randolph_kappa"], n_categories=5)
    assert five["randolph_kappa"]["value"] == pytest.approx(7 / 12)


def test_every_repeat_coefficient_is_1_on_identical_repeats_and_counts_items() -> None:
    # Identical repeats: no within-item variance, so alpha, every ICC and both kappas are 1.
    m = [[1, 1, 1], [2, 2, 2], [3, 3, 3], [5, 5, math.nan]]
    r = coefficients(m, REPEATS, bootstrap=50)
    assert all(v["value"] == pytest.approx(1.0) for v in r.values()), r
    assert r["alpha_ordinal"]["n"] == 4  # a unit with two ratings is pairable
    assert r["icc_2_1"]["n"] == 3 and r["fleiss_kappa"]["n"] == 3  # complete rows only
    assert (r["icc_3_k"]["ci_low"], r["icc_3_k"]["ci_high"]) == pytest.approx((1.0, 1.0))


def test_icc_forms_by_name_published() -> None:
    # Shrout & Fleiss (1979), Table 2: .17 .29 .71 .44 .62 .91
    r = coefficients(SHROUT_FLEISS, [n for n in REPEATS if n.startswith("icc")])
    got = [round(v["value"], 2) for v in r.values()]
    assert got == [0.17, 0.29, 0.71, 0.44, 0.62, 0.91]


def test_unknown_and_two_rater_names() -> None:
    with pytest.raises(ValueError, match="two raters"):
        statistic("cohen_kappa", [[1, 2, 3]])
    with pytest.raises(ValueError, match="unknown"):
        statistic("alpha_ratio", [[1, 2]])
    with pytest.raises(ValueError, match="unknown"):
        statistic("kendall", [[1, 2]])
    r = coefficients([[1, 2], [2, 1]], ["cohen_kappa"])  # p_o 0, p_e 1/2 -> -1
    assert r["cohen_kappa"]["value"] == pytest.approx(-1.0) and math.isnan(r["cohen_kappa"]["ci_low"])


def test_stats_reliability_on_a_run(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", sample_records())
    s = run_json(["stats", str(run), "--reliability", "--bootstrap", "200"], tmp_path)
    t0 = {r["statistic"]: r for r in rows_by(s["reliability"], judge="a", temperature=0.0)}
    assert list(t0) == list(REPEATS)
    # A_T0: i2 is [-5, -5, -6], the rest constant. Row means -1, -16/3, 0, -10; grand -49/12.
    # WMS = SS within / (n(k-1)) = (1/9 + 1/9 + 4/9) / 8 = 1/12. Row deviations 37/12, -15/12,
    # 49/12, -71/12: SS rows = 3 * 9036/144 = 188.25, BMS = 188.25 / 3 = 62.75.
    # ICC(1,1) = (BMS - WMS) / (BMS + 2 WMS) = (752/12) / (755/12) = 752/755.
    assert t0["icc_1_1"]["n"] == 4 and t0["icc_1_1"]["value"] == pytest.approx(752 / 755)
    assert t0["icc_1_1"]["ci_low"] <= t0["icc_1_1"]["value"] <= t0["icc_1_1"]["ci_high"]
    assert "b T=0" in s["reliability"]["notes"][0]  # judge b ran once: named, not shown
    without = run_json(["stats", str(run)], tmp_path)
    assert "reliability" not in without


def test_stats_reliability_on_a_table(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    rows = [{"s": [1, 1]}, {"s": [1, 2]}, {"s": [2, 2]}]
    path.write_text(json.dumps(rows), encoding="utf-8")
    s = run_json(["stats", str(path), "--repeats", "s", "--reliability", "--n-categories", "5"],
                 tmp_path)  # fmt: skip
    got = {r["statistic"]: r["value"] for r in s["reliability"]["rows"]}
    assert got["fleiss_kappa"] == pytest.approx(1 / 3) and got["randolph_kappa"] == pytest.approx(7 / 12)


def test_meta_agreement_icc_forms_fleiss_and_intervals(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    # human h, judge j: 1 of 4 disagree. p_o = 3/4; marginals h (2/4 1, 2/4 2), j (1/4, 3/4):
    # p_e = 2/4 * 1/4 + 2/4 * 3/4 = 1/2 -> kappa = (3/4 - 1/2) / (1/2) = 0.5.
    # Fleiss pools the marginals: shares (3/8, 5/8), P_e = 9/64 + 25/64 = 34/64;
    # P-bar = 3/4 -> (48/64 - 34/64) / (30/64) = 14/30.
    path.write_text("h,j\n1,1\n1,2\n2,2\n2,2\n", encoding="utf-8")
    s = run_json(["meta", str(path), "--human", "h", "--pred", "j", "--agreement",
                  "--icc-forms", "--fleiss", "--bootstrap", "300"], tmp_path)  # fmt: skip
    row = s["agreement"]["rows"][0]
    assert row["cohen_kappa"] == pytest.approx(0.5)
    assert row["fleiss_kappa"] == pytest.approx(14 / 30)
    assert {"icc_1_1", "icc_3_k", "randolph_kappa"} <= set(row)
    ci = {r["statistic"]: r for r in s["agreement_ci"]["rows"]}
    assert set(ci) == set(s["agreement"]["columns"][5:])
    assert ci["cohen_kappa"]["ci_low"] <= 0.5 <= ci["cohen_kappa"]["ci_high"]
    plain = run_json(["meta", str(path), "--human", "h", "--pred", "j", "--agreement"], tmp_path)
    assert plain["agreement"]["columns"][5:] == [
        "cohen_kappa", "kappa_quadratic", "alpha_ordinal", "alpha_interval", "icc_2_1"
    ]  # fmt: skip
    assert "agreement_ci" not in plain
