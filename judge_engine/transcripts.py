"""``judge-engine show``: an item's transcript, from the run directory alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from judge_engine.errors import RunDirError
from judge_engine.jsonio import pretty
from judge_engine.report import make_console
from judge_engine.store import OUTCOMES, TRANSCRIPTS, read_jsonl, read_manifest

DEMO_LINE = "DEMO RUN: answers come from judge-engine's built-in fake server; they are synthetic, not a model's judgments."


def print_item(run_dir: Path, *, item_id: str | None, judge: str | None, console: Console | None = None) -> int:
    """Print every task of one item: messages sent, raw answers, verdict, score, attempts, re-asks.

    A task judged again (``resume --retry``) shows every attempt it ever made and its last outcome.
    """
    manifest = read_manifest(run_dir)
    console = console or make_console()
    if manifest.get("demo"):
        console.print(f"[bold yellow]{DEMO_LINE}[/bold yellow]")
    outcomes = [o for o in read_jsonl(run_dir / OUTCOMES) if judge is None or o.get("judge") == judge]
    if item_id is None:
        if not outcomes:
            raise RunDirError(f"{run_dir}: no outcomes yet")
        item_id = str(outcomes[0]["item_id"])
    chosen = {o["task_id"]: o for o in outcomes if str(o.get("item_id")) == item_id}  # the last line wins
    attempts: dict[str, list[dict[str, Any]]] = {}
    for record in read_jsonl(run_dir / TRANSCRIPTS):
        if str(record.get("item_id")) == item_id and (judge is None or record.get("judge") == judge):
            attempts.setdefault(record["task_id"], []).append(record)
    if not chosen and not attempts:
        raise RunDirError(f"{run_dir}: no outcome or attempt for item {item_id!r}")
    for task_id, result in chosen.items():
        _print_task(console, result, attempts.get(task_id, []))
    for task_id, undone in attempts.items():
        if task_id not in chosen:  # attempts, but the run stopped before the task finished
            _print_undone(console, undone)
    return 0


def _print_undone(console: Console, attempts: list[dict[str, Any]]) -> None:
    first = attempts[0]
    console.rule(f"item {first.get('item_id')} · judge {first.get('judge')} · task {first.get('task_id', '')[:15]}")
    _print_attempts(console, attempts)
    console.print("[yellow]no outcome[/yellow]: the run stopped before this task finished; "
                  "judge-engine resume finishes it", highlight=False)


def _print_task(console: Console, result: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
    head = (f"item {result['item_id']} · judge {result['judge']} ({result['model']}, {result['protocol']}) · "
            f"T={result['temperature']} · repeat {result['repeat']}" + (f" · {result['variant']}" if result.get("variant") else ""))
    console.rule(head)
    _print_attempts(console, attempts)
    if result["status"] == "scored":
        console.print(Panel(Text(pretty(result.get("verdict"))), title="verdict", title_align="left", border_style="cyan"))
        console.print(f"score: [bold]{result.get('score')}[/bold]  {result.get('scores') or ''}")
    else:
        code = result.get("reason_code")
        console.print(f"[red]unscored[/red]{f' ({code})' if code else ''}: {result.get('reason')}", highlight=False)
    console.print(f"attempts: {result.get('attempts')} · re-asks: {result.get('reasks')} · cache hits: {result.get('cache_hits')} · cost ${result.get('cost')}")


def _print_attempts(console: Console, attempts: list[dict[str, Any]]) -> None:
    """Messages as sent (each once), then every answer or error, and protocol errors."""
    shown_messages = 0
    for attempt in attempts:
        if attempt.get("event") == "protocol_error":
            console.print(Panel(Text(attempt.get("traceback") or attempt.get("error") or ""),
                                title=f"protocol error in {attempt.get('stage')}", title_align="left", border_style="red"))
            continue
        request = attempt.get("request", {})
        messages = request.get("messages", [])
        for message in messages[shown_messages:]:
            console.print(Panel(Text(message.get("content", "")), title=f"sent: {message.get('role')}", title_align="left"))
        shown_messages = len(messages)
        label = f"attempt {attempt['attempt']} (re-ask {attempt.get('reask', 0)})" + (" [cache hit]" if attempt.get("cache_hit") else "")
        if "response" in attempt:
            response = attempt["response"]
            console.print(Panel(Text(response.get("content") or ""), title=f"answer · {label} · finish={response.get('finish_reason')}", title_align="left", border_style="green"))
        else:
            error = attempt.get("error", {})
            console.print(Panel(Text(f"{error.get('kind')}: {error.get('message')}"), title=f"error · {label}", title_align="left", border_style="red"))
