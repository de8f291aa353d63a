"""A demo run's batches outlive its process, as a real provider's do (issue 26, point 1): the fake
server keeps them in the run's ``demo/`` folder, and the servers a later ``resume``, ``status
--poll`` or ``cancel`` starts serve them again, on the wall clock of their creation."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.providers import batch_api_for
from judge_engine.providers.batch import ResultKind
from judge_engine.rundir.records import BATCHES
from judge_engine.running.demo import DEMO_DIR
from tests.harness import read_lines
from tests.running.batch.conftest import ANTHROPIC_MODEL
from tests.running.batch.test_batch_cancel import _events, _wait
from tests.running.batch.test_batch_providers import _write

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.parametrize("anthropic", [False, True])
def test_a_fake_servers_batches_are_served_again_by_a_later_server_on_its_state(tmp_path: Path,
                                                                                anthropic: bool) -> None:
    """Created, one cancelled, then the server stops; a new server on the same directory has
    them: the same ids, progress by the wall clock since their creation, their answers, the
    cancellation; its own ids never collide with the first's; a read-only one writes nothing."""
    state = tmp_path / "state"
    knobs = FakeBatchConfig(processing_s=1.5)

    def api_of(server: FakeServer):  # type: ignore[no-untyped-def]
        return batch_api_for(ANTHROPIC_MODEL, server.url, api_key="k") if anthropic else \
            batch_api_for("openai/gpt-4o-mini", server.base_url, api_key="k")

    async def submit(server: FakeServer) -> tuple[str, str, float]:
        api = api_of(server)
        _write(tmp_path / "a.jsonl", api, 12)
        file_id = await api.upload(tmp_path / "a.jsonl", "a.jsonl")
        created = time.time()
        kept = await api.create(tmp_path / "a.jsonl", file_id, metadata={"judge_engine_chunk": "c1"}, window="24h")
        cancelled = await api.create(tmp_path / "a.jsonl", file_id, metadata={"judge_engine_chunk": "c2"}, window="24h")
        await api.cancel(cancelled.batch_id)
        await api.aclose()
        return kept.batch_id, cancelled.batch_id, created

    with FakeServer(FakeConfig(batch=knobs), state_dir=state) as first:
        kept, cancelled, created = asyncio.run(submit(first))
    written = sorted(p.relative_to(state) for p in state.rglob("*"))
    answers: list[dict[str, str | None]] = []

    async def later(server: FakeServer, *, early: bool) -> None:
        api = api_of(server)
        info = await api.retrieve(kept)
        assert info.total == 12 and info.ended is not early  # it goes on by the wall clock, from its creation
        while not info.ended:
            await asyncio.sleep(0.1)
            info = await api.retrieve(kept)
        assert time.time() - created >= 1.4
        await api.download(info, tmp_path / "r.jsonl")
        results = [api.read_result(line) for line in (tmp_path / "r.jsonl").read_bytes().splitlines()]
        assert sorted(r.custom_id for r in results) == [f"task{i:03d}-1" for i in range(12)]
        assert {r.kind for r in results} == {ResultKind.ANSWER}
        answers.append({r.custom_id: r.response.content for r in results if r.response is not None})
        gone = await api.retrieve(cancelled)
        assert gone.ended and gone.status == ("ended" if anthropic else "cancelled") and gone.completed < 12
        if not anthropic:  # found again by its metadata, as a resumed run looks for a batch it never recorded
            found = await api.find({"judge_engine_chunk": "c1"}, since=created - 5, requests=12, known=frozenset())
            assert found is not None and found[0].batch_id == kept
        _write(tmp_path / "b.jsonl", api, 3)
        file_id = await api.upload(tmp_path / "b.jsonl", "b.jsonl")
        new = await api.create(tmp_path / "b.jsonl", file_id, metadata={}, window="24h")
        assert new.batch_id not in (kept, cancelled) and file_id not in {str(p.stem) for p in written}
        await api.aclose()

    with FakeServer(FakeConfig(), state_dir=state, read_only=True) as reader:  # a look: serves, writes nothing
        asyncio.run(later(reader, early=True))
    assert sorted(p.relative_to(state) for p in state.rglob("*")) == written
    with FakeServer(FakeConfig(), state_dir=state) as second:
        asyncio.run(later(second, early=False))
        assert second.stats()["batch_requests"] == 12 + 12 + 3  # what it holds, counted once
    assert len(list((state / "batches").glob("*.json"))) == 3
    assert answers[0] == answers[1]  # the same answers, whichever server computed them


