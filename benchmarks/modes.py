"""The separate modes: start-up, memory growth, long Retry-After, and crash/resume."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    child_env,
    only_run_dir,
    outcome_counts,
    read_outcomes,
    reap,
    run_engine,
    spawn,
    wall_clock_of,
)
from benchmarks.profiles import Monitor
from benchmarks.workload import JobSpec, write_items, write_job

Check = tuple[str, bool, str]


# --- start-up --------------------------------------------------------------------------------


def startup_checks(results: list[Any]) -> list[Check]:
    """``judge-engine --help`` wall time, and process start -> first request the server saw."""

    def help_once() -> None:
        subprocess.run([sys.executable, "-m", "judge_engine.cli", "--help"], env=child_env(),
                       stdout=subprocess.DEVNULL, check=True)

    help_s = wall_clock_of(help_once)
    checks: list[Check] = [("start-up: judge-engine --help < 0.3 s (best of 3)", help_s < 0.3, f"{help_s:.3f} s")]
    firsts = [m.first_request_s for _, m, _ in results if m.first_request_s is not None]
    if firsts:
        worst = max(firsts)
        checks.append(("start-up: a run sends its first request within 4 s (worst profile)", worst < 4.0, f"{worst:.2f} s"))
    return checks


# --- memory ----------------------------------------------------------------------------------


def memory(work: Path, *, sizes: list[int]) -> list[Check]:
    """Peak RSS of runs of growing size, no limits and no latency: memory must not grow with N."""
    from judge_engine.fake import FakeConfig, FakeServerProcess

    peaks: dict[int, float] = {}
    for n in sizes:
        items = write_items(work / f"items-mem-{n}.jsonl", n)
        with FakeServerProcess(FakeConfig()) as server:
            config = write_job(work / f"memory-{n}", items, server.base_url, JobSpec())
            print(f"[memory] {n:,} items...", flush=True)
            child = run_engine(config, log=config.parent / "engine.log")
            requests = server.stats()["requests_total"]
        peaks[n] = child.peak_rss_mb
        print(f"[memory] {n:,} items: peak RSS {child.peak_rss_mb:.1f} MB, {child.wall_s:.1f} s wall, "
              f"{child.cpu_s:.1f} s CPU, {requests:,} requests, exit {child.returncode}")
    small, large = min(sizes), max(sizes)
    growth = peaks[large] - peaks[small]
    return [(f"memory: peak RSS grows <= 50 MB from {small:,} to {large:,} items", growth <= 50.0,
             f"{peaks[small]:.1f} -> {peaks[large]:.1f} MB (+{growth:.1f})")]


# --- long Retry-After ------------------------------------------------------------------------


def long_retry_after(work: Path, *, seed: int = 5) -> list[Check]:
    """A storm of 429s asking for 61-75 s: the lane must wait it out with no request in between."""
    from judge_engine.fake import FakeConfig, FakeServerProcess

    retry_after = round(random.Random(seed).uniform(61.0, 75.0), 1)
    n = 200
    items = write_items(work / "items-lra.jsonl", n)
    storm = {"start_s": 0.0, "duration_s": 30.0, "retry_after_s": retry_after}
    with FakeServerProcess(FakeConfig(storm=storm)) as server:
        config = write_job(work / "long-retry-after", items, server.base_url, JobSpec(concurrency=16))
        print(f"[long-retry-after] storm for the first 30 s of the server, Retry-After {retry_after} s...", flush=True)
        with Monitor(server, period_s=0.1) as monitor:
            child = run_engine(config, log=config.parent / "engine.log", timeout_s=300)
        stats = server.stats()
    outcomes = read_outcomes(only_run_dir(config.parent))
    # The last sample that still shows only the storm's 429s, and the first that shows more requests.
    storm_429 = stats["rate_limited"]
    first_429 = next((t for t, s in monitor.samples if s["rate_limited"] > 0), None)
    after = next((t for t, s in monitor.samples if s["requests_total"] > storm_429), None)
    gap = (after - first_429) if first_429 is not None and after is not None else None
    print(f"[long-retry-after] {storm_429} x 429 (all in the first burst), next request {gap and round(gap, 1)} s "
          f"after the first 429; {len(outcomes)}/{n} outcomes; exit {child.returncode}; wall {child.wall_s:.1f} s")
    ok = gap is not None and gap >= retry_after - 0.5 and storm_429 <= 16 and len(outcomes) == n
    return [(f"long Retry-After ({retry_after} s) honoured with no request in between", ok,
             f"gap {gap and round(gap, 1)} s, {storm_429} x 429, {len(outcomes)}/{n} done")]


# --- crash and resume ------------------------------------------------------------------------


def crash(work: Path, *, items: int, kills: int, seed: int = 20, concurrency: int = 16) -> list[Check]:
    """SIGKILL the engine at ``kills`` random moments, resuming each time; then finish the run."""
    from judge_engine.fake import FakeConfig, FakeServerProcess

    rng = random.Random(seed)
    path = write_items(work / f"items-crash-{items}.jsonl", items)
    folder = work / "crash"
    killed = 0
    # 0.2 s latency: the run lasts ~2 minutes (80 req/s), so all the kills land mid-run.
    with FakeServerProcess(FakeConfig(latency_s=0.2, latency_jitter_s=0.05)) as server:
        config = write_job(folder, path, server.base_url, JobSpec(concurrency=concurrency))
        log = folder / "engine.log"
        for index in range(kills):
            run_dir = _run_dir_or_none(folder)
            command = [sys.executable, "-m", "judge_engine.cli"]
            command += ["resume", str(run_dir), "--no-live"] if run_dir else ["run", str(config), "--no-live"]
            process, started = spawn(command, cwd=folder, log=log)
            delay = rng.uniform(1.0, 8.0)
            time.sleep(delay)
            if process.poll() is not None:  # it finished (and poll() reaped it): nothing left to kill
                print(f"[crash] the run ended before kill {index + 1}", flush=True)
                break
            process.send_signal(signal.SIGKILL)
            killed += 1
            reap(process, started, log)
            done = len(outcome_counts(read_outcomes(run_dir))) if run_dir else 0
            print(f"[crash] kill {index + 1}/{kills} after {delay:.1f} s: {done:,}/{items:,} tasks have outcomes", flush=True)
        final = run_engine(config, log=log)
        stats = server.stats()
    counts = outcome_counts(read_outcomes(only_run_dir(folder)))
    once = len(counts) == items and set(counts.values()) == {1}
    dupes = sum(1 for c in counts.values() if c > 1)
    extra = stats["requests_total"] - items
    allowed = concurrency * killed
    print(f"[crash] final run exit {final.returncode}; {len(counts):,} tasks, {dupes} with more than one outcome; "
          f"server saw {stats['requests_total']:,} requests for {items:,} tasks (+{extra}, allowed +{allowed})")
    return [
        (f"crash: every task exactly once in outcomes.jsonl after {killed} kills", once,
         f"{len(counts):,}/{items:,} tasks, {dupes} duplicated"),
        ("crash: extra requests <= in-flight (concurrency) per kill", extra <= allowed, f"+{extra} <= +{allowed}"),
        (f"crash: all {kills} kills landed mid-run", killed == kills, f"{killed}/{kills}"),
    ]


def _run_dir_or_none(folder: Path) -> Path | None:
    runs = folder / "runs"
    dirs = [p for p in runs.iterdir() if p.is_dir() and (p / "run.json").exists()] if runs.exists() else []
    return dirs[0] if len(dirs) == 1 else None

