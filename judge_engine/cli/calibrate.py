"""``judge-engine calibrate``: each cascade stage's confidence threshold, with a guarantee of
agreement with humans (:func:`judge_engine.trust.calibration.calibrate`), from a run's judgments or
from judgments made anywhere:

- ``calibrate RUN_DIR --human-table FILE --key ID --label COLUMN``: the run (of the cascade's
  config with the cascade off, so every stage judged every item) gives each stage's decision
  per item (:func:`judge_engine.trust.cascade.rows.calibration_rows`), joined to the human labels;
  the stages default to the config's ``cascade.stages``, and each stage's cost per item is
  the run's own spend;
- ``calibrate --rows FILE --stages A,B,C``: CSV, TSV or JSONL, one row per item and stage:
  ``item, stage, prediction, confidence, label`` (an empty label: an item to be judged).

``--guarantee stage`` (the default) tests each stage's threshold on its own, at DELTA / stages;
``--guarantee cascade`` tests the thresholds together at the full DELTA (one guarantee for
everything the cascade answers, :mod:`judge_engine.stats.whole_cascade`), reading the items
without a human label (the run's, or the rows') to order its tests, within ``--max-cost``. The
stage guarantee is the default, as in the Python call, so that a command keeps giving the
thresholds it gave: it also answers more from a small calibration set (the cascade guarantee
learns the order of its tests on a third of the items and tests on the rest), and the cascade
guarantee's cost limit is a second choice to make knowingly. Choose the guarantee before
calibrating: running both and keeping the one that answers more is a choice made on the labels,
which neither guarantee covers.

Prints the guarantee in words and a table per stage (:func:`render_calibration`, drawn by
:mod:`judge_engine.cli.display`); ``--json`` prints the document instead (or writes it to a
path); ``--output`` writes the thresholds file a cascade's config names. Bad input (a row, a
flag) exits 2 with a message naming the file's line and the field.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_engine.cli import EXIT_OK, EXIT_UNSCORED, EXIT_USAGE

if TYPE_CHECKING:
    from judge_engine.cli.display import Terminal


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    calibrate = commands.add_parser(
        "calibrate", help="confidence thresholds of a cascade of judges, with a guarantee of agreement with humans",
        description="Calibrate each stage's confidence threshold on human-labelled items so that agreement "
                    "with humans on the answered items is >= 1 - RISK with probability >= 1 - DELTA.")
    calibrate.add_argument("run_dir", nargs="?", type=Path, metavar="RUN_DIR",
                           help="a run of the cascade's config with the cascade off (run CONFIG --no-cascade): "
                                "every stage's decision per item, joined to --human-table")
    calibrate.add_argument("--human-table", type=Path, metavar="FILE",
                           help="with RUN_DIR: human labels, CSV, TSV or JSONL, one row per item")
    calibrate.add_argument("--key", default="id", metavar="ID",
                           help="the human table's item id column (default id)")
    calibrate.add_argument("--label", metavar="COLUMN", help="the human table's label column")
    calibrate.add_argument("--rows", type=Path, metavar="FILE",
                           help="instead of RUN_DIR: judgments as CSV, TSV or JSONL: item, stage, prediction, "
                                "confidence, label")
    calibrate.add_argument("--stages", metavar="A,B,C",
                           help="the stages' names, cheapest first (with --rows; with RUN_DIR, default: the "
                                "config's cascade.stages)")
    calibrate.add_argument("--risk", type=float, required=True, metavar="ALPHA",
                           help="guarantee agreement >= 1 - ALPHA on answered items (e.g. 0.15)")
    calibrate.add_argument("--delta", type=float, required=True, metavar="DELTA",
                           help="with probability >= 1 - DELTA (e.g. 0.1)")
    calibrate.add_argument("--min-items", type=int, default=30, metavar="N",
                           help="fewest items at or above a threshold before it is tested (default 30)")
    calibrate.add_argument("--guarantee", choices=("stage", "cascade"), default="stage",
                           help="stage: each stage's threshold tested on its own at DELTA / stages (default); "
                                "cascade: the thresholds tested together at DELTA, one guarantee for everything the "
                                "cascade answers (usually answers more from a few hundred items or more)")
    calibrate.add_argument("--max-cost", metavar="SHARE",
                           help="with --guarantee cascade: the highest expected cost per item, as a share of asking "
                                "the last stage about every item (default 0.5; 'none': no limit); without --costs "
                                "each stage is taken to cost ten times the one before")
    calibrate.add_argument("--per-stage-delta", action="store_true",
                           help="test each stage at DELTA, as the reference code does: each stage is guaranteed "
                                "on its own only (the weaker statement; default: DELTA / stages, the whole cascade)")
    calibrate.add_argument("--costs", metavar="A=X,B=Y", help="each stage's cost per item in dollars: adds the "
                                                               "cascade's expected cost against the last stage alone "
                                                               "(with RUN_DIR, default: the run's own spend)")
    calibrate.add_argument("--json", nargs="?", const="-", metavar="PATH",
                           help="the report as JSON, on standard output (no table) or to PATH")
    calibrate.add_argument("--output", type=Path, metavar="THRESHOLDS",
                           help="write the thresholds file a cascade's config names")
    calibrate.set_defaults(handler=calibrate_command)


def fail(message: str) -> int:
    print(f"judge-engine calibrate: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def calibrate_command(args: argparse.Namespace) -> int:
    """Run ``calibrate``; returns the exit code (2 on bad input)."""
    from judge_engine.trust.calibration import calibrate_rows
    from judge_engine.trust.row_tables import read_rows

    stages = [s.strip() for s in args.stages.split(",") if s.strip()] if args.stages else None
    costs = _costs(args.costs) if args.costs else None
    if isinstance(costs, str):
        return fail(costs)
    if args.max_cost is not None and args.guarantee != "cascade":
        return fail("--max-cost limits the thresholds of --guarantee cascade; the stage guarantee has no cost limit")
    max_cost = _max_cost(args.max_cost or "0.5")
    if isinstance(max_cost, str):
        return fail(max_cost)
    if args.guarantee == "cascade" and args.per_stage_delta:
        return fail("--per-stage-delta shares DELTA among the stages of --guarantee stage; --guarantee cascade tests "
                    "the thresholds together at the full DELTA")
    notes: list[str] = []
    if args.run_dir is not None:
        if args.rows is not None:
            return fail("give either RUN_DIR or --rows, not both")
        if args.human_table is None or args.label is None:
            return fail("RUN_DIR needs the human labels: --human-table FILE --key ID --label COLUMN")
        from judge_engine.trust.cascade.rows import calibration_rows

        found = calibration_rows(args.run_dir, human_table=args.human_table, key=args.key, label=args.label,
                                 stages=stages, unlabelled=args.guarantee == "cascade")
        rows, stages, notes = found.rows, found.stages, found.notes
        costs = costs if costs is not None else found.costs
        where = None
    elif args.rows is not None:
        if not stages:
            return fail("--rows needs --stages A,B,C: the stages' names in the rows, cheapest first")
        rows, where = read_rows(args.rows)
    else:
        return fail("give the judgments to calibrate on: RUN_DIR --human-table FILE --label COLUMN, or --rows FILE")
    document = calibrate_rows(rows, stages=stages, risk=args.risk, delta=args.delta, min_items=args.min_items,
                              delta_rule="per_stage" if args.per_stage_delta else "bonferroni", costs=costs,
                              output=args.output, guarantee=args.guarantee, max_cost=max_cost,
                              **({"where": where} if where is not None else {}))
    return _report(args, document, [*notes, *document["notes"]])


def _report(args: argparse.Namespace, document: Mapping[str, Any], notes: list[str]) -> int:
    """Print (or write) the report; 3 when no stage answers: the calibration completed with
    nothing to show, as a run with unscored tasks does."""
    from judge_engine.cli.display import escape, make_console, path_line, say

    code = EXIT_OK if document["answered"] else EXIT_UNSCORED
    text = json.dumps(document, indent=2) + "\n"
    if args.json == "-":
        for note in notes:
            print(f"judge-engine calibrate: {note}", file=sys.stderr)
        if code == EXIT_UNSCORED:  # the exit code's reason, where a person reads it
            from judge_engine.trust.calibration import too_few_items

            for line in (nothing_answered(document["items"]), too_few_items(document)):
                if line:
                    print(f"judge-engine calibrate: {line}", file=sys.stderr)
        sys.stdout.write(text)
        return code
    console = make_console()
    render_calibration(document, console, notes=[f"[yellow]{escape(note)}[/]" for note in notes])
    if args.json:
        Path(args.json).write_text(text, encoding="utf-8")
        path_line(console, "json", args.json)
    if args.output:
        path_line(console, "thresholds", args.output)
        if not document["answered"]:
            say(console, "[yellow]a cascade refuses this thresholds file: no stage in it answers[/]")
    return code


def nothing_answered(items: int) -> str:
    """The first line of a calibration in which no stage answers."""
    which = "the 1 calibration item" if items == 1 else f"any of the {items:,} calibration items"
    return (f"nothing answered: no stage answers {which}, so a cascade with these thresholds would abstain on "
            "every item")


def _max_cost(text: str) -> float | None | str:
    """``--max-cost 0.5`` (or ``none``) as a share, or the message saying what is wrong."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        return f"--max-cost: {text!r} is not a share of the last stage's cost above 0 (e.g. 0.5), or none"
    return value


