"""Crash safety, rate-limit storms, chaos on the wire, cancellation, and secrets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.rundir.store import iter_transcript
from tests.harness import (
    TEST_KEY,
    TEST_KEY_ENV,
    TRANSPORTS,
    make_job,
    read_lines,
    read_transcripts,
)

REPO = Path(__file__).resolve().parents[2]


def _spawn_run(config: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "judge_engine.cli", *extra, "--no-live"] if extra and extra[0] == "resume"
                            else [sys.executable, "-m", "judge_engine.cli", "run", str(config), "--no-live", *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for_outcomes(run_parent: Path, at_least: int, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in run_parent.glob("*/outcomes.jsonl"):
            if run.stat().st_size and run.read_bytes().count(b"\n") >= at_least:
                return run.parent
        time.sleep(0.05)
    raise AssertionError("the run produced no outcomes in time")


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_loses_nothing_and_judges_nothing_twice(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(latency_s=0.15, latency_jitter_s=0.1)
    concurrency = 8
    job = make_job(tmp_path, fake_server, items=120, judge={"limits": {"concurrency": concurrency}})
    process = _spawn_run(job.config)
    run = _wait_for_outcomes(job.runs, at_least=30)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    before = read_lines(run / "outcomes.jsonl")
    assert 30 <= len(before) < 120
    assert json.loads((run / "run.json").read_text())["status"] == "running"
    # Killed mid-write, the directory is still whole for every reader: no transcript line refers
    # to a block the kill lost (blocks are written before the lines that use them).
    attempts = list(iter_transcript(run))
    assert len(attempts) >= len(before) and all(a.request["messages"] for a in attempts)  # type: ignore[union-attr]
    assert main(["show", str(run)]) == 0
    assert main(["resume", str(run), "--no-live"]) == 0
    outcomes = read_lines(run / "outcomes.jsonl")
    per_task = Counter(o["task_id"] for o in outcomes)
    assert len(per_task) == 120 and set(per_task.values()) == {1}, "every task exactly once"
    assert {o["status"] for o in outcomes} == {"scored"}
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    # Paid at most once: calls beyond the task count are the ones in flight at the kill.
    assert fake_server.stats()["requests_total"] <= 120 + concurrency


@pytest.mark.slow
def test_running_the_same_config_again_resumes_a_killed_run(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(latency_s=0.1)
    job = make_job(tmp_path, fake_server, items=60, judge={"limits": {"concurrency": 4}})
    process = _spawn_run(job.config)
    _wait_for_outcomes(job.runs, at_least=10)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 60 == len({o["task_id"] for o in outcomes})


@pytest.mark.slow
def test_sigint_cancels_cleanly_and_resume_finishes(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(latency_s=0.2)
    job = make_job(tmp_path, fake_server, items=80, judge={"limits": {"concurrency": 4}})
    process = _spawn_run(job.config)
    run = _wait_for_outcomes(job.runs, at_least=8)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 130
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "cancelled"
    partial = read_lines(run / "outcomes.jsonl")
    assert len(partial) < 80
    assert main(["resume", str(run), "--no-live"]) == 0
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len(outcomes) == 80 == len({o["task_id"] for o in outcomes})


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_429_storm_with_long_retry_after_is_waited_out(transport: str, tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(storm={"start_s": 0.0, "duration_s": 1.0, "retry_after_s": 2.5})
    job = make_job(tmp_path, fake_server, items=40, judge={"transport": transport, "limits": {"concurrency": 16}})
    started = time.monotonic()
    assert main(["run", str(job.config), "--no-live"]) == 0
    elapsed = time.monotonic() - started
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 40 and {o["status"] for o in outcomes} == {"scored"}
    stats = fake_server.stats()
    assert stats["rate_limited"] >= 1
    # The lane paused as a whole: far fewer 429s than requests x retries would give.
    assert stats["rate_limited"] <= 16
    assert elapsed >= 2.5


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_chaos_resets_truncation_503_and_hangs_are_retried(transport: str, tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(reset_rate=0.05, truncate_rate=0.05, error_503_rate=0.05, hang_rate=0.03, hang_s=30, seed=11)
    job = make_job(tmp_path, fake_server, items=100, judge={"transport": transport, "timeout_s": 1.0, "limits": {"concurrency": 32},
                                                             "retries": {"transport": 8}})
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 100 and {o["status"] for o in outcomes} == {"scored"}
    errors = Counter(t["error"]["kind"] for t in read_transcripts(job.only_run()) if "error" in t)
    assert errors["retry"] > 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_planted_api_key_never_reaches_the_run_directory(transport: str, tmp_path: Path, fake_server: FakeServer) -> None:
    planted = "sk-" + "plantedSECRET0123456789abcdef"  # built here: no key-shaped literal in git
    fake_server.update(require_api_key=planted)
    job = make_job(tmp_path, fake_server, items=5, judge={"transport": transport, "api_key_env": None, "api_key": planted})
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    assert len(read_lines(run / "outcomes.jsonl")) == 5
    for path in [*run.rglob("*"), *(tmp_path / "cache").rglob("*")]:
        if path.is_file():
            assert planted.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_wrong_api_key_stops_the_judge_with_a_clear_message(transport: str, tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    planted = "sk-" + "wrongKEY0123456789abcdefghij"
    fake_server.update(require_api_key="sk-the-right-one-0000000000")
    job = make_job(tmp_path, fake_server, items=30, judge={"transport": transport, "api_key_env": None, "api_key": planted})
    assert main(["run", str(job.config), "--no-live"]) == 1
    err = capsys.readouterr().err
    assert "stopped" in err and "AuthenticationError" in err
    assert planted not in err
    run = job.only_run()
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
    assert fake_server.stats()["requests_total"] <= 16  # no retries of an auth error beyond in-flight
    for path in run.rglob("*"):
        if path.is_file():
            assert planted.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_a_limit_configured_too_high_converges_to_the_declared_one(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(rpm=600, window_s=1.0, latency_s=0.05)  # the provider allows 10 per second
    job = make_job(tmp_path, fake_server, items=40, judge={"limits": {"rpm": 6000, "concurrency": 16}})
    started = time.monotonic()
    assert main(["run", str(job.config), "--no-live"]) == 0
    elapsed = time.monotonic() - started
    assert len(read_lines(job.only_run() / "outcomes.jsonl")) == 40
    stats = fake_server.stats()
    assert stats["rate_limited"] <= 0.25 * stats["requests_total"], stats
    assert elapsed >= 3.0  # paced at the provider's 10/s, not the config's 100/s


@pytest.mark.slow
@pytest.mark.parametrize("chars_per_token", [2.5, 6.0])
def test_tpm_pacing_learns_a_tokenizer_unlike_its_estimate(chars_per_token: float, tmp_path: Path, fake_server: FakeServer) -> None:
    """The lane sizes prompts as UTF-8 bytes / 4; these providers count 1.6x more tokens (2.5
    characters each) or 1.5x fewer (6). Reported usage calibrates the pace: the accepted token
    rate stays at the configured limit, neither over it (an under-estimate, paid back by
    reconciling) nor far under it (an over-estimate, which only the learnt ratio removes)."""
    fake_server.update(chars_per_token=chars_per_token)
    (tmp_path / "probe").mkdir()
    (tmp_path / "job").mkdir()
    probe = make_job(tmp_path / "probe", fake_server, items=1)
    assert main(["run", str(probe.config), "--no-live"]) == 0
    per_request = fake_server.stats()["accepted_tokens"]  # one GEMBA request, as this provider counts
    # The provider allows 10 requests' tokens per second over a 2 s window; the config asks for 9,
    # so a correctly calibrated pace never meets the provider's limit (a window of 20 requests
    # leaves no room for the 1% headroom's jitter), and any 429 says the pace ran over.
    configured = per_request * 9 * 60
    with FakeServer(FakeConfig(chars_per_token=chars_per_token, tpm=per_request * 10 * 60, window_s=2.0,
                               latency_s=0.4, latency_jitter_s=0.05)) as server:
        job = make_job(tmp_path / "job", server, items=45, judge={"limits": {"rpm": None, "tpm": configured, "concurrency": 16}})
        assert main(["run", str(job.config), "--no-live"]) == 0
        stats = server.stats()
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 45 and {o["status"] for o in outcomes} == {"scored"}
    assert stats["rate_limited"] == 0, stats
    span = stats["last_accepted_s"] - stats["first_accepted_s"]
    rate = (stats["accepted_tokens"] - per_request) / span * 60  # tokens after the first request
    assert 0.93 * configured <= rate <= 1.02 * configured, (rate / configured, stats)
