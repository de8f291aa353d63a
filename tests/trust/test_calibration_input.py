"""Calibration input (issue 35, point 5): a duplicate row is counted once and said, in a rows file
and in a human table (the reader ``calibrate``, ``stats`` and ``estimate`` share), while a
duplicate that differs exits 2 naming both lines; a table of one item says how many labelled
items it has and how many are needed, not that the vocabularies differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import judge_engine
from judge_engine.cli import EXIT_UNSCORED, EXIT_USAGE, main
from judge_engine.errors import CalibrationError
from judge_engine.trust.calibration import answering_advice
from judge_engine.trust.estimate_rows import human_labels

SETTINGS = ["--stages", "cheap,strong", "--risk", "0.15", "--delta", "0.1"]
HEADER = "item,stage,prediction,confidence,label\n"


def _rows(n: int) -> str:
    """n items, each right at both stages (cheap 0.9, strong 0.95)."""
    return "".join(f"q{i},cheap,A,0.9,A\nq{i},strong,A,0.95,A\n" for i in range(n))


def test_a_one_row_rows_file_says_how_many_labelled_items_it_has_and_needs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One item, wrong at its one stage: before, "its predictions (B) never take a value the labels
    take (A)" and exit 2. A threshold is tested from 30 items (--min-items 30; ln(0.05) / ln(0.85)
    = 18.4 is fewer), so no stage can answer: exit 3, the count first."""
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "q1,cheap,B,0.9,A\n", encoding="utf-8")
    assert main(["calibrate", "--rows", str(path), *SETTINGS]) == EXIT_UNSCORED == 3
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert "vocabular" not in captured.out + captured.err and "never take a value" not in captured.out + captured.err
    assert lines[0] == ("nothing answered: no stage answers the 1 calibration item, so a cascade with these "
                        "thresholds would abstain on every item")
    assert lines[1] == ("  1 labelled item to calibrate on: at least 30 labelled items are needed, the fewest a "
                        "threshold is tested with (--min-items 30)")
    assert "cheap: answers nothing: 1 item reached it with a judgment" in captured.out
    assert main(["calibrate", "--rows", str(path), *SETTINGS, "--json"]) == 3
    err = capsys.readouterr().err
    assert ("judge-engine calibrate: 1 labelled item to calibrate on: at least 30 labelled items are needed, the fewest "
            "a threshold is tested with (--min-items 30)") in err


def test_the_items_needed_follow_risk_and_delta_above_min_items() -> None:
    """risk 0.05, delta 0.05 over 2 stages: ln(0.025) / ln(0.95) = 71.9, so 72 > --min-items 30."""
    document = judge_engine.calibrate([{"item": "q1", "stage": "s", "prediction": "B", "confidence": 0.9,
                                        "label": "A"}, {"item": "q1", "stage": "t", "prediction": "B",
                                                        "confidence": 0.9, "label": "A"}],
                                      stages=["s", "t"], risk=0.05, delta=0.05)
    assert answering_advice(document)[0] == (
        "1 labelled item to calibrate on: at least 72 labelled items are needed, the fewest a threshold is tested "
        "with (at risk 0.05 and delta 0.05, above --min-items 30)")


def test_a_mismatched_vocabulary_is_still_refused_once_a_threshold_can_be_tested() -> None:
    rows = [{"item": i, "stage": "s", "prediction": "A", "confidence": 0.9, "label": 1} for i in range(30)]
    with pytest.raises(CalibrationError, match=r"stage 's': its predictions \(A\) never take a value the labels take"):
        judge_engine.calibrate(rows, stages=["s"], risk=0.15, delta=0.1)
    assert judge_engine.calibrate(rows[:29], stages=["s"], risk=0.15, delta=0.1)["answered"] == 0


def test_a_rows_files_identical_duplicate_is_counted_once_and_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: "a second row for item 'q0' at stage 'cheap'" and exit 2, for a row equal to the
    first. Now the same thresholds as without it, and a note naming both lines."""
    monkeypatch.setenv("COLUMNS", "200")
    once, twice = tmp_path / "once.csv", tmp_path / "twice.csv"
    once.write_text(HEADER + _rows(40), encoding="utf-8")
    twice.write_text(HEADER + _rows(40) + "q0,cheap,A,0.9,A\nq0,cheap,A,0.90,A\n", encoding="utf-8")
    assert main(["calibrate", "--rows", str(twice), *SETTINGS]) == 0
    out = " ".join(capsys.readouterr().out.split())  # a long tmp path wraps
    assert (f"2 duplicate rows (the same item, stage, prediction, confidence and label as an earlier row, e.g. 'q0' "
            f"on {twice}: line 82, first on {twice}: line 2): each is counted once") in out
    documents = []
    for path in (once, twice):
        assert main(["calibrate", "--rows", str(path), *SETTINGS, "--json"]) == 0
        documents.append(json.loads(capsys.readouterr().out))
    assert documents[1]["calibration"] == {**documents[0]["calibration"], "duplicates": 2}
    assert documents[0]["calibration"]["duplicates"] == 0 and documents[0]["notes"] == []
    assert documents[1]["stages"] == documents[0]["stages"]


def test_a_rows_files_differing_duplicate_exits_2_naming_both_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + _rows(40) + "q0,cheap,A,0.8,A\n", encoding="utf-8")
    assert main(["calibrate", "--rows", str(path), *SETTINGS]) == EXIT_USAGE == 2
    assert (f"{path}: line 82: a second row for item 'q0' at stage 'cheap' (the first is {path}: line 2)"
            in capsys.readouterr().err)


def test_the_estimate_readers_duplicates_are_said_as_calibrates_are(tmp_path: Path) -> None:
    """``estimate --human-table`` and ``stats --human-table`` read with :func:`human_labels`: the
    same note as ``calibrate``'s reader; a label that differs names both lines (before: "and
    earlier 1.0", no line)."""
    path = tmp_path / "humans.csv"
    path.write_text("id,mqm\na,1\nb,2\na,1.0\nb,2\n", encoding="utf-8")
    human = human_labels(path, key="id", column="mqm")
    assert human.labels == {"a": 1.0, "b": 2.0}
    assert human.notes == [f"{path}: 2 duplicate rows (an item labelled again with the same label, e.g. 'a' on "
                           "line 4, first on line 2): each is counted once"]
    path.write_text("id,mqm\na,1\nb,2\na,3\n", encoding="utf-8")
    with pytest.raises(CalibrationError) as raised:
        human_labels(path, key="id", column="mqm")
    assert str(raised.value) == f"{path}: line 4: item 'a' labelled '3', but {path}: line 2 labelled it '1'"
