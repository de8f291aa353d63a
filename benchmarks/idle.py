"""What a run costs per second while it waits on its pacer, apart from what its requests cost.

A TPM-bound run of 2,000 long prompts lasts ~150 s where an RPM-bound one lasts ~40 s; work the
engine does per second of the run (timers, the progress view, flushes, checkpoints, asyncio
wake-ups) is spread over the same requests and shows up in its CPU per request. This script
runs the engine on the few-shot GEMBA-MQM workload against the fake server with a token limit so
low that it sends one request every ``--every`` seconds, for ``--seconds``, and reads the engine
process from ``/proc`` meanwhile:

* CPU per second of the waiting part (from the first request the server accepted to the last):
  utime + stime of the process, sampled every 0.5 s;
* wake-ups per second of each of its threads (voluntary context switches: a thread that blocks
  and is woken again), which depend on what the engine does, not on how loaded the machine is.

    python benchmarks/idle.py [--seconds 60] [--every 4] [--compare-ref REF]
    python benchmarks/idle.py --callgrind      # instructions per waiting second (valgrind; slow)
    python benchmarks/idle.py --every 0.075 --seconds 60 --py-spy   # a tpm-long pace, profiled
    python benchmarks/idle.py --every 0.073 --seconds 30 --cprofile # calls per request, from the first

``--callgrind`` runs the engine under ``valgrind --tool=callgrind`` with instrumentation off until
the first request, switches it on then (``callgrind_control -i on``) and reads the instruction
count at the end: a figure the machine's load does not move. The request costs are included
(one request every ``--every`` seconds); compare two refs at the same settings.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import (  # noqa: E402
    checkout,
    child_env,
    only_run_dir,
    read_outcomes,
    reap,
    server_start_mono,
)
from benchmarks.workload import WORKLOADS, JobSpec, Oracle, write_items, write_job  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def thread_figures(pid: int) -> dict[int, tuple[float, int]]:
    """tid -> (CPU seconds, voluntary context switches) of every thread of ``pid``."""
    out: dict[int, tuple[float, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            with open(f"/proc/{pid}/task/{tid}/status", encoding="ascii", errors="replace") as handle:
                switches = next(int(line.split()[1]) for line in handle if line.startswith("voluntary_ctxt_switches"))
        except (OSError, IndexError, ValueError, StopIteration):
            continue
        out[int(tid)] = (cpu, switches)
    return out


class ThreadSampler:
    """Samples :func:`thread_figures` of a child every ``period_s``."""

    def __init__(self, pid: int, period_s: float = 0.5) -> None:
        self.pid, self.period_s = pid, period_s
        self.samples: list[tuple[float, dict[int, tuple[float, int]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            figures = thread_figures(self.pid)
            if not figures:
                return
            self.samples.append((time.monotonic(), figures))
            self._stop.wait(self.period_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> tuple[float, dict[int, tuple[float, float]]] | None:
        """(seconds, tid -> (CPU ms per second, wake-ups per second)) between the samples
        nearest inside [start, end]."""
        inside = [(t, f) for t, f in self.samples if start <= t <= end]
        if len(inside) < 2:
            return None
        (t0, first), (t1, last) = inside[0], inside[-1]
        span = t1 - t0
        per: dict[int, tuple[float, float]] = {}
        for tid, (cpu, switches) in last.items():
            cpu0, switches0 = first.get(tid, (0.0, 0))
            per[tid] = (1000.0 * (cpu - cpu0) / span, (switches - switches0) / span)
        return span, per


def run(args: argparse.Namespace, work: Path, who: str, source: Path | None) -> dict[str, Any]:
    from judge_engine.fake import FakeConfig, FakeServerProcess

    workload = WORKLOADS["fewshot"]
    n = int(args.seconds / args.every) + 1
    items = write_items(work / "items.jsonl", n, workload)
    oracle = Oracle("gemba-mqm")
    tokens = sum(oracle.expected(row)[1] for row in workload.rows(n)) / n
    tpm = tokens * 60.0 / args.every / 0.99  # the lane keeps 1% headroom
    fake = FakeConfig(tpm=tpm, window_s=60.0, latency_s=0.5, latency_jitter_s=0.1)
    with FakeServerProcess(fake) as server:
        start = server_start_mono(server)
        config = write_job(work / f"idle-{who}", items, server.base_url,
                           JobSpec(protocol="gemba-mqm", tpm=tpm, concurrency=64))
        command = [sys.executable, "-m", "judge_engine.cli", "run", str(config), "--no-live"]
        if args.py_spy:
            command = ["py-spy", "record", "-r", "500", "--nonblocking", "--format", "raw", "-o", str(config.parent / "profile.raw"),
                       "--", *command]
        if args.cprofile:
            command = [sys.executable, str(Path(__file__).with_name("profiled.py")), *command[3:]]
        if args.callgrind:
            command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                       f"--callgrind-out-file={config.parent / 'callgrind.out'}", *command]
        log = config.parent / "engine.log"
        handle = log.open("ab")
        started = time.monotonic()
        env = {**child_env(source), "PROFILE_OUT": str(config.parent / "profile.pstats")}
        process = subprocess.Popen(command, cwd=config.parent, env=env, stdout=handle, stderr=subprocess.STDOUT)
        handle.close()
        sampler = ThreadSampler(_engine_pid(process.pid) if args.py_spy else process.pid)
        if args.callgrind or args.cprofile:  # the run's requests, not its start-up
            _await_first_request(server)
            if args.callgrind:
                subprocess.run(["callgrind_control", "-i", "on", str(process.pid)], capture_output=True, check=False)
            else:
                os.kill(process.pid, signal.SIGUSR1)  # profiled.py switches cProfile on
        child = reap(process, started, log)
        sampler.stop()
        stats = server.stats()
    if child.returncode not in (0, 3):
        raise SystemExit(f"{who}: the engine exited {child.returncode}; see {log}")
    first, last = start + float(stats["first_accepted_s"]), start + float(stats["last_accepted_s"])
    result: dict[str, Any] = {"who": who, "requests": int(stats["requests_total"]), "span_s": last - first,
                              "outcomes": len(read_outcomes(only_run_dir(config.parent)))}
    window = sampler.between(first + 1.0, last)  # the first second still has start-up's tail
    if window is not None:
        result["measured_s"], result["threads"] = window
    if args.cprofile:
        _print_profile(config.parent / "profile.pstats", int(stats["requests_total"]))
    if args.callgrind:
        result["instructions"] = _instructions(config.parent / "callgrind.out")
    return result


def _print_profile(path: Path, requests: int, top: int = 45) -> None:
    """The engine's functions by own time, with their calls per request (cProfile's overhead
    inflates the times of small functions; the call counts are exact)."""
    import pstats

    table = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    rows = sorted(table.items(), key=lambda kv: -kv[1][2])[:top]
    print(f"cProfile, {requests} requests: calls/req  own ms/req  cum ms/req  function")
    for (file, line, name), (_, calls, own, cum, _) in rows:
        where = f"{Path(file).name}:{line}:{name}" if line else name
        print(f"  {calls / requests:9.1f}  {1000 * own / requests:10.3f}  {1000 * cum / requests:10.3f}  {where}")


def _engine_pid(pid: int) -> int:
    """The engine under py-spy: py-spy's child process."""
    for _ in range(500):
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.01)
    return pid