def _costs(text: str) -> dict[str, float] | str:
    """``--costs cheap=0.001,strong=0.03`` as a mapping, or the message saying what is wrong."""
    costs: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            costs[name.strip()] = float(value)
        except ValueError:
            return f"--costs: {part.strip()!r} is not STAGE=COST (e.g. cheap=0.001)"
    return costs


# --- the report ---------------------------------------------------------------------------------


def render_calibration(document: Mapping[str, Any], console: Terminal, *, notes: Sequence[str] = ()) -> None:
    """Print a :func:`~judge_engine.trust.calibration.calibrate` document: first, when no stage
    answers, that nothing is answered and what would let a stage answer; the ``notes`` (markup);
    the guarantee in words; a table per stage in the cascade's words
    (:mod:`judge_engine.util.cascade_words`) and what its bound is; why each stage that answers
    nothing does (with the items it would need); coverage and, when something is answered, cost."""
    from judge_engine.cli.display import Column, escape, print_table, say
    from judge_engine.trust.calibration import answering_advice
    from judge_engine.util import cascade_words as words
    from judge_engine.util.money import dollars

    answered, items = document["answered"], document["items"]
    if not answered:
        head, _, rest = nothing_answered(items).partition(": ")
        say(console, f"[bold yellow]{head}:[/] {escape(rest)}")
        for line in answering_advice(document):
            say(console, escape(f"  {line}"))
    for note in notes:
        say(console, note)
    say(console, f"[bold]guaranteed:[/] {escape(document['statement'])}")
    stages = document["stages"]
    whole = document.get("guarantee") == "cascade"
    # Each stage's cost is on the cost line: without a column of its own the table fits 80 columns.
    columns = [Column(words.STAGE, key=True), *(Column(h, justify="right") for h in (
        words.THRESHOLD, words.REACHED, words.ANSWERED, words.ERRORS, words.AGREEMENT, words.BOUND))]
    rows = [[s["stage"], words.threshold_text(s["threshold"]), str(s["offered"]), str(s["answered"]), str(s["errors"]),
             words.percent(1 - s["errors"] / s["answered"]) if s["answered"] else "-", _number(s["bound"])]
            for s in stages]
    level = stages[0]["delta"]
    rule = (" (the cascade tested as a whole)" if whole else f" ({level:.3g} per stage, Bonferroni)"
            if document["delta_rule"] == "bonferroni" else " per stage")
    print_table(f"calibration: risk {document['risk']:g}, delta {document['delta']:g}{rule}", columns, rows,
                console=console, title_justify="left")
    if whole:
        from judge_engine.trust.whole_calibration import ordering_line, tested_line, whole_advice

        say(console, escape(f"  {tested_line(document)}"))
        say(console, escape(f"  {ordering_line(document)}"))
        if answered:  # a cascade that answers nothing said its advice above
            for line in whole_advice(document):
                say(console, escape(f"  {line}"))
    else:
        say(console, escape(f"  {words.bound_line(document['delta'], len(stages), document['delta_rule'])}"))
    for stage in stages:
        if stage["threshold"] is None and not whole:
            say(console, escape(f"  {stage['stage']}: {silent_reason(stage, document['risk'])}"))
        elif stage["threshold"] is None and answered:
            say(console, escape(f"  {stage['stage']}: {words.NOT_ASKED} (no threshold on the path that passed)"))
    agreement = f"; observed {words.AGREEMENT} {words.percent(document['agreement'])}" if answered else ""
    say(console, escape(f"{words.COVERAGE} {words.percent(document['coverage'])} ({answered:,} of {items:,} items "
                        f"{words.ANSWERED}){agreement}"))
    if document.get("cost") and answered:  # nothing answered is no saving: no cost against the last stage
        cost = document["cost"]
        ratio = f" ({words.percent(cost['ratio'])})" if cost["ratio"] is not None else ""
        each = ", ".join(f"{s['stage']} {dollars(s['cost_per_item'])}" + ("" if s["threshold"] is not None else
                                                                          f" ({words.NOT_ASKED})") for s in stages)
        say(console, escape(f"cost per item {dollars(cost['per_item'])} against "
                            f"{dollars(cost['last_stage_alone'])} for {stages[-1]['stage']} alone{ratio}; "
                            f"each stage's: {each}"))


