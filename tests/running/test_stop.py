"""Ctrl-C (issue 13, item 4): the first one stops dispatching at once and says what it is
finishing, the display stays live, the second one aborts; in ``--demo`` the fake server outlives
the grace period. Each test runs ``judge-engine run`` in a child process and signals it."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from judge_engine.fake import FakeServer
from tests.harness import TEST_KEY, TEST_KEY_ENV, make_job, read_transcripts

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}


def _command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "judge_engine.cli", "run", str(config), *extra]


def _wait_for(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


@pytest.mark.slow
def test_first_ctrl_c_sends_nothing_more_and_finishes_calls_in_flight(tmp_path: Path, fake_server: FakeServer) -> None:
    # A paced lane (2 requests/s) with long calls: at any moment tasks wait for the lane.
    fake_server.update(latency_s=1.0)
    job = make_job(tmp_path, fake_server, items=200, judge={"limits": {"rpm": 120, "concurrency": 4}})
    process = subprocess.Popen(_command(job.config, "--no-live"), env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: fake_server.stats()["requests_total"] >= 6)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)  # requests sent just before the signal arrive
    at_signal = fake_server.stats()["requests_total"]
    time.sleep(2.5)  # at 2 requests/s, five more would go out if dispatching went on
    assert fake_server.stats()["requests_total"] == at_signal
    assert process.wait(timeout=30) == 130
    err = process.stderr.read() if process.stderr else ""
    assert "no new calls go out; finishing" in err and "Ctrl-C again to abort" in err
    run = job.only_run()
    # Every call the server received was answered and recorded: nothing in flight was lost.
    attempts = [t for t in read_transcripts(run) if "request" in t]
    assert len(attempts) == at_signal and all("response" in t for t in attempts)
    # Abandoned tasks were never sent: resuming judges each remaining task exactly once (limits
    # are not part of a run's identity: raise them so the rest goes fast).
    fake_server.update(latency_s=0.0)
    job.config.write_text(job.config.read_text().replace("rpm: 120", "rpm: 60000"))
    process = subprocess.run([sys.executable, "-m", "judge_engine.cli", "resume", str(run), "--no-live"],
                             env=_env(), capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    assert fake_server.stats()["requests_total"] == 200


@pytest.mark.slow
def test_second_ctrl_c_aborts_calls_in_flight(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(latency_s=60.0)
    job = make_job(tmp_path, fake_server, items=8, judge={"limits": {"concurrency": 4}, "timeout_s": 120})
    process = subprocess.Popen(_command(job.config, "--no-live"), env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: fake_server.stats()["in_flight"] >= 4)
    process.send_signal(signal.SIGINT)
    time.sleep(0.5)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=10) == 130
    assert time.monotonic() - started < 5  # not the 10 s grace period, nor the 60 s calls
    assert "cancelled" in (job.only_run() / "run.json").read_text()


@pytest.mark.slow
def test_calls_longer_than_the_grace_period_are_abandoned_and_the_run_ends(tmp_path: Path,
                                                                           fake_server: FakeServer) -> None:
    """One Ctrl-C while every worker is in a call that outlasts the grace period, with the
    queue full: the run still ends ``cancelled`` once the grace period is over (the feeder once
    waited forever to hand its workers a sentinel they were no longer there to read)."""
    fake_server.update(latency_s=40.0)
    job = make_job(tmp_path, fake_server, items=200, judge={"limits": {"concurrency": 4}, "timeout_s": 120})
    process = subprocess.Popen(_command(job.config, "--no-live"), env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: fake_server.stats()["in_flight"] >= 4)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=25) == 130
    assert time.monotonic() - started < 15  # the 10 s grace period, not the 40 s calls
    manifest = json.loads((job.only_run() / "run.json").read_text())
    assert manifest["status"] == "cancelled"
    assert manifest["counts"]["total"]["planned"] == 200 and manifest["counts"]["total"]["tasks"] < 200
    # The abandoned calls went out (and may be charged): recorded and counted, not forgotten.
    sent = fake_server.stats()["requests_total"]
    abandoned = [t for t in read_transcripts(job.only_run()) if (t.get("error") or {}).get("kind") == "abandoned"]
    assert len(abandoned) == sent == manifest["spend"]["total"]["calls"] >= 4
    assert all(t["estimated"] and t["cost"] > 0 for t in abandoned)  # booked at an estimate: maybe charged
    assert manifest["spend"]["total"]["estimated_calls"] == len(abandoned)
    assert "abandoned in flight" in (process.stderr.read() if process.stderr else "")


@pytest.mark.slow
def test_demo_fake_server_outlives_a_terminal_ctrl_c(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the whole foreground process group. The demo's fake server
    must keep answering the calls in flight: none of them may fail and be retried."""
    job = make_job(tmp_path, None, items=300, judge={"limits": {"rpm": 600, "concurrency": 8}})
    process = subprocess.Popen(_command(job.config, "--demo", "--no-live"), env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_for(lambda: any(job.runs.glob("*/outcomes.jsonl")) and
              next(job.runs.glob("*/outcomes.jsonl")).read_bytes().count(b"\n") >= 10)
    os.killpg(process.pid, signal.SIGINT)  # what the terminal does
    assert process.wait(timeout=30) == 130
    transcripts = read_transcripts(job.only_run())
    errors = [t["error"] for t in transcripts if "error" in t]
    assert errors == []


def _pty_run(config: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # an 80-column terminal
    env = {**_env(), "TERM": "xterm-256color", "COLUMNS": "80"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(_command(config, *extra), env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    return process, master


def _read_for(master: int, seconds: float) -> bytes:
    out = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
    return out


def _read_until(master: int, condition: Callable[[], bool], *, timeout: float) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        out += _read_for(master, 0.2)
    assert condition(), "the run never got its calls in flight"
    return out


@pytest.mark.slow
def test_live_display_at_80_columns_stays_live_after_ctrl_c(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(latency_s=3.0)
    job = make_job(tmp_path, fake_server, items=100, judge={"name": "mqm-gpt-4o-mini-judge",
                                                            "limits": {"rpm": 600, "concurrency": 4}})
    process, master = _pty_run(job.config)
    try:
        # Until calls are on the wire (start-up takes seconds more on a loaded machine), then a beat.
        before = _read_until(master, lambda: fake_server.stats()["requests_total"] >= 4, timeout=30.0)
        before += _read_for(master, 0.5)
        process.send_signal(signal.SIGINT)
        after = _read_for(master, 2.0)  # the calls in flight take ~3 s: the display must keep drawing
        rest = _read_for(master, 8.0)
        assert process.wait(timeout=20) == 130
    finally:
        os.close(master)
    text = (before + after).decode("utf-8", "replace")
    assert "mqm-gpt-4o-mini-judge" in text and "in flight" in text and "req/min" in text
    assert "…" not in text and "..." not in text  # nothing cut at 80 columns
    assert "no new calls go out" in after.decode("utf-8", "replace")
    assert after.count(b"in flight") >= 3  # redrawn several times after the signal
    assert b"Cancelled. Finish it with" in rest
