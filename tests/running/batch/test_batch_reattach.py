"""Reattaching to batches after a kill or a stop: Anthropic's (found by size and time, confirmed
by custom ids), a stopped run watched with ``status`` while its batches go on without it, and a
plain ``resume`` that keeps batch mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.rundir.records import BATCHES
from tests.harness import TEST_KEY, TEST_KEY_ENV, read_lines
from tests.running.batch.conftest import ANTHROPIC_MODEL, batch_job

REPO = Path(__file__).resolve().parents[3]


def _run(*argv: str, wait: bool = True) -> subprocess.Popen[bytes]:
    env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", *argv], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if wait:
        process.wait(timeout=120)
    return process


def _events(run: Path) -> list[dict[str, object]]:
    if not (run / BATCHES).exists():
        return []
    return [json.loads(line) for line in (run / BATCHES).read_bytes().split(b"\n")[:-1] if line]


def _wait_for(condition, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("timed out")


def _foreign_anthropic_batch(server: FakeServer, size: int) -> str:
    """A batch someone else made in the same workspace, of the same size as our chunk."""
    requests = [{"custom_id": f"someone-else-{i}", "params": {"model": "claude-haiku-4-5", "max_tokens": 20,
                                                             "messages": [{"role": "user", "content": f"hi {i}"}]}}
                for i in range(size)]
    request = urllib.request.Request(f"{server.url}/v1/messages/batches", data=json.dumps({"requests": requests}).encode(),
                                     method="POST", headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["id"])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_anthropic_a_batch_created_but_never_recorded_is_found_and_a_lookalike_is_rejected(tmp_path: Path) -> None:
    """Killed while Anthropic's create call was being answered, the engine never learnt its batch
    id. Anthropic batches carry no metadata, so the resumed run adopts the first batch of the
    chunk's size created since its intent, tentatively: here someone else's, whose results'
    custom ids are not the chunk's, so it is rejected; then it finds its own. Nothing is sent
    twice."""
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=0.5, create_delay_s=1.5))) as server:
        job = batch_job(tmp_path, server, items=12, anthropic=True, batch={"max_requests_per_file": 12})
        foreign = _foreign_anthropic_batch(server, 12)  # made just before ours: the older lookalike
        process = _run("run", str(job.config), "--no-live", wait=False)
        _wait_for(lambda: job.run_dirs() and any(e["event"] == "intent" for e in _events(job.only_run())))
        time.sleep(0.5)  # the create call has arrived; its answer comes 1.5 s after
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        run = job.only_run()
        assert [e["event"] for e in _events(run)] == ["intent"]
        server.update(batch={"create_delay_s": 0.0})
        resumed = _run("resume", str(run), "--no-live")
        assert resumed.returncode == 0, resumed.stderr.read().decode() if resumed.stderr else ""
        events = _events(run)
        adopted = [e for e in events if e["event"] == "submitted"]
        assert [e["batch_id"] for e in adopted][0] == foreign and all(e["found"] and e["tentative"] for e in adopted)
        assert [e["batch_id"] for e in events if e["event"] == "rejected"] == [foreign]
        assert len(adopted) == 2  # the lookalike, then its own
        submissions = server.stats()["batch_submissions"]
        ours = {task: n for task, n in submissions.items() if not task.startswith("someone-else")}
        assert len(ours) == 12 and set(ours.values()) == {1}
        assert len(read_lines(run / "outcomes.jsonl")) == 12
        assert read_lines(run / "outcomes.jsonl")[0]["model"] == ANTHROPIC_MODEL


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_stopped_batch_run_is_watched_with_status_and_resumed_in_batch_mode(tmp_path: Path) -> None:
    """``run --batch``, Ctrl-C once every task is in a batch: the batches go on at the provider;
    ``status`` shows them without the process; a plain ``resume`` (no --batch) collects them in
    batch mode, because --batch was recorded."""
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=3.0))) as server:
        job = batch_job(tmp_path, server, items=30, batch={"max_requests_per_file": 10})
        text = job.config.read_text().replace("mode: batch", "mode: online")
        job.config.write_text(text)  # batch mode comes from the command line only
        process = _run("run", str(job.config), "--batch", "--no-live", wait=False)
        _wait_for(lambda: job.run_dirs() and sum(e["event"] == "submitted" for e in _events(job.only_run())) == 3)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
        run = job.only_run()
        manifest = json.loads((run / "run.json").read_text())
        assert manifest["status"] == "cancelled" and manifest["overrides"]["batch"] is True

        status = _run("status", str(run))
        out = status.stdout.read().decode() if status.stdout else ""
        assert status.returncode == 0
        assert "0/30 done" in out and "30 in batches" in out and "in_progress" in out
        assert "judge-engine resume" in out
        assert all(len(line) <= 80 for line in out.splitlines() if str(run) not in line)
        time.sleep(3.5)  # the batches end at the provider meanwhile; --poll asks it, and writes nothing
        before = (run / BATCHES).read_bytes()
        polled = _run("status", str(run), "--poll")
        out = polled.stdout.read().decode() if polled.stdout else ""
        assert polled.returncode == 0 and out.count("completed") == 3 and "in_progress" not in out
        assert (run / BATCHES).read_bytes() == before

        resumed = _run("resume", str(run), "--no-live")
        assert resumed.returncode == 0
        assert server.stats()["requests_total"] == 0  # still batch mode: no chat call
        assert set(server.stats()["batch_submissions"].values()) == {1}
        status = _run("status", str(run))
        out = status.stdout.read().decode() if status.stdout else ""
        assert "30/30 done" in out and out.count("collected") == 3