def silent_reason(stage: Mapping[str, Any], risk: float) -> str:
    """Why a stage answers nothing, and what would let it answer, in one sentence."""
    from judge_engine.util.cascade_words import percent, threshold_text

    needed, tested = stage.get("needed"), stage.get("stopped_at")
    if not stage["judged"]:
        return "answers nothing: no item reached it with a judgment"
    if needed is None:
        return "answers nothing"
    where = f"at confidence >= {threshold_text(needed['confidence'])}"
    if tested is not None:
        errors = f"{tested['errors']} error{'' if tested['errors'] == 1 else 's'}"
        head = f"answers nothing: {where}, {errors} in {tested['items']} items, bound {tested['bound']:.3f} > {risk:g}"
    else:
        reached = f"{stage['judged']} item{'' if stage['judged'] == 1 else 's'} reached it"
        head = (f"answers nothing: {reached} with a judgment, fewer than the "
                f"{stage['start']} a threshold is tested with")
    if needed["items"] is None:
        return (f"{head}; its error rate there, {percent(needed['error_rate'])}, is at or above the risk: no "
                f"number of calibration items lets it answer")
    return (f"{head}; at its error rate there ({percent(needed['error_rate'])}) it needs {needed['items']:,} "
            f"items {where}, about {needed['calibration_items']:,} calibration items")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if not math.isnan(value) else "-"
