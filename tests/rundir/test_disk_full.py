"""A disk that fills, turns read-only or runs out of quota under a run: one message naming the
path, exit 5, ``run.json`` stopped with the reason, whole lines only, and a resume that finishes
with every task exactly once.

Two ways in: a real small disk (a tmpfs that fills; skipped where mounting is not allowed), and
the store's one write call (:meth:`RunStore._write`) refusing at a chosen line, with the errno a
full, read-only or over-quota disk gives. SQLite's own "database or disk is full" comes from a
real SQLite, capped with ``max_page_count``.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import EXIT_DISK, main
from judge_engine.errors import DiskError
from judge_engine.fake import FakeServer
from judge_engine.rundir.index import RunIndex
from judge_engine.rundir.store import RunStore
from tests.harness import Job, make_job, read_lines
from tests.machine import grow, read_only, small_disk

CONCURRENCY = 8


def _job(tmp_path: Path, server: FakeServer, items: int, *, runs: Path | None = None, cache: Path | None = None) -> Job:
    job = make_job(tmp_path, server, items=items, judge={"limits": {"concurrency": CONCURRENCY}})
    config = yaml.safe_load(job.config.read_text(encoding="utf-8"))
    if runs is not None:
        config["output"]["dir"] = str(runs)
    if cache is not None:
        config["cache"]["dir"] = str(cache)
    job.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    return job


def _only_run(runs: Path) -> Path:
    (run,) = [p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()]
    return run


def _whole_lines(run: Path) -> None:
    """Every JSONL file of the run ends at a line's end, and every line is JSON (no torn line
    left for a later write to glue onto)."""
    for name in ("outcomes.jsonl", "transcripts.jsonl", "blocks.jsonl"):
        data = (run / name).read_bytes() if (run / name).exists() else b""
        assert not data or data.endswith(b"\n"), name
        for line in data.splitlines():
            json.loads(line)


def _stopped_for_disk(run: Path, kind: str) -> dict[str, Any]:
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "stopped", manifest["status"]
    stopped = manifest["stopped"]
    assert stopped["reason"] == "disk" and stopped["kind"] == kind, stopped
    assert stopped["path"].startswith(str(run)), stopped
    assert manifest["sessions"][-1]["status"] == "stopped"
    return manifest


def _one_message(stderr: str, words: str) -> None:
    """One message saying what happened and what to do, no traceback."""
    assert "Traceback" not in stderr, stderr
    stderr = " ".join(stderr.split())  # as read, whatever the terminal's width wrapped
    assert stderr.count("Stopped: cannot write") == 1, stderr
    assert words in stderr, stderr
    assert "judge-engine resume" in stderr, stderr


def _resume_finishes(run: Path, items: int, server: FakeServer) -> None:
    """``resume`` ends the run: every task exactly once, nothing lost, nothing paid twice but the
    calls that were in flight when the disk refused."""
    assert main(["resume", str(run), "--no-live"]) == 0
    per_task = Counter(o["task_id"] for o in read_lines(run / "outcomes.jsonl"))
    assert len(per_task) == items and set(per_task.values()) == {1}, "every task exactly once"
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed" and "stopped" not in manifest
    assert manifest["counts"]["total"]["scored"] == items
    assert server.stats()["requests_total"] <= items + CONCURRENCY


def test_a_disk_that_fills_stops_the_run_and_resume_finishes_it(tmp_path: Path, fake_server: FakeServer,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A real disk too small for the run: its exit code and everything it prints; then the disk
    is given room and the run resumed."""
    items = 200
    with small_disk(tmp_path / "disk", "512k") as disk:
        job = _job(tmp_path, fake_server, items, runs=disk / "runs")
        assert main(["run", str(job.config), "--no-live"]) == EXIT_DISK
        stderr = capsys.readouterr().err
        _one_message(stderr, "the disk is full (No space left on device)")
        assert "run.json records the stop" in stderr
        run = _only_run(disk / "runs")
        manifest = _stopped_for_disk(run, "full")
        _whole_lines(run)
        written = len(read_lines(run / "outcomes.jsonl"))
        assert 0 < written < items, written
        assert manifest["counts"]["total"]["tasks"] == written
        grow(disk, "32m")
        _resume_finishes(run, items, fake_server)


