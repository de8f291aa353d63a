"""The ``meta`` command: a judge's scores against human judgments (correlation, agreement
with intervals, adequacy, literalness, close-reading span F1, MQM span agreement), per group and
pooled. Tables, JSON, CSV and plots as :mod:`judge_engine.cli.stats` writes them.

Heavy libraries are imported inside the handler, so ``judge-engine --help`` stays instant.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_engine.cli.stats import emit, fail, interval_args, output_args, write_plots

if TYPE_CHECKING:
    from judge_engine.stats.sections import Section
    from judge_engine.stats.tables import Table


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``meta`` subcommand to the main CLI's subparsers."""
    _register_meta(subparsers)


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
                      choices=["kendall", "spearman", "pearson"], help="the correlations to report")  # fmt: skip
    interval_args(meta, "for the first method and, with --agreement, kappa, alpha and ICC")
    meta.add_argument("--temperature", type=float, help="run source: use only this temperature")
    meta.add_argument(
        "--agreement", action="store_true", help="add kappa, alpha, ICC (shared discrete scale)"
    )
    meta.add_argument("--icc-forms", action="store_true",
                      help="with --agreement: all six ICC forms, not only ICC(2,1)")  # fmt: skip
    meta.add_argument("--fleiss", action="store_true",
                      help="with --agreement: Fleiss' and Randolph's free-marginal kappa")  # fmt: skip
    adequacy = meta.add_argument_group("adequacy (LitEval)")
    adequacy.add_argument(
        "--adequacy",
        action="store_true",
        help="rate at which each column prefers the human translation",
    )
    adequacy.add_argument("--item", metavar="COL", help="source item column (e.g. source_)")
    adequacy.add_argument("--human-system", nargs="+", default=["translator"], metavar="NAME",
                          help="the system name(s) of the human translations")
    adequacy.add_argument("--top-systems", nargs="+", default=[], metavar="NAME",
                          help="the machine systems to compare the human translations with (default: every other)")
    adequacy.add_argument(
        "--other-systems", nargs="+", metavar="NAME", help="default: all remaining systems"
    )
    adequacy.add_argument("--subset", metavar="PATH", help="keep only items listed in this table")
    adequacy.add_argument(
        "--subset-key", metavar="COL", help="column naming the item in --subset (default: --item)"
    )
    bias = meta.add_argument_group("self-preference")
    bias.add_argument("--self-preference", nargs="+", default=[], metavar="COL=MODEL",
                      help="a judge's score column and its model: its own family's systems (--system) "
                           "against the rest, read against the --human columns")  # fmt: skip
    bias.add_argument("--family", nargs="+", default=[], metavar="NAME=FAMILY",
                      help="model family of a model or system the built-in patterns do not know")  # fmt: skip
    literal = meta.add_argument_group("literalness (LitEval): overlap of systems' outputs")
    literal.add_argument("--literalness", nargs="?", const="chrf", choices=["chrf", "bleu"],
                         help="chrF (default) or BLEU of each system's outputs against each "
                              "other's for the same --item, by --system; needs --text")  # fmt: skip
    literal.add_argument("--text", metavar="COL", help="the column holding each output's text")
    literal.add_argument("--tokenize", metavar="NAME",
                         help="sacreBLEU's BLEU tokenizer (13a by default; zh for Chinese, char)")  # fmt: skip
    spans = meta.add_argument_group("span agreement (close reading, MQM)")
    spans.add_argument("--spans", metavar="HUMAN=JUDGE",
                       help="expression-list columns: human (in --human-table) = judge (in TABLE)")  # fmt: skip
    spans.add_argument("--spans-mqm", metavar="REFERENCE=JUDGE",
                       help="MQM error spans: a judge of the run or a column of error lists (in "
                            "--human-table or TABLE), each side; P/R/F1, severity and category match")  # fmt: skip
    output_args(meta)
    meta.set_defaults(handler=handle_meta)


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
        if not run.outcomes:  # before joining: "no rows match" would blame the human table
            raise TableError(f"{source / 'outcomes.jsonl'}: no outcomes (the run has scored nothing yet)")
        table, key = run_table(run, temperature=args.temperature), ["item_id"]
        human_key = args.human_key or args.key or key
        pred = args.pred or run.judges
    else:
        table, key, pred = read_table(source), args.key, args.pred
        human_key = args.human_key or key
    if args.human_table and not (args.spans or args.spans_mqm):
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
                sections += meta.agreement_sections(
                    table, comparisons, group=args.group, icc_forms=args.icc_forms,
                    multirater=args.fleiss, n_categories=args.n_categories,
                    bootstrap=args.bootstrap, seed=args.seed,
                )  # fmt: skip
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
        if args.self_preference:
            sections.append(_self_preference_section(args, table))
        if args.literalness:
            sections.append(_literalness_section(args, table))
        if args.spans:
            sections.append(_span_section(args, table))
        if args.spans_mqm:
            sections.append(_mqm_span_section(args, table))
        if not sections:
            raise ValueError("nothing to compare: give --human/--pred, --compare, --adequacy, "
                             "--self-preference, --literalness, --spans or --spans-mqm")  # fmt: skip
        emit(args, sections, table.notes)
        if args.plots is not None:
            default = Path(args.table) / "plots" if Path(args.table).is_dir() else Path("plots")
            from judge_engine.stats.plots import meta_charts

            plot_dir = Path(args.plots) if args.plots else default
            nothing = "charts are drawn for correlations (--human/--pred) and --adequacy"
            if any(s.name in ("correlation", "adequacy") for s in sections):
                nothing = "no section with a chart has data (see above)"
            write_plots("meta", lambda: meta_charts(sections, plot_dir), nothing)
    except ValueError as exc:  # TableError included
        return fail("meta", str(exc))
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


