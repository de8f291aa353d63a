"""Export and load_run at scale: a synthetic run of N GEMBA-MQM outcomes, timed in each format.

The run directory is written directly in the outcome format of ``records.OutcomeRecord`` (no
engine, no server): N tasks of two judges over N/2 items, verdicts of 0-5 MQM errors with
GEMBA-MQM's categories, 5% unscored with a reason code, and 1% of the tasks judged again (a
later line supersedes the first, as ``resume --retry`` leaves them), so the latest-per-task
dedupe does real work. Each measurement is its own child process (``judge-engine export ...`` or
a ``load_run`` call), timed on the wall clock, with its peak RSS from ``os.wait4``; a child
that only imports the same modules gives the baseline RSS the others are read against.

    python benchmarks/export.py --n 100000 [--workdir DIR] [--only csv,parquet,load_run]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judge_engine.rundir.records import OutcomeRecord

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import reap, spawn  # noqa: E402

CATEGORIES = (
    "accuracy/mistranslation", "accuracy/omission", "accuracy/addition", "fluency/grammar", "fluency/punctuation",
    "fluency/spelling", "style/awkward", "terminology/inappropriate for context",
)  # fmt: skip
WEIGHTS = {"critical": 25, "major": 5, "minor": 1}
WORDS = "the lamp had burned low and room smelled of wax she walked to window as if evening might answer".split()

MEASUREMENTS: dict[str, list[str]] = {
    # What a child costs before any row: the modules, and pyarrow's first allocation (~50 MB of
    # its own, whatever the size of the run).
    "baseline": ["-c", "import judge_engine.cli, judge_engine.rundir.export, judge_engine.rundir.frames, pandas, pyarrow; "
                       "pyarrow.array([0])"],
    "csv": ["-m", "judge_engine.cli", "export", "{run}", "--format", "csv", "-o", "{out}/outcomes.csv"],
    "jsonl": ["-m", "judge_engine.cli", "export", "{run}", "--format", "jsonl", "-o", "{out}/outcomes.jsonl"],
    "parquet": ["-m", "judge_engine.cli", "export", "{run}", "--format", "parquet", "-o", "{out}/outcomes.parquet"],
    "parquet --with-items": ["-m", "judge_engine.cli", "export", "{run}", "--format", "parquet", "--with-items",
                             "-o", "{out}/outcomes-items.parquet"],
    "parquet --wide": ["-m", "judge_engine.cli", "export", "{run}", "--format", "parquet", "--wide",
                       "-o", "{out}/outcomes-wide.parquet"],
    "load_run": ["-c", "import sys, judge_engine; frame = judge_engine.load_run(sys.argv[1]); print(frame.shape)",
                 "{run}"],
}
"""What each child runs (after ``python``)."""


def write_run(root: Path, n: int, *, seed: int = 7) -> Path:
    """A run directory of ``n`` tasks (and 1% more lines: the retried tasks' later ones), its
    manifest and the dataset its items come from."""
    from judge_engine.rundir.records import JudgeEntry, Manifest
    from judge_engine.util.jsonio import dumps_line, pretty

    rng = random.Random(seed)
    run = root / "runs" / f"bench-{n}"
    run.mkdir(parents=True)
    items = root / "items.jsonl"
    with items.open("wb") as handle:
        for index in range(n // 2):
            sentence = " ".join(rng.choices(WORDS, k=rng.randint(8, 30)))
            handle.write(dumps_line({"id": f"item-{index:07d}", "src": sentence, "tgt": sentence.upper(),
                                     "src_lang": "en", "tgt_lang": "de"}))
    judges = ["mqm-a", "mqm-b"]
    retries: list[OutcomeRecord] = []
    with (run / "outcomes.jsonl").open("wb") as handle:
        for index in range(n):
            retried = rng.random() < 0.01
            first = _outcome(rng, index, judges[index % 2], unscored=retried or rng.random() < 0.05)
            handle.write(dumps_line(first.to_dict()))
            if retried:
                retries.append(_outcome(rng, index, judges[index % 2], unscored=False))
        for record in retries:  # resume --retry unreadable: these lines supersede the first ones
            handle.write(dumps_line(record.to_dict()))
    fields = {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang"}
    manifest = Manifest(
        run_id=run.name, status="completed", created_at="", updated_at="", package_version="bench", versions={},
        demo=False, config_path="", config_path_from_run="",
        config={"dataset": {"path": str(items), "format": "auto", "fields": fields}}, overrides={},
        dataset={"path": str(items)}, judges=[
            JudgeEntry(name, "openai/gpt-4o-mini", "gemba-mqm", "1", {}, {}, [0.0], 1, [-25.0, 0.0], 1)
            for name in judges],
    )  # fmt: skip
    (run / "run.json").write_text(pretty(manifest.to_dict()), encoding="utf-8")
    return run


def _outcome(rng: random.Random, index: int, judge: str, *, unscored: bool) -> OutcomeRecord:
    from judge_engine.rundir.records import OutcomeRecord

    common = dict(task_id=f"b2:{index:032x}",
                  item_id=f"item-{index // 2:07d}", judge=judge, protocol="gemba-mqm", protocol_version="1",
                  model="openai/gpt-4o-mini", temperature=0.0, repeat=0, variant="", attempts=1 + unscored * 2,
                  reasks=unscored * 2, cost=round(rng.uniform(1e-4, 3e-4), 7), latency_s=round(rng.uniform(0.3, 2), 4),
                  at=f"2026-11-25T09:{index // 60000 % 60:02d}:{index // 1000 % 60:02d}.{index % 1000:03d}+00:00")
    if unscored:
        return OutcomeRecord(**common, status="unscored", reason="unusable answer after 2 re-asks: no 'Critical:', "
                             "'Major:' or 'Minor:' section found", reason_code="unreadable")  # type: ignore[arg-type]
    errors = [{"severity": rng.choices(("critical", "major", "minor"), (1, 4, 10))[0],
               "category": rng.choice(CATEGORIES), "span": " ".join(rng.choices(WORDS, k=rng.randint(1, 4))),
               "span_found": "target"} for _ in range(rng.choice((0, 0, 1, 1, 2, 3, 4, 5)))]
    score = -float(sum(WEIGHTS[e["severity"]] for e in errors))
    return OutcomeRecord(**common, status="scored", score=max(score, -25.0),  # type: ignore[arg-type]
                         verdict={"errors": errors})


def measure(name: str, run: Path, out: Path, logs: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, output bytes) of one child."""
    args = [a.format(run=run, out=out) for a in MEASUREMENTS[name]]
    log = logs / f"{name.replace(' ', '_')}.log"
    process, started = spawn([sys.executable, *args], cwd=out, log=log)
    result = reap(process, started, log)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed (exit {result.returncode}); see {log}:\n{log.read_text()[-2000:]}")
    target = next((Path(a) for a in args if a.startswith(str(out))), None)
    return time.monotonic() - started, result.peak_rss_mb, target.stat().st_size if target else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="tasks (outcome lines before the retries)")
    parser.add_argument("--workdir", type=Path, help="keep the run and the exports here (default: a temporary dir)")
    parser.add_argument("--only", help=f"comma-separated, of: {', '.join(MEASUREMENTS)}")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="export-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    run = write_run(work / f"n{args.n}", args.n)
    size = (run / "outcomes.jsonl").stat().st_size
    print(f"run: {run} ({args.n:,} tasks, {size / 1e6:,.0f} MB of outcomes, written in "
          f"{time.monotonic() - started:.1f} s)")
    names = args.only.split(",") if args.only else list(MEASUREMENTS)
    out = work / f"n{args.n}" / "export"
    out.mkdir(exist_ok=True)
    print(f"{'what':<22} {'seconds':>8} {'peak RSS MB':>12} {'output MB':>10}")
    for name in names:
        wall, rss, written = measure(name, run, out, out)
        print(f"{name:<22} {wall:>8.2f} {rss:>12.0f} {written / 1e6:>10.1f}" if written else
              f"{name:<22} {wall:>8.2f} {rss:>12.0f} {'':>10}")
    if args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
