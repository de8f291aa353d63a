"""Child processes and what they cost: the engine (or the baseline) measured by ``os.wait4``.

CPU seconds and peak RSS come from the child's own rusage, so the fake server (another process)
and this harness never count. The fake server's stats give the requests it saw and the span of
accepted ones; its start is placed on this machine's monotonic clock (both processes read the
same ``CLOCK_MONOTONIC``), so "time to first request" needs no instrumentation in the engine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.workload import KEY, KEY_ENV

REPO = Path(__file__).resolve().parents[1]


@dataclass
class ChildResult:
    """What one child process cost and how it ended."""

    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    started_mono: float
    """time.monotonic() just before the child was spawned."""
    log: Path
    extra: dict[str, Any] = field(default_factory=dict)


def child_env(source: Path | None = None) -> dict[str, str]:
    """The children's environment; ``source``: the tree whose ``judge_engine`` they import
    (another git ref's, for a before/after pair; default: this checkout)."""
    env = {**os.environ, KEY_ENV: KEY, "PYTHONPATH": str(source or REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("OPENAI_API_KEY", None)
    return env


def spawn(command: list[str], *, cwd: Path, log: Path, source: Path | None = None) -> tuple[subprocess.Popen[bytes], float]:
    handle = log.open("ab")
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=child_env(source), stdout=handle, stderr=subprocess.STDOUT)
    handle.close()
    return process, started


def reap(process: subprocess.Popen[bytes], started: float, log: Path, *, timeout_s: float | None = None) -> ChildResult:
    """Wait for the child with ``os.wait4`` (its rusage is the measurement)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG if deadline else 0)
        if pid:
            break
        if deadline and time.monotonic() > deadline:
            process.send_signal(signal.SIGKILL)
            deadline = None
        time.sleep(0.02)
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    process.returncode = code  # so Popen does not wait for a pid that is gone
    return ChildResult(code, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, started, log)


class CpuSampler:
    """Samples a child's CPU seconds (utime + stime of ``/proc/<pid>/stat``) every 10 ms, so the
    CPU it had spent by a given moment (its first request: its start-up) can be read afterwards
    from the same run, instead of from a separate, differently noisy, start-up run."""

    PERIOD_S = 0.01

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, pid: int) -> None:
        """Start sampling ``pid`` (a sampler watches one child; samples accumulate)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pid,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self, pid: int) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        path = f"/proc/{pid}/stat"
        while not self._stop.is_set():
            try:
                with open(path, "rb") as handle:  # the command name may be any bytes
                    fields = handle.read().rsplit(b")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / tick  # utime + stime, in ticks
            except (OSError, IndexError, ValueError):
                return  # the child is gone
            self.samples.append((time.monotonic(), cpu))
            self._stop.wait(self.PERIOD_S)

    def cpu_at(self, moment: float) -> float | None:
        """CPU seconds the child had spent at ``moment`` (monotonic; the last sample before it)."""
        before = [cpu for at, cpu in self.samples if at <= moment]
        return before[-1] if before else None


def run_engine(config: Path, *, log: Path, timeout_s: float | None = None, resume: Path | None = None,
               sampler: CpuSampler | None = None, source: Path | None = None) -> ChildResult:
    """Run the engine on ``config`` (or resume ``resume``) as a child; ``source``: whose engine
    (see :func:`child_env`)."""
    command = [sys.executable, "-m", "judge_engine.cli"]
    command += ["resume", str(resume), "--no-live"] if resume else ["run", str(config), "--no-live"]
    process, started = spawn(command, cwd=config.parent, log=log, source=source)
    return reap_sampled(process, started, log, timeout_s=timeout_s, sampler=sampler)


def reap_sampled(process: subprocess.Popen[bytes], started: float, log: Path, *, timeout_s: float | None = None,
                 sampler: CpuSampler | None = None) -> ChildResult:
    """:func:`reap`, with ``sampler`` watching the child's CPU meanwhile."""
    if sampler is None:
        return reap(process, started, log, timeout_s=timeout_s)
    sampler.watch(process.pid)
    try:
        return reap(process, started, log, timeout_s=timeout_s)
    finally:
        sampler.stop()


def server_start_mono(server: Any) -> float:
    """The fake server's start on this process's monotonic clock (to a few ms)."""
    before = time.monotonic()
    stats = server.stats()
    after = time.monotonic()
    return (before + after) / 2 - float(stats["uptime_s"])


def read_outcomes(run_dir: Path) -> list[dict[str, Any]]:
    from judge_engine.rundir.records import OUTCOMES
    from judge_engine.rundir.store import read_jsonl

    return list(read_jsonl(run_dir / OUTCOMES))


def checkout(ref: str, into: Path) -> Path:
    """The tree of git ``ref`` of this repository, extracted into ``into`` (its engine, for a
    before/after pair run in the same minutes)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", ref, "judge_engine"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def only_run_dir(job: Path) -> Path:
    runs = [p for p in (job / "runs").iterdir() if p.is_dir() and not p.is_symlink()] if (job / "runs").exists() else []
    if len(runs) != 1:
        raise RuntimeError(f"expected one run directory under {job / 'runs'}, found {len(runs)}")
    return runs[0]


def outcome_counts(outcomes: list[dict[str, Any]]) -> Counter[str]:
    """How many times each task has an outcome line."""
    return Counter(o["task_id"] for o in outcomes if "task_id" in o)


def wall_clock_of(fn: Any, repeats: int = 3) -> float:
    """Best wall time of ``fn()`` over ``repeats`` calls."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best