def _await_first_request(server: Any) -> None:
    while server.stats().get("first_accepted_s") is None:
        time.sleep(0.05)


def _instructions(out: Path) -> tuple[int, int]:
    """(all instructions counted, those of the interpreter's own teardown at exit)."""
    total = 0
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            total = max(total, int(line.split()[1]))
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)], capture_output=True,
                               text=True, check=False).stdout
    teardown = next((int(line.split()[0].replace(",", "")) for line in annotated.splitlines()
                     if line.rstrip().endswith("Py_FinalizeEx [") or ":Py_FinalizeEx " in line), 0)
    return total, teardown


def report(result: dict[str, Any], every: float) -> None:
    threads = result.get("threads", {})
    cpu = sum(c for c, _ in threads.values())
    wakes = sum(w for _, w in threads.values())
    print(f"{result['who']}: {result['requests']} requests (one per {every:g} s) over {result['span_s']:.1f} s; "
          f"{result['outcomes']} outcomes")
    if threads:
        print(f"  waiting part ({result['measured_s']:.1f} s): {cpu:.2f} ms of CPU per second, "
              f"{wakes:.1f} wake-ups per second")
        for tid, (c, w) in sorted(threads.items(), key=lambda kv: -kv[1][1]):
            print(f"    thread {tid}: {c:6.2f} ms/s  {w:7.1f} wake-ups/s")
    if "instructions" in result:
        total, teardown = result["instructions"]
        run = total - teardown
        print(f"  callgrind: {total:,} instructions from the first request on; {teardown:,} of them the "
              f"interpreter's teardown at exit; the rest {run / max(result['requests'], 1) / 1e6:.2f} M per "
              f"request, {run / max(result['span_s'], 1e-9) / 1e6:.1f} M per second of the run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the run waits (default 60)")
    parser.add_argument("--every", type=float, default=4.0, help="seconds between requests (default 4)")
    parser.add_argument("--compare-ref", metavar="REF", help="also measure the engine of git REF, first")
    parser.add_argument("--callgrind", action="store_true", help="count instructions under valgrind's callgrind")
    parser.add_argument("--py-spy", action="store_true",
                        help="record the engine with py-spy (profile.raw in its job folder; see collapsed.py)")
    parser.add_argument("--cprofile", action="store_true",
                        help="run the engine under cProfile (profile.pstats in its job folder; calls per request)")
    parser.add_argument("--workdir", help="where jobs and logs go (default: a new temp dir)")
    args = parser.parse_args(argv)
    if args.callgrind and shutil.which("valgrind") is None:
        parser.error("--callgrind needs valgrind")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="judge-idle-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}")
    runs: list[tuple[str, Path | None]] = []
    if args.compare_ref:
        runs.append(("ref", checkout(args.compare_ref, work / "ref-src")))
    runs.append(("engine", None))
    for who, source in runs:
        print(f"[{who}] ~{args.seconds:g} s, one request every {args.every:g} s...", flush=True)
        report(run(args, work, who, source), args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
