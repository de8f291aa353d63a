"""The attack of issue 24, replayed as one command: every family of hostile input and hostile
machine against the engine, and one row per family of what came of it.

    python benchmarks/attack.py [--quick] [--only kills,provider] [--workdir DIR] [--seed 24]

Families (in order): concurrent writers on one run; SIGKILL at random and aimed moments, online
and in batch mode, each followed by a resume; a small disk (a 2 MB tmpfs, else the store's
injected ENOSPC); read-only run directories; mutated configs and datasets (every key of two
configs set to every kind of value, config files and datasets byte by byte, and the cases the
earlier fixes did not name); template injection and render bombs; score-expression injection;
the viewer probed by URL, method, Host header and query, and in headless Chromium; a hostile
provider (a proxy in front of the fake server: ``attack_provider.py``).

Columns: attempts; clear (exit 2 or 5 with a message naming the key, line or path, or a 4xx from
the viewer); tracebacks (a Python traceback in any output, a 500 from the viewer); hangs (no end
within the attempt's bound); lost (tasks with no outcome after the last resume); duplicated (tasks
with more than one outcome line, none of them a ``--retry``); wrong (a score other than the fake's
oracle, a confidence that is no probability, spend below zero, or a run "completed" with work
missing); leaked (a planted secret found in a file, an output or a page); unclear (an exit code the
attack did not expect, or an error naming nothing). Every column but attempts and clear must be 0;
the problems are listed under the table, and the exit code is 1 when there is one.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.attack_common import MUST_BE_ZERO, Attempt, Family, Oracle, table  # noqa: E402


@dataclass
class Context:
    """What every family gets: its own folder, the fake server, the proxy, the oracle."""

    work: Path
    quick: bool
    rng: random.Random
    fake_url: str
    proxy_url: str
    oracle: Oracle
    fake_stats: Callable[[], dict[str, Any]]
    """The fake server's counters (``requests_total``: what reached it)."""

    def folder(self, name: str) -> Path:
        path = self.work / name
        path.mkdir(parents=True, exist_ok=True)
        return path


FAMILIES = {
    "concurrent writers": "attack_machine:writers",
    "kills + resume": "attack_machine:kills",
    "small disk": "attack_machine:small_disk",
    "read-only run dirs": "attack_machine:read_only",
    "mutated configs": "attack_inputs:configs",
    "mutated datasets": "attack_inputs:datasets",
    "hostile side files": "attack_inputs:side_files",
    "template injection": "attack_inputs:templates",
    "score expressions": "attack_inputs:scores",
    "viewer probes": "attack_web:viewer",
    "hostile provider": "attack_web:provider",
}
"""Each row of the table and the function that attacks it (``module:function`` in benchmarks/)."""


def family_function(where: str) -> Callable[[Context, Family], None]:
    import importlib

    module, _, name = where.partition(":")
    return getattr(importlib.import_module(f"benchmarks.{module}"), name)  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller pass of every family (~3-5 min)")
    parser.add_argument("--only", default="", help="comma-separated words of the families to run (kills,disk...)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep everything here (default: a new temp dir)")
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="judge-engine-attack-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)

    from benchmarks.attack_web import ProviderProcess
    from judge_engine.fake import FakeConfig, FakeServerProcess
    from judge_engine.fake.config import FakeBatchConfig

    chosen = {name: family_function(where) for name, where in FAMILIES.items()
              if not args.only or any(word.strip() in name for word in args.only.split(","))}
    fake_config = FakeConfig(latency_s=0.02, batch=FakeBatchConfig(processing_s=0.3))
    started = time.monotonic()
    done: list[Family] = []
    with FakeServerProcess(fake_config) as fake, ProviderProcess(fake.base_url) as proxy:
        context = Context(work, args.quick, random.Random(args.seed), fake.base_url, proxy.url, Oracle(), fake.stats)
        for name, run in chosen.items():
            family = Family(name)
            begun = time.monotonic()
            print(f"-- {name} ...", flush=True)
            try:
                run(context, family)
            except Exception:  # the harness's own failure: shown, and the family marked
                family.add(Attempt("the harness itself", unclear=True, note=traceback.format_exc()[-600:]))
            family.seconds = time.monotonic() - begun
            print(f"   {name}: {len(family.attempts)} attempts in {family.seconds:.0f} s"
                  + (f" ({family.skipped})" if family.skipped else ""), flush=True)
            done.append(family)
    print()
    print(table(done))
    print(f"\n{time.monotonic() - started:.0f} s in all{' (--quick)' if args.quick else ''}")
    for family in done:
        if family.skipped:
            print(f"note: {family.name}: {family.skipped}")
    problems = [(family.name, a) for family in done for a in family.attempts if a.problems()]
    if problems:
        print("\nproblems:")
        for name, attempt in problems:
            print(f"- {name}: {attempt.name}: {', '.join(attempt.problems())}: {attempt.note.strip()[:400]}")
    bad = any(family.row()[column] for family in done for column in MUST_BE_ZERO)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
