"""``judge-engine export``: a run's outcomes as CSV, JSONL or Parquet (:mod:`judge_engine.rundir.export`).

CSV and JSONL need nothing extra; Parquet needs pyarrow (``pip install 'judge-engine[data]'``:
without it the command says so and exits 2). Where it was written goes to standard output (a
line of its own: :func:`~judge_engine.cli.display.path_line`), notes (a demo run, a changed
dataset) to standard error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from judge_engine.cli import EXIT_OK

COLUMNS_HELP = ("columns: task_id ... at (the outcome's fields), scores.<name>, verdict.<field> (lists as JSON "
                "text, with .count), item.<field> with --with-items; --wide: item_id, then per "
                "<judge>|<temperature>|<repeat>[|<variant>] the score, .status and .scores.<name>")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export", help="write a run's outcomes as CSV, JSONL or Parquet (one row per task)",
                                 epilog=COLUMNS_HELP)
    export.add_argument("run_dir", type=Path, help="the run directory (RUNS/<run id>, or RUNS/latest)")
    export.add_argument("--format", choices=("csv", "jsonl", "parquet"), default="csv",
                        help="default csv; parquet needs pip install 'judge-engine[data]'")
    export.add_argument("--wide", action="store_true",
                        help="one row per item, a column per judge|temperature|repeat[|variant]")
    export.add_argument("--with-items", action="store_true",
                        help="join the dataset's fields (item.<field>), read with the run's field mapping")
    export.add_argument("--items", type=Path, metavar="PATH",
                        help="the run's dataset, if it moved since the run (implies --with-items)")
    export.add_argument("-o", "--output", metavar="PATH",
                        help="where to write ('-': standard output, CSV and JSONL); default "
                             "RUN_DIR/export/outcomes[-wide].<format>")
    export.set_defaults(handler=export_command)


def export_command(args: argparse.Namespace) -> int:
    from judge_engine.rundir.export import default_output, export_run

    output = (None if args.output == "-" else Path(args.output) if args.output
              else default_output(args.run_dir, args.format, wide=args.wide))
    try:
        done = export_run(args.run_dir, output, fmt=args.format, wide=args.wide, with_items=args.with_items,
                          items_path=args.items)
    except BrokenPipeError:  # '-o - | head': the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    for note in done.notes:  # as written: a note may begin with a long path, which wrapping would break
        print(note, file=sys.stderr)
    from judge_engine.cli.display import make_console, path_line

    if done.path is not None:  # a path in the run directory: whole, on a line of its own
        path_line(make_console(), f"wrote {done.rows:,} rows x {done.columns} columns", done.path)
    return EXIT_OK
