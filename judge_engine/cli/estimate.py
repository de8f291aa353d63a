"""``estimate`` and ``label-plan``: a system's human-scale score with a valid interval from every
judge verdict plus a few human labels (:mod:`judge_engine.trust.estimates`), and which items to
send to humans (:mod:`judge_engine.trust.label_plan`).

``estimate RUN_DIR --human-table FILE --human COLUMN``: one group per judge (and per ``--by``
value), a table by default, :func:`judge_engine.estimate`'s dict with ``--json``.
``label-plan RUN_DIR --budget N --output FILE``: every item with its probability of being drawn
and whether it was; annotators fill the ``label`` column of the rows drawn, and the file is the
human table ``estimate`` reads back (its probabilities make the estimate the active one).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

from judge_engine.cli import EXIT_FAILED, EXIT_OK
from judge_engine.cli.stats import fail

PLAN_LABEL = "label"
"""The column annotators fill in a plan's file."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``estimate`` and ``label-plan`` subcommands."""
    est = subparsers.add_parser(
        "estimate", help="human-scale score per system with a confidence interval (PPI++)",
        description="The mean human score of each judge's (and --by group's) items, from the judge's score of "
                    "every item and the human labels of some (prediction-powered inference), with a confidence "
                    "interval; beside it the labels alone and the judge's raw mean.",
    )  # fmt: skip
    est.add_argument("run_dir", type=Path, help="a run directory")
    _human_args(est, required=True)
    est.add_argument("--judge", nargs="+", metavar="NAME", help="the judges to estimate from (default: every judge "
                     "with numeric scores; a cascade's name for its decisions)")
    est.add_argument("--by", metavar="COLUMN", help="a dataset column to estimate per value of (e.g. system)")
    est.add_argument("--items", type=Path, metavar="PATH", help="the run's dataset, if it moved since the run")
    est.add_argument("--alpha", type=float, default=0.05, help="1 - the intervals' coverage (default 0.05)")
    est.add_argument("--method", choices=("ppi++", "ppi", "classical"), default="ppi++",
                     help="ppi++: the judge weighted for power (default); ppi: weight 1; classical: labels alone")
    est.add_argument("--differences", action="store_true",
                     help="every pair's difference and the ranks, with simultaneous (Bonferroni) intervals")
    est.add_argument("--target-width", type=float, metavar="W",
                     help="how many labels an interval of width W (high - low) needs, from the labels so far")
    est.add_argument("--json", action="store_true", help="print the estimate as JSON instead of tables")
    est.set_defaults(handler=handle_estimate)

    plan = subparsers.add_parser(
        "label-plan", help="which items to send to humans: more where the judge is unsure",
        description="Each item's probability of being labelled, growing with the judge's uncertainty (its measured "
                    "confidence, else the spread of its repeats, else uniform) with a uniform floor, and a seeded "
                    "draw. The output lists every item; annotators fill 'label' where selected is true, and "
                    "judge-engine estimate reads the file back as its --human-table.",
    )  # fmt: skip
    plan.add_argument("run_dir", type=Path, help="a run directory")
    size = plan.add_mutually_exclusive_group(required=True)
    size.add_argument("--budget", type=float, metavar="N", help="the expected number of labels")
    size.add_argument("--target-width", type=float, metavar="W",
                      help="instead of a budget: the interval width (high - low) to reach, from a pilot "
                           "--human-table's labels")
    plan.add_argument("--output", type=Path, required=True, metavar="FILE", help="the plan (.csv, .tsv or .jsonl)")
    plan.add_argument("--judge", metavar="NAME", help="the judge whose uncertainty to follow (needed when the run "
                      "has several)")
    plan.add_argument("--by", metavar="COLUMN", help="a dataset column; the budget is split across its values")
    plan.add_argument("--items", type=Path, metavar="PATH", help="the run's dataset, if it moved since the run")
    plan.add_argument("--key", default="id", metavar="ID", help="the item id column written (default id)")
    plan.add_argument("--human-table", type=Path, metavar="FILE", help="with --target-width: the pilot's labels")
    plan.add_argument("--human", metavar="COLUMN", help="the pilot table's label column")
    plan.add_argument("--positive", metavar="VALUE", help="the pilot's labels: 1 where the label is VALUE, else 0")
    plan.add_argument("--alpha", type=float, default=0.05, help="with --target-width: 1 - coverage (default 0.05)")
    plan.add_argument("--floor", type=float, default=0.2,
                      help="the least uniform share of every probability, 0-1 (default 0.2)")
    plan.add_argument("--max-cost", type=float, default=1.05, metavar="FACTOR",
                      help="the most variance the plan may cost, against uniform labelling, if the judge's "
                           "uncertainty says nothing; the uniform share is raised to keep it (default 1.05)")
    plan.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    plan.set_defaults(handler=handle_label_plan)


