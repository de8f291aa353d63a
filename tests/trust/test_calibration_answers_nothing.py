"""A calibration in which no stage answers (issue 34.2): it says so first, says what would let a
stage answer (calibration items at its error rate, computed with the exact bound, or a lower
``--min-items``), prints no cost ratio, and exits 3 (completed, nothing to show); a cascade
whose thresholds file answers nothing is refused by ``plan`` with the same advice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import judge_engine
from judge_engine.cli import EXIT_UNSCORED, main
from judge_engine.stats.risk_control import clopper_pearson_upper, start_size
from tests.trust.cascade.conftest import cascade_job

ROWS = Path(__file__).resolve().parents[2] / "examples" / "calibrate" / "rows.csv"
SETTINGS = ["--stages", "mini,small,large", "--risk", "0.15", "--delta", "0.1"]


def _first_rows(tmp_path: Path, n: int = 60) -> Path:
    """The issue's reproduction: the example's first 60 rows (20 items, 3 stages)."""
    path = tmp_path / "rows.csv"
    path.write_text("".join(ROWS.read_text(encoding="utf-8").splitlines(keepends=True)[: n + 1]), encoding="utf-8")
    return path


def test_calibrate_on_60_rows_says_nothing_is_answered_first_and_exits_3(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code = main(["calibrate", "--rows", str(_first_rows(tmp_path)), *SETTINGS,
                 "--costs", "mini=0.0002,small=0.001,large=0.01"])
    out = capsys.readouterr().out
    assert code == EXIT_UNSCORED == 3
    flat = " ".join(out.split())
    assert out.splitlines()[0].startswith("nothing answered: no stage answers any of the 20 calibration items")
    # what would let a stage answer: large is wrong on 2 of its 20 items (10%), mini and small on 35% and 42%
    assert "large would answer with about 180 calibration items at its error rate (10.0%)" in flat
    assert "mini, small: no number of calibration items (error rates at or above the risk 0.15)" in flat
    assert ("a lower --min-items would not help: even at 21, the least risk 0.15 and delta 0.1 allow, no stage "
            "answers") in flat
    # nothing is answered, so nothing is saved: no cost per item, no ratio
    assert "cost per item" not in flat and "(0.0%)" not in flat
    assert "coverage 0.0% (0 of 20 items answered)" in flat


def test_the_items_needed_are_the_exact_bounds_own() -> None:
    """180 is honest: at 10% errors, 18 errors in 180 items has a Clopper-Pearson bound (at delta
    0.1 / 3, Bonferroni) under 0.15, and 17 in 170 does not."""
    per_stage = 0.1 / 3
    assert float(clopper_pearson_upper(18, 180, per_stage)) <= 0.15 < float(clopper_pearson_upper(17, 170, per_stage))
    document = judge_engine.calibrate(_rows_of(ROWS, 60), stages=["mini", "small", "large"], risk=0.15, delta=0.1)
    large = document["stages"][2]
    assert large["needed"]["items"] == 180 and large["needed"]["calibration_items"] == 180
    assert document["nothing_answered"] == {"least_min_items": 21, "answered_with_least": 0}
    assert start_size(0.15, per_stage, 1) == 21  # ln(0.0333) / ln(0.85) = 20.9


def _rows_of(path: Path, n: int) -> list[dict[str, Any]]:
    import csv

    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))[:n]


def test_a_lower_min_items_that_would_answer_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """25 items, all right at 0.9: at risk 0.15, delta 0.1, a threshold is tested from 15 items
    (ln 0.1 / ln 0.85 = 14.2), so --min-items 15 lets it answer the 25 (0 errors in 25: bound
    1 - 0.1^(1/25) = 0.088); the default 30 never tests it."""
    rows = [{"item": f"q{i}", "stage": "only", "prediction": "A", "confidence": 0.9, "label": "A"} for i in range(25)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["calibrate", "--rows", str(path), "--stages", "only", "--risk", "0.15", "--delta", "0.1"]) == 3
    flat = " ".join(capsys.readouterr().out.split())
    assert ("--min-items 15 (the least risk 0.15 and delta 0.1 allow; now 30) would answer 25 of these 25 items; "
            "choose it before calibrating and calibrate on other items: a value picked to make these pass has no "
            "guarantee") in flat
    assert "only would answer with about 30 calibration items at its error rate (0.0%)" in flat
    document = judge_engine.calibrate(rows, stages=["only"], risk=0.15, delta=0.1)
    assert document["nothing_answered"] == {"least_min_items": 15, "answered_with_least": 25}
    assert judge_engine.calibrate(rows, stages=["only"], risk=0.15, delta=0.1, min_items=15)["answered"] == 25


def test_the_json_report_exits_3_too_and_has_no_ratio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["calibrate", "--rows", str(_first_rows(tmp_path)), *SETTINGS,
                 "--costs", "mini=0.0002,small=0.001,large=0.01", "--json"])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert code == 3 and document["coverage"] == 0.0 and document["cost"]["ratio"] is None
    assert "judge-engine calibrate: nothing answered: no stage answers any of the 20 calibration items" in captured.err


def test_a_calibration_that_answers_something_still_exits_0(tmp_path: Path) -> None:
    assert main(["calibrate", "--rows", str(ROWS), *SETTINGS, "--json", str(tmp_path / "report.json")]) == 0
    assert json.loads((tmp_path / "report.json").read_text())["nothing_answered"] is None


def test_plan_refuses_a_thresholds_file_that_answers_nothing_and_says_what_would(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file calibrate wrote on the 60 rows, renamed to the cascade's stages."""
    job = cascade_job(tmp_path, None, thresholds={"cheap": 0.9, "mid": 0.9, "strong": 0.9})
    rows = [{**r, "stage": {"mini": "cheap", "small": "mid", "large": "strong"}[r["stage"]]} for r in _rows_of(ROWS, 60)]
    judge_engine.calibrate(rows, stages=["cheap", "mid", "strong"], risk=0.15, delta=0.1,
                           output=tmp_path / "thresholds.json")
    capsys.readouterr()
    assert main(["plan", str(job.config)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no stage answers anything" in err and "the cascade would abstain on every item" in err
    assert "strong would answer with about 180 calibration items at its error rate (10.0%)" in err
