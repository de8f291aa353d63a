"""The load profiles and how one run of the engine or the baseline is measured.

Every run gets a fresh fake server process (clean counters, windows and storm clock) and a fresh
job folder (empty cache), so no run can borrow from another.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    REPO,
    ChildResult,
    CpuSampler,
    only_run_dir,
    read_outcomes,
    reap_sampled,
    run_engine,
    server_start_mono,
    spawn,
)
from benchmarks.workload import JobSpec, Oracle, Workload, write_job


@dataclass(frozen=True)
class Profile:
    name: str
    fake: dict[str, Any]
    """FakeConfig fields for the provider."""
    job: JobSpec
    binding: str
    """``rpm`` / ``tpm``: utilization of that limit; ``physical``: lower bound over actual time."""
    limit: float = 0.0
    """The provider's real limit of the binding kind (rpm or tpm)."""
    about: str = ""


WINDOW_S = 5.0  # the fake's sliding window: limits bite within seconds, rates unchanged

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in [
        Profile("rpm", {"rpm": 3000, "window_s": WINDOW_S, "latency_s": 0.5, "latency_jitter_s": 0.1},
                JobSpec(rpm=3000, concurrency=64), "rpm", 3000, "provider 3,000 RPM, 0.5 s latency; config rpm 3000"),
        Profile("tpm", {"tpm": 1_500_000, "window_s": WINDOW_S, "latency_s": 0.5, "latency_jitter_s": 0.1},
                JobSpec(protocol="novel-spans", tpm=1_500_000, concurrency=64), "tpm", 1_500_000,
                "provider 1.5M TPM, novel-spans zero-shot (~800 fake tokens/request); config tpm 1.5M"),
        Profile("tpm-long", {"tpm": 1_500_000, "window_s": WINDOW_S, "latency_s": 0.5, "latency_jitter_s": 0.1},
                JobSpec(protocol="gemba-mqm", tpm=1_500_000, concurrency=64), "tpm", 1_500_000,
                "provider 1.5M TPM, gemba-mqm few-shot (~1,800-2,000 fake tokens/request: ~150 s at N=2,000); "
                "config tpm 1.5M"),
        Profile("latency", {"latency_s": 2.0, "latency_jitter_s": 0.2},
                JobSpec(concurrency=200), "physical", 0, "2 s latency, no limits, concurrency 200"),
        Profile("faults", {"latency_s": 0.5, "latency_jitter_s": 0.1, "error_500_rate": 0.05, "malformed_rate": 0.02, "seed": 3},
                JobSpec(concurrency=64), "physical", 0, "5% HTTP 500, 2% malformed answers, 0.5 s latency"),
        Profile("chaos", {"latency_s": 0.2, "latency_jitter_s": 0.05, "error_503_rate": 0.03, "reset_rate": 0.03,
                          "truncate_rate": 0.03, "hang_rate": 0.02, "hang_s": 15.0, "seed": 7},
                JobSpec(concurrency=64, timeout_s=2.0, transport_retries=8, backoff_max_s=2.0), "physical", 0,
                "3% 503, 3% resets, 3% truncated bodies, 2% hangs (15 s; timeout_s 2)"),
        Profile("misconfigured", {"rpm": 3000, "window_s": WINDOW_S, "latency_s": 0.5, "latency_jitter_s": 0.1},
                JobSpec(rpm=6000, concurrency=64), "rpm", 3000, "config says 6,000 RPM, provider allows 3,000"),
    ]
}


def physical_bound_s(profile: Profile, n: int) -> float:
    """The shortest time any client with this concurrency could take: slot-seconds needed / slots.

    Every attempt costs the mean latency of a slot; a failed attempt (5xx, reset, truncated,
    malformed) costs one more attempt; a hang costs ``timeout_s`` instead of the latency.
    """
    fake = profile.fake
    latency = float(fake.get("latency_s", 0.0))
    fail = 1.0
    for key in ("error_500_rate", "error_503_rate", "reset_rate", "truncate_rate", "malformed_rate"):
        fail *= 1.0 - float(fake.get(key, 0.0))
    hang = float(fake.get("hang_rate", 0.0))
    good = fail * (1.0 - hang)
    attempts = n / good
    slot_seconds = attempts * (1.0 - hang) * latency + attempts * hang * profile.job.timeout_s
    return slot_seconds / profile.job.concurrency