def _refuse_writes(monkeypatch: pytest.MonkeyPatch, *, after: int, code: int) -> None:
    """The store's writes fail with ``code`` from its ``after``-th line on; a full disk first
    takes half of the line it fills on (a short write)."""
    real = RunStore._write
    count = itertools.count()

    def write(self: RunStore, fd: int, data: bytes) -> int:
        number = next(count)
        if number < after:
            return real(self, fd, data)
        if number == after and code == errno.ENOSPC and len(data) > 1:
            return real(self, fd, data[: len(data) // 2])
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(RunStore, "_write", write)


@pytest.mark.parametrize(("code", "kind", "words"), [
    (errno.ENOSPC, "full", "the disk is full"),
    (errno.EROFS, "read-only", "the file system is read-only"),
    (errno.EDQUOT, "quota", "the disk quota is exceeded"),
])
def test_a_write_the_disk_refuses_stops_the_run(code: int, kind: str, words: str, tmp_path: Path,
                                                 fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    items = 120
    job = _job(tmp_path, fake_server, items)
    with monkeypatch.context() as patch:
        _refuse_writes(patch, after=150, code=code)
        assert main(["run", str(job.config), "--no-live"]) == EXIT_DISK
    _one_message(capsys.readouterr().err, words)
    run = job.only_run()
    manifest = _stopped_for_disk(run, kind)
    _whole_lines(run)
    assert manifest["counts"]["total"]["tasks"] == len(read_lines(run / "outcomes.jsonl"))
    assert not (run / ".reserve").exists()  # given back: a stopped run holds no room
    assert main(["status", str(run)]) == 0
    status = " ".join(capsys.readouterr().out.split())
    assert "stopped: disk" in status and f"{words} (" in status, status
    _resume_finishes(run, items, fake_server)


def test_an_index_the_disk_refuses_stops_the_run(tmp_path: Path, fake_server: FakeServer,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """SQLite's own "database or disk is full" (a real one: the index may not grow) stops the
    run like a line the disk refused; every line written is kept, the index catches up later."""
    items = 120
    job = _job(tmp_path, fake_server, items)
    real = RunIndex.writer

    def capped(self: RunIndex) -> Any:
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        self._db.execute(f"PRAGMA max_page_count = {pages + 1}")
        return real(self)

    with monkeypatch.context() as patch:
        patch.setattr(RunIndex, "writer", capped)
        patch.setattr("judge_engine.rundir.index.FLUSH_ROWS", 10)
        assert main(["run", str(job.config), "--no-live"]) == EXIT_DISK
    _one_message(capsys.readouterr().err, "index.sqlite: the disk is full (database or disk is full)")
    run = job.only_run()
    manifest = _stopped_for_disk(run, "full")
    _whole_lines(run)
    written = len(read_lines(run / "outcomes.jsonl"))
    assert manifest["counts"]["total"]["tasks"] == written  # counted from the lines: the index could not take them
    _resume_finishes(run, items, fake_server)


def test_a_run_json_the_disk_refuses_is_said(tmp_path: Path, fake_server: FakeServer,
                                             monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The disk refuses the last ``run.json`` too: the message says it still says running."""
    items = 60
    job = _job(tmp_path, fake_server, items)
    real = RunStore.write_manifest

    def write_manifest(self: RunStore, manifest: Any) -> None:
        if manifest.status != "running":
            raise DiskError(str(self.run_dir / "run.json"), "read-only", os.strerror(errno.EROFS))
        real(self, manifest)

    with monkeypatch.context() as patch:
        _refuse_writes(patch, after=40, code=errno.EROFS)
        patch.setattr(RunStore, "write_manifest", write_manifest)
        assert main(["run", str(job.config), "--no-live"]) == EXIT_DISK
    stderr = capsys.readouterr().err
    _one_message(stderr, "run.json could not be updated either")
    run = job.only_run()
    assert json.loads((run / "run.json").read_text(encoding="utf-8"))["status"] == "running"
    _resume_finishes(run, items, fake_server)


def test_a_run_on_a_read_only_disk_is_refused_before_anything_is_sent(
        tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``resume`` of a run on a read-only mount: one line naming the path, exit 5, nothing sent."""
    job = _job(tmp_path, fake_server, 30)
    with monkeypatch.context() as patch:
        _refuse_writes(patch, after=20, code=errno.ENOSPC)
        assert main(["run", str(job.config), "--no-live"]) == EXIT_DISK
    run = job.only_run()
    capsys.readouterr()
    sent = fake_server.stats()["requests_total"]
    with read_only(run, tmp_path / "ro") as view:
        assert main(["resume", str(view), "--no-live"]) == EXIT_DISK
        stderr = capsys.readouterr().err
    assert "Traceback" not in stderr and stderr.count("judge-engine: error: cannot write") == 1, stderr
    assert "read-only" in stderr or "permission denied" in stderr, stderr
    assert fake_server.stats()["requests_total"] == sent


# --- the answer cache: it degrades, the run goes on -------------------------------------------------


def test_a_cache_on_a_read_only_disk_is_refused_before_anything_is_sent(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A cache that cannot be made where the config puts it is bad input, named (exit 2, nothing
    sent); a cache that stops taking writes during the run degrades instead (next test)."""
    (tmp_path / "cache-source").mkdir()
    with read_only(tmp_path / "cache-source", tmp_path / "cache-ro") as cache_dir:
        job = _job(tmp_path, fake_server, 20, cache=cache_dir / "answers")
        assert main(["run", str(job.config), "--no-live"]) == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr and "cache.dir" in stderr and "not writable" in stderr, stderr
    assert fake_server.stats()["requests_total"] == 0


def test_a_cache_on_a_full_disk_leaves_the_run_going(tmp_path: Path, fake_server: FakeServer,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The cache on a disk of its own, which fills: the run (on another disk) completes, said once."""
    with small_disk(tmp_path / "cache-disk", "2m") as disk:
        (disk / "filler").write_bytes(b"\0" * 1728 * 1024)  # 320 KiB left: the cache opens, then fills
        job = _job(tmp_path, fake_server, 400, cache=disk / "answers")
        assert main(["run", str(job.config), "--no-live"]) == 0
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr and stderr.count("The answer cache could not be written") == 1, stderr
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 400 and {o["status"] for o in outcomes} == {"scored"}


# --- batch mode: its request files and its downloads ---------------------------------------------------


def test_a_batch_request_file_the_disk_refuses_is_a_disk_error(tmp_path: Path) -> None:
    from judge_engine.running.batch.chunks import ChunkLimits, ChunkWriter

    with small_disk(tmp_path / "disk", "64k") as disk:
        writer = ChunkWriter.start(disk, "chunk-1", 1, ChunkLimits(requests=10_000, bytes=10**9))
        with pytest.raises(DiskError) as caught:
            for number in range(1000):
                writer.add(f"task-{number}", b"x" * 1000 + b"\n", 10, number)
            writer.close()
        writer.discard()
    assert caught.value.kind == "full" and caught.value.path.endswith("chunk-1.jsonl")


def _fill(path: Path) -> None:
    """Write ``path`` until its disk is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError) as caught:
            while True:
                os.write(fd, b"\0" * 4096)
        assert caught.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_download_the_disk_refuses_is_a_disk_error_not_a_transport_failure(tmp_path: Path,
                                                                             fake_server: FakeServer) -> None:
    """A batch's results downloaded onto a full disk: a DiskError naming the file (the run stops
    with exit 5), never a transport failure retried and then blamed on the provider."""
    import asyncio

    from judge_engine.providers.http import BatchHTTP

    async def fetch(dest: Path) -> int:
        http = BatchHTTP({"Authorization": "Bearer fake-key"}, secret="fake-key")
        try:
            return await http.download(fake_server.base_url.rstrip("/") + "/models", dest)
        finally:
            await http.aclose()

    with small_disk(tmp_path / "disk", "64k") as disk:
        _fill(disk / "filler")
        with pytest.raises(DiskError) as caught:
            asyncio.run(fetch(disk / "results.jsonl"))
    assert caught.value.kind == "full" and caught.value.path == str(disk / "results.jsonl")


def test_a_batch_run_whose_disk_fills_stops_and_resume_finishes_it(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Batch mode on a disk too small for its request files and results: one message, exit 5,
    stopped; with room, resume submits what was never sent and every task ends exactly once."""
    from judge_engine.fake import FakeConfig
    from judge_engine.fake.config import FakeBatchConfig
    from tests.running.batch.conftest import batch_job

    items = 150
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=0.3))) as server, \
            small_disk(tmp_path / "disk", "448k") as disk:
        job = batch_job(tmp_path, server, items=items, batch={"max_requests_per_file": 50})
        config = yaml.safe_load(job.config.read_text(encoding="utf-8"))
        config["output"]["dir"] = str(disk / "runs")
        job.config.write_text(yaml.safe_dump(config), encoding="utf-8")
        assert main(["run", str(job.config), "--no-live"]) == EXIT_DISK
        stderr = capsys.readouterr().err
        _one_message(stderr, "the disk is full (No space left on device)")
        run = _only_run(disk / "runs")
        _stopped_for_disk(run, "full")
        _whole_lines(run)
        grow(disk, "32m")
        assert main(["resume", str(run), "--no-live"]) == 0
        per_task = Counter(o["task_id"] for o in read_lines(run / "outcomes.jsonl"))
        assert len(per_task) == items and set(per_task.values()) == {1}, "every task exactly once"
        assert json.loads((run / "run.json").read_text(encoding="utf-8"))["status"] == "completed"
        submitted = server.stats()["batch_submissions"]
        assert len(submitted) == items and set(submitted.values()) == {1}, "each request sent in one batch, once"


def test_an_export_to_a_place_that_cannot_be_written_is_one_line(tmp_path: Path, fake_server: FakeServer,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Not a run's file, a path the user gave: a read-only mount is a disk's refusal (exit 5),
    a directory this user may not write a path they may not use (exit 2); one line, no traceback."""
    job = _job(tmp_path, fake_server, 10)
    assert main(["run", str(job.config), "--no-live"]) == 0
    (tmp_path / "out").mkdir()
    capsys.readouterr()
    with read_only(tmp_path / "out", tmp_path / "out-ro") as out:
        code = main(["export", str(job.only_run()), "--output", str(out / "outcomes.csv")])
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
    if os.geteuid() == 0:  # a read-only bind mount
        assert code == EXIT_DISK and "the file system is read-only" in stderr, stderr
    else:  # permissions taken away
        assert code == 2 and "permission denied" in stderr, stderr
    assert str(out / "outcomes.csv") in stderr
