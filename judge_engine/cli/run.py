"""``judge-engine run`` and ``resume``: a session, watched, then the summary and the exit code.

The session (:mod:`judge_engine.running.session`) prints nothing and calls nothing back; this module
watches its :class:`~judge_engine.running.runtime.RunProgress` from a thread (:class:`SessionView`),
prints the summary of the :class:`~judge_engine.running.session.RunResult`, and turns it into an exit
code: 0 every task scored (or ``--allow-unscored``); 1 a judge stopped (provider error,
unreachable or failing endpoint); 3 the run completed but some tasks are unscored; 4 stopped at
a budget; 5 the run's disk refused a write (full, read-only, over quota); 130 cancelled
(:func:`exit_code`, from the status ``run.json`` records: a Ctrl-C after the run was recorded
does not change it). Bad input raises before anything is sent and becomes exit 2 in
:func:`judge_engine.cli.main`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_engine.cli import (
    EPILOG,
    EXIT_BUDGET,
    EXIT_CANCELLED,
    EXIT_DISK,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNSCORED,
    NOT_FAILURES,
)
from judge_engine.errors import ReasonCode

if TYPE_CHECKING:
    from judge_engine.cli.display import Terminal as Console
    from judge_engine.running.budget import BudgetStop
    from judge_engine.running.session import RunResult

FINAL_CODES = frozenset({"too_few_valid", "item_tie", "none_readable", "item_incomplete", "abstained"})
"""Codes that asking again cannot change: a method's own verdict, or an item's decision over its
requests (it follows its requests: retry theirs, and the item's line is written again)."""
PROGRESS_EVERY_S = 30.0
"""Seconds between progress lines when there is no live display."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run`` and ``resume``."""
    run = commands.add_parser("run", help="judge a dataset (resumes a run of the same config)", epilog=EPILOG)
    run.add_argument("config", type=Path, help="the job's config file (YAML); the same config again resumes its run")
    add_overrides(run)
    run.add_argument("--demo", action="store_true", help="answer with the built-in fake server (synthetic answers, no API key)")
    run.add_argument("--new-run", action="store_true", help="start a fresh run directory even if this config ran before")
    add_batch_option(run)
    _demo_batch_option(run)
    _session_options(run)
    run.set_defaults(handler=run_command)

    resume = commands.add_parser("resume", help="finish a killed, cancelled or stopped run, or --retry its unscored tasks",
                                 epilog=EPILOG)
    resume.add_argument("run_dir", type=Path, help="the run directory (RUNS/<run id>, or RUNS/latest)")
    resume.add_argument("--retry", metavar="CODES",
                        help="judge again the tasks left unscored: 'unscored' for all, or reason codes separated by "
                             "commas (e.g. transport_exhausted,rate_limited); cached answers are re-read, not re-bought")
    add_batch_option(resume)
    resume.add_argument("--demo", action="store_true",
                        help="not needed: a demo run resumes as a demo (given for a run that is not one: an error)")
    _demo_batch_option(resume)
    _session_options(resume)
    resume.set_defaults(handler=resume_command)


def add_overrides(parser: argparse.ArgumentParser) -> None:
    """The config overrides ``run`` and ``plan`` share."""
    parser.add_argument("--model", help="judge with this litellm model instead of the config's (every judge)")
    parser.add_argument("--limit", type=int, help="only the first N items")
    parser.add_argument("--output", type=Path, help="runs directory (default: the config's output.dir)")
    parser.add_argument("--cache-dir", type=Path, help="answer cache directory")
    parser.add_argument("--dataset", type=Path, metavar="PATH",
                        help="judge this dataset instead of the config's (e.g. a cascade's calibration items)")
    parser.add_argument("--no-cascade", action="store_true",
                        help="every judge judges every item, the config's cascade switched off (to judge the "
                             "calibration items with every stage)")


def override_values(args: argparse.Namespace) -> dict[str, Any]:
    """The overrides as :func:`judge_engine.inputs.config.load_config` takes them. Paths typed on the
    command line are relative to the working directory (paths in the config file are relative
    to the file); made absolute, they mean the same thing when the run is resumed elsewhere."""
    def absolute(path: Path | None) -> Path | None:
        return None if path is None else path.resolve()

    return {"model": args.model, "limit": args.limit, "output_dir": absolute(args.output),
            "cache_dir": absolute(args.cache_dir), "batch": True if getattr(args, "batch", False) else None,
            "dataset": absolute(args.dataset), "cascade": False if args.no_cascade else None}


def add_batch_option(parser: argparse.ArgumentParser) -> None:
    """``--batch``, which ``run``, ``resume`` and ``plan`` share."""
    parser.add_argument("--batch", action="store_true",
                        help="every judge through its provider's batch API (half the price, results within 24 h; "
                             "recorded, so a resume keeps it); see the config's batch: settings")


def _demo_batch_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo-batch-s", type=_seconds, metavar="SECONDS",
                        help="a demo run's batches take this long to complete (default 3), long enough to stop "
                             "the run and watch status and resume find them")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{text!r}: between 0 and 86400 seconds")
    return value


