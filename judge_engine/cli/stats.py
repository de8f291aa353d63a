"""The ``stats`` and ``meta`` commands: how far can the judge be trusted?

``stats SOURCE``: consistency, score distribution, unscored rate and agreement between judges
for a run directory (or consistency across repeat columns of any table); for CDAT and DAT runs
also valid responses, novelty and appropriateness, and with ``--baselines`` the gate, the CDAT
score, the elbow distance and the Pareto front (:mod:`judge_engine.protocols.cdat_report`).
``meta TABLE``: correlation, agreement, adequacy and span F1 between judge scores and human
judgments, per group and pooled. Both print rich tables and can write JSON, CSV and PNG plots.

Heavy libraries (scipy, rich, matplotlib) are imported inside the handlers; the tables are drawn
by :mod:`judge_engine.cli.display`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judge_engine.protocols.cdat_report import GenerationReport
    from judge_engine.stats.plots import Chart
    from judge_engine.stats.runs import Run
    from judge_engine.stats.sections import Section
    from judge_engine.stats.tables import Table

EXIT_BAD_INPUT = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``stats`` and ``meta`` subcommands to the main CLI's subparsers."""
    _register_stats(subparsers)
    _register_meta(subparsers)


def _register_stats(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stats = subparsers.add_parser(
        "stats", help="consistency, distributions and agreement of a run",
        description="Trust measurements of one run directory, or of repeat columns of a table.",
    )  # fmt: skip
    stats.add_argument(
        "source", help="a run directory, or a table (.csv/.jsonl/.json) with --repeats"
    )
    stats.add_argument("--repeats", nargs="+", metavar="COL",
                       help="table mode: one column of score lists, or one column per repeat")  # fmt: skip
    stats.add_argument("--group", metavar="COL", help="table mode: split by this column")
    stats.add_argument(
        "--small", type=float, default=1.0, help="|delta| bound of the first bucket (default 1)"
    )
    stats.add_argument(
        "--large", type=float, default=5.0, help="|delta| bound of the last bucket (default 5)"
    )
    stats.add_argument("--verdict-field", metavar="NAME",
                       help="flip rate on verdict[NAME] (e.g. winner) instead of the score")  # fmt: skip
    stats.add_argument("--baselines", nargs="+", type=Path, default=[], metavar="FILE",
                       help="CDAT runs: RANDOM.json [COMMON.json] (judge-engine cdat-baselines, or the "
                            "paper's files) for the gate, CDAT score, elbow distance and Pareto front")  # fmt: skip
    _output_args(stats)
    stats.set_defaults(handler=handle_stats)


def _register_meta(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    meta = subparsers.add_parser(
        "meta", help="judge vs human: correlation, agreement, adequacy, span F1",
        description="Compare judge scores with human judgments, per group and pooled.",
    )  # fmt: skip
    meta.add_argument(
        "table", help="judge scores: a run directory or a .csv/.tsv/.jsonl/.json table"
    )
    meta.add_argument("--human-table", metavar="PATH", help="human judgments, joined on --key")
    meta.add_argument("--key", nargs="+", metavar="COL",
                      help="join key in TABLE; for a run directory, the item id column of "
                           "--human-table (default item_id)")  # fmt: skip
    meta.add_argument(
        "--human-key", nargs="+", metavar="COL", help="join key in --human-table (default: --key)"
    )
    meta.add_argument("--human", nargs="+", default=[], metavar="COL", help="human score columns")
    meta.add_argument("--pred", nargs="+", default=[], metavar="COL",
                      help="judge score columns, each compared with each --human (run: all judges)")  # fmt: skip
    meta.add_argument("--compare", nargs="+", default=[], metavar="HUMAN=JUDGE",
                      help="explicit column pairs, e.g. mqm_score_acc=gemba_acc_literary")  # fmt: skip
    meta.add_argument("--negate", nargs="+", default=[], metavar="COL",
                      help="flip the sign of these columns first (penalties vs scores)")  # fmt: skip
    meta.add_argument("--group", metavar="COL", help="report per value of this column (e.g. pair)")
    meta.add_argument(
        "--system", metavar="COL", help="system column: adds system-level correlation"
    )
    meta.add_argument("--methods", nargs="+", default=["kendall", "spearman", "pearson"],
                      choices=["kendall", "spearman", "pearson"])  # fmt: skip
    meta.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="N",
        help="bootstrap CI resamples for the first method",
    )
    meta.add_argument("--seed", type=int, default=0)
    meta.add_argument("--temperature", type=float, help="run source: use only this temperature")
    meta.add_argument(
        "--agreement", action="store_true", help="add kappa, alpha, ICC (shared discrete scale)"
    )
    adequacy = meta.add_argument_group("adequacy (LitEval)")
    adequacy.add_argument(
        "--adequacy",
        action="store_true",
        help="rate at which each column prefers the human translation",
    )
    adequacy.add_argument("--item", metavar="COL", help="source item column (e.g. source_)")
    adequacy.add_argument("--human-system", nargs="+", default=["translator"], metavar="NAME")
    adequacy.add_argument("--top-systems", nargs="+", default=[], metavar="NAME")
    adequacy.add_argument(
        "--other-systems", nargs="+", metavar="NAME", help="default: all remaining systems"
    )
    adequacy.add_argument("--subset", metavar="PATH", help="keep only items listed in this table")
    adequacy.add_argument(
        "--subset-key", metavar="COL", help="column naming the item in --subset (default: --item)"
    )
    spans = meta.add_argument_group("span agreement (close reading)")
    spans.add_argument("--spans", metavar="HUMAN=JUDGE",
                       help="expression-list columns: human (in --human-table) = judge (in TABLE)")  # fmt: skip
    _output_args(meta)
    meta.set_defaults(handler=handle_meta)


def _output_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write all sections as JSON")
    parser.add_argument(
        "--csv", metavar="PATH", help="write all sections as one CSV (a 'section' column)"
    )
    parser.add_argument("--plots", nargs="?", const="", metavar="DIR",
                        help="write PNG charts (default dir for a run: RUN_DIR/plots)")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no tables on stdout")


def _fail(command: str, message: str) -> int:
    print(f"judge-engine {command}: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def handle_stats(args: argparse.Namespace) -> int:
    """Run ``stats``; returns the exit code (2 on bad input)."""
    from judge_engine.stats.runs import read_run
    from judge_engine.stats.sections import run_sections, table_consistency_section
    from judge_engine.stats.tables import read_table

    source = Path(args.source)
    if not source.exists():
        return _fail("stats", f"{source}: no such file or directory")
    try:
        generation = None
        if source.is_dir():
            run = read_run(source)
            if not run.outcomes:
                return _fail("stats", f"{source / 'outcomes.jsonl'}: no outcomes")
            sections = run_sections(run, small=args.small, large=args.large,
                                    verdict_field=args.verdict_field)  # fmt: skip
            from judge_engine.protocols.reports import protocol_sections

            sections += protocol_sections(run)
            from judge_engine.stats.jury import jury_sections

            sections += jury_sections(run)
            generation = _generation(run, args.baselines)
            sections += generation.sections if generation else []
            notes = run.notes
        elif args.baselines:
            return _fail("stats", "--baselines applies to a CDAT run directory")
        elif args.repeats:
            table = read_table(source)
            table.require(*args.repeats, *([args.group] if args.group else []))
            sections = [table_consistency_section(table.rows, args.repeats, group=args.group,
                                                  small=args.small, large=args.large)]  # fmt: skip
            notes = table.notes
        else:
            return _fail("stats", f"{source}: not a run directory (give --repeats COL for a table)")
        _emit(args, sections, notes)
        if args.plots is not None:
            plot_dir = (
                Path(args.plots)
                if args.plots
                else (source / "plots" if source.is_dir() else Path("plots"))
            )
            from judge_engine.stats.plots import run_charts

            if source.is_dir():
                nothing = "no section with a chart has data (see above)"
                extra = generation.charts if generation else (lambda _: [])
                _write_plots("stats", lambda: run_charts(sections, run.outcomes, plot_dir) + extra(plot_dir), nothing)
            else:
                _write_plots("stats", list, "the charts are drawn from a run directory")
    except ValueError as exc:  # TableError included
        return _fail("stats", str(exc))
    return 0


def _generation(run: Run, baselines: Sequence[Path]) -> GenerationReport | None:
    """The CDAT/DAT sections when the run has word lists (None otherwise).

    Raises:
        TableError: baselines given for a run without CDAT lists, or unreadable.
    """
    from judge_engine.errors import TableError
    from judge_engine.protocols import cdat_report

    cdat = any(o.protocol == "cdat" for o in run.outcomes)
    if baselines and not cdat:
        raise TableError(f"--baselines: {run.path} has no CDAT outcomes (the baselines are CDAT's)")
    if not cdat_report.has_generation(run):
        return None
    random, common = cdat_report.read_baselines(baselines)
    return cdat_report.generation_report(run, random=random, common=common)


def _load_meta_table(args: argparse.Namespace) -> tuple[Table, list[str]]:
    """The judge table (run or file), joined with --human-table, subset and negated."""
    from judge_engine.errors import TableError
    from judge_engine.stats.runs import read_run, run_table
    from judge_engine.stats.tables import join, read_table

    source = Path(args.table)
    if source.is_dir():
        # A run's rows are keyed by the item id; --key then names the human table's id column
        # (as the dataset names it, e.g. "id"), unless --human-key does.
        run = read_run(source)
        table, key = run_table(run, temperature=args.temperature), ["item_id"]
        human_key = args.human_key or args.key or key
        pred = args.pred or run.judges
    else:
        table, key, pred = read_table(source), args.key, args.pred
        human_key = args.human_key or key
    if args.human_table and not args.spans:
        if not key:
            raise TableError("--human-table needs --key (the join column)")
        table = join(table, read_table(args.human_table), left_key=key, right_key=human_key)
    if args.subset:
        subset_key = args.subset_key or args.item
        if not subset_key:
            raise TableError("--subset needs --subset-key or --item")
        allowed = {str(v) for v in read_table(args.subset).values(subset_key)}
        table.require(args.item or subset_key)
        table.rows = [r for r in table.rows if str(r.get(args.item or subset_key)) in allowed]
        if not table.rows:
            raise TableError(f"no rows of {table.name} match {args.subset} on {subset_key!r}")
    for col in args.negate:
        for row, v in zip(table.rows, table.floats(col), strict=True):
            row[col] = -v
    return table, pred


def _comparisons(args: argparse.Namespace, pred: Sequence[str]) -> list[tuple[str, str]]:
    pairs = [(h, p) for h in args.human for p in pred]
    for spec in args.compare:
        human, sep, judge = spec.partition("=")
        if not sep or not human or not judge:
            raise ValueError(f"--compare {spec!r}: expected HUMAN=JUDGE")
        pairs.append((human, judge))
    return pairs


def handle_meta(args: argparse.Namespace) -> int:
    """Run ``meta``; returns the exit code (2 on bad input)."""
    from judge_engine.stats import meta

    try:
        table, pred = _load_meta_table(args)
        comparisons = _comparisons(args, pred)
        sections: list[Section] = []
        if comparisons:
            sections.append(meta.correlation_section(
                table, comparisons, group=args.group, system=args.system,
                methods=args.methods, bootstrap=args.bootstrap, seed=args.seed,
            ))  # fmt: skip
            if args.agreement:
                sections.append(meta.agreement_section(table, comparisons, group=args.group))
        if args.adequacy:
            if not (args.item and args.system and args.top_systems):
                raise ValueError("--adequacy needs --item, --system and --top-systems")
            metrics = list(
                dict.fromkeys([*args.human, *pred, *(c for p in comparisons for c in p)])
            )
            sections.append(meta.adequacy_section(
                table, metrics, item=args.item, system=args.system, human=args.human_system,
                top=args.top_systems, other=args.other_systems, group=args.group,
            ))  # fmt: skip
        if args.spans:
            sections.append(_span_section(args, table))
        if not sections:
            raise ValueError(
                "nothing to compare: give --human/--pred, --compare, --adequacy or --spans"
            )
        _emit(args, sections, table.notes)
        if args.plots is not None:
            default = Path(args.table) / "plots" if Path(args.table).is_dir() else Path("plots")
            from judge_engine.stats.plots import meta_charts

            plot_dir = Path(args.plots) if args.plots else default
            nothing = "charts are drawn for correlations (--human/--pred) and --adequacy"
            if any(s.name in ("correlation", "adequacy") for s in sections):
                nothing = "no section with a chart has data (see above)"
            _write_plots("meta", lambda: meta_charts(sections, plot_dir), nothing)
    except ValueError as exc:  # TableError included
        return _fail("meta", str(exc))
    return 0


def _span_section(args: argparse.Namespace, table: Table) -> Section:
    from judge_engine.stats.meta import span_section
    from judge_engine.stats.tables import read_table

    human_col, sep, judge_col = args.spans.partition("=")
    from_run = Path(args.table).is_dir()
    if not (sep and args.human_table and (args.key or from_run)):
        raise ValueError("--spans HUMAN=JUDGE needs --human-table and --key")
    pred_key = ["item_id"] if from_run else args.key
    return span_section(
        table, read_table(args.human_table), pred_key=pred_key,
        ref_key=args.human_key or args.key or pred_key, pred_col=judge_col, ref_col=human_col,
        group=args.group,
    )  # fmt: skip


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalar
        return _clean(value.item())
    return value


def _emit(args: argparse.Namespace, sections: Sequence[Section], notes: Sequence[str]) -> None:
    if not args.quiet:
        from judge_engine.cli.display import render_sections

        render_sections(sections, notes)
    if args.json:
        doc = {
            "version": 1,
            "notes": list(notes),
            "sections": {
                s.name: {"title": s.title, "columns": s.columns,
                         "rows": [{k: _clean(v) for k, v in r.items()} for r in s.rows],
                         "absent": s.absent or None, "notes": s.notes}
                for s in sections
            },
        }  # fmt: skip
        Path(args.json).write_text(
            json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8"
        )
    if args.csv:
        columns = list(dict.fromkeys(["section", *(c for s in sections for c in s.columns)]))
        with Path(args.csv).open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, columns, extrasaction="ignore")
            writer.writeheader()
            for s in sections:
                for r in s.rows:
                    writer.writerow({"section": s.name, **{k: _clean(v) for k, v in r.items()}})


def _write_plots(command: str, charts: Callable[[], list[Chart]], nothing: str) -> None:
    """Draw the charts and say where each went, or why it was not drawn (a section that is
    absent was explained with the tables, so its chart is not mentioned again)."""
    from judge_engine.stats import plots

    if not plots.available():
        print(f"judge-engine {command}: matplotlib is not installed, so no plots were written; "
              f"install the plots extra: {plots.INSTALL_HINT}", file=sys.stderr)  # fmt: skip
        return
    drawn = charts()
    for chart in drawn:
        if chart.written:
            print(f"plot: {chart.path}")
        else:
            print(f"no plot {chart.path.name}: {chart.why_not}")
    if not drawn:
        print(f"judge-engine {command}: no plots: {nothing}")
