"""The ``stats`` command, and the output both trust commands share (``meta`` is in
:mod:`judge_engine.cli.meta`): how far can the judge be trusted?

``stats SOURCE``: consistency across repeats and temperatures, each score and dimension across
repeats, reliability (``--reliability``), score distribution, unscored rate, agreement
between judges and within a panel of 3+ judges on one label for a run directory (or
consistency across repeat columns of any table); for CDAT
and DAT runs also valid responses, novelty and appropriateness, and with ``--baselines`` the
gate, the CDAT score, the elbow distance and the Pareto front
(:mod:`judge_engine.protocols.cdat_report`). Both commands print rich tables and can write JSON,
CSV and PNG plots (:func:`emit`, :func:`write_plots`).

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

from judge_engine.cli import EXIT_USAGE

if TYPE_CHECKING:
    from judge_engine.protocols.cdat_report import GenerationReport
    from judge_engine.stats.plots import Chart
    from judge_engine.stats.runs import Run
    from judge_engine.stats.sections import Section


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``stats`` subcommand to the main CLI's subparsers."""
    _register_stats(subparsers)


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
    stats.add_argument("--dimensions", nargs="+", metavar="NAME",
                       help="sub-scores to follow across repeats (default: TTCT's dimensions, "
                            "literary MQM's aspects)")  # fmt: skip
    stats.add_argument("--reliability", action="store_true",
                       help="repeats as raters: alpha, the six ICC forms, Fleiss' and Randolph's kappa")  # fmt: skip
    interval_args(stats, "for --reliability and the panel's kappas")
    bias = stats.add_argument_group("biases (from the run's items)")
    bias.add_argument("--system-field", default="system", metavar="NAME",
                      help="item field naming the system that produced the judged text (default system)")  # fmt: skip
    bias.add_argument("--family", nargs="+", default=[], metavar="NAME=FAMILY",
                      help="model family of a judge's model or a system the built-in patterns do not "
                           "know, e.g. towerinstruct-7b-v0.2=meta")  # fmt: skip
    bias.add_argument("--length-of", metavar="FIELD[/AGAINST]",
                      help="verbosity for judges whose protocol names no judged text (custom judges, "
                           "juries): the item field judged and the one it is judged against, e.g. "
                           "response/reference")  # fmt: skip
    bias.add_argument("--items", type=Path, metavar="PATH",
                      help="the run's dataset, if it moved since the run")  # fmt: skip
    human = stats.add_argument_group("against human labels")
    human.add_argument("--human-table", type=Path, metavar="FILE",
                       help="human labels (CSV, TSV or JSONL, one row per item): each judge's human-scale estimate "
                            "beside its raw mean (judge-engine estimate), and a cascade's agreement per stage")
    human.add_argument("--key", default="id", metavar="ID", help="the human table's item id column (default id)")
    human.add_argument("--label", "--human", dest="label", metavar="COLUMN", help="the human table's label column")
    human.add_argument("--positive", metavar="VALUE",
                       help="labels that are not numbers (A/B, pass/fail): estimate the share equal to VALUE")
    stats.add_argument("--baselines", nargs="+", type=Path, default=[], metavar="FILE",
                       help="CDAT runs: RANDOM.json [COMMON.json] (judge-engine cdat-baselines, or the "
                            "paper's files) for the gate, CDAT score, elbow distance and Pareto front")  # fmt: skip
    output_args(stats)
    stats.set_defaults(handler=handle_stats)


def interval_args(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--bootstrap", type=int, default=0, metavar="N",
                        help=f"percentile bootstrap intervals over items, N resamples ({what})")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--n-categories", type=int, metavar="K",
                        help="Randolph's k: categories a rater could choose (default: scores seen)")  # fmt: skip


def output_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write all sections as JSON")
    parser.add_argument(
        "--csv", metavar="PATH", help="write all sections as one CSV (a 'section' column)"
    )
    parser.add_argument("--plots", nargs="?", const="", metavar="DIR",
                        help="write PNG charts (default dir for a run: RUN_DIR/plots)")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no tables on stdout")