def _pairs(specs: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not (sep and name and value):
            raise ValueError(f"{flag} {spec!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def _self_preference_section(args: argparse.Namespace, table: Table) -> Section:
    from judge_engine.stats.bias import table_self_preference_section

    if not args.system:
        raise ValueError("--self-preference needs --system (the column naming each row's system)")
    overrides = {k.lower(): v.lower() for k, v in _pairs(args.family, "--family").items()}
    return table_self_preference_section(
        table, _pairs(args.self_preference, "--self-preference"), system=args.system,
        controls=args.human, group=args.group, overrides=overrides,
    )  # fmt: skip


def _literalness_section(args: argparse.Namespace, table: Table) -> Section:
    from judge_engine.stats import literalness

    if not (args.item and args.system and args.text):
        raise ValueError("--literalness needs --item, --system and --text (a table of outputs)")
    if not literalness.available():
        raise ValueError(f"--literalness needs sacreBLEU: {literalness.INSTALL_HINT}")
    return literalness.literalness_section(
        table, item=args.item, system=args.system, text=args.text, human=args.human_system,
        group=args.group, metric=args.literalness, tokenize=args.tokenize,
    )  # fmt: skip


def _mqm_span_section(args: argparse.Namespace, table: Table) -> Section:
    """``--spans-mqm REFERENCE=JUDGE``: each side a judge of the run (its verdicts' errors) or a
    column of error lists in --human-table (joined on --human-key/--key) or in TABLE (--key)."""
    from judge_engine.stats.mqm_spans import mqm_span_section, run_mqm_errors, table_mqm_errors
    from judge_engine.stats.runs import read_run
    from judge_engine.stats.tables import read_table

    reference, sep, judge = args.spans_mqm.partition("=")
    if not (sep and reference and judge):
        raise ValueError(f"--spans-mqm {args.spans_mqm!r}: expected REFERENCE=JUDGE")
    run = read_run(args.table) if Path(args.table).is_dir() else None
    human = read_table(args.human_table) if args.human_table else None
    own_key = ["item_id"] if run else args.key

    def side(name: str) -> dict[tuple[str, ...], list[dict[str, Any]]]:
        if run is not None and name in run.judges:
            return run_mqm_errors(run, name, temperature=args.temperature)
        if human is not None and name in human.columns:
            key = args.human_key or args.key or own_key
            if not key:
                raise ValueError("--spans-mqm with --human-table needs --key")
            return table_mqm_errors(human, name, key)
        if run is None and name in table.columns:
            if not own_key:
                raise ValueError("--spans-mqm on a table needs --key")
            return table_mqm_errors(table, name, own_key)
        where = f"a judge of {args.table}" if run else f"a column of {args.table}"
        extra = f" or of {args.human_table}" if human is not None else ""
        raise ValueError(f"--spans-mqm: {name!r} is not {where}{extra}")

    groups = None
    if args.group:
        source = table if run is None else human
        if source is None or args.group not in source.columns:
            raise ValueError(f"--group {args.group}: not a column of the annotations' table")
        key = own_key if source is table else (args.human_key or args.key or own_key)
        groups = {tuple(str(r.get(k)) for k in key): str(r.get(args.group)) for r in source.rows}
    return mqm_span_section(side(reference), side(judge), names=(reference, judge), groups=groups)


