"""judge_engine.calibrate over rows (dicts or a DataFrame), the thresholds file, and
``judge-engine calibrate --rows``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import judge_engine
from judge_engine.cli import main
from judge_engine.errors import CalibrationError, TableError
from judge_engine.stats.risk_control import guarantee
from judge_engine.trust.calibration import calibrate_rows
from judge_engine.trust.thresholds import THRESHOLDS_VERSION, read_thresholds, write_thresholds

STAGES = ["cheap", "strong"]


def _rows() -> list[dict[str, Any]]:
    """100 items labelled A. cheap: items 0-39 at 0.9, correct; 40-99 at 0.5, half wrong. strong:
    0.99 and correct on every item but 95-99, which it has no judgment for.

    Bonferroni (delta 0.1 / 2 = 0.05, start 30): cheap's 0.9 holds 40 items, 0 errors: u =
    1 - 0.05^(1/40) = 0.0722 <= 0.1 passes; 0.5 (100 items, 30 errors) fails. strong gets the
    60 items left, 55 judged at 0.99 with 0 errors: u = 1 - 0.05^(1/55) = 0.0530, passes."""
    rows = []
    for i in range(100):
        cheap = ("A", 0.9) if i < 40 else ("B" if i % 2 else "A", 0.5)
        rows.append({"item": f"q{i}", "stage": "cheap", "prediction": cheap[0], "confidence": cheap[1],
                     "label": "A"})
        if i < 95:
            rows.append({"item": f"q{i}", "stage": "strong", "prediction": "A", "confidence": 0.99,
                         "label": "A"})
        else:
            rows.append({"item": f"q{i}", "stage": "strong", "prediction": None, "confidence": None,
                         "label": "A"})
    return rows


def test_calibrate_returns_the_document() -> None:
    document = judge_engine.calibrate(_rows(), stages=STAGES, risk=0.1, delta=0.1, costs={"cheap": 1, "strong": 10})
    assert {"risk", "delta", "coverage", "stages"} <= set(document)
    assert (document["risk"], document["delta"], document["delta_rule"]) == (0.1, 0.1, "bonferroni")
    cheap, strong = document["stages"]
    assert {"stage", "threshold", "answered", "errors", "bound"} <= set(cheap)
    assert (cheap["stage"], cheap["threshold"], cheap["answered"], cheap["errors"]) == ("cheap", 0.9, 40, 0)
    assert cheap["bound"] == pytest.approx(1 - 0.05 ** (1 / 40))
    assert (cheap["offered"], cheap["judged"], cheap["escalated"], cheap["escalation_rate"]) == (100, 100, 60, 0.6)
    assert (strong["threshold"], strong["offered"], strong["judged"], strong["answered"]) == (0.99, 60, 55, 55)
    assert strong["bound"] == pytest.approx(1 - 0.05 ** (1 / 55))
    assert strong["delta"] == pytest.approx(0.05) and strong["needed"] is None
    assert document["coverage"] == 0.95 and document["agreement"] == 1.0
    # cost: cheap asked about every item (1), strong about the 60 left (10 x 0.6): 7 against 10
    assert document["cost"] == {"per_item": pytest.approx(7.0), "last_stage_alone": 10.0, "ratio": pytest.approx(0.7)}
    assert document["calibration"]["items"] == 100 and document["calibration"]["rows"] == 200
    assert document["calibration"]["digest"].startswith("b2:")
    assert document["guarantee"] == "stage"
    assert document["statement"] == ("agreement with humans >= 90% on answered items, with probability >= 90%, "
                                     "over the whole cascade (stage guarantee: each stage tested at delta / 2, "
                                     "Bonferroni)")
    # each answering stage's error rate is under its bound, so the cascade's (their mix) is under the largest
    assert document["bound"] == max(cheap["bound"], strong["bound"])
    json.dumps(document, allow_nan=False)  # plain JSON


def test_the_digest_is_the_rows_not_their_order() -> None:
    rows = _rows()
    first = judge_engine.calibrate(rows, stages=STAGES, risk=0.1, delta=0.1)
    again = judge_engine.calibrate(list(reversed(rows)), stages=STAGES, risk=0.1, delta=0.1)
    assert first["calibration"]["digest"] == again["calibration"]["digest"]
    rows[0]["confidence"] = 0.91
    assert judge_engine.calibrate(rows, stages=STAGES, risk=0.1, delta=0.1)["calibration"]["digest"] != \
        first["calibration"]["digest"]


def test_a_stage_that_answers_nothing_says_what_it_needs() -> None:
    rows = _rows()
    for row in rows:
        if row["stage"] == "strong" and row["item"] in {f"q{i}" for i in range(40, 45)}:
            row["prediction"] = "B"  # 5 errors among strong's 55 judged items
    document = judge_engine.calibrate(rows, stages=STAGES, risk=0.1, delta=0.1)
    strong = document["stages"][1]
    # 55 items at 0.99 with 5 errors: u(5, 55, 0.05) = 0.182 > 0.1
    assert strong["threshold"] is None and strong["bound"] is None and strong["answered"] == 0
    assert strong["stopped_at"]["items"] == 55 and strong["stopped_at"]["errors"] == 5
    needed = strong["needed"]
    assert needed["confidence"] == 0.99 and needed["error_rate"] == pytest.approx(5 / 55)
    assert needed["items"] > 1000 and needed["calibration_items"] == math.ceil(needed["items"] * 100 / 55)


def test_per_stage_delta_is_named_the_weaker_statement() -> None:
    document = judge_engine.calibrate(_rows(), stages=STAGES, risk=0.1, delta=0.1, delta_rule="per_stage")
    assert [s["delta"] for s in document["stages"]] == [0.1, 0.1]
    assert "per-stage delta, the weaker statement" in document["statement"]
    assert "over the whole cascade only >= 80%" in document["statement"]
    assert guarantee(0.15, 0.1, "bonferroni", 3) == ("agreement with humans >= 85% on answered items, with "
                                                      "probability >= 90%, over the whole cascade (stage guarantee: "
                                                      "each stage tested at delta / 3, Bonferroni)")
    assert guarantee(0.15, 0.1, "bonferroni", 3, "cascade") == (
        "agreement with humans >= 85% on answered items, with probability >= 90%, over the whole cascade (cascade "
        "guarantee: its thresholds tested together)")
    assert guarantee(0.025, 0.4, "per_stage", 3).endswith("over the whole cascade only nothing")


def test_a_dataframe_is_read_through_frames() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(_rows())
    frame.loc[frame["confidence"].isna(), "prediction"] = pd.NA
    assert judge_engine.calibrate(frame, stages=STAGES, risk=0.1, delta=0.1) == \
        judge_engine.calibrate(_rows(), stages=STAGES, risk=0.1, delta=0.1)


def test_numbers_agree_as_numbers() -> None:
    rows = [{"item": i, "stage": "s", "prediction": "1", "confidence": "0.9", "label": 1.0} for i in range(30)]
    document = judge_engine.calibrate(rows, stages=["s"], risk=0.1, delta=0.1)
    assert document["stages"][0]["errors"] == 0 and document["stages"][0]["answered"] == 30


@pytest.mark.parametrize(("change", "message"), [
    ({"stage": "mid"}, r"rows\[3\]: stage 'mid' is not one of the stages \(cheap, strong\)"),
    ({"confidence": 1.2}, r"rows\[3\]: confidence 1.2 is outside \[0, 1\]"),
    ({"confidence": -0.1}, r"rows\[3\]: confidence -0.1 is outside \[0, 1\]"),
    ({"confidence": "high"}, r"rows\[3\]: confidence 'high' is not a number"),
    ({"label": None}, r"rows\[3\]: no label for item 'q1', but rows\[2\] gave it 'A': an item is labelled in all its "
                      r"rows or in none"),
    ({"label": "B"}, r"rows\[3\]: label 'B' for item 'q1', but rows\[2\] gave it 'A'"),
    ({"prediction": None}, r"rows\[3\]: a confidence \(0.99\) without a prediction"),
    ({"item": ""}, r"rows\[3\]: item is empty"),
    ({"stage": "cheap"}, r"rows\[3\]: a second row for item 'q1' at stage 'cheap' \(the first is rows\[2\]\)"),
])
def test_bad_rows_are_named(change: dict[str, Any], message: str) -> None:
    rows = _rows()
    rows[3].update(change)
    with pytest.raises(CalibrationError, match=message):
        judge_engine.calibrate(rows, stages=STAGES, risk=0.1, delta=0.1)


def test_missing_fields_and_non_rows_are_named() -> None:
    rows = _rows()
    del rows[5]["label"]
    with pytest.raises(CalibrationError, match=r"rows\[5\]: no field 'label' \(a row holds item, stage"):
        judge_engine.calibrate(rows, stages=STAGES, risk=0.1, delta=0.1)
    with pytest.raises(CalibrationError, match=r"rows\[0\]: not a row of fields \(got list\)"):
        judge_engine.calibrate([["q1"]], stages=STAGES, risk=0.1, delta=0.1)
    with pytest.raises(CalibrationError, match="no rows"):
        judge_engine.calibrate([], stages=STAGES, risk=0.1, delta=0.1)


def test_predictions_that_never_match_a_label_are_refused() -> None:
    # the reference's human labels are 1/2 while a judge says A/B: every item would be an error
    rows = [{"item": i, "stage": "s", "prediction": "A", "confidence": 0.9, "label": 1} for i in range(40)]
    with pytest.raises(CalibrationError, match=r"stage 's': its predictions \(A\) never take a value the labels "
                                               r"take \(1.0\)"):
        judge_engine.calibrate(rows, stages=["s"], risk=0.1, delta=0.1)


@pytest.mark.parametrize(("settings", "message"), [
    ({"risk": 0.0}, "risk must be a number strictly between 0 and 1"),
    ({"risk": 1.0}, "risk must be"),
    ({"delta": 1.5}, "delta must be a number strictly between 0 and 1"),
    ({"delta": True}, "delta must be"),
    ({"min_items": 0}, "min_items must be a whole number >= 1"),
    ({"delta_rule": "holm"}, "delta_rule must be one of bonferroni, per_stage"),
    ({"stages": []}, "stages must be a non-empty list"),
    ({"stages": "cheap"}, "stages must be a non-empty list"),
    ({"stages": ["cheap", "cheap"]}, "stages: cheap named more than once"),
    ({"costs": {"cheap": 1}}, "costs: no cost for strong"),
    ({"costs": {"cheap": 1, "strong": 2, "mid": 3}}, "costs: no stage mid"),
    ({"costs": [1.0]}, "costs: 1 values for 2 stages"),
    ({"costs": [1.0, -2.0]}, "costs: stage 'strong': -2.0 is not a cost per item"),
])
def test_bad_settings_are_named(settings: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"stages": STAGES, "risk": 0.1, "delta": 0.1, **settings}
    with pytest.raises(CalibrationError, match=message) as raised:
        judge_engine.calibrate(_rows(), **arguments)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, TableError)


# --- the thresholds file ------------------------------------------------------------------------


def test_the_thresholds_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "thresholds.json"
    document = judge_engine.calibrate(_rows(), stages=STAGES, risk=0.1, delta=0.1, output=path)
    raw = json.loads(path.read_text())
    assert raw["format"] == "judge-engine-thresholds" and raw["version"] == THRESHOLDS_VERSION
    assert raw["package_version"] == judge_engine.__version__ and raw["created_at"].endswith("+00:00")
    thresholds = read_thresholds(path)
    assert (thresholds.risk, thresholds.delta, thresholds.delta_rule) == (0.1, 0.1, "bonferroni")
    assert (thresholds.items, thresholds.rows, thresholds.digest) == (100, 200, document["calibration"]["digest"])
    cheap = thresholds.stage("cheap")
    assert (cheap.threshold, cheap.answered, cheap.errors, cheap.offered) == (0.9, 40, 0, 100)
    assert cheap.bound == document["stages"][0]["bound"]  # floats written exactly
    assert thresholds.stage("strong").threshold == 0.99
    assert (thresholds.kind, thresholds.statement) == ("stage", document["statement"])
    with pytest.raises(KeyError):
        thresholds.stage("mid")


def _written(tmp_path: Path, **change: Any) -> Path:
    path = tmp_path / "t.json"
    write_thresholds(judge_engine.calibrate(_rows(), stages=STAGES, risk=0.1, delta=0.1), path)
    raw = json.loads(path.read_text())
    for key, value in change.items():
        if key.startswith("stage0_"):
            raw["stages"][0][key.removeprefix("stage0_")] = value
        else:
            raw[key] = value
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize(("change", "message"), [
    ({"version": 3}, "thresholds format 3 was written by a newer judge-engine"),
    ({"guarantee": "whole"}, "guarantee must be one of stage, cascade"),
    ({"format": "judge-engine-run"}, "not a judge-engine thresholds file"),
    ({"risk": 1.5}, "risk 1.5 is not strictly between 0 and 1"),
    ({"delta_rule": "holm"}, "delta_rule must be one of"),
    ({"stages": []}, "stages is empty"),
    ({"stage0_threshold": 1.3}, r"stages\[0\]: threshold 1.3 is outside \[0, 1\]"),
    ({"stage0_answered": "40"}, r"stages\[0\]: answered must be a whole number"),
    ({"stage0_errors": 41}, r"stages\[0\]: needs errors <= answered <= offered"),
    ({"stage0_bound": None}, r"stages\[0\]: a stage guarantee's stage with a threshold has the bound it passed with"),
    ({"stage0_threshold": None}, r"stages\[0\]: a stage with no threshold answers nothing"),
    ({"stage0_stage": "strong"}, "a stage named more than once"),
])
def test_a_bad_thresholds_file_is_named(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    path = _written(tmp_path, **change)
    with pytest.raises(CalibrationError, match=message) as raised:
        read_thresholds(path)
    assert str(path) in str(raised.value)


def test_an_unreadable_thresholds_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="cannot read the thresholds file"):
        read_thresholds(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CalibrationError, match="bad.json: not JSON"):
        read_thresholds(tmp_path / "bad.json")


# --- the command line ---------------------------------------------------------------------------


def _rows_file(tmp_path: Path, kind: str, rows: list[dict[str, Any]] | None = None) -> Path:
    rows = _rows() if rows is None else rows
    path = tmp_path / f"rows.{kind}"
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        lines = ["item,stage,prediction,confidence,label"] + [
            ",".join("" if r[f] is None else str(r[f]) for f in ("item", "stage", "prediction", "confidence", "label"))
            for r in rows]
        path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_cli_json_is_the_python_document(tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = _rows_file(tmp_path, kind)
    code = main(["calibrate", "--rows", str(path), "--stages", "cheap,strong", "--risk", "0.1", "--delta", "0.1",
                 "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    expected = calibrate_rows(_rows(), stages=STAGES, risk=0.1, delta=0.1)
    if kind == "csv":  # text cells: another digest, the same figures
        printed["calibration"].pop("digest")
        expected["calibration"].pop("digest")
    assert printed == expected


def test_cli_table_at_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    rows = _rows()
    for row in rows:
        if row["stage"] == "strong" and row["item"] in {f"q{i}" for i in range(40, 45)}:
            row["prediction"] = "B"
    out = tmp_path / "thresholds.json"
    code = main(["calibrate", "--rows", str(_rows_file(tmp_path, "jsonl", rows)), "--stages", "cheap,strong",
                 "--risk", "0.1", "--delta", "0.1", "--costs", "cheap=1,strong=10", "--output", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    # every line within 80 columns but the path's, which is never broken (display.path_line)
    assert max(len(line) for line in text.splitlines() if not line.startswith("thresholds: ")) <= 80
    flat = " ".join(text.split())
    assert ("guaranteed: agreement with humans >= 90% on answered items, with probability >= 90%, over the whole "
            "cascade (stage guarantee: each stage tested at delta / 2, Bonferroni)") in flat
    assert "┃ stage ┃ threshold ┃ reached ┃ answered ┃ errors ┃ agreement ┃ bound ┃" in flat  # the cascade's words
    assert "│ cheap │ 0.9000 │ 100 │ 40 │ 0 │ 100.0% │ 0.072 │" in flat
    assert "strong: answers nothing: at confidence >= 0.9900, 5 errors in 55 items, bound 0.182 > 0.1" in flat
    assert "calibration items" in flat
    assert "coverage 40.0% (40 of 100 items answered)" in flat
    assert f"thresholds: {out}" in flat and read_thresholds(out).stage("strong").threshold is None


def test_cli_costs_are_written_as_dollars(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``--costs`` are dollars per item: the cost line writes them as money.dollars does ($0.0002,
    not 0.0002), each stage's after the cascade's. Expected cost per item: cheap answers 40 of the
    100 items and strong answers 55 of the other 60, so every item is asked of cheap ($0.0002) and
    60 of strong (0.6 x $0.01 = $0.006): $0.0062 against $0.01 for strong alone, 62.0%."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["calibrate", "--rows", str(_rows_file(tmp_path, "jsonl")), "--stages", "cheap,strong",
                 "--risk", "0.1", "--delta", "0.1", "--costs", "cheap=0.0002,strong=0.01"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "│ cheap │ 0.9000 │ 100 │ 40 │ 0 │ 100.0% │ 0.072 │" in flat
    assert ("cost per item $0.0062 against $0.01 for strong alone (62.0%); each stage's: cheap $0.0002, strong "
            "$0.01") in flat


def test_cli_errors_name_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows()
    rows[6]["confidence"] = 2
    path = _rows_file(tmp_path, "csv", rows)
    code = main(["calibrate", "--rows", str(path), "--stages", "cheap,strong", "--risk", "0.1", "--delta", "0.1"])
    assert code == 2
    assert f"{path}: line 8: confidence '2' is outside [0, 1]" in capsys.readouterr().err  # header = line 1
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(json.dumps(_rows()[0]) + "\n\n{not json\n")
    assert main(["calibrate", "--rows", str(jsonl), "--stages", "cheap", "--risk", "0.1", "--delta", "0.1"]) == 2
    assert f"{jsonl}: line 3 is not JSON" in capsys.readouterr().err


@pytest.mark.parametrize(("arguments", "message"), [
    (["--risk", "1.5"], "risk must be a number strictly between 0 and 1"),
    (["--costs", "cheap:1"], "--costs: 'cheap:1' is not STAGE=COST"),
    (["--stages", "cheap"], "stage 'strong' is not one of the stages (cheap)"),
])
def test_cli_bad_flags_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str],
                              message: str) -> None:
    base = {"--stages": "cheap,strong", "--risk": "0.1", "--delta": "0.1"}
    base.update(dict(zip(arguments[::2], arguments[1::2], strict=True)))
    argv = ["calibrate", "--rows", str(_rows_file(tmp_path, "jsonl"))] + [x for kv in base.items() for x in kv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_rows_need_stages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _rows_file(tmp_path, "jsonl")
    assert main(["calibrate", "--rows", str(path), "--risk", "0.1", "--delta", "0.1"]) == 2
    assert "--rows needs --stages A,B,C" in capsys.readouterr().err


def test_cli_run_dir_needs_the_human_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", str(tmp_path), "--stages", "a", "--risk", "0.1", "--delta", "0.1"]) == 2
    assert "RUN_DIR needs the human labels: --human-table FILE --key ID --label COLUMN" in capsys.readouterr().err
