"""A cascaded run killed with SIGKILL (a real subprocess) during the first stage, between a
stage's decision and the next stage's request, and during the second stage, then resumed: no
request sent twice beyond the calls in flight at the kill (the fake server's counts per body),
every task's outcome once, every item's cascade line once, no stage asked about an item an
earlier stage answered, and the same answers as the same cascade run through without a kill.

And, deterministic, a kill after any outcome line: a finished run's outcome file cut after a
stage's decision line (the kill between the decision and the cascade line, or the next stage's
request) resumes to the same cascade lines."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.rundir.store import read_manifest
from tests.harness import TEST_KEY, TEST_KEY_ENV
from tests.trust.cascade.conftest import MODELS, cascade_job, decisions, expected, latest, lines

REPO = Path(__file__).resolve().parents[3]
THRESHOLDS = {"cheap": 0.95, "mid": 0.9, "strong": 0.8}
CONCURRENCY = 4


def _spawn(config: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "judge_engine.cli", "run", str(config), "--no-live"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_when(job: Any, process: subprocess.Popen[bytes], ready: Callable[[list[dict[str, Any]]], bool],
               timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = job.run_dirs()
        if runs and (runs[0] / "outcomes.jsonl").exists():
            try:
                found = lines(runs[0])
            except json.JSONDecodeError:  # a line half written
                found = []
            if ready(found):
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=10)
                return runs[0]
        if process.poll() is not None:
            raise AssertionError(f"the run ended before the kill point: {process.stderr.read() if process.stderr else ''}")
        time.sleep(0.02)
    process.kill()
    raise AssertionError("the kill point was not reached in time")


def _escalated_not_asked(found: list[dict[str, Any]]) -> bool:
    """Some item's cheap decision is in, with no cascade line (it went on), and mid has asked
    nothing about it yet."""
    decided = {o["item_id"] for o in found if o["judge"] == "cheap:item"}
    finished = {o["item_id"] for o in found if o["judge"] == "cascade"}
    return len(decided - finished) >= 3


KILL_POINTS: dict[str, tuple[dict[str, Any], Callable[[list[dict[str, Any]]], bool]]] = {
    "during stage 1": ({}, lambda found: sum(o["judge"] == "cheap" for o in found) >= 30),
    # mid paced at 2 requests a minute: escalated items wait for it, unasked, when the kill comes
    "between a decision and the next stage's request": ({"mid": {"limits": {"rpm": 2, "concurrency": 1}}},
                                                        _escalated_not_asked),
    "during stage 2": ({}, lambda found: sum(o["judge"] == "mid" for o in found) >= 8),
}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_sigkill_mid_cascade_resumes_with_nothing_asked_twice(tmp_path: Path, fake_server: FakeServer,
                                                                 point: str, capsys: pytest.CaptureFixture[str]) -> None:
    judges, ready = KILL_POINTS[point]
    fake_server.update(latency_s=0.08, latency_jitter_s=0.04)
    job = cascade_job(tmp_path, fake_server, thresholds=THRESHOLDS, judges=judges,
                      judge={"limits": {"concurrency": CONCURRENCY}})
    run = _kill_when(job, _spawn(job.config), ready)
    killed = lines(run)
    assert read_manifest(run).status == "running"
    fake_server.update(latency_s=0.0, latency_jitter_s=0.0)
    # status, from the files alone: a later stage plans the items escalated to it so far, not every item
    capsys.readouterr()
    assert main(["status", str(run)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    escalated = {o["item_id"] for o in killed if o["judge"] == "cheap:item"} - \
        {o["item_id"] for o in killed if o["judge"] == "cascade" and "cheap" in (
            (o["verdict"] or {}).get("stage"), (o["verdict"] or {}).get("held_at"))}
    assert f"mid (online, {MODELS['mid']}) · {sum(o['judge'] == 'mid' for o in killed)}/{6 * len(escalated)} done" in said
    assert f"cheap (online, {MODELS['cheap']}) · {sum(o['judge'] == 'cheap' for o in killed)}/144 done" in said
    if point.startswith("between"):
        asked = {o["item_id"] for o in killed if o["judge"] == "mid"}
        waiting = {o["item_id"] for o in killed if o["judge"] == "cheap:item"} - \
            {o["item_id"] for o in killed if o["judge"] == "cascade"}
        assert waiting - asked, "items escalated to mid and not asked of it at the kill"
        config = yaml.safe_load(job.config.read_text())  # limits are not part of the run: resume at full pace
        config["judges"] = [{**j, "limits": {"concurrency": CONCURRENCY}} for j in config["judges"]]
        job.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert main(["resume", str(run), "--no-live"]) == 0
    final = lines(run)
    per_task = Counter(o["task_id"] for o in final)
    assert set(per_task.values()) == {1}, "every task's outcome (and every item's cascade line) exactly once"
    cascade = latest(run, "cascade")
    assert len(cascade) == 24 and Counter(o["judge"] for o in final)["cascade"] == 24
    stats = fake_server.stats()
    tasks = Counter(o["judge"] for o in final)
    for stage, model in MODELS.items():
        sent = stats["by_model"].get(model.split("/")[-1], 0)
        assert tasks[stage] <= sent <= tasks[stage] + CONCURRENCY, (stage, sent, tasks[stage])
    assert stats["bodies_seen_again"] <= 3 * CONCURRENCY, "sent again: only the calls in flight at the kill"
    # No stage asked about an item an earlier stage answered, and the answers of an unbroken run.
    order = list(MODELS)
    for item, record in cascade.items():
        answered = (record.verdict or {})["stage"]
        if answered is not None:
            for later in order[order.index(answered) + 1:]:
                assert not any(o["judge"] == later and o["item_id"] == item for o in final), (item, later)
    assert main(["run", str(job.config), "--no-cascade", "--no-live"]) == 0
    full = decisions(next(p for p in job.run_dirs() if p != run))
    for item, (stage, prediction, _) in expected(full, THRESHOLDS, sorted(cascade)).items():
        assert ((cascade[item].verdict or {})["stage"], (cascade[item].verdict or {})["prediction"]) == (stage, prediction)


def test_a_kill_after_any_decision_line_resumes_to_the_same_cascade(tmp_path: Path, fake_server: FakeServer) -> None:
    job = cascade_job(tmp_path / "whole", fake_server, thresholds=THRESHOLDS, items=12)
    assert main(["run", str(job.config), "--no-live"]) == 0
    whole = job.only_run()
    reference = {item: ((r.verdict or {})["stage"], (r.verdict or {})["prediction"])
                 for item, r in latest(whole, "cascade").items()}
    raw = (whole / "outcomes.jsonl").read_bytes().splitlines(keepends=True)
    deciding = [n for n, line in enumerate(raw) if json.loads(line)["judge"] in ("cheap:item", "mid:item", "strong:item")]
    assert len(deciding) >= 12
    for cut in deciding[::3]:
        copy = tmp_path / f"cut-{cut}" / whole.name
        shutil.copytree(whole, copy)
        (copy / "outcomes.jsonl").write_bytes(b"".join(raw[:cut + 1]))  # killed right after this decision line
        (copy / "index.sqlite").unlink()
        manifest = json.loads((copy / "run.json").read_text())
        manifest["status"] = "running"
        (copy / "run.json").write_text(json.dumps(manifest))
        before = fake_server.stats()["requests_total"]
        assert main(["resume", str(copy), "--no-live"]) == 0
        assert fake_server.stats()["requests_total"] == before, "answered from the cache: nothing sent"
        final = lines(copy)
        assert set(Counter(o["task_id"] for o in final).values()) == {1}, cut
        got = {item: ((r.verdict or {})["stage"], (r.verdict or {})["prediction"])
               for item, r in latest(copy, "cascade").items()}
        assert got == reference, cut


@pytest.mark.slow
def test_ctrl_c_mid_cascade_stops_every_stage_and_resume_finishes(tmp_path: Path, fake_server: FakeServer) -> None:
    """A later stage's feeder waiting for escalations stops at a Ctrl-C like any other (no
    hang), the run says cancelled, and resume finishes it with nothing judged twice."""
    fake_server.update(latency_s=0.08, latency_jitter_s=0.04)
    job = cascade_job(tmp_path, fake_server, thresholds=THRESHOLDS, judge={"limits": {"concurrency": CONCURRENCY}})
    process = _spawn(job.config)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (job.run_dirs() and (job.run_dirs()[0] / "outcomes.jsonl").exists()
                                               and sum(o["judge"] == "mid" for o in lines(job.run_dirs()[0])) >= 3):
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=20) == 130
    run = job.only_run()
    assert read_manifest(run).status == "cancelled"
    fake_server.update(latency_s=0.0, latency_jitter_s=0.0)
    assert main(["resume", str(run), "--no-live"]) == 0
    final = lines(run)
    assert set(Counter(o["task_id"] for o in final).values()) == {1}
    assert len(latest(run, "cascade")) == 24


def test_resume_retry_after_a_kill_mid_item_decides_the_item_with_all_its_parts(
        tmp_path: Path, fake_server: FakeServer) -> None:
    """Killed part-way through an item one of whose finished requests was unreadable, then
    ``resume --retry unreadable``: the cascade leaves that request alone (the item is not held)
    and decides the item with every part once the rest come in, within the session."""
    fake_server.update(malformed_rate=0.08)
    job = cascade_job(tmp_path / "whole", fake_server, thresholds=THRESHOLDS, items=12, judge={"retries": {"reasks": 0}})
    main(["run", str(job.config), "--no-live"])
    whole = job.only_run()
    raw = (whole / "outcomes.jsonl").read_bytes().splitlines(keepends=True)
    found = [json.loads(line) for line in raw]
    went_on = {item for item, r in latest(whole, "cascade").items() if (r.verdict or {})["stage"] != "cheap"}
    cut = next(n for n, o in enumerate(found) if o["judge"] == "cheap" and o["reason_code"] == "unreadable"
               and o["item_id"] in went_on  # decided at the session's end, it could not go on in it
               and any(later["judge"] == "cheap" and later["item_id"] == o["item_id"] for later in found[n + 1:]))
    copy = tmp_path / "cut" / whole.name
    shutil.copytree(whole, copy)
    (copy / "outcomes.jsonl").write_bytes(b"".join(raw[:cut + 1]))
    (copy / "index.sqlite").unlink()
    manifest = json.loads((copy / "run.json").read_text())
    manifest["status"] = "running"
    (copy / "run.json").write_text(json.dumps(manifest))
    fake_server.update(malformed_rate=0.0)
    main(["resume", str(copy), "--retry", "unreadable", "--no-live"])
    assert read_manifest(copy).status == "completed"
    final = lines(copy)
    assert set(Counter(o["task_id"] for o in final if o["judge"] != "cascade").values()) == {1}
    assert len(latest(copy, "cascade")) == 12
