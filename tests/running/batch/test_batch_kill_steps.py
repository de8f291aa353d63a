"""Exactly once in batch mode under kill -9 at every step of a collection.

The engine is a child process that SIGKILLs itself at a named step (``JUDGE_ENGINE_KILL_AT``,
:mod:`judge_engine.running.batch.killpoints`): an ended batch found, its results downloaded, a result's
transcript line written before its outcome or carry ("decide"), an outcome or carry written
("write"), the chunk's ``collected`` line written; the online carries (``fallback: online``) are
killed from outside while one is in flight at the fake server and after one has its outcome.
Each session is resumed and killed at the next step; the last one finishes the run.

What is counted, at the fake server and in the run directory:

* outcome lines per task: exactly one;
* transcript lines per batch result (batch id, custom id): at most one (a result is recorded once,
  however many times its collection is redone);
* batch submissions per task: exactly the rounds its results asked for (a kill between a batch's
  creation and its record adopts the batch, never sends it again);
* online requests per task, per session (the chat route's count per prompt). A request is *in
  flight* from the moment it is sent until its task's next record (its outcome, or the carry of
  its next request) is written; one in flight when the process is killed may be sent again by
  the next session, and that is the only cause for sending a request twice. So: no session sends
  a task whose outcome was written before the session started, and no session sends one
  request of a task twice (no transport faults are configured, nor malformed answers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.answers import prompt_key
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.rundir.records import BATCHES
from judge_engine.rundir.store import iter_transcript
from judge_engine.running.batch.killpoints import ENV
from tests.harness import TEST_KEY, TEST_KEY_ENV, Job, make_job, read_lines
from tests.running.batch.conftest import rounds_needed

pytestmark = pytest.mark.slow  # see tests/conftest.py: python -m pytest --all runs it

REPO = Path(__file__).resolve().parents[3]
KNOBS = FakeBatchConfig(processing_s=0.2, failure_rate=0.25, expire_rate=0.1)
STEPS = ("fetch-r1:1", "downloaded-r1:1", "recorded-r1:2", "collected-r1:1", "taken-r2:2", "recorded-r2:1")
"""Where the sessions kill themselves, in turn: before a download, after it, between a result's
transcript line and its outcome or carry, after a chunk's ``collected`` line; then in a later
round (its tasks rebuilt from their carries), after two tasks' outcomes or carries, and in the
collection that redoes it, between the first result's transcript line and its outcome."""


def _spawn(*argv: str, kill_at: str | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}
    env.pop(ENV, None)
    if kill_at is not None:
        env[ENV] = kill_at
    return subprocess.Popen([sys.executable, "-m", "judge_engine.cli", *argv, "--no-live", "--allow-unscored"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class Sessions:
    """A run's sessions, each killed at its step, with what the server and the run said at each kill."""

    def __init__(self, job: Job, server: FakeServer) -> None:
        self.job, self.server = job, server
        self.run: Path | None = None
        self.sent: list[Counter[str]] = [Counter()]
        """The chat route's requests per prompt key, before the first session and after each."""
        self.finished: list[set[str]] = [set()]
        """Tasks with an outcome line, before the first session and after each."""
        self.kills: list[str] = []

    def session(self, kill_at: str | None = None, *, aim: Callable[[Path], bool] | None = None) -> None:
        """One session: killed at step ``kill_at``, or from here once ``aim`` says so, or to its end."""
        argv = ("resume", str(self.run)) if self.run is not None else ("run", str(self.job.config))
        process = _spawn(*argv, kill_at=kill_at)
        if aim is not None:
            deadline = time.monotonic() + 60
            while process.poll() is None and time.monotonic() < deadline:
                if self.job.run_dirs() and aim(self.job.only_run()):
                    process.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.005)
        code = process.wait(timeout=120)
        stderr = process.stderr.read().decode() if process.stderr else ""
        if kill_at is not None or aim is not None:
            assert code == -signal.SIGKILL, f"session {len(self.kills) + 1} was not killed ({kill_at}): {code} {stderr}"
            self.kills.append(kill_at or aim.__name__)  # type: ignore[union-attr]
        else:
            assert code == 0, stderr
        self.run = self.job.only_run()
        self.sent.append(Counter(self.server.stats()["by_prompt"]))
        self.finished.append(self.outcome_tasks())

    def outcome_tasks(self) -> set[str]:
        path = self.job.only_run() / "outcomes.jsonl"
        return {o["task_id"] for o in read_lines(path)} if path.exists() else set()

    def sent_since(self, session: int) -> Counter[str]:
        """Online requests per prompt key the session now running has sent so far."""
        now = Counter(self.server.stats()["by_prompt"])
        now.subtract(self.sent[session])
        return +now

    def check(self, items: int, *, online: str) -> dict[str, int]:
        """Every count the module docstring lists (judge ``online`` is the one that sends online:
        the judges share their prompts); what was counted."""
        assert self.run is not None
        outcomes = read_lines(self.run / "outcomes.jsonl")
        per_task = Counter(o["task_id"] for o in outcomes)
        assert len(per_task) == items
        duplicates = sum(n - 1 for n in per_task.values())
        attempts = list(iter_transcript(self.run))
        results = Counter((a.batch["id"], a.batch["custom_id"]) for a in attempts
                          if getattr(a, "batch", None) is not None)  # type: ignore[union-attr]
        prompts = {prompt_key(a.request["messages"]): a.task_id for a in attempts  # type: ignore[union-attr]
                   if a.judge == online}
        unjustified = []
        for session in range(1, len(self.sent)):
            delta = self.sent[session].copy()
            delta.subtract(self.sent[session - 1])
            for key, n in (+delta).items():
                task = prompts[key]
                if task in self.finished[session - 1] or n > 1:
                    unjustified.append((session, task, n))
        twice = [result for result, n in results.items() if n > 1]
        assert {"duplicate outcome lines": duplicates, "results recorded twice": twice, "sent without cause": unjustified} \
            == {"duplicate outcome lines": 0, "results recorded twice": [], "sent without cause": []}
        online = sum(self.sent[-1].values())
        return {"tasks": items, "kills": len(self.kills), "duplicates": duplicates, "results": len(results),
                "online_requests": online, "unjustified": len(unjustified)}


def _batch_lines(run: Path) -> list[dict[str, object]]:
    path = run / BATCHES
    return [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1] if line] if path.exists() else []


