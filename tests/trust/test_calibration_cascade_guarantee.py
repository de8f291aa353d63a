"""``calibrate(..., guarantee="cascade")`` (issue 36): the document, the rows without a label
(the items to be judged: they order the tests, are never calibrated on), the thresholds file
(format 2, and format 1 still read), the command line, and a config that names the guarantee
it must run under."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import judge_engine
from judge_engine.cli import main
from judge_engine.errors import CalibrationError
from judge_engine.trust.thresholds import THRESHOLDS_VERSION, read_thresholds, write_thresholds
from tests.stats.calibration_populations import Correlated, truth

STAGES = ["cheap", "mid", "strong"]


def _rows(labelled: int = 450, unlabelled: int = 450, seed: int = 4) -> list[dict[str, Any]]:
    """A correlated three-stage cascade's judgments: labelled items, then items to be judged."""
    rng = np.random.default_rng(seed)
    population = Correlated()
    c, e = population.draw(rng, labelled + unlabelled)
    rows = []
    for i in range(labelled + unlabelled):
        label = "A" if i % 2 else "B"
        other = "B" if label == "A" else "A"
        for s, stage in enumerate(STAGES):
            rows.append({"item": f"i{i}", "stage": stage, "prediction": other if e[i, s] else label,
                         "confidence": float(c[i, s]), "label": label if i < labelled else None})
    return rows


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return judge_engine.calibrate(_rows(), stages=STAGES, risk=0.15, delta=0.1, guarantee="cascade",
                                  costs={"cheap": 1, "mid": 5, "strong": 100})


def test_the_document_keeps_its_shape_and_names_the_guarantee(document: dict[str, Any]) -> None:
    stage_document = judge_engine.calibrate(_rows(), stages=STAGES, risk=0.15, delta=0.1)
    assert set(stage_document) <= set(document)  # the stage guarantee's fields, all there
    assert (document["guarantee"], stage_document["guarantee"]) == ("cascade", "stage")
    assert "cascade guarantee" in document["statement"] and "stage guarantee" in stage_document["statement"]
    assert document["delta_rule"] is None
    # the unlabelled items order the tests; they are never calibration items
    assert document["items"] == 450 and document["calibration"] == {**document["calibration"], "items": 450,
                                                                   "rows": 1350, "unlabelled": 450}
    assert document["ordering"] == {"unlabelled": 450, "costs": [1.0, 5.0, 100.0], "costs_given": True,
                                    "max_cost": 0.5}
    test = document["test"]
    assert document["answered"] > 0 and document["bound"] == test["bound"] <= 0.15
    assert document["coverage"] == document["answered"] / 450
    assert document["answered"] == sum(s["answered"] for s in document["stages"])
    assert document["errors"] == sum(s["errors"] for s in document["stages"])
    assert test["folds"] == 3 and test["level"] == pytest.approx(0.1 / 3)
    assert test["pilot_items"] + test["test_items"] == 450
    assert all(s["bound"] is None and s["delta"] == pytest.approx(0.1 / 3) for s in document["stages"])
    passed = document["folds"][test["fold"] - 1]["passed"]  # folds counted from 1
    assert passed["thresholds"] == [s["threshold"] for s in document["stages"]]
    assert document["cost"]["ratio"] <= 0.5 + 0.1  # kept to the limit on the unlabelled items, measured on these
    json.dumps(document, allow_nan=False)


def test_the_thresholds_it_gives_keep_agreement_on_the_population(document: dict[str, Any]) -> None:
    thresholds = np.array([[np.nan if s["threshold"] is None else s["threshold"] for s in document["stages"]]])
    risk, coverage = truth(Correlated(), thresholds)
    assert risk[0] <= 0.15 and coverage[0] > 0.2


def test_the_stage_guarantee_notes_the_unlabelled_items_it_does_not_use() -> None:
    stage = judge_engine.calibrate(_rows(), stages=STAGES, risk=0.15, delta=0.1)
    assert stage["calibration"]["unlabelled"] == 450 and stage["items"] == 450
    assert any("450 items without a human label: not used by the stage guarantee" in n for n in stage["notes"])
    assert stage["bound"] == max(s["bound"] for s in stage["stages"] if s["bound"] is not None)


