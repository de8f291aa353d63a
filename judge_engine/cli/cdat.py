"""``judge-engine cdat-baselines``: the reference points of a CDAT run, written as the files
``judge-engine stats RUN_DIR --baselines RANDOM.json [COMMON.json]`` reads.

* ``--cues FILE --seed N``: the **Random** baseline, ``--size`` (10) random WordNet nouns per cue,
  reproducible from the seed (:func:`~judge_engine.protocols.cdat_baselines.random_baseline`).
* ``--from-run RUN_DIR``: the lists of a CDAT run, one judge at one temperature, as a baseline:
  the **Common** baseline is a run of ``protocol_options: {prompt: common}`` at temperature 0
  (the paper used gpt-4.1-nano). The cues come from the run's dataset.

Either way the lists are checked and scored as a run scores a model's answer (the packaged
lexicon, all-MiniLM-L6-v2), so the ``embeddings`` extra is needed; without it the command says
how to install it and exits 2 before drawing anything. The file's format is the paper's
(:mod:`judge_engine.protocols.cdat_baselines`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from judge_engine.cli import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from judge_engine.protocols.cdat_baselines import BaselineList, WordList

MINIMUM_SIZE = 7
"""Nouns a list needs to be scored (``word_lists.MINIMUM_VALID``, not imported here so that
``--help`` stays light)."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    baselines = commands.add_parser(
        "cdat-baselines", help="write CDAT's Random baseline for a cue list (or a run's lists) for stats --baselines",
        description="Write a CDAT baseline file (the paper's random_results550.json format), scored with "
                    "all-MiniLM-L6-v2: the Random baseline for a cue list, or the lists of a run "
                    "(e.g. the Common prompt at temperature 0).",
    )
    source = baselines.add_mutually_exclusive_group(required=True)
    source.add_argument("--cues", type=Path, metavar="FILE",
                        help="the cues: one per line, or a .jsonl/.csv dataset with a 'cue' column")
    source.add_argument("--from-run", type=Path, metavar="RUN_DIR",
                        help="a CDAT run of one judge at one temperature (e.g. protocol_options: {prompt: common})")
    baselines.add_argument("--seed", type=int, metavar="N", help="with --cues: the seed of the random draw (required)")
    baselines.add_argument("--size", type=int, default=10, metavar="K", help="with --cues: nouns per list (default 10)")
    baselines.add_argument("--output", type=Path, required=True, metavar="FILE", help="the baseline file to write (JSON)")
    baselines.set_defaults(handler=cdat_baselines_command)


def _fail(message: str) -> int:
    print(f"judge-engine cdat-baselines: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def cdat_baselines_command(args: argparse.Namespace) -> int:
    """Read the input, draw or take the lists, score them, write the file; 2 on bad input or a
    missing extra (the input is checked first, so its problems are named either way)."""
    if args.cues is not None:
        if args.seed is None:
            return _fail("--cues needs --seed N (the draw is reproducible from it)")
        if args.size < MINIMUM_SIZE:
            return _fail(f"--size {args.size}: a list needs at least {MINIMUM_SIZE} nouns to be scored")
        cues = read_cues(args.cues)
    else:
        label, lists, origin = run_lists(args.from_run)
    from judge_engine.protocols.embeddings import install_advice, minilm_missing

    missing = minilm_missing()
    if missing:
        return _fail(f"the baseline is scored with all-MiniLM-L6-v2, which needs {', '.join(missing)}: "
                     f"{install_advice(missing)}")
    if args.cues is not None:
        from judge_engine.protocols.cdat_baselines import random_baseline
        from judge_engine.protocols.lexicon import default_lexicon

        label, lists = "Random", random_baseline(cues, seed=args.seed, lexicon=default_lexicon(), size=args.size)
        origin = f"{len(cues)} cues from {args.cues}, {args.size} random WordNet nouns each (seed {args.seed})"
    written = _score_and_write(label, lists, args.output)
    _report(label, origin, written, args.output, run_dir=args.from_run)
    return EXIT_OK


def read_cues(path: Path) -> list[str]:
    """The cues of a text file (one per line; blank lines skipped) or of a dataset's ``cue``
    column (``.jsonl``, ``.csv``, ``.tsv``).

    Raises:
        DatasetError: the file is missing, unreadable, lacks the column, or holds no cue.
    """
    from judge_engine.errors import DatasetError

    if not path.is_file():
        raise DatasetError(f"{path}: cue file not found")
    if path.suffix.lower() in (".jsonl", ".ndjson", ".csv", ".tsv"):
        from judge_engine.inputs.config import DatasetConfig
        from judge_engine.inputs.dataset import iter_rows

        cues = []
        for number, row in iter_rows(DatasetConfig(path=path)):
            cue = row.get("cue")
            if not isinstance(cue, str) or not cue.strip():
                raise DatasetError(f"{path}:{number}: no 'cue' (a non-empty string)")
            cues.append(cue.strip())
    else:
        try:
            cues = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}: not UTF-8 text ({exc.reason})") from None
    if not cues:
        raise DatasetError(f"{path}: no cues (one per line, or a 'cue' column)")
    return cues


