"""Table and run-directory readers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from judge_engine.stats import TableError, join, parse_list, read_run, read_table, run_table
from judge_engine.stats.runs import score_matrices
from tests.stats.fixtures import outcome, sample_records, write_run


def test_read_csv_renames_duplicate_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('id,x,x,text\n1,2,3,"multi\nline"\n2,,nan,b\n', encoding="utf-8")
    t = read_table(path)
    assert t.columns == ["id", "x", "x.1", "text"]
    assert "appears more than once" in t.notes[0]
    assert t.rows[0]["text"] == "multi\nline"
    assert t.floats("x")[0] == 2 and math.isnan(t.floats("x")[1]) and math.isnan(t.floats("x.1")[1])
    with pytest.raises(TableError, match="no column 'y'"):
        t.floats("y")
    with pytest.raises(TableError, match="not a number"):
        t.floats("text")


def test_read_json_jsonl_and_errors(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([{"k": 1, "s": [1, 2]}]), encoding="utf-8")
    assert read_table(tmp_path / "a.json").rows[0]["s"] == [1, 2]
    (tmp_path / "b.jsonl").write_text('{"k": 1}\n{"k": 2, "z": 3}\n{"k": ', encoding="utf-8")
    b = read_table(tmp_path / "b.jsonl")
    assert b.columns == ["k", "z"] and len(b.rows) == 2 and "torn" in b.notes[0]
    (tmp_path / "c.jsonl").write_text('{"k": 1\n{"k": 2}\n', encoding="utf-8")
    with pytest.raises(TableError, match="line 1"):
        read_table(tmp_path / "c.jsonl")
    with pytest.raises(TableError, match="cannot read"):
        read_table(tmp_path / "missing.csv")
    with pytest.raises(TableError, match="unknown table format"):
        read_table(tmp_path / "x.parquet")


def test_join(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("id,s\n1,0.5\n2,0.7\n3,0.1\n", encoding="utf-8")
    (tmp_path / "r.csv").write_text("key,s,h\n1,x,5\n2,y,4\n", encoding="utf-8")
    j = join(read_table(tmp_path / "l.csv"), read_table(tmp_path / "r.csv"),
             left_key=["id"], right_key=["key"])  # fmt: skip
    assert [r["h"] for r in j.rows] == ["5", "4"] and "s.right" in j.columns
    (tmp_path / "d.csv").write_text("key,h\n1,5\n1,4\n", encoding="utf-8")
    with pytest.raises(TableError, match="not unique"):
        join(read_table(tmp_path / "l.csv"), read_table(tmp_path / "d.csv"),
             left_key=["id"], right_key=["key"])  # fmt: skip
    (tmp_path / "n.csv").write_text("key,h\n9,5\n", encoding="utf-8")
    with pytest.raises(TableError, match="no rows"):
        join(read_table(tmp_path / "l.csv"), read_table(tmp_path / "n.csv"),
             left_key=["id"], right_key=["key"])  # fmt: skip


def test_parse_list() -> None:
    assert parse_list("[3, 2, 3]") == [3, 2, 3]
    assert parse_list("['a', \"b\"]") == ["a", "b"]  # Python literal
    assert parse_list([{"expression": "x"}]) == [{"expression": "x"}]
    assert parse_list("single") == ["single"]
    assert parse_list("") == [] and parse_list(None) == []


def test_read_run_last_line_wins_and_torn_tail(tmp_path: Path) -> None:
    records = sample_records()
    first_b = records[-4]["task_id"]  # judge b, item i1: re-done, now unscored
    records.append({**outcome("i1", "b", 0.0, 0, None), "task_id": first_b})
    run = read_run(write_run(tmp_path / "run", records, torn=True))
    assert run.manifest is not None and run.manifest.version == 1
    assert run.judges == ["a", "b"]
    assert len(run.outcomes) == len(records) - 1  # the duplicate task id replaced its first line
    redone = next(o for o in run.outcomes if o.task_id == first_b)
    assert redone.status == "unscored" and math.isnan(redone.score)
    assert any("torn" in n for n in run.notes)


def test_read_run_errors(tmp_path: Path) -> None:
    with pytest.raises(TableError, match="not found"):
        read_run(tmp_path)
    (tmp_path / "outcomes.jsonl").write_text('{"item_id": "x"}\n{}\n', encoding="utf-8")
    with pytest.raises(TableError, match="outcome line without"):
        read_run(tmp_path)


def test_score_matrices_and_run_table(tmp_path: Path) -> None:
    run = read_run(write_run(tmp_path / "run", sample_records()))
    mats = score_matrices(run.outcomes)
    items, m = mats[("a", 1.0, "")]
    assert items == ["i1", "i2", "i3", "i4"]
    assert m[1][:2] == [-5, -5] and math.isnan(m[1][2])
    table = run_table(run, temperature=0.0)
    assert table.columns == ["item_id", "a", "b"]
    row = next(r for r in table.rows if r["item_id"] == "i2")
    assert row["a"] == pytest.approx(-16 / 3) and row["b"] == -5