def test_the_python_call_keeps_the_stage_guarantee_by_default() -> None:
    rows = [r for r in _rows(unlabelled=0)]
    assert judge_engine.calibrate(rows, stages=STAGES, risk=0.15, delta=0.1)["guarantee"] == "stage"


@pytest.mark.parametrize(("arguments", "message"), [
    ({"guarantee": "whole"}, "guarantee must be one of stage, cascade"),
    ({"guarantee": "cascade", "delta_rule": "per_stage"}, "a cascade guarantee tests the thresholds together"),
    ({"guarantee": "cascade", "max_cost": 0}, "max_cost must be a share of the last stage's cost above 0"),
    ({"guarantee": "cascade", "max_cost": "half"}, "max_cost must be"),
])
def test_bad_settings_are_named(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(CalibrationError, match=message):
        judge_engine.calibrate(_rows(60, 10), stages=STAGES, risk=0.15, delta=0.1, **arguments)


def test_rows_with_no_label_at_all_are_refused() -> None:
    with pytest.raises(CalibrationError, match="no row has a human label: 10 items, none labelled"):
        judge_engine.calibrate(_rows(0, 10), stages=STAGES, risk=0.15, delta=0.1, guarantee="cascade")


def test_too_few_labelled_items_answer_nothing_and_say_what_more_would_buy() -> None:
    small = judge_engine.calibrate(_rows(90, 300), stages=STAGES, risk=0.15, delta=0.1, guarantee="cascade")
    assert small["answered"] == 0 and small["test"] is None and small["bound"] is None
    assert all(s["threshold"] is None for s in small["stages"])
    assert small["more_data"] and all(m["more"] is None or m["more"] >= 0 for m in small["more_data"])
    advice = judge_engine.trust.calibration.answering_advice(small)
    assert advice and any("labelled items" in line and "more than these 90" in line for line in advice)


# --- the thresholds file -----------------------------------------------------------------------


def test_the_thresholds_file_names_the_guarantee(tmp_path: Path, document: dict[str, Any]) -> None:
    path = write_thresholds(document, tmp_path / "thresholds.json")
    raw = json.loads(path.read_text())
    assert raw["version"] == THRESHOLDS_VERSION == 2 and raw["guarantee"] == "cascade"
    thresholds = read_thresholds(path)
    assert (thresholds.kind, thresholds.delta_rule, thresholds.bound) == ("cascade", None, document["bound"])
    assert thresholds.statement == document["statement"]
    assert [s.threshold for s in thresholds.stages] == [s["threshold"] for s in document["stages"]]
    assert all(s.bound is None for s in thresholds.stages)


def test_a_file_from_before_the_guarantee_had_a_name_reads_as_a_stage_guarantee(tmp_path: Path) -> None:
    rows = _rows(200, 0)
    document = judge_engine.calibrate(rows, stages=STAGES, risk=0.15, delta=0.1)
    path = write_thresholds(document, tmp_path / "t.json")
    raw = json.loads(path.read_text())
    raw["version"] = 1
    raw["guarantee"] = raw.pop("statement")  # version 1 held the words here
    raw.pop("bound")
    path.write_text(json.dumps(raw))
    old = read_thresholds(path)
    assert (old.kind, old.delta_rule, old.version) == ("stage", "bonferroni", 1)
    assert old.statement == document["statement"]


# --- the command line --------------------------------------------------------------------------


def _rows_file(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_cascade_guarantee_prints_it_and_its_test(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    rows = _rows()
    path = _rows_file(tmp_path, rows)
    out = tmp_path / "thresholds.json"
    assert main(["calibrate", "--rows", str(path), "--stages", ",".join(STAGES), "--risk", "0.15", "--delta", "0.1",
                 "--guarantee", "cascade", "--costs", "cheap=1,mid=5,strong=100", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines() if not line.startswith("thresholds: ")) <= 80
    flat = " ".join(text.split())
    assert "(cascade guarantee: its thresholds tested together)" in flat
    assert "calibration: risk 0.15, delta 0.1 (the cascade tested as a whole)" in flat
    assert "tested as a whole on" in flat and "<= 0.15 at delta 0.0333" in flat
    assert read_thresholds(out).kind == "cascade"
    assert main(["calibrate", "--rows", str(path), "--stages", ",".join(STAGES), "--risk", "0.15", "--delta", "0.1",
                 "--guarantee", "cascade", "--costs", "cheap=1,mid=5,strong=100", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = judge_engine.calibrate(rows, stages=STAGES, risk=0.15, delta=0.1, guarantee="cascade",
                                      costs={"cheap": 1, "mid": 5, "strong": 100})
    assert printed == expected


@pytest.mark.parametrize(("flags", "message"), [
    (["--guarantee", "cascade", "--per-stage-delta"], "--per-stage-delta shares DELTA among the stages"),
    (["--guarantee", "cascade", "--max-cost", "lots"], "--max-cost: 'lots' is not a share"),
    (["--guarantee", "whole"], "invalid choice: 'whole'"),
])
def test_cli_bad_flags_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                              message: str) -> None:
    path = _rows_file(tmp_path, _rows(60, 10))
    try:
        code = main(["calibrate", "--rows", str(path), "--stages", ",".join(STAGES), "--risk", "0.15", "--delta",
                     "0.1", *flags])
    except SystemExit as exc:  # argparse's own refusal of a choice
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


# --- what review found -------------------------------------------------------------------------


def test_one_stage_has_no_cost_limit_to_keep() -> None:
    """One stage is the last stage alone: a limit below its own cost would leave nothing."""
    rows = [r for r in _rows(600, 0) if r["stage"] == "strong"]
    document = judge_engine.calibrate(rows, stages=["strong"], risk=0.15, delta=0.1, guarantee="cascade")
    assert document["ordering"]["max_cost"] is None and document["answered"] > 0


def test_a_few_unlabelled_items_do_not_make_coarse_steps() -> None:
    """One unlabelled item (a row whose label was left empty by mistake) used to be the whole
    ladder of quantiles: the pilot's own confidences join it now."""
    rows = _rows(600, 0)
    alone = judge_engine.calibrate(rows, stages=STAGES, risk=0.15, delta=0.1, guarantee="cascade")
    one_more = rows + [{**r, "item": "extra", "label": None} for r in rows[:3]]
    with_one = judge_engine.calibrate(one_more, stages=STAGES, risk=0.15, delta=0.1, guarantee="cascade")
    assert alone["answered"] > 0 and with_one["answered"] >= 0.8 * alone["answered"]


def test_a_cost_limit_no_configuration_keeps_to_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    from judge_engine.trust.whole_calibration import ordering_line, tested_line

    document = judge_engine.calibrate(_rows(300, 100), stages=STAGES, risk=0.15, delta=0.1, guarantee="cascade",
                                      max_cost=0.001)
    assert document["answered"] == 0
    assert "no configuration keeps the expected cost within max_cost 0.001" in tested_line(document)
    assert "costs assumed 1, 10, 100: give --costs" in ordering_line(document)


def test_the_public_call_is_the_tested_procedure() -> None:
    """calibrate(rows, guarantee="cascade") gives exactly the thresholds of
    stats.whole_cascade.calibrate_whole on the same matrices, ids and unlabelled items: the
    procedure whose validity tests/stats/test_whole_cascade_guarantee.py measures."""
    from judge_engine.stats.whole_cascade import calibrate_whole

    rows = _rows(300, 200, seed=9)
    document = judge_engine.calibrate(rows, stages=STAGES, risk=0.15, delta=0.1, guarantee="cascade",
                                      costs=[1, 5, 100])
    labelled = [f"i{i}" for i in range(300)]
    cell = {(r["item"], r["stage"]): r for r in rows}
    c = np.array([[cell[(i, s)]["confidence"] for s in STAGES] for i in labelled])
    e = np.array([[cell[(i, s)]["prediction"] != cell[(i, s)]["label"] for s in STAGES] for i in labelled])
    u = np.array([[cell[(f"i{i}", s)]["confidence"] for s in STAGES] for i in range(300, 500)])
    fit = calibrate_whole(c, e, labelled, risk=0.15, delta=0.1, unlabelled=u, costs=[1.0, 5.0, 100.0])
    assert [s["threshold"] for s in document["stages"]] == list(fit.thresholds)
    assert document["bound"] == (fit.test.bound if fit.test else None)
