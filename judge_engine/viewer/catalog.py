"""The runs a viewer has open, and the one SQLite connection every page is read through.

Each run's ``index.sqlite`` is brought up to date (:func:`judge_engine.rundir.store.open_index`: it
catches up unless another process is writing the run) and attached to one in-memory connection
as ``r0``, ``r1``...; the list, the counts and the item lookups are SQL over those schemas, so
several runs (two judges' runs on one dataset) answer as one. What the viewer derives for itself
(:mod:`judge_engine.viewer.derived`) lives in the run's index, or, for a run another process is
writing when the viewer opens it, or one this user may not write (its index then read-only, or
built in a temporary directory: :meth:`judge_engine.rundir.index.RunIndex.open`), in a temporary file
attached as ``d0``, ``d1``...: a reader never writes into a run that is being written.

Lines are read by offset (outcomes, transcripts), one open handle per file; the message blocks
are read once and again only when ``blocks.jsonl`` grew (a live run adds blocks).

Every method here runs on the viewer's one query thread (:mod:`judge_engine.viewer.server`).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_engine.errors import RunDirError
from judge_engine.rundir.blocks import BLOCKS
from judge_engine.rundir.index import INDEX, RunIndex
from judge_engine.rundir.records import (
    DEMO_NOTE,
    MANIFEST,
    OUTCOMES,
    TRANSCRIPTS,
    JudgeEntry,
    Manifest,
    OutcomeRecord,
)
from judge_engine.rundir.store import (
    LineReader,
    open_index,
    read_blocks,
    read_manifest,
    writer_active,
)
from judge_engine.util.naming import with_model


@dataclass(frozen=True, slots=True)
class Jury:
    """A jury of an open run, as its recorded config has it."""

    jurors: tuple[str, ...]
    aggregate: str
    score_range: tuple[float, float] | None
    """The jurors' range (a jury's score is one of their scores, or their mean or median);
    the span of all of them if their ranges differ; None when one of them has none."""


@dataclass(frozen=True, slots=True)
class Judge:
    """One judge of one open run, under the name the pages show (``label``: the judge's own
    name, with the model it ran when ``--model`` swapped it, ``name (model)``; and the run's id
    after it when two open runs have a judge of that label, ``name (run id)``)."""

    run: int
    name: str
    label: str
    entry: JudgeEntry | None
    """What the manifest records of it (None for a jury, or a judge found only in the index)."""
    jury: Jury | None = None
    """What a jury is made of (None for a judge)."""

    @property
    def score_range(self) -> tuple[float, float] | None:
        if self.jury is not None:
            return self.jury.score_range
        return None if self.entry is None else _range(self.entry)


@dataclass(slots=True)
class OpenRun:
    """One run directory the viewer has open."""

    number: int
    run_dir: Path
    derived_path: Path
    """Where the viewer's own tables go: the run's index, or a temporary file."""
    manifest: Manifest
    index: RunIndex | None = None
    """The run's index, open while the viewer is (a temporary one lives as long)."""
    _manifest_stamp: float = 0.0
    _lines: LineReader | None = None
    _blocks: dict[str, Any] | None = None
    _blocks_size: int = -1

    @property
    def schema(self) -> str:
        """The attached name of the run's index."""
        return f"r{self.number}"

    @property
    def derived_schema(self) -> str:
        """The attached name of the database holding the viewer's own tables for this run."""
        return self.schema if self.derived_path == self.run_dir / INDEX else f"d{self.number}"

    @property
    def in_index(self) -> bool:
        """Whether the viewer's tables live in the run's index (the run was not being written)."""
        return self.derived_schema == self.schema

    @property
    def index_database(self) -> str:
        """What ``ATTACH DATABASE`` takes to read the run's index (a path, or a read-only URI)."""
        return self.index.database if self.index is not None else str(self.run_dir / INDEX)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id or self.run_dir.name

    def current_manifest(self) -> Manifest:
        """``run.json`` as it is now (re-read when it changed: a live run rewrites it)."""
        try:
            stamp = (self.run_dir / MANIFEST).stat().st_mtime
        except FileNotFoundError:
            return self.manifest
        if stamp != self._manifest_stamp:
            try:
                self.manifest = read_manifest(self.run_dir)
                self._manifest_stamp = stamp
            except RunDirError:
                pass  # caught mid-replace: the last one read stands
        return self.manifest

    def live(self) -> bool:
        """Whether a judge-engine process is writing this run now."""
        return writer_active(self.run_dir)

    def read_line(self, name: str, offset: int, length: int) -> dict[str, Any]:
        """The JSON record at ``offset`` of the run's ``name`` file."""
        if self._lines is None:
            self._lines = LineReader(self.run_dir)
        return self._lines.read_line(name, offset, length)

    def outcome(self, offset: int, length: int) -> OutcomeRecord:
        return OutcomeRecord.from_dict(self.read_line(OUTCOMES, offset, length), where=str(self.run_dir / OUTCOMES))

    def transcript_line(self, offset: int, length: int) -> dict[str, Any]:
        return self.read_line(TRANSCRIPTS, offset, length)

    def blocks(self) -> dict[str, Any]:
        """The run's message blocks (read again when ``blocks.jsonl`` grew)."""
        path = self.run_dir / BLOCKS
        size = path.stat().st_size if path.exists() else 0
        if self._blocks is None or size != self._blocks_size:
            self._blocks, self._blocks_size = read_blocks(self.run_dir), size
        return self._blocks

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()
        if self.index is not None:
            self.index.close()
            self.index = None


