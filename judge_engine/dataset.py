"""Dataset readers (JSONL, CSV, Parquet) and the field mapping that turns rows into protocol items.

Rows are streamed, never loaded whole: a job over millions of items keeps one row in memory per
reader (Parquet: one batch of rows, read through :mod:`judge_engine.parquet`, the ``data``
extra). :func:`scan` makes one validating pass before anything is sent (so a bad line 90,000
fails before money is spent) and fingerprints the file; :func:`iter_items` streams items. Errors
name the file and the line (``items.jsonl:7``; CSV counts the header as line 1) or, for Parquet,
the row (``items.parquet:row 7``, from 1).
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_engine.config import DatasetConfig
from judge_engine.errors import DatasetError
from judge_engine.jsonio import JSONDecodeError, loads
from judge_engine.languages import language_name

LANGUAGE_FIELDS = ("source_lang", "target_lang", "language")
"""Fields whose language codes (``de``, ``zh-Hans``...) become English names (``German``)."""

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass(frozen=True, slots=True)
class DatasetSummary:
    """What one validating pass found."""

    items: int
    fingerprint: str
    """Hash of the file bytes: part of the run id, so an edited dataset starts a new run."""
    variants: tuple[int, ...] = ()
    """Per ``variant_counts`` function given to :func:`scan`, its sum over every item (a
    protocol's sub-tasks: the display's totals come from here, not from another read)."""


def _format(config: DatasetConfig) -> str:
    if config.format != "auto":
        return config.format
    suffix = config.path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix == ".parquet":
        return "parquet"
    raise DatasetError(f"{config.path}: cannot tell the format from the suffix; set dataset.format")


def iter_rows(config: DatasetConfig, *, skip: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, raw row) pairs. Line numbers are 1-based file lines (CSV: the header
    is line 1; Parquet: row numbers, from 1). Blank JSONL lines are skipped. ``skip``: leave
    out the first rows unread (a JSONL line is not even parsed: a resumed run passes its finished
    prefix this way).

    Raises:
        DatasetError: no such file, or a line that cannot be read.
        ConfigError: a Parquet dataset without pyarrow installed (the message says how).
    """
    path = config.path
    if not path.is_file():
        raise DatasetError(f"{path}: dataset file not found")
    match _format(config):
        case "jsonl":
            yield from _jsonl_rows(path, skip)
        case "csv":
            yield from itertools.islice(_csv_rows(path), skip, None)
        case "parquet":
            from judge_engine.parquet import read_rows

            yield from itertools.islice(read_rows(path), skip, None)
        case other:
            raise AssertionError(other)


def location(config: DatasetConfig, number: int) -> str:
    """Where row ``number`` of :func:`iter_rows` is, for an error message: ``file:line`` or,
    for Parquet, ``file:row N``."""
    return f"{config.path}:row {number}" if _format(config) == "parquet" else f"{config.path}:{number}"


def fingerprint(path: Path) -> str:
    """A tagged hash of a file's bytes (``b2:<hex>``), read 1 MB at a time."""
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "b2:" + digest.hexdigest()


