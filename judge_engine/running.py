"""What ``judge-engine run`` and ``resume`` do around the engine: demo server, live display, summary."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from judge_engine.config import JudgeConfig
from judge_engine.report import make_console
from judge_engine.runner import (
    PreparedRun,
    default_provider,
    execute,
    prepare,
    prepare_resume,
    provider_for_endpoint,
)

DEMO_API_BASE = "demo://fake-server"
DEMO_BANNER = "DEMO: answers come from judge-engine's built-in fake server; they are synthetic, not a model's judgments."


@contextlib.contextmanager
def demo_server() -> Iterator[str]:
    """Start the project's fake OpenAI-compatible server on a free loopback port."""
    from judge_engine.fake import FakeConfig, FakeServerProcess

    with FakeServerProcess(FakeConfig(latency_s=0.05, latency_jitter_s=0.03)) as server:
        yield server.base_url


def run_job(config_path: Path, *, overrides: Mapping[str, Any], demo: bool, new_run: bool, live: bool) -> int:
    prepared = prepare(config_path, overrides=overrides, demo=demo, new_run=new_run)
    console = make_console(stderr=True)
    if prepared.resumed and prepared.manifest.get("status") == "completed":
        console.print(f"This config already ran to completion: {prepared.run_dir}\n"
                      "(use --new-run to judge again; cached answers cost nothing)")
        return 0
    if prepared.resumed:
        console.print(f"Resuming {prepared.run_dir}")
    return _run(prepared, demo=demo, live=live, console=console)


def resume_job(run_dir: Path, *, live: bool) -> int:
    from judge_engine.store import read_manifest

    manifest = read_manifest(run_dir)
    demo = bool(manifest.get("demo"))
    overrides = {"api_base": DEMO_API_BASE} if demo else {}
    prepared = prepare_resume(run_dir, overrides=overrides)
    console = make_console(stderr=True)
    if manifest.get("status") == "completed":
        console.print(f"{run_dir} is already complete.")
        return 0
    return _run(prepared, demo=demo, live=live, console=console)


def _run(prepared: PreparedRun, *, demo: bool, live: bool, console: Console) -> int:
    with demo_server() if demo else contextlib.nullcontext(None) as demo_url:
        if demo:
            console.print(f"[bold yellow]{DEMO_BANNER}[/bold yellow]")
        return asyncio.run(_execute(prepared, demo_url=demo_url, live=live, console=console))


def demo_model(judge: JudgeConfig) -> str:
    """The model name a demo sends to the fake server (the config's model stays in cache keys)."""
    return "openai/" + judge.model.split("/")[-1]


async def _execute(prepared: PreparedRun, *, demo_url: str | None, live: bool, console: Console) -> int:
    from judge_engine.engine import Engine
    from judge_engine.report import LiveDisplay, summary_table

    def provider_for(judge: JudgeConfig) -> Any:
        if demo_url:  # the endpoint on_start gives every judge below
            return provider_for_endpoint(judge, demo_model(judge), demo_url, api_key="demo-key")
        return default_provider(judge)

    started = time.monotonic()
    banner = DEMO_BANNER if demo_url else ""
    with contextlib.ExitStack() as stack:
        engines: list[Engine] = []

        def on_start(engine: Engine) -> None:
            engines.append(engine)
            if demo_url:  # every judge talks to the fake server; cache keys keep the config's model
                for runtime in engine.judges:
                    runtime.endpoint = (demo_model(runtime.config), demo_url)
            if live:
                stack.enter_context(LiveDisplay(engine.judges, console=console, banner=banner))
            else:
                console.print(f"Judging {sum(j.counters.total for j in engine.judges):,} tasks -> {prepared.run_dir}")

        result, manifest = await execute(prepared, provider_factory=provider_for, on_start=on_start)
    judges = engines[0].judges if engines else []
    console.print(summary_table(manifest, judges, time.monotonic() - started))
    for message in result.failures.values():
        console.print(f"[red]{message}[/red]")
    if banner:
        console.print(f"[yellow]{banner}[/yellow]")
    console.print(f"Run directory: {prepared.run_dir}")
    if result.status == "cancelled":
        console.print(f"Cancelled. Finish it with: judge-engine resume {prepared.run_dir}")
        return 130
    return 1 if result.status == "failed" else 0
