"""What ``judge-engine run`` and ``resume`` do around the engine: demo server, live display or
progress lines, Ctrl-C messages, the summary and the exit code.

Exit codes: 0 every task scored (or ``--allow-unscored``); 1 a judge stopped (provider error,
unreachable or failing endpoint); 2 bad input (raised as errors, turned into 2 by the CLI); 3 the
run completed but some tasks are unscored; 130 cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from judge_engine.cli import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_UNSCORED
from judge_engine.config import JudgeConfig
from judge_engine.providers import check_credentials, for_judge, provider_for_endpoint
from judge_engine.report import make_console
from judge_engine.runner import (
    GRACE_S,
    RETRY_ALL,
    PreparedRun,
    execute,
    prepare,
    prepare_resume,
    retry_codes,
)

DEMO_API_BASE = "demo://fake-server"
DEMO_BANNER = "DEMO: answers come from judge-engine's built-in fake server; they are synthetic, not a model's judgments."
PROGRESS_EVERY_S = 30.0
"""Seconds between progress lines when there is no live display."""


@contextlib.contextmanager
def demo_server() -> Iterator[str]:
    """Start the project's fake OpenAI-compatible server on a free loopback port.

    It runs in its own session, so a Ctrl-C meant for the run does not kill it before the
    calls in flight have finished; it is stopped when the run ends.
    """
    from judge_engine.fake import FakeConfig, FakeServerProcess

    with FakeServerProcess(FakeConfig(latency_s=0.05, latency_jitter_s=0.03), own_session=True) as server:
        yield server.base_url


def run_job(config_path: Path, *, overrides: Mapping[str, Any], demo: bool, new_run: bool, live: bool,
            allow_unscored: bool = False, progress_every_s: float = PROGRESS_EVERY_S) -> int:
    """``judge-engine run``: judge a config's dataset, or resume its run."""
    prepared = prepare(config_path, overrides=overrides, demo=demo, new_run=new_run)
    if not demo:
        check_credentials(prepared.config)
    console = make_console(stderr=True)
    if prepared.resumed and prepared.manifest.get("status") == "completed":
        console.print(f"This config already ran to completion: {prepared.run_dir}\n"
                      "(use --new-run to judge again; cached answers cost nothing)")
        return _completed_code(prepared.manifest, prepared.run_dir, console, allow_unscored)
    return _run(prepared, demo=demo, live=live, console=console, allow_unscored=allow_unscored,
                progress_every_s=progress_every_s)


def resume_job(run_dir: Path, *, live: bool, retry: str | None = None, allow_unscored: bool = False,
               progress_every_s: float = PROGRESS_EVERY_S) -> int:
    """``judge-engine resume``: finish a run, or judge its unscored tasks again (``retry``)."""
    from judge_engine.store import read_manifest

    manifest = read_manifest(run_dir)
    codes = retry_codes(retry)
    demo = bool(manifest.get("demo"))
    overrides = {"api_base": DEMO_API_BASE} if demo else {}
    prepared = prepare_resume(run_dir, overrides=overrides)
    if not demo:
        check_credentials(prepared.config)
    console = make_console(stderr=True)
    if manifest.get("status") == "completed" and codes is None:
        console.print(f"{run_dir} is already complete.")
        return _completed_code(manifest, run_dir, console, allow_unscored)
    return _run(prepared, demo=demo, live=live, console=console, retry=codes, allow_unscored=allow_unscored,
                progress_every_s=progress_every_s)


def _run(prepared: PreparedRun, *, demo: bool, live: bool, console: Console, retry: frozenset[str] | None = None,
         allow_unscored: bool, progress_every_s: float) -> int:
    live = live and console.is_terminal
    with demo_server() if demo else contextlib.nullcontext(None) as demo_url:
        if demo and not live:  # the live display shows it above its figures
            console.print(f"[bold yellow]{DEMO_BANNER}[/bold yellow]")
        return asyncio.run(_execute(prepared, demo_url=demo_url, live=live, console=console,
                                    retry=retry, allow_unscored=allow_unscored, progress_every_s=progress_every_s))


def demo_model(judge: JudgeConfig) -> str:
    """The model name a demo sends to the fake server (the config's model stays in cache keys)."""
    return "openai/" + judge.model.split("/")[-1]


