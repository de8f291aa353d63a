"""``judge-engine plan``: the dry-run estimate (:mod:`judge_engine.running.estimate`) as a table."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from judge_engine.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from judge_engine.cli.display import Terminal
    from judge_engine.inputs.config import JobConfig
    from judge_engine.providers import EndpointCheck


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from judge_engine.cli.run import add_batch_option, add_overrides

    plan = commands.add_parser("plan", help="dry run: tasks, tokens, cost and time; renders every prompt")
    plan.add_argument("config", type=Path, help="the job's config file (YAML)")
    add_overrides(plan)
    add_batch_option(plan)
    plan.add_argument("--latency", type=float, default=2.0, help="assumed seconds per call for the time estimate")
    plan.add_argument("--strict", action="store_true", help="exit 2 when a model or its price is unknown")
    plan.add_argument("--check-endpoints", action="store_true",
                      help="reach every judge's endpoint as a run would (its proxy, its certificates), sending no "
                           "prompt: a GET of its model list; exit 1 when one cannot be reached or verified")
    plan.set_defaults(handler=plan_command)


def plan_command(args: argparse.Namespace) -> int:
    """Prepare the run as ``run`` would (nothing sent, no key needed), then estimate it."""
    from judge_engine.cli.display import (
        escape,
        make_console,
        path_line,
        plan_lines,
        plan_table,
        say,
    )
    from judge_engine.cli.run import override_values
    from judge_engine.providers import insecure_endpoints
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
        say(console, line)
    path_line(console, "run directory", prepared.run_dir)
    for warning in budget_warnings(plans, prepared.config):
        say(console, f"[yellow]budget: {escape(warning)}[/yellow]")
    for line in self_preference_lines(plans, items=prepared.dataset.items):
        say(console, f"[yellow]{escape(line)}[/yellow]")
    for line in jury_lines(prepared.config, prepared.protocols):
        say(console, escape(line))
    for line in item_lines(prepared.config, prepared.protocols):
        say(console, escape(line))
    for line in cascade:
        say(console, escape(line))
    for warning in insecure_endpoints(prepared.config):
        say(console, f"[yellow]warning: {escape(warning)}[/yellow]")
    if args.check_endpoints and not _endpoints_answer(prepared.config, console):
        return EXIT_FAILED
    if args.strict and any(p.warnings for p in plans):
        console.print("plan --strict: exit 2 (see the warnings above)", highlight=False)
        return EXIT_USAGE
    return EXIT_OK


def _endpoints_answer(config: JobConfig, console: Terminal) -> bool:
    """Print what each judge's endpoint said to a GET of its model list; True when every one
    was reached (and, over https, its certificate verified)."""
    import asyncio

    from judge_engine.cli.display import escape
    from judge_engine.providers import check_endpoint, endpoints_to_check

    async def check_all() -> list[EndpointCheck]:
        placed = [(judge, where, endpoint) for judge in config.judges for where, endpoint in endpoints_to_check(judge)]
        return list(await asyncio.gather(*(check_endpoint(judge, where, endpoint) for judge, where, endpoint in placed)))

    checks = asyncio.run(check_all())
    for check in checks:
        mark = "[green]ok[/green]" if check.ok else "[red]failed[/red]"
        console.print(f"endpoint {mark} {escape(check.where)}: {escape(check.said)}", highlight=False)
    return all(check.ok for check in checks)
