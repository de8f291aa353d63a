"""The run directory's formats (records.py): one definition, and every past version still read.

``tests/fixtures/run_v1`` was written by judge-engine before records.py existed (no format
version on its lines); every reader must still accept it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.errors import RunDirError
from judge_engine.rundir.records import (
    OUTCOME_VERSION,
    UNRECORDED,
    AttemptRecord,
    Manifest,
    OutcomeRecord,
    Spend,
    transcript_record,
)
from judge_engine.rundir.store import (
    iter_outcomes,
    iter_transcript,
    latest_outcome_records,
    read_manifest,
)
from judge_engine.stats.runs import read_run

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "run_v1"


@pytest.fixture
def v1_run(tmp_path: Path) -> Path:
    """A copy of the version-1 run directory, laid out as it was made (config two levels up)."""
    run = tmp_path / "runs" / "fx-440f79a8ce"
    run.mkdir(parents=True)
    for name in ("run.json", "outcomes.jsonl", "transcripts.jsonl"):
        shutil.copy(V1 / name, run / name)
    for name in ("config.yaml", "items.jsonl"):
        shutil.copy(V1 / name, tmp_path / name)
    return run


def test_every_reader_accepts_a_version_1_run_directory(v1_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = read_manifest(v1_run)
    assert manifest.version == 1 and manifest.run_id == "fx-440f79a8ce" and manifest.judges[0].name == "mqm"
    lines = list(iter_outcomes(v1_run))
    latest = latest_outcome_records(v1_run)
    assert len(lines) == 22 and len(latest) == 16  # six tasks judged again by resume --retry
    assert sum(o.scored for o in latest.values()) == 10
    assert {o.reason_code for o in latest.values() if not o.scored} == {"unreadable"}
    attempts = list(iter_transcript(v1_run))
    assert len(attempts) == 22 and all(isinstance(a, AttemptRecord) for a in attempts)
    spend = Spend()
    for attempt in attempts:
        spend.add(attempt)
    assert (spend.calls, spend.cache_hits) == (16, 6)  # as the run itself counted in run.json
    assert spend.to_dict() == {k: v for k, v in manifest.spend["total"].items() if k != "covers_bytes"}

    run = read_run(v1_run)
    assert len(run.outcomes) == 16 and run.judges == ["mqm"]
    assert main(["show", str(v1_run), "--item", "lit-002", "--full"]) == 0
    shown = capsys.readouterr().out
    assert "sent: system" in shown and "answer · attempt 1" in shown
    assert main(["stats", str(v1_run), "--quiet", "--json", str(v1_run.parent / "stats.json")]) == 0


def test_records_round_trip_at_the_current_version(v1_run: Path) -> None:
    for line in iter_outcomes(v1_run):
        written = line.to_dict()
        assert written["v"] == OUTCOME_VERSION and OutcomeRecord.from_dict(written) == line
    for attempt in iter_transcript(v1_run):
        assert transcript_record(attempt.to_dict()) == attempt
    manifest = read_manifest(v1_run)
    assert Manifest.from_dict(manifest.to_dict()) == manifest


def test_an_unscored_line_written_before_reason_codes_reads_as_unrecorded() -> None:
    line = {"task_id": "t", "item_id": "i", "judge": "j", "status": "unscored", "reason": "bad answer"}
    assert OutcomeRecord.from_dict(line).reason_code == UNRECORDED


@pytest.mark.parametrize("kind", ["outcome", "attempt", "manifest"])
def test_a_format_from_a_newer_judge_engine_is_refused_not_misread(kind: str) -> None:
    newer = {"outcome": lambda: OutcomeRecord.from_dict({"v": 99, "task_id": "t", "item_id": "i", "judge": "j",
                                                         "status": "scored"}),
             "attempt": lambda: transcript_record({"v": 99, "task_id": "t", "request": {}}),
             "manifest": lambda: Manifest.from_dict({"format": "judge-engine-run", "version": 99, "run_id": "r"})}
    with pytest.raises(RunDirError, match="newer judge-engine"):
        newer[kind]()


def test_a_line_without_the_fields_every_version_has_names_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "outcomes.jsonl").write_text(json.dumps({"task_id": "t", "judge": "j", "status": "scored"}) + "\n")
    with pytest.raises(RunDirError, match="outcomes.jsonl: an outcome line without 'item_id'"):
        list(iter_outcomes(tmp_path))
