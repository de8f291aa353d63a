"""``judge-engine status RUN_DIR``: how far a run is, from its files, with or without its process."""

from __future__ import annotations

import argparse
from pathlib import Path

from judge_engine.cli import EXIT_OK


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = commands.add_parser("status", help="how far a run is (tasks, batches and their states), "
                                                "read from its files: no process needed")
    status.add_argument("run_dir", type=Path)
    status.add_argument("--poll", action="store_true",
                        help="ask the provider for each open batch's state now (needs the run's API key; "
                             "writes nothing)")
    status.set_defaults(handler=status_command)


def status_command(args: argparse.Namespace) -> int:
    from judge_engine.batch.status import run_status
    from judge_engine.cli.display import make_console, status_report

    status_report(run_status(args.run_dir, poll=args.poll), make_console())
    return EXIT_OK