async def _execute(prepared: PreparedRun, *, demo_url: str | None, live: bool, console: Console,
                   retry: frozenset[str] | None, allow_unscored: bool, progress_every_s: float) -> int:
    from judge_engine.engine import Engine
    from judge_engine.report import LiveDisplay, ProgressLines, summary_table

    def provider_for(judge: JudgeConfig) -> Any:
        if demo_url:  # the endpoint on_start gives every judge below
            return provider_for_endpoint(judge, demo_model(judge), demo_url, api_key="demo-key")
        return for_judge(judge)

    started = time.monotonic()
    banner = DEMO_BANNER if demo_url else ""
    console.print(f"Run directory: {prepared.run_dir}")
    with contextlib.ExitStack() as stack:
        engines: list[Engine] = []
        displays: list[LiveDisplay] = []

        def on_start(engine: Engine) -> None:
            engines.append(engine)
            if demo_url:  # every judge talks to the fake server; cache keys keep the config's model
                for runtime in engine.judges:
                    runtime.endpoint = (demo_model(runtime.config), demo_url)
            console.print(_start_line(engine, retry))
            if live:
                displays.append(stack.enter_context(LiveDisplay(engine.judges, console=console, banner=banner)))
            else:
                stack.enter_context(ProgressLines(engine.judges, console=console, every_s=progress_every_s))

        def on_stop(engine: Engine) -> None:
            calls = engine.in_flight
            message = (f"Stopping: no new calls go out; finishing {calls} call{'s' if calls != 1 else ''} in flight "
                       f"(at most {GRACE_S:g}s). Ctrl-C again to abort {'them' if calls != 1 else 'it'}.")
            if displays:
                displays[0].message = message
            else:
                console.print(f"[yellow]{message}[/yellow]")

        result, manifest = await execute(prepared, provider_factory=provider_for, on_start=on_start,
                                         on_stop=on_stop, retry=retry)
    judges = engines[0].judges if engines else []
    console.print(summary_table(manifest, judges, time.monotonic() - started, width=console.width))
    for message in result.failures.values():
        console.print(f"[red]{message}[/red]")
    if banner:
        console.print(f"[yellow]{banner}[/yellow]")
    console.print(f"Run directory: {prepared.run_dir}")
    if result.status == "cancelled":
        console.print(f"Cancelled. Finish it with:\n  judge-engine resume {prepared.run_dir}", highlight=False)
        return EXIT_CANCELLED
    if result.status == "failed":
        console.print(f"Fix the cause above, then finish the run with:\n  judge-engine resume {prepared.run_dir}",
                      highlight=False)
        return EXIT_FAILED
    return _completed_code(manifest, prepared.run_dir, console, allow_unscored)


def _start_line(engine: Any, retry: frozenset[str] | None) -> str:
    total = sum(j.counters.total for j in engine.judges)
    done = engine.done_count
    if retry is not None:
        again = engine.retry_count
        codes = "every unscored task" if RETRY_ALL in retry else ", ".join(sorted(retry))
        return (f"Judging again {again:,} tasks ({codes}) and {max(0, total - done - again):,} not yet judged; "
                f"{done:,} of {total:,} stay as they are")
    if done:
        return f"Resuming: {done:,} of {total:,} tasks already done; judging the other {max(0, total - done):,}"
    return f"Judging {total:,} tasks"


def _completed_code(manifest: Mapping[str, Any], run_dir: Path, console: Console, allow_unscored: bool) -> int:
    """0, or 3 when tasks are unscored (unless the user accepts that), saying how to retry them."""
    total = (manifest.get("counts") or {}).get("total", {})
    unscored = int(total.get("unscored") or 0)
    if not unscored:
        return EXIT_OK
    by_code = total.get("unscored_by_code") or {}
    codes = ",".join(sorted(by_code)) or RETRY_ALL
    console.print(f"{unscored:,} of {int(total.get('tasks') or 0):,} tasks are unscored "
                  f"({', '.join(f'{c} {n:,}' for c, n in sorted(by_code.items()))}). Why, per judge:\n"
                  f"  judge-engine stats {run_dir}\nJudge them again (cached answers are re-read, not bought again):\n"
                  f"  judge-engine resume {run_dir} --retry {codes}", highlight=False)
    if allow_unscored:
        return EXIT_OK
    console.print(f"Exit code {EXIT_UNSCORED}: the run is complete but not every task is scored "
                  "(--allow-unscored makes this exit 0).")
    return EXIT_UNSCORED
