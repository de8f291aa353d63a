"""The command line: the parser, the entry point and the exit codes. One module per command:

========================  ===============================================================
``cli/run.py``            ``run`` and ``resume``: a session with a live display or progress lines
``cli/plan.py``           ``plan``: the dry-run estimate (:mod:`judge_engine.running.estimate`) as a table
``cli/show.py``           ``show``: transcripts and outcomes, filtered and sorted through the index
``cli/rescore.py``        ``rescore``: the current parser and scoring over recorded answers
``cli/stats.py``          ``stats``: trust measurements of a run (:mod:`judge_engine.stats`)
``cli/meta.py``           ``meta``: a judge against human judgments (:mod:`judge_engine.stats`)
``cli/calibrate.py``      ``calibrate``: a cascade's confidence thresholds (:mod:`judge_engine.trust.calibration`)
``cli/estimate.py``       ``estimate``: a system's human-scale score with an interval (:mod:`judge_engine.trust.estimates`);
                          ``label-plan``: which items to send to humans (:mod:`judge_engine.trust.label_plan`)
``cli/export.py``         ``export``: a run's outcomes as CSV, JSONL or Parquet (:mod:`judge_engine.rundir.export`)
``cli/status.py``         ``status``: how far a run is, its batches' states, without its process;
                          ``cancel``: a stopped run's open batches cancelled at the provider
``cli/protocols.py``      ``protocols`` and ``schemas``: what the judging protocols are
``cli/cdat.py``           ``cdat-baselines``: CDAT's Random (or a run's Common) baseline file
``cli/view.py``           ``view``: runs audited in the browser (:mod:`judge_engine.viewer`)
``cli/display.py``        everything drawn on a terminal: the one module that imports rich
``cli/line_breaks.py``    where a line of prose may break (never between a figure and its name)
``cli/process.py``        process tuning for a run (garbage collector, GIL switch interval)
========================  ===============================================================

A new command is a module here with ``register(commands)`` (its arguments, light imports only)
and a handler that imports what it needs when it runs, so ``judge-engine --help`` stays instant.

Exit codes: 0 done, every task scored; 1 a judge stopped (auth, bad request, an endpoint that
cannot be reached or keeps failing: resume it); 2 bad input (config, dataset, template, run
directory, a missing API key); 3 the run completed with tasks unscored by a failure
(:data:`NOT_FAILURES` are not one; ``--allow-unscored`` makes it 0), or ``calibrate`` completed with
nothing to show (no stage answers); 4 stopped before passing a budget (``resume --budget`` continues); 5 a disk refused
a write (full, read-only, over quota: the message names the path; make room, then resume it);
130 cancelled (resume it).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

from judge_engine._version import __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNSCORED, EXIT_BUDGET, EXIT_CANCELLED = 0, 1, 2, 3, 4, 130
EXIT_DISK = 5
NOT_FAILURES = frozenset({"self_preference", "item_tie", "abstained"})
"""Unscored on purpose, or as the method's answer, not a failure to get one (the exit code does
not count them, and the run's summary says so): held back by ``self_preference: forbid``; an
item whose requests split evenly (its confidence, 0.5, is the finding, and calibration reads it
so); an item a cascade abstained on (no stage was sure enough: the guarantee working)."""
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT})
"""Errors only a write meets (a refused read is a permission, exit 2)."""
EPILOG = ("exit codes: 0 done, every task scored (or left unscored by item_tie, abstained, self_preference: "
          "no failure); 1 a judge stopped (provider error, unreachable or failing endpoint: resume it); 2 bad "
          "input or a missing API key; 3 completed with tasks unscored by a failure (see --allow-unscored), or a "
          "calibration in which no stage answers; 4 stopped at a budget (resume it with --budget); 5 a disk full, "
          "read-only or over quota (make room, then resume it); 130 cancelled (resume it)")


def parser() -> argparse.ArgumentParser:
    """The ``judge-engine`` argument parser, with every command registered."""
    from judge_engine.cli import (
        calibrate,
        cdat,
        estimate,
        export,
        meta,
        plan,
        protocols,
        rescore,
        run,
        show,
        stats,
        status,
        view,
    )

    root = _Root(prog="judge-engine", epilog=EPILOG,
                 description="Run LLM judges at scale, and measure how far they can be trusted.")
    root.add_argument("--version", action="version", version=f"judge-engine {__version__}")
    # No abbreviated options: `resume RUN --demo` was read as --demo-batch-s and asked for its value.
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for module in (run, plan, status, show, view, rescore, export, protocols, stats, meta, estimate, calibrate, cdat):
        module.register(commands)
    root.commands = commands
    return root


class _Root(argparse.ArgumentParser):
    """The ``judge-engine`` parser: an option its command does not know is named with the
    nearest one it does (``--modle``: did you mean ``--model``?)."""

    commands: argparse._SubParsersAction[Any] | None = None

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            from judge_engine.util.naming import did_you_mean

            command = self.commands.choices.get(parsed.command) if self.commands is not None else None
            known = [o for action in command._actions for o in action.option_strings] if command is not None else []
            hints = [hint for word in extras if word.startswith("-") and (hint := did_you_mean(word.split("=")[0], known))]
            self.error(f"unrecognized arguments: {' '.join(extras)}" + (f"; {hints[0]}" if hints else ""))
        return parsed


class _Parser(argparse.ArgumentParser):
    """A command's parser: options are spelled out, never abbreviated."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(**kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``judge-engine`` command: the handler's exit code, 2 for bad input."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = parser().parse_args(argv)
    from judge_engine.errors import (
        ConfigError,
        DatasetError,
        DiskError,
        RunDirError,
        TableError,
        TemplateError,
    )
    from judge_engine.rundir.disk import disk_error

    try:
        code: int = args.handler(args)
    except (ConfigError, DatasetError, RunDirError, TemplateError, TableError) as exc:
        print(f"judge-engine: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DiskError as exc:  # a run's writer said so, naming its file
        print(f"judge-engine: error: {exc}; {exc.advice}, then run the command again.", file=sys.stderr)
        return EXIT_DISK
    except OSError as exc:  # a file the command writes (an export, a chart) or reads
        where = exc.filename or "a file"
        if exc.errno in _DISK_ERRNOS and (error := disk_error(exc, where)) is not None:
            print(f"judge-engine: error: {error}; {error.advice}, then run the command again.", file=sys.stderr)
            return EXIT_DISK
        if isinstance(exc, PermissionError):  # a path given that this user may not read or write
            print(f"judge-engine: error: {where}: permission denied", file=sys.stderr)
            return EXIT_USAGE
        raise
    except KeyboardInterrupt:
        print("judge-engine: interrupted", file=sys.stderr)
        return EXIT_CANCELLED
    return code


if __name__ == "__main__":
    sys.exit(main())
