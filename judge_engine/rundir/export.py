"""``judge-engine export``'s work: a run's table (:mod:`judge_engine.rundir.layout`) written as CSV,
JSONL or Parquet, streaming, with the items of the run's dataset joined in on request.

CSV and JSONL are written here with the standard library and orjson (no extra needed); Parquet
through :mod:`judge_engine.util.parquet` (the ``data`` extra), in row groups. A file appears whole or
not at all (written beside, then renamed). CSV: a header row, null as an empty cell, lists and
objects as JSON text. JSONL: one object per row with every column, null as null.
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal

from judge_engine.errors import DatasetError, RunDirError
from judge_engine.inputs.config import DatasetConfig
from judge_engine.inputs.dataset import fingerprint, iter_items
from judge_engine.rundir.layout import Columns, ItemTable, Row, outcome_batches, wide_batches
from judge_engine.rundir.records import DEMO_NOTE, LOCK, MANIFEST, OUTCOMES, TRANSCRIPTS, Manifest
from judge_engine.rundir.store import read_manifest
from judge_engine.util.jsonio import dumps_line
from judge_engine.util.parquet import ParquetSink, require

if TYPE_CHECKING:
    from judge_engine.inputs.config import DatasetConfig

Format = Literal["csv", "jsonl", "parquet"]


def run_items(run_dir: Path, manifest: Manifest, *, path: Path | None = None,
              notes: list[str] | None = None) -> ItemTable:
    """The items of the dataset a run was made from (``path``: where it is now, if it moved),
    read through :mod:`judge_engine.inputs.dataset` with the run's field mapping.

    Raises:
        DatasetError: the dataset file is gone, or unreadable.
        RunDirError: the manifest records no dataset.
    """
    return ItemTable.read(iter_items(run_dataset(run_dir, manifest, path=path, notes=notes)))


def run_dataset(run_dir: Path, manifest: Manifest, *, path: Path | None = None,
                notes: list[str] | None = None) -> DatasetConfig:
    """Where a run's dataset is now and how its rows map to items (the run's own field mapping):
    where the manifest says, else at the same place relative to the config when the project
    moved, else ``path``. A dataset whose bytes changed since the run is said in ``notes``.

    Raises:
        DatasetError: the dataset file is gone, or this user may not read it.
        RunDirError: the manifest records no dataset.
    """
    recorded = dict(manifest.config.get("dataset") or {})
    if not recorded.get("path"):
        raise RunDirError(f"{run_dir}: run.json records no dataset, so there are no items to join")
    if path is not None and not path.is_file():
        raise DatasetError(f"--items {path}: no such file")
    try:  # a colleague's run: its dataset may be where this user may not read
        found = path or next((p for p in _dataset_places(run_dir, manifest, Path(recorded["path"])) if p.is_file()),
                             None)
        changed = found is not None and manifest.dataset.get("fingerprint") not in (None, fingerprint(found))
    except PermissionError as exc:
        raise DatasetError(f"the run's dataset {exc.filename or recorded['path']} cannot be read (permission "
                           "denied), so its items cannot be joined; give a copy with --items PATH") from None
    if found is None:
        raise DatasetError(f"the run's dataset {recorded['path']} is gone (moved or deleted), so its items cannot "
                           "be joined; give its new place with --items PATH")
    config = DatasetConfig(path=found, format="auto" if path else recorded.get("format") or "auto",
                           fields=recorded.get("fields") or {})
    if changed and notes is not None:
        notes.append(f"{found} changed since the run was made: items are joined by id from the file as it is now")
    return config


def _dataset_places(run_dir: Path, manifest: Manifest, recorded: Path) -> list[Path]:
    """Where the dataset may be: where it was, else at the same place relative to the config
    when the project moved (the config is found from the run directory)."""
    places = [recorded]
    if manifest.config_path and manifest.config_path_from_run and recorded.is_absolute():
        config_dir = (run_dir / manifest.config_path_from_run).parent
        places.append(config_dir / os.path.relpath(recorded, Path(manifest.config_path).parent))
    return places


# --- writing ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Exported:
    """What :func:`export_run` wrote."""

    path: Path | None
    """The file (None: standard output)."""
    rows: int
    columns: int
    notes: list[str]


def export_run(run_dir: Path, output: Path | None, *, fmt: Format, wide: bool = False, with_items: bool = False,
               items_path: Path | None = None) -> Exported:
    """Write a run's table (long, or ``wide``) as CSV, JSONL or Parquet to ``output`` (None:
    standard output, CSV and JSONL only), streaming. The file appears whole or not at all.

    Raises:
        RunDirError: not a run directory, or ``output`` would replace one of its files.
        DatasetError: ``with_items`` and the dataset is gone or unreadable.
        ConfigError: Parquet without pyarrow installed (the message says how to install it).
    """
    if fmt == "parquet":
        require("writing Parquet")
    manifest = read_manifest(run_dir)
    notes = [DEMO_NOTE] if manifest.demo else []
    if output is not None and output.resolve().parent == run_dir.resolve() and output.name in _RUN_FILES:
        raise RunDirError(f"{output}: that is the run's own record; write the export elsewhere")
    items = run_items(run_dir, manifest, path=items_path, notes=notes) if with_items or items_path else None
    columns, batches = (wide_batches if wide else outcome_batches)(run_dir, items=items, notes=notes)
    if manifest.demo and fmt != "parquet":
        # A file outlives the terminal's note, and CSV and JSONL carry no metadata (Parquet's
        # says it): every row says its answers are synthetic.
        columns = [("synthetic", "bool"), *columns]
        batches = ([[True, *row] for row in batch] for batch in batches)
    metadata = {"judge_engine.run_id": manifest.run_id, "judge_engine.layout": "wide" if wide else "long",
                **({"judge_engine.synthetic": DEMO_NOTE} if manifest.demo else {})}
    rows = _write(output, fmt, columns, batches, metadata)
    if items is not None and items.missing:
        notes.append(f"{items.missing} rows name an item that is not in the dataset: their item.* columns are empty")
    return Exported(output, rows, len(columns), notes)


_RUN_FILES = {MANIFEST, OUTCOMES, TRANSCRIPTS, LOCK}


def default_output(run_dir: Path, fmt: Format, *, wide: bool = False) -> Path:
    """``RUN_DIR/export/outcomes.<format>`` (``outcomes-wide.<format>`` for the wide form)."""
    return run_dir / "export" / f"outcomes{'-wide' if wide else ''}.{fmt}"


def _write(output: Path | None, fmt: Format, columns: Columns, batches: Iterable[list[Row]],
           metadata: Mapping[str, str]) -> int:
    """Rows written; to ``output`` through a ``.partial`` file renamed at the end."""
    if output is None:
        if fmt == "parquet":
            raise RunDirError("Parquet is written to a file: give --output PATH")
        return _stream(fmt, columns, batches, sys.stdout.buffer)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    try:
        if fmt == "parquet":
            rows = _parquet(partial, columns, batches, metadata)
        else:
            with partial.open("wb") as handle:
                rows = _stream(fmt, columns, batches, handle)
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    return rows


def _parquet(path: Path, columns: Columns, batches: Iterable[list[Row]], metadata: Mapping[str, str]) -> int:

    rows = 0
    with ParquetSink(path, columns, metadata=metadata) as sink:
        for batch in batches:
            sink.write(batch)
            rows += len(batch)
    return rows


def _stream(fmt: Format, columns: Columns, batches: Iterable[list[Row]], handle: BinaryIO) -> int:
    """CSV (a header row; null as an empty cell) or JSONL (one object per row, every column)."""
    names = [name for name, _ in columns]
    rows = 0
    if fmt == "csv":
        text = io.TextIOWrapper(handle, encoding="utf-8", newline="", write_through=True)
        writer = csv.writer(text)
        writer.writerow(names)
        for batch in batches:
            writer.writerows(batch)
            rows += len(batch)
        text.flush()
        text.detach()  # the handle stays the caller's (standard output is not closed)
        return rows
    for batch in batches:
        for row in batch:  # a line at a time: orjson's bytes objects keep spare room, a batch of them ~60 MB
            handle.write(dumps_line(dict(zip(names, row, strict=True))))
        rows += len(batch)
    return rows
