"""``judge-engine show``: an item's transcripts, from the run directory alone.

Read through :mod:`judge_engine.store` (every format version); printed with the primitives of
:mod:`judge_engine.cli.display`. Run text (dataset fields, answers, errors) is always printed
literally, never read as markup.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from judge_engine.cli import EXIT_OK

if TYPE_CHECKING:
    from judge_engine.cli.display import Terminal as Console
    from judge_engine.records import OutcomeRecord, TranscriptRecord


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    show = commands.add_parser("show", help="print transcripts: messages, raw answer, verdict, score, attempts")
    show.add_argument("run_dir", type=Path)
    show.add_argument("--item", help="item id (default: the first item)")
    show.add_argument("--judge", help="only this judge")
    show.set_defaults(handler=show_command)


def show_command(args: argparse.Namespace) -> int:
    from judge_engine.cli.display import make_console

    print_item(args.run_dir, item_id=args.item, judge=args.judge, console=make_console())
    return EXIT_OK


def print_item(run_dir: Path, *, item_id: str | None, judge: str | None, console: Console) -> None:
    """Print every task of one item: messages sent, raw answers, verdict, score, attempts, re-asks.

    A task judged again (``resume --retry``) shows every attempt it ever made and its last outcome.

    Raises:
        RunDirError: not a run directory, or nothing recorded for the item.
    """
    from judge_engine.cli.display import say
    from judge_engine.errors import RunDirError
    from judge_engine.records import DEMO_NOTE
    from judge_engine.store import iter_outcomes, iter_transcript, read_manifest

    manifest = read_manifest(run_dir)
    if manifest.demo:
        say(console, f"[bold yellow]{DEMO_NOTE}[/bold yellow]")
    outcomes = [o for o in iter_outcomes(run_dir) if judge is None or o.judge == judge]
    if item_id is None:
        if not outcomes:
            raise RunDirError(f"{run_dir}: no outcomes yet")
        item_id = outcomes[0].item_id
    chosen = {o.task_id: o for o in outcomes if o.item_id == item_id}  # the last line wins
    attempts: dict[str, list[TranscriptRecord]] = {}
    for record in iter_transcript(run_dir):
        if record.item_id == item_id and (judge is None or record.judge == judge):
            attempts.setdefault(record.task_id, []).append(record)
    if not chosen and not attempts:
        raise RunDirError(f"{run_dir}: no outcome or attempt for item {item_id!r}")
    for task_id, result in chosen.items():
        _print_task(console, result, attempts.get(task_id, []))
    for task_id, undone in attempts.items():
        if task_id not in chosen:  # attempts, but the run stopped before the task finished
            _print_undone(console, undone)


def _print_undone(console: Console, attempts: Sequence[TranscriptRecord]) -> None:
    from judge_engine.cli.display import rule, say

    first = attempts[0]
    rule(console, f"item {first.item_id} · judge {first.judge} · task {first.task_id[:15]}")
    _print_attempts(console, attempts)
    say(console, "[yellow]no outcome[/yellow]: the run stopped before this task finished; "
                 "judge-engine resume finishes it")


def _print_task(console: Console, result: OutcomeRecord, attempts: Sequence[TranscriptRecord]) -> None:
    from judge_engine.cli.display import escape, panel, rule, say
    from judge_engine.jsonio import pretty

    head = (f"item {result.item_id} · judge {result.judge} ({result.model}, {result.protocol}) · "
            f"T={result.temperature} · repeat {result.repeat}" + (f" · {result.variant}" if result.variant else ""))
    rule(console, head)
    _print_attempts(console, attempts)
    if result.scored:
        panel(console, pretty(result.verdict), title="verdict", style="cyan")
        say(console, f"score: [bold]{result.score}[/bold]  {escape(str(dict(result.scores)) if result.scores else '')}")
    else:
        code = f" ({result.reason_code})" if result.reason_code else ""
        say(console, f"[red]unscored[/red]{code}: {escape(result.reason or '')}")
    say(console, f"attempts: {result.attempts} · re-asks: {result.reasks} · cache hits: {result.cache_hits} · "
                 f"cost ${result.cost}")


def _print_attempts(console: Console, attempts: Sequence[TranscriptRecord]) -> None:
    """Messages as sent (each once), then every answer or error, and protocol errors."""
    from judge_engine.cli.display import panel
    from judge_engine.records import AttemptRecord

    shown_messages = 0
    for attempt in attempts:
        if not isinstance(attempt, AttemptRecord):
            panel(console, attempt.traceback or attempt.error, title=f"protocol error in {attempt.stage}", style="red")
            continue
        messages = list(attempt.request.get("messages", []))
        for message in messages[shown_messages:]:
            panel(console, str(message.get("content", "")), title=f"sent: {message.get('role')}")
        shown_messages = len(messages)
        label = f"attempt {attempt.attempt} (re-ask {attempt.reask})" + (" [cache hit]" if attempt.cache_hit else "")
        if attempt.response is not None:
            finish = attempt.response.get("finish_reason")
            panel(console, str(attempt.response.get("content") or ""), title=f"answer · {label} · finish={finish}",
                  style="green")
        else:
            error = attempt.error or {}
            panel(console, f"{error.get('kind')}: {error.get('message')}", title=f"error · {label}", style="red")
