"""The command line: thin wrappers over runner, planning, store readers and stats.

Exit codes: 0 done, every task scored; 1 a judge stopped (auth, bad request, an endpoint that
cannot be reached or keeps failing: resume it); 2 bad input (config, dataset, template, run
directory, a missing API key); 3 the run completed with unscored tasks (``--allow-unscored``
makes it 0); 130 cancelled (resume it).
Heavy modules (litellm, the engine) are imported inside the commands, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judge_engine import __version__
from judge_engine.memory import configure_process

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNSCORED, EXIT_CANCELLED = 0, 1, 2, 3, 130
EPILOG = ("exit codes: 0 done, every task scored; 1 a judge stopped (provider error, unreachable or "
          "failing endpoint: resume it); 2 bad input or a missing API key; 3 completed with unscored "
          "tasks (see --allow-unscored); 130 cancelled (resume it)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="judge-engine", description="Run LLM judges at scale, and measure how far they can be trusted.",
                                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"judge-engine {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="judge a dataset (resumes a run of the same config)", epilog=EPILOG)
    run.add_argument("config", type=Path)
    _overrides(run)
    run.add_argument("--demo", action="store_true", help="answer with the built-in fake server (synthetic answers, no API key)")
    run.add_argument("--new-run", action="store_true", help="start a fresh run directory even if this config ran before")
    _session_options(run)
    run.set_defaults(handler=_cmd_run)

    resume = commands.add_parser("resume", help="finish a killed, cancelled or stopped run, or --retry its unscored tasks",
                                 epilog=EPILOG)
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("--retry", metavar="CODES",
                        help="judge again the tasks left unscored: 'unscored' for all, or reason codes separated by "
                             "commas (e.g. transport_exhausted,rate_limited); cached answers are re-read, not re-bought")
    _session_options(resume)
    resume.set_defaults(handler=_cmd_resume)

    plan = commands.add_parser("plan", help="dry run: tasks, tokens, cost and time; renders every prompt")
    plan.add_argument("config", type=Path)
    _overrides(plan)
    plan.add_argument("--latency", type=float, default=2.0, help="assumed seconds per call for the time estimate")
    plan.add_argument("--strict", action="store_true", help="exit 2 when a model or its price is unknown")
    plan.set_defaults(handler=_cmd_plan)

    show = commands.add_parser("show", help="print transcripts: messages, raw answer, verdict, score, attempts")
    show.add_argument("run_dir", type=Path)
    show.add_argument("--item", help="item id (default: the first item)")
    show.add_argument("--judge", help="only this judge")
    show.set_defaults(handler=_cmd_show)

    protocols = commands.add_parser("protocols", help="list judging protocols")
    protocols.set_defaults(handler=_cmd_protocols)

    schemas = commands.add_parser("schemas", help="write the protocols' JSON Schemas (or --check them)")
    schemas.add_argument("--dir", type=Path, default=Path("schemas"))
    schemas.add_argument("--check", action="store_true", help="exit 1 if the files differ from the models")
    schemas.set_defaults(handler=_cmd_schemas)

    try:
        from judge_engine import cli_stats
    except ImportError:
        pass
    else:
        cli_stats.register(commands)
    return parser


def _overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="judge with this litellm model instead of the config's (every judge)")
    parser.add_argument("--limit", type=int, help="only the first N items")
    parser.add_argument("--output", type=Path, help="runs directory (default: the config's output.dir)")
    parser.add_argument("--cache-dir", type=Path, help="answer cache directory")


def _session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-live", action="store_true", help="no live display: a progress line every "
                        "--progress-every seconds instead (also when stderr is not a terminal)")
    parser.add_argument("--progress-every", type=float, default=30.0, metavar="SECONDS",
                        help="seconds between progress lines without a live display (default 30)")
    parser.add_argument("--allow-unscored", action="store_true",
                        help="exit 0 even when some tasks end unscored (default: exit 3)")


def _override_values(args: argparse.Namespace) -> dict[str, Any]:
    # Paths typed on the command line are relative to the working directory (paths in the config
    # file are relative to the file); absolute, they also mean the same thing when resumed.
    def absolute(path: Path | None) -> Path | None:
        return None if path is None else path.resolve()

    return {"model": args.model, "limit": args.limit, "output_dir": absolute(args.output),
            "cache_dir": absolute(args.cache_dir)}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``judge-engine`` command."""
    configure_process()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = _parser().parse_args(argv)
    from judge_engine.errors import ConfigError, DatasetError, RunDirError, TemplateError

    try:
        code: int = args.handler(args)
    except (ConfigError, DatasetError, RunDirError, TemplateError) as exc:
        print(f"judge-engine: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("judge-engine: interrupted", file=sys.stderr)
        return EXIT_CANCELLED
    return code


def _cmd_run(args: argparse.Namespace) -> int:
    from judge_engine.running import run_job

    overrides = _override_values(args)
    if args.demo:
        from judge_engine.running import DEMO_API_BASE

        overrides["api_base"] = DEMO_API_BASE
    return run_job(args.config, overrides=overrides, demo=args.demo, new_run=args.new_run, live=not args.no_live,
                   allow_unscored=args.allow_unscored, progress_every_s=args.progress_every)


def _cmd_resume(args: argparse.Namespace) -> int:
    from judge_engine.running import resume_job

    return resume_job(args.run_dir, live=not args.no_live, retry=args.retry, allow_unscored=args.allow_unscored,
                      progress_every_s=args.progress_every)


def _cmd_plan(args: argparse.Namespace) -> int:
    from judge_engine.planning import plan_rows
    from judge_engine.report import make_console, plan_lines, plan_table
    from judge_engine.runner import prepare

    prepared = prepare(args.config, overrides=_override_values(args), demo=False, new_run=False)
    plans = plan_rows(prepared, latency_s=args.latency)
    console = make_console()
    console.print(plan_table(plans))
    for line in plan_lines(plans, items=prepared.dataset.items, run_dir=prepared.run_dir):
        console.print(line, highlight=False)
    if args.strict and any(p.warnings for p in plans):
        console.print("plan --strict: exit 2 (see the warnings above)", highlight=False)
        return EXIT_USAGE
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    from judge_engine.transcripts import print_item

    return print_item(args.run_dir, item_id=args.item, judge=args.judge)


def _cmd_protocols(args: argparse.Namespace) -> int:
    from rich.table import Table

    from judge_engine.protocols import available, get_protocol
    from judge_engine.report import make_console

    table = Table(title="judging protocols")
    for column in ("name", "version", "output fields", "score range", "item fields", "description"):
        table.add_column(column)
    for name in available():
        cls = get_protocol(name)
        protocol = cls()
        fields = ", ".join(cls.output_model.model_fields)
        low_high = protocol.score_range()
        score_range = f"{low_high[0]:g} .. {low_high[1]:g}" if low_high else "not fixed (rubric, sentences or per candidate)"
        table.add_row(name, cls.version, fields, score_range, ", ".join(cls.required_fields), cls.description)
    make_console().print(table)
    return EXIT_OK


def _cmd_schemas(args: argparse.Namespace) -> int:
    from judge_engine.schemas import check_schemas, write_schemas

    if args.check:
        stale = check_schemas(args.dir)
        for name in stale:
            print(f"stale or missing schema: {args.dir / name}", file=sys.stderr)
        return EXIT_FAILED if stale else EXIT_OK
    for path in write_schemas(args.dir):
        print(path)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