def _jsonl_rows(path: Path, skip: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            if skip:
                skip -= 1
                continue
            line = line.rstrip(b"\r\n")  # so a position is within the line, not on "line 2" of it
            try:
                row = loads(line)
            except JSONDecodeError as exc:
                where = getattr(exc, "pos", None)
                at = "" if not isinstance(where, int) else (
                    " at the end of the line (is it cut off?)" if where >= len(line) else f" at character {where + 1}")
                raise DatasetError(f"{path}:{number}: not valid JSON: {getattr(exc, 'msg', exc)}{at}") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{number}: each line must be a JSON object")
            yield number, row


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    with path.open(newline="", encoding="utf-8-sig") as handle:
        # strict: a quote left open at the end of the file is an error, not a value that
        # silently swallows every line after it (the non-strict reader accepts it).
        reader = csv.DictReader(handle, delimiter=delimiter, strict=True)
        try:
            _ = reader.fieldnames  # reads the header: line_num is now the header's last line
        except csv.Error as exc:
            raise DatasetError(f"{path}:1: the header is not valid CSV ({exc})") from None
        last = reader.line_num
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                hint = ": is a closing quote missing?" if "end of data" in str(exc) else ""
                raise DatasetError(f"{path}:{last + 1}: not valid CSV ({exc}){hint}") from None
            first, last = last + 1, reader.line_num  # a quoted value may hold line breaks
            if None in row:
                raise DatasetError(f"{path}:{first}: more values than header columns")
            if last > first and any(value is None for value in row.values()):
                # Fewer values than columns in a row that ran over several lines: a quote opened
                # here and closed only later (or never) swallowed the lines after it.
                raise DatasetError(f"{path}:{first}: a quoted value that runs on to line {last} and leaves this row "
                                   "short of values: is a closing quote missing?")
            yield first, dict(row)


def to_item(
    row: Mapping[str, Any], fields: Mapping[str, str], required: Sequence[str], where: str
) -> dict[str, Any]:
    """Map a raw row to a protocol item: canonical names from ``fields``, other columns as they
    are; language codes to English names; checks that ``id`` and ``required`` are present."""
    item: dict[str, Any] = {k: v for k, v in row.items() if k not in fields.values()}
    for canonical, column in fields.items():
        if column not in row:
            raise DatasetError(f"{where}: column {column!r} (mapped to {canonical!r}) is missing")
        item[canonical] = row[column]
    for name in ("id", *required):
        value = item.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            mapped = f" (column {fields[name]!r})" if name in fields else ""
            raise DatasetError(f"{where}: required field {name!r}{mapped} is missing or empty")
    item["id"] = str(item["id"])
    for name in LANGUAGE_FIELDS:
        if isinstance(item.get(name), str):
            item[name] = language_name(item[name])
    return item


def iter_items(config: DatasetConfig, required: Sequence[str] = (), *, skip: int = 0) -> Iterator[dict[str, Any]]:
    """Stream items (after :func:`to_item`), honouring ``config.limit``; ``skip`` leaves out the
    first items unread (:func:`iter_rows`)."""
    for count, (number, row) in enumerate(iter_rows(config, skip=skip), start=skip + 1):
        if config.limit is not None and count > config.limit:
            return
        yield to_item(row, config.fields, required, location(config, number))


def scan(
    config: DatasetConfig,
    required: Sequence[str] = (),
    checks: Sequence[Callable[[Mapping[str, Any]], list[str]]] = (),
    variant_counts: Sequence[Callable[[Mapping[str, Any]], int]] = (),
) -> DatasetSummary:
    """Validate every row (fields present, ids unique, the protocols' own ``checks``),
    fingerprint the file and sum ``variant_counts`` over the items.

    Raises:
        DatasetError: the first bad row, naming the file and line.
    """
    if not config.path.is_file():
        raise DatasetError(f"{config.path}: dataset file not found")
    seen: dict[bytes, int] = {}
    count = 0
    variants = [0] * len(variant_counts)
    for count, (number, row) in enumerate(iter_rows(config), start=1):
        if config.limit is not None and count > config.limit:
            count -= 1
            break
        where = location(config, number)
        item = to_item(row, config.fields, required, where)
        for check in checks:
            if problems := check(item):
                raise DatasetError(f"{where}: {'; '.join(problems)}")
        # 8-byte digests: a million ids cost ~100 MB as strings but ~50 MB like this.
        key = hashlib.blake2b(item["id"].encode(), digest_size=8).digest()
        if key in seen:
            unit = "row" if _format(config) == "parquet" else "line"
            raise DatasetError(f"{where}: duplicate id {item['id']!r} (first on {unit} {seen[key]})")
        seen[key] = number
        for index, variant_count in enumerate(variant_counts):
            variants[index] += variant_count(item)
    if count == 0:
        raise DatasetError(f"{config.path}: the dataset has no items")
    return DatasetSummary(items=count, fingerprint=fingerprint(config.path), variants=tuple(variants))
