"""The baseline: the same workload through plain ``litellm.acompletion``, ``asyncio.gather`` and an
``asyncio.Semaphore`` (same concurrency, litellm's defaults otherwise). Run as its own process:

    python benchmarks/baseline.py ITEMS.jsonl --protocol gemba-mqm --n 2000 \
        --api-base http://127.0.0.1:PORT/v1 --concurrency 64 --out answers.jsonl

Writes one line per item: ``{"id", "content"}`` for an answer or ``{"id", "error"}`` for an
exception. Judging what came back (strictly readable? right score?) is the harness's job, so its
CPU is not charged to the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workload import KEY, MODEL, Oracle  # noqa: E402


async def main(args: argparse.Namespace) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm  # noqa: TID251 - the baseline is plain litellm on purpose

    oracle = Oracle(args.protocol)
    rows = [json.loads(line) for line, _ in zip(Path(args.items).open(encoding="utf-8"), range(args.n), strict=False)]
    semaphore = asyncio.Semaphore(args.concurrency)

    async def one(row: dict[str, Any]) -> dict[str, Any]:
        async with semaphore:
            try:
                response = await litellm.acompletion(
                    model=MODEL, messages=oracle.messages(row), temperature=0.0,
                    max_tokens=args.max_tokens, api_base=args.api_base, api_key=KEY,
                )
            except Exception as exc:  # noqa: BLE001 - a lost item, whatever the reason
                return {"id": row["id"], "error": type(exc).__name__}
            return {"id": row["id"], "content": response.choices[0].message.content}

    results = await asyncio.gather(*(one(row) for row in rows))
    with open(args.out, "w", encoding="utf-8") as handle:
        for result in results:
            handle.write(json.dumps(result, ensure_ascii=False) + "\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("items")
    parser.add_argument("--protocol", default="gemba-mqm")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
