"""Runs this user may not write (an archive, a colleague's run, a read-only mount) are read in
full, writing nothing; and an index is rebuilt only when it is corrupt, never when it is merely
busy, and never under a process writing the run.

A read-only run is made with a read-only bind mount as root, or by taking the write
permissions away otherwise (:func:`tests.machine.read_only`); the test skips where neither works.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.errors import RunDirError
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.rundir.index import INDEX, Query, RunIndex
from judge_engine.rundir.store import open_index
from tests.harness import make_job
from tests.machine import as_nobody, read_only, snapshot

ITEMS = 20


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of twenty items, complete, its index current."""
    folder = tmp_path_factory.mktemp("read-only-run")
    os.environ.setdefault("JUDGE_ENGINE_TEST_KEY", "fake-test-key-0000")
    with FakeServer(FakeConfig()) as server:
        job = make_job(folder, server, items=ITEMS)
        assert main(["run", str(job.config), "--no-live"]) == 0
    return job.only_run()


def _stale_index(run: Path, scratch: Path) -> None:
    """Give ``run`` the index it had halfway: it covers the first half of its lines only (a run
    killed before its last flush, then read)."""
    half = scratch / "half"
    shutil.copytree(run, half, ignore=shutil.ignore_patterns("index.sqlite*"))
    for name in ("outcomes.jsonl", "transcripts.jsonl"):
        lines = (half / name).read_bytes().splitlines(keepends=True)
        (half / name).write_bytes(b"".join(lines[: len(lines) // 2]))
    with RunIndex.open(half) as index:
        assert 0 < index.count(Query(status="scored")) < ITEMS
    for leftover in run.glob("index.sqlite*"):
        leftover.unlink()
    shutil.copy(half / INDEX, run / INDEX)


@pytest.fixture(params=["fresh", "stale", "missing"])
def archived(request: pytest.FixtureRequest, finished_run: Path, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the finished run as a read-only directory: its index as the run left it, stale,
    or missing. Temporary files go to a directory of the test's own (emptied by then, checked)."""
    source = tmp_path / "source"
    shutil.copytree(finished_run, source)
    if request.param == "stale":
        _stale_index(source, tmp_path)
    elif request.param == "missing":
        for leftover in source.glob("index.sqlite*"):
            leftover.unlink()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before = snapshot(source)
    with read_only(source, tmp_path / "mount") as view:
        yield view
    assert snapshot(source) == before, "a reader wrote into the run"
    assert not list(scratch.iterdir()), "a temporary index was left behind"


def test_status_of_a_read_only_run(archived: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(archived)]) == 0
    out = capsys.readouterr().out
    assert f"{ITEMS}/{ITEMS} done" in out, out


def test_show_of_a_read_only_run(archived: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(archived), "--brief", "--limit", "100"]) == 0
    out = capsys.readouterr().out
    assert all(f"item-{n:05d}" in out for n in range(ITEMS)), out
    assert main(["show", str(archived), "--item", "item-00019"]) == 0  # the prompt and the transcript
    assert "item-00019" in capsys.readouterr().out


def test_stats_of_a_read_only_run(archived: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(archived)]) == 0
    assert capsys.readouterr().out


def test_export_of_a_read_only_run(archived: Path, tmp_path: Path) -> None:
    out = tmp_path / "outcomes.csv"
    assert main(["export", str(archived), "--output", str(out)]) == 0
    with out.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == ITEMS and {r["status"] for r in rows} == {"scored"}


def test_view_of_a_read_only_run(archived: Path) -> None:
    from tests.viewer.conftest import ServedViewer

    with ServedViewer([archived]) as viewer:
        viewer.ready()
        page = viewer.json("api/tasks?size=200")
        assert page["total"] == ITEMS
        row = page["rows"][-1]
        assert viewer.json(f"api/item?id={row['item_id']}")["tasks"]
        assert viewer.json(f"api/transcript?run={row['run']}&task={row['task_id']}")
        overview = viewer.json("api/overview")
        assert not any(run["derived"]["problems"] for run in overview["runs"]), overview["runs"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["fresh", "stale", "missing"])
def test_a_user_who_may_not_write_the_run_reads_it(variant: str, finished_run: Path) -> None:
    """The same commands as ``nobody``, on a run root owns: permissions, not a mount, make it
    read-only here (what a colleague's run is)."""
    shared = Path(tempfile.mkdtemp(prefix="judge-engine-shared-", dir="/tmp"))
    try:
        run = shared / "run"
        shutil.copytree(finished_run, run)
        if variant == "stale":
            _stale_index(run, shared)
        elif variant == "missing":
            for leftover in run.glob("index.sqlite*"):
                leftover.unlink()
        for path in (shared, *shared.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        out, scratch = shared / "out", shared / "tmp"
        for folder in (out, scratch):
            folder.mkdir()
            folder.chmod(0o777)
        before = snapshot(run)
        for argv, expected in ((["status", str(run)], f"{ITEMS}/{ITEMS} done"),
                               (["show", str(run), "--brief", "--limit", "100"], "item-00019"),
                               (["stats", str(run)], "mqm"),
                               (["export", str(run), "--output", str(out / "outcomes.csv")], "")):
            done = as_nobody(argv, cwd=scratch)
            assert done.returncode == 0 and "Traceback" not in done.stderr, (argv, done.stderr)
            assert expected in done.stdout, (argv, done.stdout)
        if variant == "fresh":  # an export into the run itself: a path this user may not write
            done = as_nobody(["export", str(run), "--output", str(run / "mine.csv")], cwd=scratch)
            (line,) = done.stderr.strip().splitlines()
            assert done.returncode == 2 and line.startswith(f"judge-engine: error: {run / 'mine.csv'}"), done.stderr
            assert line.endswith(": permission denied"), line
        assert snapshot(run) == before, "a reader wrote into the run"
        assert not list(scratch.iterdir()), "a temporary index was left behind"
        with (out / "outcomes.csv").open(encoding="utf-8") as handle:
            assert len(list(csv.DictReader(handle))) == ITEMS
    finally:
        shutil.rmtree(shared)


# --- a busy, a corrupt index -----------------------------------------------------------------------


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    return run


def test_a_busy_index_is_not_taken_for_a_corrupt_one(run_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holds the index locked: the reader says it is busy; the index stays."""
    monkeypatch.setattr("judge_engine.rundir.index.BUSY_S", 0.2, raising=False)
    before = (run_copy / INDEX).read_bytes()
    holder = sqlite3.connect(run_copy / INDEX, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(RunDirError, match="busy"):
            open_index(run_copy)
        assert main(["show", str(run_copy), "--brief"]) == 2  # said, not a traceback
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (run_copy / INDEX).read_bytes() == before
    with open_index(run_copy) as index:
        assert index.count() == ITEMS


def _corrupt(run: Path) -> bytes:
    for leftover in run.glob("index.sqlite-*"):
        leftover.unlink()
    garbage = b"this is not an index: " * 500
    (run / INDEX).write_bytes(garbage)
    return garbage


def test_a_corrupt_index_is_rebuilt_when_nobody_writes_the_run(run_copy: Path) -> None:
    _corrupt(run_copy)
    with open_index(run_copy) as index:
        assert index.in_place and index.count(Query(status="scored")) == ITEMS
    with sqlite3.connect(run_copy / INDEX) as db:  # a real index again, in place
        assert db.execute("SELECT count(*) FROM tasks").fetchone()[0] == ITEMS


def test_a_corrupt_index_is_left_alone_while_a_process_writes_the_run(run_copy: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's lock is held (a writer): the reader builds its own index elsewhere (removed
    when it is closed), and the writer's file is not touched."""
    garbage = _corrupt(run_copy)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    lock = os.open(run_copy / ".lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with open_index(run_copy) as index:
            assert index.count(Query(status="scored")) == ITEMS
            assert (run_copy / INDEX).read_bytes() == garbage
            assert list(scratch.iterdir())  # built here instead
    finally:
        os.close(lock)
    assert (run_copy / INDEX).read_bytes() == garbage
    assert not list(scratch.iterdir())


def test_an_index_of_another_version_is_rebuilt_like_a_corrupt_one(run_copy: Path) -> None:
    with sqlite3.connect(run_copy / INDEX) as db:
        db.execute("UPDATE meta SET value = '999' WHERE key = 'version'")
    with open_index(run_copy) as index:
        assert index.in_place and index.count() == ITEMS
    with sqlite3.connect(run_copy / INDEX) as db:
        assert json.loads(db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]) != 999