def _example(tmp_path: Path, name: str) -> Path:
    """An example's config in a fresh copy of the examples it needs (no runs, no cache)."""
    for folder in {name, "literary_mt"}:
        shutil.copytree(REPO / "examples" / folder, tmp_path / "examples" / folder,
                        ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    return tmp_path / "examples" / name / "config.yaml"


def _cli(tmp_path: Path, *argv: str) -> subprocess.Popen[bytes]:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "HOME": str(tmp_path), "COLUMNS": "80"}
    return subprocess.Popen([sys.executable, "-m", "judge_engine.cli", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _killed_after_submit(tmp_path: Path, demo_batch_s: float, example: str = "overnight") -> Path:
    """``run --demo --batch`` of an example, SIGKILLed once its batch is submitted."""
    config = _example(tmp_path, example)
    process = _cli(tmp_path, "run", str(config), "--demo", "--batch", "--no-live", "--demo-batch-s", str(demo_batch_s))
    runs = config.parent / "runs"
    _wait(lambda: any((r / BATCHES).exists() and any(e["event"] == "submitted" for e in _events(r))
                      for r in runs.glob("*-demo-*")) or process.poll() is not None, timeout=120)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL, "the run ended before its batch could be killed"
    (run,) = runs.glob("*-demo-*")
    return run


def _submitted_at_the_fake(run: Path) -> Counter[str]:
    """How many times each task was submitted to the demo's fake provider, over every batch of
    every demo server, from the state they keep in the run's demo folder."""
    custom_ids = [c for path in (run / DEMO_DIR).glob("*/batches/*.json")
                  for c in json.loads(path.read_bytes())["custom_ids"]]
    return Counter("b2:" + c.rpartition("-")[0] for c in custom_ids)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_demo_batch_run_killed_after_submitting_resumes_and_finishes(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The README's overnight demo in batch mode, killed with SIGKILL once its batch is at the
    fake provider: ``status`` names the batch, and ``resume`` (new fake servers) finds it, waits
    for it and finishes the run, every task judged exactly once and submitted exactly once."""
    run = _killed_after_submit(tmp_path, demo_batch_s=3)
    (batch_id,) = {str(e["batch_id"]) for e in _events(run) if e["event"] == "submitted"}
    assert main(["status", str(run)]) == 0
    assert batch_id in capsys.readouterr().out
    resume = _cli(tmp_path, "resume", str(run), "--no-live")
    out = resume.communicate(timeout=240)[0].decode()
    assert resume.returncode == 0, out
    assert "completed" in out and "404" not in out
    outcomes = read_lines(run / "outcomes.jsonl")
    tasks = Counter(o["task_id"] for o in outcomes)
    assert len(tasks) == 20 and set(tasks.values()) == {1} and all(o["status"] == "scored" for o in outcomes)
    assert _submitted_at_the_fake(run) == tasks  # each task in one batch, never sent again
    collected = [e for e in _events(run) if e["event"] == "collected"]
    assert len(collected) == 1 and collected[0]["batch_id"] == batch_id
    assert json.loads((run / "run.json").read_text())["status"] == "completed"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_status_poll_and_cancel_reach_a_killed_demo_runs_batches(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``status --poll`` asks the demo's fake provider (started again, read-only) for the batch's
    state now; ``cancel`` cancels it there; ``resume`` keeps what it answered and sends the rest."""
    run = _killed_after_submit(tmp_path, demo_batch_s=60, example="literary_mt")  # one judge, one server
    before = sorted(p.relative_to(run) for p in (run / DEMO_DIR).rglob("*"))
    time.sleep(1.0)  # a few of its 20 requests processed (one every 3 s), most not
    assert main(["status", str(run), "--poll"]) == 0
    out = capsys.readouterr().out
    assert "in_progress" in out and "ended with its session" not in out
    assert sorted(p.relative_to(run) for p in (run / DEMO_DIR).rglob("*")) == before  # a look writes nothing
    assert main(["cancel", str(run)]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 open batches cancelled" in out, out
    (state,) = (run / DEMO_DIR).glob("*/batches/*.json")
    assert json.loads(state.read_bytes())["cancelled_at"] is not None  # at the fake provider, kept
    resume = _cli(tmp_path, "resume", str(run), "--no-live")
    out = resume.communicate(timeout=240)[0].decode()
    assert resume.returncode == 0, out
    outcomes = read_lines(run / "outcomes.jsonl")
    assert Counter(o["task_id"] for o in outcomes) == Counter({o["task_id"]: 1 for o in outcomes})
    assert len(outcomes) == 20 and all(o["status"] == "scored" for o in outcomes)
    assert any(o["attempts"] == 2 for o in outcomes)  # cancelled in the batch, then answered online
