"""Dataset readers (JSONL, CSV, Parquet) and the field mapping that turns rows into protocol items.

Rows are streamed, never loaded whole: a job over millions of items keeps one row in memory per
reader (Parquet: one batch of rows, read through :mod:`judge_engine.util.parquet`, the ``data``
extra). :func:`scan` makes one validating pass before anything is sent (so a bad line 90,000
fails before money is spent) and fingerprints the file; :func:`iter_items` streams items. Errors
name the file and the line (``items.jsonl:7``; CSV counts the header as line 1) or, for Parquet,
the row (``items.parquet:row 7``, from 1). The scan reports every bad row it finds in one error
(the first :data:`MAX_SHOWN`, then how many more), so one run shows what to fix.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import itertools
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from judge_engine.errors import ConfigError, DatasetError
from judge_engine.inputs.config import DatasetConfig
from judge_engine.util.jsonio import JSONDecodeError, loads
from judge_engine.util.languages import language_name
from judge_engine.util.naming import did_you_mean, nearest
from judge_engine.util.parquet import read_rows

MAX_DEPTH = 64
"""How deeply an item's values may nest (its task id hashes them as JSON, which stops at 255)."""
MAX_SHOWN = 20
"""Bad rows one scan names (it counts the rest)."""
MAX_NAMES = 1000
"""Column names a scan keeps (the first seen), to suggest one for a name no row has."""
LANGUAGE_FIELDS = ("source_lang", "target_lang", "language")
"""Fields whose language codes (``de``, ``zh-Hans``...) become English names (``German``)."""

_SPACED_KEY = re.compile(rb'"[ \t]+:')
"""A key spaced from its colon (the fast check for keys given twice counts ``":``)."""

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


class Reader(NamedTuple):
    """What reads an item field, for a message about a field no row has."""

    what: str
    """In the config's words: ``judges[mine].protocol_options.template, line 3, reads the
    variable 'mesage'``, ``judges[mqm]: protocol gemba-mqm reads the item field 'source'``."""
    fixed: bool = False
    """The name is the protocol's own (not the config's to change): the fix is a column mapped
    to it in ``dataset.fields``, so the nearest unmapped column is offered as that mapping."""


Report = Callable[[int, str], None]
"""Where a reader puts a bad row's problem (its line or row number, what is wrong) and reads on."""


