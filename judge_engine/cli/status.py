"""``judge-engine status RUN_DIR``: how far a run is, from its files, with or without its process,
and what goes on with it: why it stopped or failed, and the command that continues it. Beside
it, ``judge-engine cancel RUN_DIR``: the run's open batches cancelled at the provider."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from judge_engine.cli import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from judge_engine.cli.display import Terminal as Console
    from judge_engine.running.status import RunStatusReport


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = commands.add_parser("status", help="how far a run is (tasks, batches and their states), "
                                                "read from its files: no process needed")
    status.add_argument("run_dir", type=Path, help="the run directory (RUNS/<run id>, or RUNS/latest)")
    status.add_argument("--poll", action="store_true",
                        help="ask the provider for each open batch's state now (needs the run's API key; "
                             "writes nothing)")
    status.set_defaults(handler=status_command)
    cancel = commands.add_parser("cancel", help="cancel a stopped run's open batches at the provider (a later resume "
                                                "keeps what they answered and sends the rest)")
    cancel.add_argument("run_dir", type=Path, help="the run directory (RUNS/<run id>, or RUNS/latest)")
    cancel.add_argument("--judge", action="append", default=[], metavar="NAME",
                        help="only this judge's batches (repeatable)")
    cancel.set_defaults(handler=cancel_command)


def status_command(args: argparse.Namespace) -> int:
    from judge_engine.cli.display import escape, make_console, say, status_report
    from judge_engine.running.status import run_status

    report = run_status(args.run_dir, poll=args.poll)
    console = make_console()
    status_report(report, console)
    from judge_engine.trust.cascade.report import summary_lines

    for line in summary_lines(report.manifest.cascade, report.manifest.counts):
        say(console, escape(line))
    what_next(report, console)
    return EXIT_OK


def cancel_command(args: argparse.Namespace) -> int:
    from judge_engine.cli.display import Column, command, make_console, print_table, say
    from judge_engine.cli.run import resume_command_line
    from judge_engine.running.cancel import cancel_run

    run_dir = args.run_dir.resolve()
    cancels = cancel_run(run_dir, judges=args.judge)
    console = make_console()
    if not cancels:
        say(console, "No open batch in this run: nothing to cancel.")
        return EXIT_OK
    said = {"cancelled": "cancel sent", "ended": "had ended: resume collects it", "not sent": "no batch at the provider",
            "unsure": "left alone", "failed": "failed"}
    rows = [[c.chunk, c.batch_id or "-", c.status, said[c.outcome] + (f": {c.note}" if c.note else "")]
            for c in cancels]
    print_table(f"{sum(c.outcome == 'cancelled' for c in cancels)} of {len(cancels)} open batches cancelled",
                [Column("chunk", key=True), "provider's batch", "status", Column("result", wrap=True,
                                                                                  fold_long_words=True)],
                rows, console=console, title_justify="left")
    if any(c.outcome in ("cancelled", "ended", "unsure") for c in cancels):
        command(console, resume_command_line(run_dir, {}), lead="A resume collects what they answered and sends the "
                "rest (the next batch round, or online: batch.fallback):")
    return EXIT_FAILED if any(c.outcome == "failed" for c in cancels) else EXIT_OK


def what_next(report: RunStatusReport, console: Console) -> None:
    """Why the run ended where it did, and the command that goes on with it (none while a process
    holds it, or once it is complete)."""
    from judge_engine.cli.display import command, escape, say
    from judge_engine.cli.run import budget_advice, resume_command_line, sentence
    from judge_engine.running.budget import BudgetStop

    manifest = report.manifest
    if report.writing or manifest.status == "completed":
        return
    stop = BudgetStop.from_dict(manifest.stopped or {}) if manifest.status == "stopped" else None
    if stop is not None:
        say(console, f"[yellow]{escape(sentence(stop.message))}[/yellow]")
        lead, line = budget_advice(stop, report.run_dir)
        command(console, line, lead=lead)
        return
    if manifest.status == "failed":
        for message in manifest.failures.values():
            say(console, f"[red]{escape(message)}[/red]")
        codes = manifest.total_counts.unscored_by_code
        command(console, resume_command_line(report.run_dir, codes), lead="Fix the cause above, then finish the run with:")
        return
    if any(judge.mode == "batch" for judge in report.judges):
        lead = "Go on (collects the batches that ended, sends what remains):"
    elif manifest.status == "running":  # a run is "running" until its session ends: this one's process is gone
        lead = "Its process ended without closing it (killed?); finish it with:"
    else:
        lead = "Finish it (judges the tasks not done yet):"
    command(console, resume_command_line(report.run_dir, {}), lead=lead)

