"""``judge-engine protocols`` and ``schemas``: what the judging protocols are and what they answer.

``protocols --check CONFIG`` validates every judge's protocol options (a custom judge's
template, fields, score and reading included) and the config's juries, then renders the first
item's prompt for each judge and prints it, with the JSON schema sent in JSON mode: what a judge
will be asked, before anything is sent. Exit 2 on a problem, naming the key.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from judge_engine.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from judge_engine.cli.display import Terminal as Console
    from judge_engine.inputs.config import JobConfig, JudgeConfig
    from judge_engine.protocols import Protocol


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    protocols = commands.add_parser("protocols", help="list judging protocols, or --check a config's judges")
    protocols.add_argument("--check", metavar="CONFIG", type=Path,
                           help="validate every judge's protocol options and the juries in CONFIG, and print the "
                                "first item's prompt for each judge (exit 2 on a problem)")
    protocols.set_defaults(handler=protocols_command)

    schemas = commands.add_parser("schemas", help="write the protocols' JSON Schemas (or --check them)")
    schemas.add_argument("--dir", type=Path, default=Path("schemas"), help="the folder of the schema files")
    schemas.add_argument("--check", action="store_true", help="exit 1 if the files differ from the models")
    schemas.set_defaults(handler=schemas_command)


def protocols_command(args: argparse.Namespace) -> int:
    from judge_engine.cli.display import Column, print_table
    from judge_engine.protocols import available, get_protocol

    if args.check is not None:
        return check_command(args.check)
    rows = []
    for name in available():
        cls = get_protocol(name)
        if cls.output_per_config:
            rows.append([name, cls.version, "declared in the config (fields)", "from the config (score)",
                         "the template's variables", cls.description])
            continue
        low_high = cls().score_range()
        score_range = f"{low_high[0]:g} .. {low_high[1]:g}" if low_high else "not fixed (rubric, sentences or per candidate)"
        rows.append([name, cls.version, ", ".join(cls.output_model.model_fields), score_range,
                     ", ".join(cls.required_fields), cls.description])
    # Names and versions are never broken; the lists and the description wrap between words.
    columns = [Column("name", key=True), Column("version"), Column("output fields", wrap=True),
               Column("score range", wrap=True), Column("item fields", wrap=True), Column("description", wrap=True)]
    print_table("judging protocols", columns, rows)
    return EXIT_OK


def schemas_command(args: argparse.Namespace) -> int:
    from judge_engine.protocols.schemas import check_schemas, write_schemas

    if args.check:
        stale = check_schemas(args.dir)
        for name in stale:
            print(f"stale or missing schema: {args.dir / name}", file=sys.stderr)
        return EXIT_FAILED if stale else EXIT_OK
    for path in write_schemas(args.dir):
        print(path)
    return EXIT_OK


def check_command(config_path: Path) -> int:
    """``protocols --check CONFIG``: every judge's options, the juries and the cascade checked, and the first
    item's prompt per judge printed. Returns 2 on a problem (each named on stderr)."""
    from judge_engine.cli.display import make_console, path_line, say
    from judge_engine.errors import ConfigError, DatasetError, TemplateError
    from judge_engine.inputs.config import load_config
    from judge_engine.inputs.dataset import check_first_row
    from judge_engine.planning.plan import build_protocol, field_readers, with_protocol_defaults
    from judge_engine.trust.cascade.report import plan_lines
    from judge_engine.trust.cascade.stages import cascade_plan, check_stages
    from judge_engine.trust.jury import check_juries, jury_lines

    config = load_config(config_path)
    protocols: dict[str, Protocol] = {}
    problems: list[str] = []
    for judge in config.judges:
        try:
            protocols[judge.name] = build_protocol(judge)
        except ConfigError as exc:
            problems.append(str(exc))
    cascade = None
    if not problems:
        try:
            check_juries(config, protocols)
            with_defaults = with_protocol_defaults(config, protocols)  # pairwise-annotators reads log-probs
            check_stages(with_defaults, protocols)
            cascade = cascade_plan(with_defaults, protocols)
        except ConfigError as exc:
            problems.append(str(exc))
    if not problems:
        try:  # a template's typo, said once by its line rather than as each judge's missing field
            check_first_row(config.dataset, sorted({f for p in protocols.values() for f in p.required_fields}),
                            field_readers(config, protocols))
        except ConfigError as exc:
            problems.append(str(exc))
        except DatasetError:
            pass  # a first row that cannot be read: each judge's check below names it
    console = make_console()
    for judge in config.judges if not problems else []:
        try:
            _show_first_prompt(console, config, judge, protocols[judge.name])
        except (ConfigError, DatasetError, TemplateError) as exc:
            problems.append(f"judges[{judge.name}]: {exc}")
    for problem in problems:
        print(f"judge-engine protocols --check: {problem}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    for line in jury_lines(config, protocols):
        say(console, _escaped(line))
    for line in plan_lines(cascade, None) if cascade is not None else []:
        say(console, _escaped(line))
    path_line(console, f"{len(config.judges)} judges checked, first item rendered for each", config_path)
    return EXIT_OK


def _show_first_prompt(console: Console, config: JobConfig, judge: JudgeConfig, protocol: Protocol) -> None:
    from judge_engine.cli.display import panel, rule, say
    from judge_engine.errors import DatasetError
    from judge_engine.inputs.dataset import iter_items
    from judge_engine.util.jsonio import pretty

    item = next(iter_items(config.dataset, protocol.required_fields))
    if problems := protocol.check_item(item):
        raise DatasetError(f"item {item['id']}: {'; '.join(problems)}")
    variants = protocol.variants(item)
    bounds = protocol.score_range()
    rule(console, f"{judge.name} · {judge.model} · {protocol.name} · output {protocol.options.output}")
    say(console, _escaped(f"verdict fields: {', '.join(protocol.output_model.model_fields)}; score range: "
                          + (f"{bounds[0]:g}..{bounds[1]:g}" if bounds else "not fixed")
                          + f"; item fields: {', '.join(protocol.required_fields) or 'none'}; "
                          + f"{len(variants)} variant(s) per item"))
    for message in protocol.render(item, variants[0]):
        panel(console, message["content"], title=f"item {item['id']}{f' [{variants[0]}]' if variants[0] else ''} · "
                                                 f"{message['role']}", marked=True)  # the template's own lines
    response_format = protocol.response_format()
    if response_format is not None:
        panel(console, pretty(response_format["json_schema"]["schema"]), title="JSON schema sent", style="cyan")


def _escaped(text: str) -> str:
    from judge_engine.cli.display import escape

    return escape(text)