def fail(command: str, message: str) -> int:
    print(f"judge-engine {command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def handle_stats(args: argparse.Namespace) -> int:
    """Run ``stats``; returns the exit code (2 on bad input)."""
    from judge_engine.stats.report import ReportOptions, run_report, table_report
    from judge_engine.stats.runs import read_run
    from judge_engine.stats.tables import read_table

    source = Path(args.source)
    if not source.exists():
        return fail("stats", f"{source}: no such file or directory")
    from judge_engine.protocols.reports import dimensions, generation_protocols

    options = ReportOptions(
        small=args.small, large=args.large, verdict_field=args.verdict_field,
        reliability=args.reliability, bootstrap=args.bootstrap, seed=args.seed,
        n_categories=args.n_categories, dimensions=dimensions(), only_dimensions=args.dimensions,
        generation=generation_protocols(),
    )  # fmt: skip
    labels: dict[str, str] = {}
    try:
        generation = None
        if source.is_dir():
            run = read_run(source)
            if not run.outcomes:
                return fail("stats", f"{source / 'outcomes.jsonl'}: no outcomes")
            sections = run_report(run, options)
            from judge_engine.protocols.reports import protocol_sections

            sections += protocol_sections(run)
            sections += _panel_sections(run, args)
            sections += _bias_sections(run, args)
            from judge_engine.stats.jury import jury_sections

            sections += jury_sections(run)
            sections += _estimate_sections(run, args)
            sections += _cascade_sections(run, args)
            generation = _generation(run, args.baselines)
            sections += generation.sections if generation else []
            notes = run.notes
            labels, notes = swapped_labels(run.manifest.swapped_models() if run.manifest else {}, notes)
        elif args.baselines:
            return fail("stats", "--baselines applies to a CDAT run directory")
        elif args.repeats:
            table = read_table(source)
            table.require(*args.repeats, *([args.group] if args.group else []))
            sections = table_report(table.rows, args.repeats, options, group=args.group)
            notes = table.notes
        else:
            return fail("stats", f"{source}: not a run directory (give --repeats COL for a table)")
        emit(args, sections, notes, labels)
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
                write_plots("stats", lambda: run_charts(sections, run.outcomes, plot_dir) + extra(plot_dir), nothing)
            else:
                write_plots("stats", list, "the charts are drawn from a run directory")
    except ValueError as exc:  # TableError included
        return fail("stats", str(exc))
    return 0


def _cascade_sections(run: Run, args: argparse.Namespace) -> list[Section]:
    """A cascaded run's stages: shares, agreement with --human-table, cost against the last
    stage alone (its spend read with the transcript written since the last checkpoint)."""
    from judge_engine.stats.cascade import cascade_sections
    from judge_engine.trust.cascade.rows import read_labels, run_spend

    section = run.manifest.cascade if run.manifest is not None else None
    if not section:
        return []
    human = None
    if args.human_table is not None:
        if not args.label:
            raise ValueError("--human-table needs --label COLUMN (and --key ID, default id)")
        human, notes = read_labels(args.human_table, args.key, args.label)
        run.notes.extend(notes)
    assert run.manifest is not None
    spend = {judge: s.cost for judge, s in run_spend(run.path, run.manifest).items()}
    return cascade_sections(run, spend, human=human, fallback_cost=_calibrated_cost(section))


def _estimate_sections(run: Run, args: argparse.Namespace) -> list[Section]:
    """Each judge's human-scale estimate with its interval, beside its raw mean, from
    --human-table (:func:`judge_engine.trust.estimate_rows.estimate_run`)."""
    if args.human_table is None:
        return []
    if not args.label:
        raise ValueError("--human-table needs --label COLUMN (or --human; and --key ID, default id)")
    from judge_engine.errors import CalibrationError
    from judge_engine.stats.sections import Section
    from judge_engine.trust.estimate_rows import estimate_run, estimate_section, human_labels

    try:
        human = human_labels(args.human_table, key=args.key, column=args.label, positive=args.positive)
    except CalibrationError as exc:
        if "is not a number" not in str(exc):
            raise
        return [Section("estimate", "Human-scale estimate per judge", [], [], absent=str(exc))]
    try:
        result = estimate_run(run.path, human)
    except ValueError as exc:  # no judge with numeric scores
        return [Section("estimate", "Human-scale estimate per judge", [], [], absent=str(exc))]
    result["notes"] = [n for n in result["notes"] if n not in run.notes]  # the run's own are said above
    return [estimate_section(result, title="Human-scale estimate per judge")]


def _calibrated_cost(section: dict[str, Any]) -> float | None:
    """The last stage's cost per item in the cascade's thresholds file (its calibration run),
    if it has one."""
    from judge_engine.errors import CalibrationError
    from judge_engine.trust.thresholds import read_thresholds

    try:
        thresholds = read_thresholds(str(section.get("thresholds") or ""))
    except CalibrationError:
        return None
    stages = thresholds.document.get("stages") or []
    cost = stages[-1].get("cost_per_item") if stages and isinstance(stages[-1], dict) else None
    return float(cost) if isinstance(cost, int | float) else None


def _panel_sections(run: Run, args: argparse.Namespace) -> list[Section]:
    """Fleiss' and Randolph's kappa of 3+ judges writing one categorical field (none when no
    judge writes one)."""
    from judge_engine.protocols.reports import categorical_fields
    from judge_engine.stats.panel import panel_section

    section = panel_section(run, categorical_fields(run.manifest), bootstrap=args.bootstrap, seed=args.seed)
    return [section] if section is not None else []


def _bias_sections(run: Run, args: argparse.Namespace) -> list[Section]:
    """Verbosity and self-preference, from the run's items (read from its dataset)."""
    from judge_engine.protocols.reports import length_fields
    from judge_engine.stats.bias import self_preference_section, verbosity_section

    fields = length_fields()
    if args.length_of:
        answer, _, against = args.length_of.partition("/")
        if not answer.strip():
            raise ValueError(f"--length-of {args.length_of!r}: expected FIELD or FIELD/AGAINST")
        own = (answer.strip(), against.strip() or None)
        fields = {**{p: own for p in ("custom", "jury")}, **fields}
    wanted = {args.system_field, *(f for pair in fields.values() for f in pair if f)}
    items, why = _items(run, wanted, args.items)
    overrides = {}
    for spec in args.family:
        name, sep, family = spec.partition("=")
        if not (sep and name and family):
            raise ValueError(f"--family {spec!r}: expected NAME=FAMILY")
        overrides[name.strip().lower()] = family.strip().lower()
    return [
        verbosity_section(run, items, fields, why_no_items=why),
        self_preference_section(run, items, system_field=args.system_field, overrides=overrides,
                                why_no_items=why),
    ]  # fmt: skip


def _items(run: Run, fields: set[str], path: Path | None) -> tuple[dict[str, dict[str, Any]] | None, str]:
    """``(items by id with only ``fields``, "")``, or ``(None, why not)``."""
    from judge_engine.errors import DatasetError, RunDirError
    from judge_engine.rundir.export import run_items
    from judge_engine.util.jsonio import loads

    if run.manifest is None:
        return None, f"{run.path} has no readable run.json naming its dataset"
    try:
        table = run_items(run.path, run.manifest, path=path)
    except (DatasetError, RunDirError) as exc:
        return None, str(exc)
    items = {}
    for item_id, encoded in table.encoded.items():
        item = loads(encoded)
        items[item_id] = {k: item[k] for k in fields if k in item}
    return items, ""


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


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalar
        return _clean(value.item())
    return value


def swapped_labels(models: dict[str, str], notes: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """How the tables show the judges ``--model`` swapped (their name and the model they ran),
    and the notes with the one that names those models whole."""
    from judge_engine.util.naming import swapped_note, with_model

    note = swapped_note(models)
    return ({name: with_model(name, model) for name, model in models.items()},
            [*notes, *([note] if note else [])])


def emit(args: argparse.Namespace, sections: Sequence[Section], notes: Sequence[str],
         labels: dict[str, str] | None = None) -> None:
    """Print the sections (``labels``: judges shown with their model, see :func:`swapped_labels`;
    the JSON and CSV keep the names as the run records them) and write the files asked for."""
    if not args.quiet:
        from judge_engine.cli.display import render_sections

        render_sections(sections, notes, labels)
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


def write_plots(command: str, charts: Callable[[], list[Chart]], nothing: str) -> None:
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
