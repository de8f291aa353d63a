"""A run as a table (issue 15, item 4): ``judge-engine export`` and ``judge_engine.load_run``.

The expected values are read from ``outcomes.jsonl`` with the standard library's json (the last
line per task), never through the code under test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from judge_engine.store import latest_outcome_lines, latest_outcome_records

REPO = Path(__file__).resolve().parents[1]
RUN_V1 = REPO / "tests" / "fixtures" / "run_v1"


def latest_lines(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Task id -> its last outcome line, in the order of those lines."""
    latest: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "outcomes.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        latest.pop(record["task_id"], None)
        latest[record["task_id"]] = record
    return latest


# --- the streaming reader of the latest outcomes -----------------------------------------------


def test_latest_outcome_lines_stream_what_latest_outcome_records_hold() -> None:
    lines = latest_outcome_lines(RUN_V1)
    assert lines.lines == 22 and lines.tasks == 16  # 6 tasks judged again by resume --retry
    assert list(lines) == list(latest_outcome_records(RUN_V1).values())
    assert list(lines) == list(lines)  # iterated again, the same rows
    assert [r.task_id for r in lines] == list(latest_lines(RUN_V1))


def test_lines_appended_after_the_index_are_left_out(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN_V1, run)
    lines = latest_outcome_lines(run)
    before = list(lines)
    first = (run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()[0]
    with (run / "outcomes.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(first + "\n")  # a later line for a task that already has its latest
    assert list(lines) == before
    assert latest_outcome_lines(run).tasks == 16


def test_an_empty_run_has_no_latest_outcomes(tmp_path: Path) -> None:
    (tmp_path / "outcomes.jsonl").write_text("", encoding="utf-8")
    assert latest_outcome_lines(tmp_path).tasks == 0 and list(latest_outcome_lines(tmp_path)) == []
    one = (RUN_V1 / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()[0]
    (tmp_path / "outcomes.jsonl").write_text(one + "\n", encoding="utf-8")
    assert [r.task_id for r in latest_outcome_lines(tmp_path)] == [json.loads(one)["task_id"]]