class Catalog:
    """The open runs, their judges and the query connection.

    Raises (from the constructor):
        RunDirError: a path that is not a run directory, or one given twice.
    """

    def __init__(self, run_dirs: Sequence[Path]) -> None:
        resolved = [Path(p).resolve() for p in run_dirs]
        if len(set(resolved)) != len(resolved):
            raise RunDirError("the same run directory is given twice")
        self._scratch = tempfile.TemporaryDirectory(prefix="judge-engine-view-")
        self.db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None, uri=True)
        self.runs: list[OpenRun] = []
        try:
            for number, run_dir in enumerate(resolved):
                self.runs.append(self._open(number, run_dir))
        except BaseException:
            self.close()
            raise
        self.judges = _judges(self.runs, self.db)

    def _open(self, number: int, run_dir: Path) -> OpenRun:
        manifest = read_manifest(run_dir)
        live = writer_active(run_dir)
        index = open_index(run_dir)  # created or caught up (not for a run being written)
        own = index.in_place and not live
        derived = run_dir / INDEX if own else Path(self._scratch.name) / f"run{number}.sqlite"
        run = OpenRun(number, run_dir, derived, manifest, index=index)
        try:
            self.db.execute(f"ATTACH DATABASE ? AS {run.schema}", (index.database,))
        except BaseException:
            run.close()
            raise
        if not run.in_index:
            self.db.execute(f"ATTACH DATABASE ? AS {run.derived_schema}", (str(derived),))
        run.current_manifest()
        return run

    @property
    def scratch(self) -> Path:
        """A temporary directory of the viewer's own, removed when it closes."""
        return Path(self._scratch.name)

    @property
    def demo(self) -> bool:
        return any(run.manifest.demo for run in self.runs)

    def synthetic(self, numbers: Iterable[int] | None = None) -> str | None:
        """What a page about the runs ``numbers`` (every open run by default) says of its
        answers: nothing when none of them is a demo run; :data:`DEMO_NOTE` when every open run
        is one; else the note naming the demo runs among them, and that the others are not."""
        chosen = sorted(set(range(len(self.runs)) if numbers is None else numbers))
        demo = [self.runs[n].run_id for n in chosen if self.runs[n].manifest.demo]
        if not demo:
            return None
        if all(run.manifest.demo for run in self.runs):
            return DEMO_NOTE
        named = DEMO_NOTE.replace("DEMO RUN:", f"DEMO RUN{'S' if len(demo) > 1 else ''} {', '.join(demo)}:", 1)
        return f"{named} The other open runs are not demo runs."

    def judge(self, label: str) -> Judge | None:
        return next((j for j in self.judges if j.label == label), None)

    def judge_of(self, run: int, name: str) -> Judge:
        found = next((j for j in self.judges if j.run == run and j.name == name), None)
        return found if found is not None else Judge(run, name, name, None)

    def run(self, number: int) -> OpenRun:
        """The open run numbered ``number``.

        Raises:
            RunDirError: no such open run.
        """
        if not 0 <= number < len(self.runs):
            raise RunDirError(f"no open run numbered {number}")
        return self.runs[number]

    def refresh_judges(self) -> None:
        """Look again for judges (a live run's index gains them as tasks are written)."""
        self.judges = _judges(self.runs, self.db)

    def close(self) -> None:
        self.db.close()
        for run in self.runs:
            run.close()
        self._scratch.cleanup()


def _judges(runs: Sequence[OpenRun], db: sqlite3.Connection) -> list[Judge]:
    """Every judge of every run: the manifest's, in its order, then its config's juries, then any
    only the index knows."""
    found: list[tuple[int, str, JudgeEntry | None, Jury | None]] = []
    for run in runs:
        manifest = run.manifest
        found += [(run.number, entry.name, entry, None) for entry in manifest.judges]
        juries = [str(j.get("name")) for j in manifest.config.get("juries") or [] if isinstance(j, dict)]
        found += [(run.number, name, None, _jury(manifest, name)) for name in juries]
        indexed = [name for (name,) in db.execute(f"SELECT DISTINCT judge FROM {run.schema}.tasks ORDER BY judge")]
        known = {name for number, name, _, _ in found if number == run.number}
        found += [(run.number, name, None, None) for name in indexed if name not in known]
    swapped = [run.manifest.swapped_models() for run in runs]
    shown = [with_model(name, swapped[number][name]) if name in swapped[number] else name
             for number, name, _, _ in found]
    counts: dict[str, int] = {}
    for label in shown:
        counts[label] = counts.get(label, 0) + 1
    return [Judge(number, name, label if counts[label] == 1 else f"{label} ({runs[number].run_id})", entry, jury)
            for (number, name, entry, jury), label in zip(found, shown, strict=True)]


def declared_scales(manifest: Manifest) -> dict[str, tuple[float, float]]:
    """Judge or jury -> the scale its scores are on, as the run recorded it (those that have one)."""
    found = {entry.name: scale for entry in manifest.judges if (scale := _range(entry)) is not None}
    for config in manifest.config.get("juries") or []:
        jury = _jury(manifest, str(config.get("name"))) if isinstance(config, dict) else None
        if jury is not None and jury.score_range is not None:
            found[str(config.get("name"))] = jury.score_range
    return found


def _range(entry: JudgeEntry) -> tuple[float, float] | None:
    if not entry.score_range:
        return None
    low, high = entry.score_range
    return (low, high) if high > low else None


def _jury(manifest: Manifest, name: str) -> Jury | None:
    config = manifest.jury(name)
    if config is None:
        return None
    jurors = tuple(str(j) for j in config.get("judges") or [])
    ranges = [_range(entry) if (entry := manifest.judge(juror)) is not None else None for juror in jurors]
    known = [r for r in ranges if r is not None]
    scale = (min(r[0] for r in known), max(r[1] for r in known)) if known and len(known) == len(ranges) else None
    return Jury(jurors, str(config.get("aggregate") or ""), scale)