def ideal_client_util(profile: Profile, n: int, *, runs: int = 200) -> tuple[float, float, float]:
    """What a client with zero overhead reaches of :func:`physical_bound_s` on this profile's
    latency distribution: mean, min and max over ``runs`` simulated runs.

    The bound divides slot-seconds by slots as if every slot ended at the same instant; with
    jittered latencies the last requests end at different times whatever the client does (an
    online client cannot know which request will be slow). The simulation hands ``n`` requests,
    latency uniform in ``latency_s ± latency_jitter_s`` (the fake's distribution), to the first
    free of ``concurrency`` slots, with no cost between requests.
    """
    import heapq
    import random

    latency = float(profile.fake.get("latency_s", 0.0))
    jitter = float(profile.fake.get("latency_jitter_s", 0.0))
    slots_n = profile.job.concurrency
    utils = []
    for seed in range(runs):
        draw = random.Random(seed)
        slots = [0.0] * slots_n
        end = total = 0.0
        for _ in range(n):
            took = latency + jitter * draw.uniform(-1.0, 1.0)
            total += took
            start = heapq.heappop(slots)
            heapq.heappush(slots, start + took)
            end = max(end, start + took)
        utils.append((total / slots_n) / end)
    return sum(utils) / runs, min(utils), max(utils)


class Monitor:
    """Polls the fake server's stats (4 Hz) while a child runs: a time series on our clock."""

    def __init__(self, server: Any, period_s: float = 0.25) -> None:
        self.server, self.period_s = server, period_s
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), self.server.stats()))
            except OSError:
                pass
            self._stop.wait(self.period_s)


@dataclass
class Measured:
    """One row of the table (engine or baseline)."""

    who: str
    child: ChildResult
    stats: dict[str, Any]
    n: int
    lost: int
    wrong: int
    unscored: int
    first_request_s: float | None
    active_s: float
    """From the first request the server saw to the child's exit."""
    samples: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    server_start: float = 0.0
    startup_cpu_s: float | None = None
    """The child's CPU up to its first accepted request (this run's own start-up)."""
    shutdown_cpu_s: float | None = None
    """The child's CPU after its last accepted request's answer (its summary, manifest, exit);
    still counted in :meth:`cpu_ms_per_request`, shown apart to say where it went."""

    @property
    def requests(self) -> int:
        return int(self.stats["requests_total"])

    @property
    def share_429(self) -> float:
        return self.stats["rate_limited"] / max(1, self.requests)

    def accepted_rate(self, kind: str) -> float | None:
        """Accepted requests (or tokens) per minute between the first and last accepted one."""
        first, last = self.stats.get("first_accepted_s"), self.stats.get("last_accepted_s")
        count = self.stats["accepted_requests"]
        if first is None or last is None or last <= first or count < 2:
            return None
        amount = count - 1 if kind == "rpm" else self.stats["accepted_tokens"] * (count - 1) / count
        return amount / (last - first) * 60.0

    def late_rate(self, kind: str) -> float | None:
        """The same over the second half of the span (a converged pace, for misconfigured limits)."""
        first, last = self.stats.get("first_accepted_s"), self.stats.get("last_accepted_s")
        if first is None or last is None or not self.samples:
            return None
        mid = self.server_start + first + (last - first) / 2
        end = self.server_start + last
        key = "accepted_requests" if kind == "rpm" else "accepted_tokens"
        window = [(t, s[key]) for t, s in self.samples if mid <= t <= end]
        if len(window) < 2 or window[-1][0] - window[0][0] < 2.0:
            return None
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0]) * 60.0

    def cpu_ms_per_request(self) -> float:
        """CPU per request the server saw, net of this run's own start-up (its CPU up to its
        first request; NaN when that was not sampled, so a gap never passes as a figure)."""
        if self.startup_cpu_s is None:
            return math.nan
        return 1000.0 * max(0.0, self.child.cpu_s - self.startup_cpu_s) / max(1, self.requests)


def _first_request_s(server_start: float, stats: dict[str, Any], child: ChildResult) -> float | None:
    first = stats.get("first_accepted_s")
    return None if first is None else server_start + float(first) - child.started_mono


