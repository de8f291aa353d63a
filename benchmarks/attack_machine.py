"""``attack.py``'s families of hostile machines: two writers on one run, SIGKILL at random and
aimed moments (online and in batch mode) each followed by a resume, a small disk that fills,
and run directories nobody may write.

Every run here is checked against the fake server's oracle at the end (:func:`check_run`):
no task lost, none duplicated, every score the fake's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.attack_common import (
    Attempt,
    Family,
    check_run,
    gemba_judge,
    judge_engine,
    judged,
    kill_group,
    line_count,
    mount,
    run_dirs,
    scan_attempt,
    spawn,
    umount,
    wait_for,
    write_config,
    write_items,
)

if TYPE_CHECKING:
    from benchmarks.attack import Context

RUN = ["run", "config.yaml", "--no-live"]


def _job(ctx: Context, folder: Path, items: int, *, concurrency: int = 4, **judge: Any) -> list[dict[str, Any]]:
    rows = write_items(folder / "items.jsonl", items)
    write_config(folder, [gemba_judge("mqm", ctx.fake_url, limits={"concurrency": concurrency}, **judge)])
    return rows


def _finish(attempt: Attempt, ctx: Context, folder: Path, rows: list[dict[str, Any]], tries: int = 4) -> Path | None:
    """Resume the job's run until it completes; then check it against the oracle."""
    for _ in range(tries):
        runs = run_dirs(folder)
        done = judge_engine(["resume", str(runs[0]), "--no-live"] if runs else RUN, cwd=folder, timeout=180)
        judged(attempt, done, expect=(0,))
        if done.code == 0 or done.hung or done.traceback:
            break
    runs = run_dirs(folder)
    if not runs:
        attempt.lost += len(rows)
        return None
    check_run(attempt, runs[0], rows, ctx.oracle, {"mqm": [0.0]})
    return runs[0]


# --- two writers ----------------------------------------------------------------------------------


def writers(ctx: Context, family: Family) -> None:
    """A second process on a run being written (``run`` of the same config, ``resume``) is
    refused with a message; the first finishes with every task once."""
    for round_ in range(2 if ctx.quick else 6):
        folder = ctx.folder(f"writers-{round_}")
        rows = _job(ctx, folder, 120, concurrency=2)
        first = spawn(RUN, cwd=folder, log=folder / "first.log")
        try:
            wait_for(lambda job=folder: any(line_count(r / "outcomes.jsonl") > 2 for r in run_dirs(job)), 60)
            for argv in (RUN, ["resume", str(run_dirs(folder)[0]), "--no-live"] if run_dirs(folder) else RUN):
                done = judge_engine(argv, cwd=folder, timeout=120)
                attempt = judged(Attempt(f"second writer: {' '.join(argv[:2])}"), done, expect=(0, 2))
                if done.code == 0:
                    attempt.unclear = first.poll() is None  # both wrote the run at once
                    attempt.note += " a second writer ran while the first held the run"
                family.add(attempt)
        finally:
            first.wait(timeout=300)
        attempt = Attempt("the first writer's run", unclear=first.returncode != 0,
                          note=(folder / "first.log").read_text(errors="replace")[-300:] if first.returncode else "")
        check_run(attempt, run_dirs(folder)[0], rows, ctx.oracle, {"mqm": [0.0]})
        family.add(attempt)
    family.add(scan_attempt(ctx.folder("writers-0")))


# --- kills ----------------------------------------------------------------------------------------


def kills(ctx: Context, family: Family) -> None:
    """SIGKILL the engine after a random delay or at an aimed moment (the n-th outcome line),
    again and again, resuming in between; then finish and check the run."""
    for mode, count in (("online", 6 if ctx.quick else 40), ("batch", 3 if ctx.quick else 15)):
        items = count * (60 if mode == "online" else 40)  # enough that the last kill still lands mid-run
        folder = ctx.folder(f"kills-{mode}")
        extra: dict[str, Any] = {}
        if mode == "batch":
            extra = {"mode": "batch", "batch": {"poll_interval_s": 0.1, "fallback": "batch", "max_rounds": 3}}
        rows = _job(ctx, folder, items, concurrency=4, **extra)
        for number in range(count):
            runs = run_dirs(folder)
            argv = ["resume", str(runs[0]), "--no-live"] if runs else RUN
            process = spawn(argv, cwd=folder, log=folder / "engine.log")
            aimed = number % 2 == 1
            if aimed:  # the moment an outcome line is being written
                target = line_count(runs[0] / "outcomes.jsonl") + 1 + ctx.rng.randrange(5) if runs else 1
                wait_for(lambda job=folder, n=target: _outcome_lines(job) >= n, 30, step=0.002)
            else:
                time.sleep(ctx.rng.uniform(0.2, 2.5))
            finished = process.poll() is not None
            kill_group(process)
            if finished and process.returncode == 0:  # the run completed before this kill: no more to attack
                break
            family.add(Attempt(f"{mode} kill {number + 1} ({'aimed' if aimed else 'random'})",
                               unclear=finished and process.returncode not in (0,),
                               note=f"exit {process.returncode} before the kill" if finished else ""))
        log = (folder / "engine.log").read_text(errors="replace")
        family.add(Attempt(f"{mode}: the killed processes' output", traceback="Traceback (most recent" in log,
                           note=log[-300:] if "Traceback (most recent" in log else ""))
        family.add(_finished(ctx, folder, rows, f"{mode}: resumed to the end"))
        family.add(scan_attempt(folder))


