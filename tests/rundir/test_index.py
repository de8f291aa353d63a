"""The run index (issue 15, item 2): built while the run writes, rebuilt from the JSONL files when
deleted, always the latest outcome per task; ``show``'s filters read through it."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.rundir.index import INDEX, Query, RunIndex
from judge_engine.rundir.store import latest_outcome_records, open_index
from tests.harness import make_job

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "run_v1"


def _dump(run: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    db = sqlite3.connect(run / INDEX)
    try:
        tasks = sorted(db.execute("SELECT task_id, item_id, judge, temperature, repeat, variant, status, reason_code, "
                                  "score, outcome_offset, outcome_length FROM tasks"))
        attempts = sorted(db.execute("SELECT t.task_id, a.offset, a.length FROM attempts a JOIN tasks t ON t.id = a.task"))
    finally:
        db.close()
    return tasks, attempts


@pytest.fixture
def faulty_run(tmp_path: Path, fake_server: FakeServer) -> Path:
    """A finished run with unscored tasks (malformed answers, no re-asks), then a --retry that
    supersedes some outcome lines."""
    fake_server.update(malformed_rate=0.3, seed=2)
    job = make_job(tmp_path, fake_server, items=40, judge={"temperatures": [0.0, 1.0],
                                                            "retries": {"reasks": 0}})
    assert main(["run", str(job.config), "--no-live", "--allow-unscored"]) == 0
    fake_server.update(malformed_rate=0.0)
    run = job.only_run()
    assert main(["resume", str(run), "--retry", "unreadable", "--no-live", "--allow-unscored"]) == 0
    return run


def test_the_index_a_run_writes_equals_one_rebuilt_from_its_files(faulty_run: Path) -> None:
    written = _dump(faulty_run)
    latest = latest_outcome_records(faulty_run)
    assert len(written[0]) == len(latest) == 80
    assert {row[0]: row[6] for row in written[0]} == {t: o.status for t, o in latest.items()}  # the latest line wins
    (faulty_run / INDEX).unlink()
    for name in ("index.sqlite-wal", "index.sqlite-shm"):
        (faulty_run / name).unlink(missing_ok=True)
    with open_index(faulty_run):
        pass
    assert _dump(faulty_run) == written


def test_queries_filter_sort_and_page_in_the_index(faulty_run: Path) -> None:
    latest = latest_outcome_records(faulty_run)
    with open_index(faulty_run) as index:
        unscored = index.tasks(Query(status="unscored"))
        assert {r.task_id for r in unscored} == {t for t, o in latest.items() if not o.scored}
        by_score = index.tasks(Query(status="scored", sort="score"))
        assert [r.score for r in by_score] == sorted(o.score for o in latest.values() if o.scored)  # type: ignore[type-var]
        page = index.tasks(Query(status="scored", sort="score", limit=5, offset=5))
        assert page == by_score[5:10]
        high = index.tasks(Query(temperature=1.0, min_score=-5, max_score=-1))
        assert high and all(r.temperature == 1.0 and -5 <= (r.score or 0) <= -1 for r in high)
        assert index.count(Query(judge="mqm")) == 80
        item = by_score[0].item_id
        offsets = index.attempt_offsets([r.task_id for r in index.tasks(Query(item_id=item))])
        assert all(offsets.values()) and len(offsets) == 2  # two temperatures, each with its attempts


def test_show_filters_pick_exactly_the_tasks_asked_for(faulty_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    latest = latest_outcome_records(faulty_run)
    unscored = [o for o in latest.values() if not o.scored]
    assert main(["show", str(faulty_run), "--status", "unscored", "--brief", "--limit", "100"]) == 0
    out = capsys.readouterr().out
    assert out.count("unreadable") == len(unscored) > 0
    assert main(["show", str(faulty_run), "--status", "scored", "--sort", "score", "--limit", "1"]) == 0
    lowest = min((o for o in latest.values() if o.scored), key=lambda o: (o.score, o.item_id))
    shown = capsys.readouterr().out
    assert f"item {lowest.item_id} " in shown and "sent first, folded: system prompt" in shown
    assert f"score: {lowest.score:g}" in shown


def test_show_of_a_judge_the_run_does_not_have_is_bad_input(faulty_run: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt judge is not "no task matches" (exit 0): it names the run's judges, exit 2."""
    judge = next(iter(latest_outcome_records(faulty_run).values())).judge
    assert main(["show", str(faulty_run), "--judge", judge + "x", "--brief"]) == 2
    assert f"has: {judge}" in capsys.readouterr().err


def test_a_run_written_before_the_index_gets_one_on_first_read(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("run.json", "outcomes.jsonl", "transcripts.jsonl"):
        shutil.copy(V1 / name, run / name)
    with RunIndex.open(run) as index:
        assert index.count() == 16 and index.count(Query(status="unscored")) == 6
        assert sum(len(v) for v in index.attempt_offsets([r.task_id for r in index.tasks()]).values()) == 22