def _session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-live", action="store_true", help="no live display: a progress line every "
                        "--progress-every seconds instead (also when stderr is not a terminal)")
    parser.add_argument("--progress-every", type=float, default=PROGRESS_EVERY_S, metavar="SECONDS",
                        help="seconds between progress lines without a live display (default 30)")
    parser.add_argument("--allow-unscored", action="store_true",
                        help="exit 0 even when some tasks end unscored (default: exit 3)")
    parser.add_argument("--budget", type=float, metavar="USD",
                        help="stop dispatching before the run's spend (every session, plus calls in flight) "
                             "would pass this many dollars; recorded, so a later resume keeps it")
    parser.add_argument("--budget-hours", type=float, metavar="HOURS",
                        help="stop dispatching after this many hours of judging, summed over sessions")


def run_command(args: argparse.Namespace) -> int:
    """``judge-engine run CONFIG``."""
    from judge_engine.running import session

    overrides = {**override_values(args), **_budget(args)}
    if args.demo_batch_s is not None and not args.demo:
        from judge_engine.errors import ConfigError

        raise ConfigError("--demo-batch-s: only a demo run (--demo) has demo batches")
    return _watched(args, lambda progress: session.run(
        args.config, overrides=overrides, demo=args.demo, new_run=args.new_run, progress=progress,
        demo_batch_s=args.demo_batch_s))


def resume_command(args: argparse.Namespace) -> int:
    """``judge-engine resume RUN_DIR``."""
    from judge_engine.running import session

    return _watched(args, lambda progress: session.resume(args.run_dir, retry=args.retry, progress=progress,
                                                          overrides=_budget(args), batch=args.batch,
                                                          demo_batch_s=args.demo_batch_s, demo=args.demo))


def _budget(args: argparse.Namespace) -> dict[str, Any]:
    return {key: value for key, value in (("max_cost_usd", args.budget), ("max_hours", args.budget_hours))
            if value is not None}


def _watched(args: argparse.Namespace, start: Any) -> int:
    from judge_engine.cli.display import SessionView, make_console
    from judge_engine.cli.process import tune_for_a_run
    from judge_engine.running.runtime import RunProgress

    tune_for_a_run()
    console = make_console(stderr=True)
    progress = RunProgress()
    result: RunResult | None = None
    try:
        with SessionView(progress, console=console, live=not args.no_live, every_s=args.progress_every):
            result = start(progress)
        return _report(result, console, allow_unscored=args.allow_unscored)
    except KeyboardInterrupt:
        if result is None:
            raise  # before the run was recorded: cancelled (exit 130), and resume finishes it
        # A Ctrl-C while the display closes or the summary prints: the run is recorded, and
        # the exit code says what run.json says.
        return exit_code(result, allow_unscored=args.allow_unscored)


def exit_code(result: RunResult, *, allow_unscored: bool) -> int:
    """The exit code of a recorded session: what its ``run.json`` status says (0, or 3 for a
    completed run with tasks unscored; 1 failed; 4 stopped at a budget; 5 stopped by its disk; 130 cancelled)."""
    if result.status == "cancelled":
        return EXIT_CANCELLED
    if result.disk is not None:
        return EXIT_DISK
    if result.status == "failed":
        return EXIT_FAILED
    if result.status == "stopped" and result.budget is not None:
        return EXIT_BUDGET
    counts = result.counts
    unscored = counts.unscored - sum(counts.unscored_by_code.get(code, 0) for code in NOT_FAILURES)
    return EXIT_UNSCORED if unscored and not allow_unscored else EXIT_OK


def _report(result: RunResult, console: Console, *, allow_unscored: bool) -> int:
    from judge_engine.cli.display import command, path_line, summary
    from judge_engine.rundir.records import DEMO_NOTE, DEMO_TOKENS_NOTE

    if result.already_complete:
        if result.started_by == "run":
            command(console, str(result.run_dir), lead="This config already ran to completion (use --new-run to judge "
                                                       "again; cached answers cost nothing):")
        else:
            command(console, str(result.run_dir), lead="This run is already complete:")
        return _completed_code(result, console, allow_unscored)
    console.print(summary(result, width=console.width))
    for message in result.failures.values():
        console.print(f"[red]{_escape(message)}[/red]")
    if result.demo:
        console.print(f"[yellow]{DEMO_NOTE}[/yellow]")
        console.print(f"[yellow]{DEMO_TOKENS_NOTE}[/yellow]")
    if result.cache_problem and result.disk is None:  # (a disk stop says it all: the same disk, usually)
        console.print(f"[yellow]{_escape(sentence(result.cache_problem))}[/yellow]", highlight=False)
    path_line(console, "Run directory", result.run_dir)
    abandoned = sum(j.abandoned for j in result.judges)
    if abandoned:
        console.print(f"[yellow]{abandoned:,} call{'s were' if abandoned != 1 else ' was'} abandoned in flight: sent "
                      "(the provider may charge them) but never answered; counted as calls, their tasks left "
                      "undone.[/yellow]")
    if result.status == "cancelled":
        command(console, resume_command_line(result.run_dir, {}), lead="Cancelled. Finish it with:")
        return exit_code(result, allow_unscored=allow_unscored)
    if result.disk is not None:
        console.print(f"[red]{_escape(disk_message(result))}[/red]", highlight=False)
        command(console, f"judge-engine resume {shell_word(result.run_dir)}", lead=f"{sentence(result.disk.advice)[:-1]}, "
                "then finish the run with:")
        return EXIT_DISK
    if result.status == "failed":
        command(console, resume_command_line(result.run_dir, result.counts.unscored_by_code),
                lead="Fix the cause above, then finish the run with:")
        return exit_code(result, allow_unscored=allow_unscored)
    if result.status == "stopped" and result.budget is not None:
        console.print(f"[yellow]{_escape(sentence(result.budget.message))}[/yellow]", highlight=False)
        lead, line = budget_advice(result.budget, result.run_dir)
        command(console, line, lead=lead)
        return exit_code(result, allow_unscored=allow_unscored)
    return _completed_code(result, console, allow_unscored)