def iter_rows(config: DatasetConfig, *, skip: int = 0, strict: bool = False,
              report: Report | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, raw row) pairs. Line numbers are 1-based file lines (CSV: the header
    is line 1; Parquet: row numbers, from 1). Blank JSONL lines are skipped. ``skip``: leave
    out the first rows unread (a JSONL line is not even parsed: a resumed run passes its finished
    prefix this way). ``strict`` (the validating :func:`scan`): a row nested past
    :data:`MAX_DEPTH`, or a JSONL line with a key given twice, is an error too (a CSV header's or
    Parquet schema's repeated name always is). ``report``: a row that cannot be read goes there
    and is left out, instead of raising (a CSV that is no longer CSV ends the reading after it).

    Raises:
        DatasetError: no such file, or a line that cannot be read (without ``report``).
        ConfigError: a Parquet dataset without pyarrow installed (the message says how).
    """
    path = config.path
    _require_file(path)
    unit = "row " if _format(config) == "parquet" else ""

    def bad(number: int, problem: str) -> None:
        if report is None:
            raise DatasetError(f"{path}:{unit}{number}: {problem}")
        report(number, problem)

    match _format(config):
        case "jsonl":
            yield from _jsonl_rows(path, skip, strict=strict, bad=bad)
        case "csv":
            yield from itertools.islice(_csv_rows(path, bad), skip, None)
        case "parquet":
            for number, row in itertools.islice(read_rows(path), skip, None):
                if strict and any(isinstance(value, dict | list) for value in row.values()) and _depth(row) > MAX_DEPTH:
                    bad(number, f"values nested more than {MAX_DEPTH} levels deep")
                    continue
                yield number, row
        case other:
            raise AssertionError(other)


def _require_file(path: Path) -> None:
    try:
        problem = None if path.is_file() else "is a folder" if path.is_dir() else "dataset file not found"
    except OSError as exc:  # a name too long, a folder that cannot be searched
        shown = str(path) if len(str(path)) <= 200 else f"{str(path)[:100]}...({len(str(path)):,} characters)"
        raise DatasetError(f"dataset.path: {shown} cannot be read ({exc.strerror or exc})") from None
    if problem is not None:
        raise DatasetError(f"{path}: {problem}")


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


def _jsonl_rows(path: Path, skip: int, *, strict: bool, bad: Report) -> Iterator[tuple[int, dict[str, Any]]]:
    """``strict``: also refuse a key given twice in a line (the validating scan's check)."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if number == 1:
                line = line.removeprefix(codecs.BOM_UTF8)  # an editor's byte order mark is not data
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
                bad(number, f"not valid JSON: {getattr(exc, 'msg', exc)}{at}")
                continue
            problem = "each line must be a JSON object" if not isinstance(row, dict) else (
                _line_problem(line, row) if strict else None)
            if problem is not None:
                bad(number, problem)
                continue
            yield number, row


def _line_problem(line: bytes, row: dict[str, Any]) -> str | None:
    """What the validating scan checks of a JSONL row besides its fields: nesting a task id can
    hash, and no key given twice (orjson keeps the last silently)."""
    flat = not [value for value in row.values() if type(value) is dict or type(value) is list]
    if not flat and _depth(row) > MAX_DEPTH:
        return f"values nested more than {MAX_DEPTH} levels deep"
    if twice := _duplicate_key(line, row, flat):
        return f"the key {twice!r} is given twice in one object (JSON readers keep one of them silently)"
    return None


def _duplicate_key(line: bytes, row: dict[str, Any], flat: bool) -> str | None:
    """A key given twice in one of the line's objects, or None. The fast path: each key written
    is followed by ``":``, so when the line holds exactly as many ``":`` as the parsed row has
    keys (none spaced before its colon), no key was lost; otherwise the line is read again,
    slowly, keeping every pair (~4x orjson's time, for lines with ``\\":`` in their text)."""
    if line.count(b'":') == (len(row) if flat else _key_count(row)) and not _SPACED_KEY.search(line):
        return None
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in items]
        found.extend(key for index, key in enumerate(keys) if key in keys[:index])
        return dict(items)

    try:
        json.loads(line, object_pairs_hook=pairs)
    except RecursionError:  # nested past any item's limit: to_item refuses the row
        return None
    return found[0] if found else None


def _key_count(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_key_count(v) for v in value.values() if isinstance(v, dict | list))
    if isinstance(value, list):
        return sum(_key_count(v) for v in value if isinstance(v, dict | list))
    return 0


def _csv_rows(path: Path, bad: Report) -> Iterator[tuple[int, dict[str, Any]]]:
    """The CSV's rows; a row that breaks the CSV's own rules (a stray quote) is the last one
    read, as the reader cannot tell where the next row starts."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    with path.open(newline="", encoding="utf-8-sig") as handle:
        # strict: a quote left open at the end of the file is an error, not a value that
        # silently swallows every line after it (the non-strict reader accepts it).
        reader = csv.DictReader(handle, delimiter=delimiter, strict=True)
        try:
            _check_header(path, reader.fieldnames)  # reads it: line_num is now the header's last line
        except csv.Error as exc:
            raise DatasetError(f"{path}:1: the header is not valid CSV ({exc})") from None
        except UnicodeDecodeError:
            raise DatasetError(f"{path}:{_undecodable_line(path)}: not UTF-8 text; save the file as UTF-8") from None
        last = reader.line_num
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                hint = ": is a closing quote missing?" if "end of data" in str(exc) else ""
                bad(last + 1, f"not valid CSV ({exc}){hint}")
                return
            except UnicodeDecodeError:
                bad(_undecodable_line(path), "not UTF-8 text; save the file as UTF-8")
                return
            first, last = last + 1, reader.line_num  # a quoted value may hold line breaks
            if None in row:
                bad(first, "more values than header columns")
            elif last > first and any(value is None for value in row.values()):
                # Fewer values than columns in a row that ran over several lines: a quote opened
                # here and closed only later (or never) swallowed the lines after it.
                bad(first, f"a quoted value that runs on to line {last} and leaves this row short of values: "
                           "is a closing quote missing?")
            else:
                yield first, dict(row)


def _check_header(path: Path, names: Sequence[str] | None) -> None:
    """A CSV header whose every column has a name of its own (a reader keeps one silently)."""
    seen: dict[str, int] = {}
    for number, name in enumerate(names or (), start=1):
        if name in seen:
            raise DatasetError(f"{path}:1: columns {seen[name]} and {number} are both named {name!r}; rename one")
        seen[name] = number


def _undecodable_line(path: Path) -> int:
    """The first line of ``path`` that is not UTF-8 (read again, on the error's path only)."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 1


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


def _depth(value: Any) -> int:
    """How deeply ``value`` nests (walked without recursion)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node
        todo.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


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
    readers: Mapping[str, Sequence[Reader]] | None = None,
) -> DatasetSummary:
    """Validate every row (fields present, ids unique, the protocols' own ``checks``),
    fingerprint the file and sum ``variant_counts`` over the items.

    A required field that no row has, or a column of ``dataset.fields`` that no row has, is the
    config's mistake (a template's typo, a column spelt wrong), not every row's: it is said once,
    by what reads it (``readers``: per field, the config's words for each reader, such as
    ``judges[mine].protocol_options.template, line 3, reads the variable 'mesage'``), with the
    nearest column the rows do have.

    Raises:
        ConfigError: a required field or mapped column that no row read has.
        DatasetError: every bad row (up to :data:`MAX_SHOWN`, then how many more), each named by
            the file and line.
    """
    _require_file(config.path)
    seen: dict[bytes, int] = {}
    variants = [0] * len(variant_counts)
    bad = _BadRows(config)
    presence = _Presence(config, required)
    limit = config.limit if config.limit is not None else sys.maxsize  # rows read, good or bad
    unread = 0  # rows the reader could not read (reported, never yielded)

    def unreadable(number: int, problem: str) -> None:
        nonlocal unread
        unread += 1
        if unread + count <= limit:
            bad.add(number, problem)

    count = 0
    for count, (number, row) in enumerate(iter_rows(config, strict=True, report=unreadable), start=1):
        if count + unread > limit:
            count -= 1
            break
        where = location(config, number)
        presence.see(row)
        try:
            item = to_item(row, config.fields, required, where)
            problems = [problem for check in checks for problem in check(item)]
            # 8-byte digests: a million ids cost ~100 MB as strings but ~50 MB like this.
            key = hashlib.blake2b(item["id"].encode(), digest_size=8).digest()
            if key in seen:
                problems.append(f"duplicate id {item['id']!r} (first on {bad.unit} {seen[key]})")
            else:
                seen[key] = number
            if problems:
                raise DatasetError(f"{where}: {'; '.join(problems)}")
            for index, variant_count in enumerate(variant_counts):  # a bad row's are dropped with the scan
                variants[index] += variant_count(item)
        except DatasetError as exc:  # a protocol's own check may raise too (item 'x': ...)
            bad.add(number, str(exc).removeprefix(f"{where}: "))
    if count:
        presence.raise_any(readers or {}, every=config.limit is None or count + unread < config.limit, rows=count)
    bad.raise_any()
    if count == 0:
        raise DatasetError(f"{config.path}: the dataset has no items")
    return DatasetSummary(items=count, fingerprint=fingerprint(config.path), variants=tuple(variants))


def check_first_row(config: DatasetConfig, required: Sequence[str] = (),
                    readers: Mapping[str, Sequence[Reader]] | None = None) -> None:
    """:func:`scan`'s check of the fields the config reads, on the first row alone (what
    ``protocols --check`` reads). A row that cannot be read is left to the caller.

    Raises:
        ConfigError: a required field or a column of ``dataset.fields`` the first row lacks.
    """
    presence = _Presence(config, required)
    for _, row in itertools.islice(iter_rows(config, report=lambda number, problem: None), 1):
        presence.see(row)
        presence.raise_any(readers or {}, every=False, rows=1)


class _Presence:
    """Which required fields (and columns of ``dataset.fields``) no row has had so far, and the
    first :data:`MAX_NAMES` column names seen. Cheap per row: once each name has been seen, a
    row costs one test of an empty set."""

    def __init__(self, config: DatasetConfig, required: Sequence[str]) -> None:
        self.config = config
        self.mapped = set(config.fields.values())
        self.columns: dict[str, None] = {}
        self.absent_columns = dict.fromkeys(config.fields.values())
        self.required = frozenset(("id", *required))
        self.absent = dict.fromkeys(("id", *required))

    def see(self, row: Mapping[str, Any]) -> None:
        if len(self.columns) < MAX_NAMES:
            self.columns.update(dict.fromkeys(itertools.islice(row, MAX_NAMES - len(self.columns))))
        if self.absent_columns:
            for column in [c for c in self.absent_columns if c in row]:
                del self.absent_columns[column]
        if self.absent:
            for name in [n for n in self.absent if self._has(row, n)]:
                del self.absent[name]

    def _has(self, row: Mapping[str, Any], name: str) -> bool:
        """Whether the item :func:`to_item` makes of ``row`` has the key ``name``."""
        column = self.config.fields.get(name)
        return column in row if column is not None else name in row and name not in self.mapped

    def raise_any(self, readers: Mapping[str, Sequence[Reader]], *, every: bool, rows: int) -> None:
        """One ConfigError naming every field or mapped column no row had (``every``: all rows were
        read; otherwise the first ``rows``), by what reads it, with the nearest column."""
        path = self.config.path
        scope = (f"any row of {path}" if every else f"the first row of {path}" if rows == 1
                 else f"any of the first {rows:,} rows of {path}")
        fields = self.config.fields
        problems = [f"dataset.fields maps {name!r} to the column {column!r}, but {column!r} is not a column of "
                    f"{scope}{self._hint(column, list(self.columns))}"
                    for name, column in fields.items() if column in self.absent_columns]
        names = [fields.get(c, c) for c in self.columns if c not in self.mapped]
        names += [n for n, c in fields.items() if c in self.columns]
        free = [c for c in self.columns if c not in self.mapped and c not in self.required]
        for name in self.absent:
            if fields.get(name) in self.absent_columns:
                continue  # said above, by its column
            for reader in readers.get(name) or [Reader(f"every item needs the field {name!r}", fixed=True)]:
                hint = self._mapping_hint(name, free, names) if reader.fixed else self._hint(name, names)
                problems.append(f"{reader.what}, but {name!r} is not a field of {scope}{hint}")
        if len(problems) == 1:
            raise ConfigError(problems[0])
        if problems:
            raise ConfigError("\n".join([f"the dataset lacks what the config reads in {len(problems)} places:",
                                         *(f"  {problem}" for problem in problems)]))

    @staticmethod
    def _hint(name: str, known: Sequence[str]) -> str:
        if hint := did_you_mean(name, known):
            return f"; {hint}"
        return f" ({_fields_shown(known)})" if known else ""

    @staticmethod
    def _mapping_hint(name: str, free: Sequence[str], known: Sequence[str]) -> str:
        """For a name the config cannot change: the nearest column no field is mapped from, as a mapping."""
        if (column := nearest(name, free)) is not None:
            return f"; to read the column {column!r} as {name!r}, map it: dataset.fields: {{{name}: {column}}}"
        shown = f" ({_fields_shown(known)})" if known else ""
        return f"{shown}; map a column to it: dataset.fields: {{{name}: <column>}}"


def _fields_shown(names: Sequence[str]) -> str:
    return "the rows' fields: " + ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")


class _BadRows:
    """The bad rows of one scan: the first :data:`MAX_SHOWN` named, the rest counted."""

    def __init__(self, config: DatasetConfig) -> None:
        self.config = config
        self.unit = "row" if _format(config) == "parquet" else "line"
        self.shown: list[str] = []
        self.more = 0

    def __len__(self) -> int:
        return len(self.shown) + self.more

    def add(self, number: int, problem: str) -> None:
        """Row ``number`` (as :func:`iter_rows` numbers it) cannot be used, because ``problem``."""
        if len(self.shown) < MAX_SHOWN:
            self.shown.append(f"{location(self.config, number)}: {problem}")
        else:
            self.more += 1

    def raise_any(self) -> None:
        """Raise one DatasetError for the rows found bad, if any: one alone as its line, several
        under a heading that counts them, one to a line."""
        if len(self) == 1:
            raise DatasetError(self.shown[0])
        if self:
            more = [f"  ... and {self.more:,} more"] if self.more else []
            raise DatasetError("\n".join([f"{self.config.path}: {len(self):,} {self.unit}s cannot be used:",
                                          *(f"  {line}" for line in self.shown), *more]))
