"""``judge-engine plan``: the dry-run estimate (:mod:`judge_engine.running.estimate`) as a table."""

from __future__ import annotations

import argparse
from pathlib import Path

from judge_engine.cli import EXIT_OK, EXIT_USAGE


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from judge_engine.cli.run import add_batch_option, add_overrides

    plan = commands.add_parser("plan", help="dry run: tasks, tokens, cost and time; renders every prompt")
    plan.add_argument("config", type=Path, help="the job's config file (YAML)")
    add_overrides(plan)
    add_batch_option(plan)
    plan.add_argument("--latency", type=float, default=2.0, help="assumed seconds per call for the time estimate")
    plan.add_argument("--strict", action="store_true", help="exit 2 when a model or its price is unknown")
    plan.set_defaults(handler=plan_command)


def plan_command(args: argparse.Namespace) -> int:
    """Prepare the run as ``run`` would (nothing sent, no key needed), then estimate it."""
    from judge_engine.cli.display import escape, make_console, path_line, plan_lines, plan_table
    from judge_engine.cli.run import override_values
    from judge_engine.running.estimate import (
        budget_warnings,
        expected_plans,
        plan_rows,
        self_preference_lines,
        stage_costs,
    )
    from judge_engine.running.session import prepare
    from judge_engine.trust.decisions import item_lines
    from judge_engine.trust.jury import jury_lines

    prepared = prepare(args.config, overrides=override_values(args), check_keys=False)
    plans = plan_rows(prepared, latency_s=args.latency)
    cascade: list[str] = []
    if prepared.cascade is not None:  # each stage asked about its calibrated share of the items
        from judge_engine.trust.cascade.report import plan_lines as cascade_lines

        cascade = cascade_lines(prepared.cascade, stage_costs(prepared.cascade, plans))
        plans = expected_plans(prepared.cascade, plans)
    console = make_console()
    console.print(plan_table(plans))
    for line in plan_lines(plans, items=prepared.dataset.items):
        console.print(line, highlight=False)
    path_line(console, "run directory", prepared.run_dir)
    for warning in budget_warnings(plans, prepared.config):
        console.print(f"[yellow]budget: {escape(warning)}[/yellow]", highlight=False)
    for line in self_preference_lines(plans, items=prepared.dataset.items):
        console.print(f"[yellow]{escape(line)}[/yellow]", highlight=False)
    for line in jury_lines(prepared.config, prepared.protocols):
        console.print(escape(line), highlight=False)
    for line in item_lines(prepared.config, prepared.protocols):
        console.print(escape(line), highlight=False)
    for line in cascade:
        console.print(escape(line), highlight=False)
    if args.strict and any(p.warnings for p in plans):
        console.print("plan --strict: exit 2 (see the warnings above)", highlight=False)
        return EXIT_USAGE
    return EXIT_OK
