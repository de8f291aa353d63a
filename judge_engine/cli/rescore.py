"""``judge-engine rescore RUN_DIR``: the current parser and scoring over a run's recorded answers.

No connection and no spend (a replay of the transcripts: :mod:`judge_engine.running.rescore`); the result
is a new run directory, and what changed is printed: the tasks whose score or status moved, the
counts per reason code before and after, and each judge's protocol version in the run and today
(``gemba-mqm 1 -> 2``: a run an earlier version wrote). Exit 0 when every task was re-scored (unscored
ones included: they are the report), 1 when a judge stopped (``--reask-online`` only), 130 on
Ctrl-C.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from judge_engine.cli import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK

SHOWN_CHANGES = 20


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rescore = commands.add_parser(
        "rescore", help="re-parse and re-score a run's recorded answers (no calls, no spend)",
        description="Judge a run's tasks again from its transcripts with the current protocol code and options; "
                    "writes a new run directory and prints what changed.")
    rescore.add_argument("run_dir", type=Path, help="the run to re-score (RUNS/<run id>, or RUNS/latest)")
    rescore.add_argument("--protocol-option", action="append", default=[], metavar="[JUDGE.]KEY=VALUE",
                         help="change a protocol option (e.g. parser=legacy-gemba); repeatable")
    rescore.add_argument("--output", type=Path, help="the new run directory (default: beside the run)")
    rescore.add_argument("--reask-online", action="store_true",
                         help="ask the provider for answers the run never recorded (re-asks the new rules make)")
    rescore.add_argument("--dataset", type=Path, metavar="PATH",
                         help="the run's dataset, when it is no longer where the run recorded it (the same file)")
    rescore.add_argument("--changes", type=int, default=SHOWN_CHANGES, metavar="N",
                         help=f"list at most N changed tasks (default {SHOWN_CHANGES}; 0 lists every one)")
    rescore.set_defaults(handler=rescore_command)


def rescore_command(args: argparse.Namespace) -> int:
    from judge_engine.cli.display import Column, escape, make_console, path_line, print_table, say
    from judge_engine.running.rescore import rescore

    result = rescore(args.run_dir, options=args.protocol_option, output=args.output, reask_online=args.reask_online,
                     dataset=args.dataset)
    console = make_console()
    if result.run.demo:
        from judge_engine.rundir.records import DEMO_NOTE

        say(console, f"[bold yellow]{DEMO_NOTE}[/bold yellow]")
    codes = sorted(set(result.before) | set(result.after), key=lambda c: (c != "scored", c))
    print_table(f"re-scored {result.tasks:,} tasks of {result.original.name}",
                [Column("outcome", key=True), "before", "after"],
                [[c, f"{result.before.get(c, 0):,}", f"{result.after.get(c, 0):,}"] for c in codes], console=console)
    _versions(console, result.versions)
    spend = result.run.manifest.spend.get("total", {})
    say(console, f"{len(result.changed):,} tasks changed score or status; {spend.get('replayed', 0):,} recorded "
                 f"answers replayed, {spend.get('calls', 0):,} calls made.")
    shown = len(result.changed) if args.changes <= 0 else min(args.changes, len(result.changed))
    if shown:
        more = f" (first {shown:,} of {len(result.changed):,}; --changes 0 lists every one)" \
            if shown < len(result.changed) else ""
        print_table("what changed" + more, [Column("task", wrap=True, key=True), "before", "after"],
                    [[c.task, c.before, c.after] for c in result.changed[:shown]], console=console)
    path_line(console, "New run directory", result.run.run_dir)
    # Unscored tasks are what a re-score reports, not a failure of it; a judge that stopped
    # (asked online: bad key, unreachable endpoint) or a Ctrl-C is.
    if result.run.status == "cancelled":
        say(console, "Cancelled: the new run directory holds what was re-scored so far.")
        return EXIT_CANCELLED
    if result.run.status == "failed":
        for message in result.run.failures.values():
            say(console, f"[red]{escape(message)}[/red]")
        say(console, "The re-score did not finish (see above): the new run directory is incomplete.")
        return EXIT_FAILED
    return EXIT_OK


def _versions(console: Any, versions: dict[str, dict[str, str]]) -> None:
    """Each judge's protocol version in the run and today's (``gemba-mqm 1 -> 2``)."""
    from judge_engine.cli.display import escape, say

    say(console, "Protocol versions (the run's -> today's, which re-scored it):")
    for judge, move in versions.items():
        before, after = move.get("from") or "(not recorded)", move.get("to", "")
        moved = f"{before} -> {after}" if before != after else f"{after} (unchanged)"
        say(console, f"  {escape(judge)}: {escape(move.get('protocol', ''))} {escape(moved)}")
