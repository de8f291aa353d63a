"""Reading a table of rows: a calibration's rows file, a human table, an estimate's rows (CSV,
TSV or JSONL), each row with where it came from (``FILE: line N``), and the one note for rows
given twice alike."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from judge_engine.errors import CalibrationError


def read_rows(path: Path) -> tuple[list[dict[str, Any]], Callable[[int], str]]:
    """A CSV, TSV or JSONL file's rows (a rows file, a human table), and how to name the i-th
    one in a message (``FILE: line N``).

    Raises:
        CalibrationError: the file cannot be read, or a line is not a row.
    """
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".tsv", ".jsonl"):
        raise CalibrationError(f"{path}: rows are read from .csv, .tsv or .jsonl (got {suffix or 'no suffix'})")
    lines: list[int] = []
    rows: list[dict[str, Any]] = []
    try:
        for line, row in (_jsonl(path) if suffix == ".jsonl" else _csv(path, "\t" if suffix == ".tsv" else ",")):
            lines.append(line)
            rows.append(row)
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise CalibrationError(f"{path}: cannot parse ({exc})") from None
    return rows, lambda i: f"{path}: line {lines[i]}"


def repeated_note(name: str | None, repeats: Sequence[tuple[str, str, str]],
                  what: str = "an item labelled again with the same label") -> list[str]:
    """The note for duplicate rows, harmless (each is counted once) but said, with the first
    one's lines: a human table's (an item labelled again the same), a rows file's (a row equal
    to an earlier one). ``repeats`` holds ``(item, where the repeat is, where the first is)``;
    ``name`` (the file) starts the note; empty: no note."""
    if not repeats:
        return []
    item, again, first = repeats[0]
    count = len(repeats)
    head = f"{name}: " if name else ""
    return [f"{head}{count:,} duplicate row{'s' if count > 1 else ''} ({what}, e.g. {item!r} on "
            f"{again.removeprefix(head)}, first on {first.removeprefix(head)}): each is counted once"]


def _csv(path: Path, delimiter: str) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        if reader.fieldnames is None:
            raise CalibrationError(f"{path}: empty file, expected a header row")
        for row in reader:
            if None in row:  # more cells than the header has
                raise CalibrationError(f"{path}: line {reader.line_num}: more cells than the header's "
                                       f"{len(reader.fieldnames)} columns")
            if any(v is not None and v != "" for v in row.values()):
                yield reader.line_num, row


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CalibrationError(f"{path}: line {number} is not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise CalibrationError(f"{path}: line {number} is not a JSON object")
            yield number, row