def _submitted(server: FakeServer) -> dict[str, int]:
    return {f"b2:{t}": n for t, n in server.stats()["batch_submissions"].items()}


def _judge(name: str, server: FakeServer, **batch: object) -> dict[str, object]:
    return {"name": name, "model": "openai/gpt-4o-mini", "api_base": server.base_url, "api_key_env": TEST_KEY_ENV,
            "protocol": "gemba-mqm", "temperatures": [0.0], "max_tokens": 300, "timeout_s": 120, "mode": "batch",
            "limits": {"rpm": 60000, "tpm": 100000000, "concurrency": 2},
            "retries": {"transport": 6, "reasks": 2, "backoff_max_s": 0.05},
            "batch": {"poll_interval_s": 0.05, "max_requests_per_file": 8, **batch}}


@pytest.mark.timeout(400)
def test_a_collection_killed_at_every_step_records_each_result_once_and_sends_nothing_twice(tmp_path: Path) -> None:
    """Two judges, ``fallback: batch`` (three rounds) and ``fallback: online``: collections killed
    at each step in rounds 1 and 2, then the online carries killed while a request is in flight
    and after one has its outcome, then a session to the end."""
    with FakeServer(FakeConfig(batch=KNOBS)) as server:
        server.update(latency_s=60.0)  # while the collections are killed, online requests stay in flight
        job = make_job(tmp_path, server, items=24, judges=[_judge("rounds", server, fallback="batch", max_rounds=3),
                                                          _judge("online", server, fallback="online")])
        # No answer cache: a request sent again is sent, not answered from the cache (which would
        # hide it at the server, though not in the outcomes).
        config = yaml.safe_load(job.config.read_text())
        job.config.write_text(yaml.safe_dump({**config, "cache": {"dir": "cache", "enabled": False}}))
        sessions = Sessions(job, server)
        for step in STEPS:
            sessions.session(step)

        def in_flight_and_one_finished(run: Path) -> bool:
            """A request of an online carry in flight, and another carry's outcome written."""
            carried = {line["task_id"] for line in _batch_lines(run) if line.get("to") == "online"}
            finished = len((sessions.outcome_tasks() - sessions.finished[len(sessions.kills)]) & carried)
            return finished >= 1 and sum(sessions.sent_since(len(sessions.kills)).values()) > finished

        assert sum(line.get("to") == "online" for line in _batch_lines(job.only_run())) >= 3
        server.update(latency_s=0.4)  # now they are answered, two at a time, each 0.4 s after it is sent
        sessions.session(aim=in_flight_and_one_finished)
        sessions.session()
        counts = sessions.check(48, online="online")
        print(counts)  # with -s: the counts the issue asked for
        submitted = _submitted(server)
        by_judge = {o["task_id"]: o["judge"] for o in read_lines(job.only_run() / "outcomes.jsonl")}
        rounds = {t: n for t, n in submitted.items() if by_judge[t] == "rounds"}
        expected = {t: rounds_needed(t, KNOBS, max_rounds=3) for t in by_judge if by_judge[t] == "rounds"}
        assert max(expected.values()) == 3 and rounds == expected  # once per round its results asked for
        assert {n for t, n in submitted.items() if by_judge[t] == "online"} == {1}  # one round, the rest online
        assert counts["online_requests"] > 0