def _outcome_lines(job: Path) -> int:
    runs = run_dirs(job)
    return line_count(runs[0] / "outcomes.jsonl") if runs else 0


def _finished(ctx: Context, folder: Path, rows: list[dict[str, Any]], name: str) -> Attempt:
    attempt = Attempt(name)
    _finish(attempt, ctx, folder, rows)
    return attempt


# --- a small disk ---------------------------------------------------------------------------------


def small_disk(ctx: Context, family: Family) -> None:
    """The run and the cache on a 2 MB tmpfs that fills: exit 5 naming the path, ``run.json``
    stopped with the reason; then the disk grows and a resume finishes with nothing lost."""
    folder = ctx.folder("small-disk")
    disk = folder / "disk"
    disk.mkdir(exist_ok=True)
    if not mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)):
        family.skipped = "cannot mount a tmpfs here: see tests/rundir/test_disk_full.py for the injected ENOSPC"
        return
    try:
        rows = _job(ctx, folder, 1200 if ctx.quick else 2400, concurrency=8)  # ~2 KB a task: past 2 MB
        config = folder / "config.yaml"
        text = config.read_text(encoding="utf-8").replace("dir: runs", "dir: disk/runs").replace("dir: cache",
                                                                                                 "dir: disk/cache")
        config.write_text(text, encoding="utf-8")
        done = judge_engine(RUN, cwd=folder, timeout=300)
        attempt = judged(Attempt(f"the run on a 2 MB disk (exit {done.code})"), done, expect=(5,), names=("disk",))
        runs = sorted((disk / "runs").iterdir()) if (disk / "runs").exists() else []
        runs = [r for r in runs if r.is_dir() and not r.is_symlink()]
        if done.code == 5 and runs:
            manifest = _manifest(runs[0])
            if manifest.get("status") != "stopped" or not manifest.get("stopped"):
                attempt.wrong += 1
                attempt.note += f" run.json: status {manifest.get('status')!r}, no reason"
        family.add(attempt)
        for size in ("3m", "64m"):  # a resume on a disk still too small, then on one with room
            mount("-o", f"remount,size={size}", str(disk))
            if runs:
                done = judge_engine(["resume", str(runs[0]), "--no-live"], cwd=folder, timeout=300)
                family.add(judged(Attempt(f"resume on a {size} disk"), done, expect=(0, 5) if size == "3m" else (0,),
                                  names=("disk",)))
        if runs:
            final = Attempt("the run after the disk grew")
            check_run(final, runs[0], rows, ctx.oracle, {"mqm": [0.0]})
            family.add(final)
        family.add(scan_attempt(disk))
    finally:
        umount(disk)


def _manifest(run: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((run / "run.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


# --- read-only runs -------------------------------------------------------------------------------


def read_only(ctx: Context, family: Family) -> None:
    """``status``, ``show``, ``export``, ``stats`` and ``view`` on a finished run mounted
    read-only, with its index current, deleted (missing) and stale."""
    folder = ctx.folder("read-only")
    rows = _job(ctx, folder, 30)
    judge_engine(RUN, cwd=folder, timeout=180)
    runs = run_dirs(folder)
    if not runs:
        family.add(Attempt("the run to make read-only", unclear=True, note="no run"))
        return
    run = runs[0]
    view = folder / "ro"
    for state in ("current", "missing", "stale"):
        if state == "missing":
            (run / "index.sqlite").unlink(missing_ok=True)
        if state == "stale":
            with (run / "outcomes.jsonl").open("ab"):  # touched: the index's record of it is older
                pass
            (run / "outcomes.jsonl").touch()
        view.mkdir(exist_ok=True)
        if not (mount("--bind", str(run), str(view)) and mount("-o", "remount,ro,bind", str(view))):
            umount(view)
            family.skipped = "cannot bind-mount read-only here (root ignores permissions)"
            return
        try:
            before = _listing(view)
            for argv in (["status", str(view)], ["show", str(view)], ["stats", str(view)],
                         ["export", str(view), "-o", str(folder / f"export-{state}.csv")]):
                done = judge_engine(argv, cwd=folder, timeout=120)
                family.add(judged(Attempt(f"{argv[0]} on a read-only run (index {state})"), done, expect=(0,)))
            family.add(_view(view, state))
            if _listing(view) != before:
                family.add(Attempt(f"the read-only run (index {state}) unchanged", wrong=1))
        finally:
            umount(view)
    final = Attempt("the run itself, after")
    check_run(final, run, rows, ctx.oracle, {"mqm": [0.0]})
    family.add(final)


def _listing(path: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(path)), p.stat().st_size) for p in path.rglob("*") if p.is_file())


def _view(run: Path, state: str) -> Attempt:
    from benchmarks.attack_web import Viewer

    attempt = Attempt(f"view on a read-only run (index {state})")
    try:
        served = Viewer([run], cwd=run.parent)
    except RuntimeError as exc:
        attempt.unclear = True
        attempt.note = str(exc)
        return attempt
    try:
        overview = served.get("/api/overview")
        tasks = served.get("/api/tasks?size=5")
        if not overview or not tasks or not tasks.get("rows"):
            attempt.wrong = 1
            attempt.note = f"overview {bool(overview)}, tasks {tasks and len(tasks.get('rows', []))}"
    finally:
        log = served.stop()
    attempt.traceback = "Traceback (most recent" in log
    if attempt.traceback:
        attempt.note += log[-300:]
    return attempt