def _human_args(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--human-table", type=Path, required=required, metavar="FILE",
                        help="human labels: CSV, TSV or JSONL, one row per item (a label-plan file included)")
    parser.add_argument("--key", default="id", metavar="ID", help="the human table's item id column (default id)")
    parser.add_argument("--human", required=required, metavar="COLUMN", help="the human table's label column")
    parser.add_argument("--positive", metavar="VALUE",
                        help="labels that are not numbers (A/B, pass/fail): estimate the share equal to VALUE")


def handle_estimate(args: argparse.Namespace) -> int:
    """Run ``estimate``: 0 with an estimate for every group, 1 when a group has none, 2 on bad input."""
    from judge_engine.trust.estimate_rows import (
        differences_section,
        estimate_run,
        estimate_section,
        human_labels,
        needed_section,
    )

    if not args.run_dir.is_dir():
        return fail("estimate", f"{args.run_dir}: not a run directory")
    human = human_labels(args.human_table, key=args.key, column=args.human, positive=args.positive)
    try:
        result = estimate_run(args.run_dir, human, judges=args.judge, by=args.by, items_path=args.items,
                              alpha=args.alpha, method=args.method, differences=args.differences,
                              target_width=args.target_width)
    except ValueError as exc:  # TableError and CalibrationError included
        return fail("estimate", str(exc))
    if args.json:
        print(json.dumps(_finite(result), indent=2, allow_nan=False))
    else:
        from judge_engine.cli.display import render_sections

        sections = [estimate_section(result)]
        if args.differences:
            sections.append(differences_section(result))
        if args.target_width is not None:
            sections.append(needed_section(result))
        from judge_engine.cli.stats import swapped_labels
        from judge_engine.rundir.store import read_manifest

        labels, notes = swapped_labels(read_manifest(args.run_dir).swapped_models(), [])
        render_sections(sections, notes, labels)
    return EXIT_OK if all(g["estimate"] is not None for g in result["groups"]) else EXIT_FAILED


def _finite(value: Any) -> Any:
    """NaN and infinity as null (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def handle_label_plan(args: argparse.Namespace) -> int:
    """Run ``label-plan``: write the plan, say what was drawn; 2 on bad input."""
    from judge_engine.trust.estimate_rows import human_labels, judged_items, plan_rows
    from judge_engine.trust.label_plan import label_plan

    if not args.run_dir.is_dir():
        return fail("label-plan", f"{args.run_dir}: not a run directory")
    if args.output.suffix.lower() not in (".csv", ".tsv", ".jsonl"):
        return fail("label-plan", f"--output {args.output}: write a .csv, .tsv or .jsonl file")
    if args.target_width is not None and not (args.human_table and args.human):
        return fail("label-plan", "--target-width needs a pilot: --human-table FILE --human COLUMN")
    judged = judged_items(args.run_dir, judges=[args.judge] if args.judge else None, by=args.by, items_path=args.items)
    if len(judged.judges) > 1:
        return fail("label-plan", f"the run has several judges ({', '.join(judged.judges)}): name one with --judge")
    rows = plan_rows(judged)
    if args.human_table is not None:
        if not args.human:
            return fail("label-plan", "--human-table needs --human COLUMN")
        pilot = human_labels(args.human_table, key=args.key, column=args.human, positive=args.positive)
        for row in rows:
            row["label"] = pilot.labels.get(row["item"])
    try:
        plan = label_plan(rows, args.budget, by="group" if args.by else None, target_width=args.target_width,
                          alpha=args.alpha, seed=args.seed, floor=args.floor, max_cost=args.max_cost)
    except ValueError as exc:
        return fail("label-plan", str(exc))
    _write_plan(args.output, plan, key=args.key, by=args.by)
    for note in judged.notes + plan.notes:
        print(f"note: {note}", file=sys.stderr)
    to_label = sum(1 for r in plan if r["selected"] and r.get("label") is None)
    print(f"{args.output}: {len(plan):,} items, {plan.drawn:,} drawn (expected {plan.expected:,.1f}, seed {plan.seed}); "
          f"uncertainty from {plan.source}. Annotators fill '{PLAN_LABEL}' on the {to_label:,} rows with selected "
          f"true; then: judge-engine estimate {args.run_dir} --human-table {args.output} --key {args.key} "
          f"--human {PLAN_LABEL}" + (f" --by {args.by}" if args.by else ""))
    return EXIT_OK


def _write_plan(path: Path, plan: list[dict[str, Any]], *, key: str, by: str | None) -> None:
    """Every item: id, group, probability, drawn or not, and an empty label (the pilot's, if any).
    The judge's prediction is left out: annotators should not see it."""
    columns = [key, *([by] if by else []), "sampling_probability", "selected", "uncertainty", PLAN_LABEL]
    rows = [{key: r["item"], **({by: r["group"]} if by else {}),
             "sampling_probability": float(f"{r['sampling_probability']:.12g}"),
             "selected": r["selected"], "uncertainty": r["uncertainty"], PLAN_LABEL: r.get("label")} for r in plan]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
        return
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, columns, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else str(v).lower() if isinstance(v, bool) else v)
                             for k, v in row.items()})