def run_engine_profile(profile: Profile, n: int, items: Path, work: Path, oracle: Oracle,
                       expected: dict[str, float | None], *, who: str = "engine",
                       source: Path | None = None) -> Measured:
    """One engine run of ``profile``; ``source``: the tree whose engine runs (another git ref's,
    labelled ``who``), default this checkout's."""
    from judge_engine.fake import FakeConfig, FakeServerProcess

    with FakeServerProcess(FakeConfig(**profile.fake)) as server:
        start = server_start_mono(server)
        config = write_job(work / f"{profile.name}-{who}", items, server.base_url, profile.job)
        config = _limit(config, n)
        sampler = CpuSampler()
        with Monitor(server) as monitor:
            child = run_engine(config, log=config.parent / "engine.log", sampler=sampler, source=source)
        stats = server.stats()
    outcomes = read_outcomes(only_run_dir(config.parent))
    latest = {o["task_id"]: o for o in outcomes}
    wrong = sum(1 for o in latest.values() if o["status"] == "scored" and not _same(o["score"], expected.get(o["item_id"])))
    unscored = sum(1 for o in latest.values() if o["status"] != "scored")
    first = _first_request_s(start, stats, child)
    active = child.wall_s - (first or 0.0)
    return Measured(who, child, stats, n, n - len(latest), wrong, unscored, first, active, monitor.samples, start,
                    _startup_cpu(sampler, child, first), _shutdown_cpu(sampler, child, start, stats, profile))


def run_baseline_profile(profile: Profile, n: int, items: Path, work: Path, oracle: Oracle, workload: Workload) -> Measured:
    from judge_engine.fake import FakeConfig, FakeServerProcess

    folder = work / f"{profile.name}-baseline"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "answers.jsonl"
    with FakeServerProcess(FakeConfig(**profile.fake)) as server:
        start = server_start_mono(server)
        sampler = CpuSampler()
        with Monitor(server) as monitor:
            child = run_baseline(items, n, server.base_url, profile.job, out, log=folder / "baseline.log", sampler=sampler)
        stats = server.stats()
    rows = {row["id"]: row for row in workload.rows(n)}
    answers = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []
    lost = n - sum(1 for a in answers if "content" in a)
    wrong = sum(1 for a in answers if "content" in a and not oracle.strictly_readable(rows[a["id"]], a["content"]))
    first = _first_request_s(start, stats, child)
    return Measured("baseline", child, stats, n, lost, wrong, 0, first, child.wall_s - (first or 0.0), monitor.samples, start,
                    _startup_cpu(sampler, child, first))


def _startup_cpu(sampler: CpuSampler, child: ChildResult, first_request_s: float | None) -> float | None:
    """The child's CPU up to the first request the server accepted from it."""
    return None if first_request_s is None else sampler.cpu_at(child.started_mono + first_request_s)


def _shutdown_cpu(sampler: CpuSampler, child: ChildResult, server_start: float, stats: dict[str, Any],
                  profile: Profile) -> float | None:
    """The child's CPU from its last accepted request's answer (its latency at most) to its exit."""
    last = stats.get("last_accepted_s")
    if last is None:
        return None
    latest = float(profile.fake.get("latency_s", 0.0)) + float(profile.fake.get("latency_jitter_s", 0.0))
    answered = server_start + float(last) + latest
    at = sampler.cpu_at(answered)
    return None if at is None else max(0.0, child.cpu_s - at)


def run_baseline(items: Path, n: int, api_base: str, job: JobSpec, out: Path, *, log: Path,
                 sampler: CpuSampler | None = None) -> ChildResult:
    command = [sys.executable, str(REPO / "benchmarks" / "baseline.py"), str(items), "--protocol", job.protocol,
               "--n", str(n), "--api-base", api_base, "--concurrency", str(job.concurrency),
               "--max-tokens", str(job.max_tokens), "--out", str(out)]
    process, started = spawn(command, cwd=out.parent, log=log)
    return reap_sampled(process, started, log, sampler=sampler)


def _limit(config: Path, n: int) -> Path:
    """Judge only the first ``n`` items of a shared items file (dataset.limit)."""
    import yaml

    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["dataset"]["limit"] = n
    config.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return config


def _same(score: Any, expected: float | None) -> bool:
    if score is None or expected is None:
        return score is None and expected is None
    return math.isclose(float(score), float(expected), rel_tol=1e-9, abs_tol=1e-12)