def disk_message(result: RunResult) -> str:
    """What a run its disk stopped says: the write refused, what became of the rest, and whether
    ``run.json`` could record it."""
    assert result.disk is not None
    recorded = ("run.json records the stop" if result.recorded
                else "run.json could not be updated either (it still says running; resume finishes the run all the same)")
    return (f"Stopped: {result.disk}. Nothing more was sent; calls in flight were recorded where the disk let them, "
            f"and every task without an outcome is left for resume; {recorded}.")


def sentence(text: str) -> str:
    """``text`` as a sentence: capitalised, ending in a full stop."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def shell_word(path: Path) -> str:
    """A path as a shell word (quoted when it holds a space or a shell character)."""
    import shlex

    return shlex.quote(str(path))


def resume_command_line(run_dir: Path, unscored_by_code: Mapping[str, int]) -> str:
    """The command that finishes a run: with ``--retry transport_exhausted`` when a failing
    endpoint left tasks recorded so (a plain resume leaves a recorded task as it is)."""
    retry = " --retry transport_exhausted" if unscored_by_code.get(str(ReasonCode.TRANSPORT_EXHAUSTED)) else ""
    return f"judge-engine resume {shell_word(run_dir)}{retry}"


def budget_advice(stop: BudgetStop, run_dir: Path) -> tuple[str, str]:
    """(what to do, the command) after a budget stopped a run: the run's budget is raised on the
    command line (and recorded for later resumes); a judge's own budget is in the config."""
    from judge_engine.util.money import dollars

    limit = dollars(stop.limit) if stop.kind == "cost" else f"{stop.limit:g} h"
    if stop.scope == "run":
        more = "--budget USD" if stop.kind == "cost" else "--budget-hours HOURS"
        return (f"The tasks not sent are left for later; continue with a budget above {limit}:",
                f"judge-engine resume {shell_word(run_dir)} {more}")
    key = "max_cost_usd" if stop.kind == "cost" else "max_hours"
    return (f"The tasks not sent are left for later; raise judges[{stop.scope}].budget.{key} ({limit}) in the "
            "config, then continue with:", f"judge-engine resume {shell_word(run_dir)}")


def _escape(text: str) -> str:
    from judge_engine.cli.display import escape

    return escape(text)


def _completed_code(result: RunResult, console: Console, allow_unscored: bool) -> int:
    """0, or 3 when tasks are unscored (unless the user accepts that), saying how to retry them.
    Tasks held back on purpose (``self_preference: forbid``) and items whose requests tied are
    not a failure (:data:`NOT_FAILURES`)."""
    from judge_engine.cli.display import command

    counts = result.counts
    code = exit_code(result, allow_unscored=allow_unscored)
    if not counts.unscored - sum(counts.unscored_by_code.get(c, 0) for c in NOT_FAILURES):
        return code
    # A method's own verdict (a word list with too few nouns) is the data: asking again would only
    # re-read the same cached answer, so it is not offered.
    retryable = sorted(c for c in counts.unscored_by_code if c not in FINAL_CODES)
    console.print(f"{counts.unscored:,} of {counts.tasks:,} tasks are unscored "
                  f"({', '.join(f'{c} {n:,}' for c, n in sorted(counts.unscored_by_code.items()))}). Why, per judge:",
                  highlight=False)
    command(console, f"judge-engine stats {shell_word(result.run_dir)}")
    if retryable:
        command(console, f"judge-engine resume {shell_word(result.run_dir)} --retry {','.join(retryable)}",
                lead="Judge them again (cached answers are re-read, not bought again):")
    else:
        console.print("They are the method's own verdicts (the answers are the data): there is nothing to judge "
                      "again.", highlight=False)
    if code == EXIT_UNSCORED:
        console.print(f"Exit code {EXIT_UNSCORED}: the run is complete but not every task is scored "
                      "(--allow-unscored makes this exit 0).")
    return code
