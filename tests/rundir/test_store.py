"""The append-only store: a torn last line tolerated and cut, a corrupt middle line and a second
writer refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_engine.errors import RunDirError
from judge_engine.rundir.records import Manifest, OutcomeRecord
from judge_engine.rundir.store import RunStore, latest_outcome_records, read_jsonl


def _manifest() -> Manifest:
    return Manifest.from_dict({"format": "judge-engine-run", "version": 1, "run_id": "run"})


def _outcome(task_id: str) -> OutcomeRecord:
    return OutcomeRecord(task_id, "item", "j", "gemba-mqm", "1", "m", 0.0, 0, "", "scored", score=-1.0)


def test_store_tolerates_and_cuts_a_torn_last_line(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "run", _manifest())
    store.write_outcome(_outcome("a"))
    store.write_outcome(_outcome("b"))
    store.close()
    outcomes = tmp_path / "run" / "outcomes.jsonl"
    with outcomes.open("ab") as handle:
        handle.write(b'{"task_id": "c", "sco')  # a crash mid-write
    assert [r["task_id"] for r in read_jsonl(outcomes)] == ["a", "b"]
    store = RunStore.open(tmp_path / "run")
    assert set(latest_outcome_records(tmp_path / "run")) == {"a", "b"}
    store.write_outcome(_outcome("c"))
    store.close()
    assert [r["task_id"] for r in read_jsonl(outcomes)] == ["a", "b", "c"]


def test_store_rejects_a_corrupt_middle_line_and_a_second_writer(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "run", _manifest())
    with pytest.raises(RunDirError, match="another judge-engine process"):
        RunStore.open(tmp_path / "run")
    store.close()
    outcomes = tmp_path / "run" / "outcomes.jsonl"
    outcomes.write_bytes(b'{"task_id": "a"}\ngarbage\n{"task_id": "b"}\n')
    with pytest.raises(RunDirError, match="outcomes.jsonl:2: corrupt line"):
        list(read_jsonl(outcomes))


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="not a judge-engine run directory"):
        RunStore.open(tmp_path)