def run_lists(run_dir: Path) -> tuple[str, list[WordList], str]:
    """(label, lists, which lists they are) of a CDAT run of one judge at one temperature; the
    label is ``Common`` when the judge used the Common prompt, else the judge's name (with
    ``(demo)`` for a demo run: its answers are the fake server's).

    Raises:
        RunDirError: not a run directory, or its config (for the cues) is gone.
        DatasetError: the run is not one judge's CDAT lists at one temperature.
    """
    from judge_engine.errors import DatasetError
    from judge_engine.inputs.config import load_config
    from judge_engine.inputs.dataset import iter_items
    from judge_engine.protocols.cdat_baselines import WordList
    from judge_engine.rundir.store import latest_outcome_records, read_manifest
    from judge_engine.running.session import recorded_config_path

    manifest = read_manifest(run_dir)
    outcomes = [o for o in latest_outcome_records(run_dir).values() if o.protocol == "cdat"]
    groups = sorted({(o.judge, o.temperature) for o in outcomes})
    if len(groups) != 1:
        found = ", ".join(f"{judge} T={temperature:g}" for judge, temperature in groups) or "none"
        raise DatasetError(f"{run_dir}: a baseline is the CDAT lists of one judge at one temperature "
                           f"(this run has: {found})")
    config = load_config(recorded_config_path(run_dir, manifest))
    cues = {item["id"]: str(item["cue"]) for item in iter_items(config.dataset, ("cue",))}
    order = {item_id: index for index, item_id in enumerate(cues)}  # the dataset's, not the finishing order
    lists = [WordList(cues[o.item_id], tuple(o.verdict["words"]))
             for o in sorted(outcomes, key=lambda o: (order.get(o.item_id, len(order)), o.repeat))
             if o.item_id in cues and o.verdict is not None and "words" in o.verdict]
    judge = next(j for j in config.judges if j.name == groups[0][0])
    label = "Common" if judge.protocol_options.get("prompt") == "common" else judge.name
    label += " (demo)" if manifest.demo else ""
    left = len(outcomes) - len(lists)
    origin = (f"{len(lists)} lists of {judge.name} ({judge.model}, T={groups[0][1]:g})"
              + (f"; {left} tasks without an answer left out" if left else ""))
    return label, lists, origin


def _score_and_write(label: str, lists: Sequence[WordList], output: Path) -> list[BaselineList]:
    from judge_engine.protocols.cdat_baselines import BaselineList, score_lists, write_baseline
    from judge_engine.protocols.embeddings import get_embedder
    from judge_engine.protocols.lexicon import default_lexicon

    scored = score_lists(lists, lexicon=default_lexicon(), embedder=get_embedder("minilm"))
    written = [BaselineList.of(label, s) for s in scored]
    write_baseline(output, written)
    return written


def _report(label: str, origin: str, lists: Sequence[BaselineList], output: Path, *,
            run_dir: Path | None = None) -> None:
    from judge_engine.cli.display import make_console, path_line
    from judge_engine.stats.creativity import mean_ci

    points = [p for bl in lists if (p := bl.point) is not None]
    print(f"{label} baseline: {origin}")
    if run_dir is not None:  # whole, on a line of its own
        path_line(make_console(), "from run directory", run_dir)
    if points:
        app, nov = mean_ci([p[0] for p in points]), mean_ci([p[1] for p in points])
        print(f"{len(points)} of {len(lists)} lists scored (7+ valid nouns): appropriateness {app.mean:.2f} "
              f"[{app.low:.2f}, {app.high:.2f}], novelty {nov.mean:.2f} [{nov.low:.2f}, {nov.high:.2f}] "
              "(mean, 95% CI)")
    else:
        print(f"none of the {len(lists)} lists has 7 valid nouns: nothing scored")
    print(f"wrote {output}")
