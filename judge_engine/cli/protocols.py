"""``judge-engine protocols`` and ``schemas``: what the judging protocols are and what they answer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from judge_engine.cli import EXIT_FAILED, EXIT_OK


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    protocols = commands.add_parser("protocols", help="list judging protocols")
    protocols.set_defaults(handler=protocols_command)

    schemas = commands.add_parser("schemas", help="write the protocols' JSON Schemas (or --check them)")
    schemas.add_argument("--dir", type=Path, default=Path("schemas"))
    schemas.add_argument("--check", action="store_true", help="exit 1 if the files differ from the models")
    schemas.set_defaults(handler=schemas_command)


def protocols_command(args: argparse.Namespace) -> int:
    from judge_engine.cli.display import print_table
    from judge_engine.protocols import available, get_protocol

    rows = []
    for name in available():
        cls = get_protocol(name)
        low_high = cls().score_range()
        score_range = f"{low_high[0]:g} .. {low_high[1]:g}" if low_high else "not fixed (rubric, sentences or per candidate)"
        rows.append([name, cls.version, ", ".join(cls.output_model.model_fields), score_range,
                     ", ".join(cls.required_fields), cls.description])
    print_table("judging protocols", ["name", "version", "output fields", "score range", "item fields", "description"],
                rows)
    return EXIT_OK


def schemas_command(args: argparse.Namespace) -> int:
    from judge_engine.schemas import check_schemas, write_schemas

    if args.check:
        stale = check_schemas(args.dir)
        for name in stale:
            print(f"stale or missing schema: {args.dir / name}", file=sys.stderr)
        return EXIT_FAILED if stale else EXIT_OK
    for path in write_schemas(args.dir):
        print(path)
    return EXIT_OK
