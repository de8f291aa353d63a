"""Plain tables: read CSV/TSV/JSON/JSONL into rows of dicts, pick columns, join on keys.

Everything raises :class:`TableError` (a ``ValueError``) with a message naming the file and
column, so a command line can print it as is.
"""

from __future__ import annotations

import ast
import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judge_engine.errors import TableError as TableError  # raised here; stats re-exports it
from judge_engine.stats._arrays import FloatArray


@dataclass
class Table:
    """Rows of one table, with its column order and notes about how it was read."""

    name: str
    """Where it came from (a path), used in messages."""
    columns: list[str]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    """Things a user should know, e.g. a renamed duplicate column or a skipped torn line."""

    def require(self, *columns: str) -> None:
        """Raise :class:`TableError` naming the first column this table lacks."""
        for c in columns:
            if c not in self.columns:
                raise TableError(
                    f"{self.name}: no column {c!r} (columns: {', '.join(self.columns)})"
                )

    def values(self, column: str) -> list[Any]:
        """The raw values of one column."""
        self.require(column)
        return [row.get(column) for row in self.rows]

    def floats(self, column: str) -> FloatArray:
        """One column as floats; empty cells, None and "nan" become NaN."""
        out = np.empty(len(self.rows))
        for i, v in enumerate(self.values(column)):
            out[i] = to_float(v, where=f"{self.name}: column {column!r}, row {i + 1}")
        return out


def to_float(value: Any, *, where: str = "value") -> float:
    """A cell as a float (None, "", "nan", "NA" -> NaN); :class:`TableError` otherwise."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "nan", "na")):
        return math.nan
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TableError(f"{where}: {value!r} is not a number") from None


def _dedupe(header: Sequence[str]) -> tuple[list[str], list[str]]:
    """Rename repeated column names pandas-style (``x``, ``x.1``, ...)."""
    seen: dict[str, int] = {}
    out, notes = [], []
    for name in header:
        if name in seen:
            seen[name] += 1
            new = f"{name}.{seen[name]}"
            notes.append(f"column {name!r} appears more than once; the repeat is {new!r}")
            out.append(new)
        else:
            seen[name] = 0
            out.append(name)
    return out, notes


def _read_csv(path: Path, delimiter: str) -> Table:
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        header = next(reader, None)
        if header is None:
            raise TableError(f"{path}: empty file, expected a header row")
        columns, notes = _dedupe(header)
        rows = [dict(zip(columns, r, strict=False)) for r in reader if r]
    return Table(str(path), columns, rows, notes)


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Objects from a JSON-lines file; an unparseable *last* line (torn write) is skipped."""
    lines = path.read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    rows, notes = [], []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:
                notes.append(f"{path}: skipped a torn last line")
                break
            raise TableError(f"{path}: line {i + 1} is not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise TableError(f"{path}: line {i + 1} is not a JSON object")
        rows.append(obj)
    return rows, notes


def _from_records(name: str, records: list[dict[str, Any]], notes: list[str]) -> Table:
    columns: dict[str, None] = {}
    for r in records:
        columns.update(dict.fromkeys(r))
    return Table(name, list(columns), records, notes)


def read_table(path: str | Path) -> Table:
    """Read ``.csv``, ``.tsv``, ``.jsonl`` or ``.json`` (a list of objects) into a :class:`Table`.

    CSV cells stay strings (convert with :meth:`Table.floats`); JSON values keep their types.
    """
    p = Path(path)
    try:
        suffix = p.suffix.lower()
        if suffix in (".csv", ".tsv"):
            return _read_csv(p, "\t" if suffix == ".tsv" else ",")
        if suffix == ".jsonl":
            return _from_records(str(p), *read_jsonl(p))
        if suffix == ".json":
            data = json.loads(p.read_text(encoding="utf-8"))
            if not (isinstance(data, list) and all(isinstance(r, dict) for r in data)):
                raise TableError(f"{p}: expected a JSON list of objects")
            return _from_records(str(p), data, [])
    except OSError as exc:
        raise TableError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError, csv.Error) as exc:
        raise TableError(f"{p}: cannot parse ({exc})") from None
    raise TableError(f"{p}: unknown table format (use .csv, .tsv, .jsonl or .json)")


def parse_list(value: Any) -> list[Any]:
    """A cell holding a list: a real list, a JSON list, a Python-literal list, or one scalar."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text[0] in "[(":
            for parse in (json.loads, ast.literal_eval):
                try:
                    parsed = parse(text)
                except (ValueError, SyntaxError):
                    continue
                if isinstance(parsed, list | tuple):
                    return list(parsed)
    return [value]


def join(left: Table, right: Table, *, left_key: Sequence[str], right_key: Sequence[str]) -> Table:
    """Inner join on key columns; right-hand columns that clash get a ``.right`` suffix.

    Raises:
        TableError: a missing key column, duplicate keys in ``right``, or no matching rows.
    """
    left.require(*left_key)
    right.require(*right_key)
    index: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in right.rows:
        key = tuple(str(row.get(k)) for k in right_key)
        if key in index:
            raise TableError(f"{right.name}: key {', '.join(right_key)} = {key} is not unique")
        index[key] = row
    rename = {c: (f"{c}.right" if c in left.columns else c) for c in right.columns}
    rows = []
    for row in left.rows:
        match = index.get(tuple(str(row.get(k)) for k in left_key))
        if match is not None:
            rows.append({**row, **{rename[c]: v for c, v in match.items()}})
    if not rows:
        raise TableError(
            f"no rows of {left.name} ({', '.join(left_key)}) match {right.name} "
            f"({', '.join(right_key)})"
        )
    columns = left.columns + [rename[c] for c in right.columns]
    return Table(f"{left.name} + {right.name}", columns, rows, left.notes + right.notes)
