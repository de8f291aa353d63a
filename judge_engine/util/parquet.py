"""The one home of pyarrow: Parquet datasets read in batches, tables written in row groups.

pyarrow is an optional extra (``pip install 'judge-engine[data]'``) and is imported when first
needed; without it, whatever needed it raises a :class:`~judge_engine.errors.ConfigError` that
says how to install it. What the columns are is decided elsewhere (:mod:`judge_engine.rundir.export`);
this module only turns rows into Arrow and back:

- :func:`read_rows`: a Parquet dataset's rows as dicts, one batch at a time (a million rows are
  never a million dicts), numbered from 1 for error messages (``items.parquet:row 7``).
- :class:`ParquetSink`: rows written in row groups, one batch of Python values in memory.
- :func:`table`: rows gathered into one Arrow table (for :func:`judge_engine.load_run`).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Literal

from judge_engine.errors import ConfigError, DatasetError

INSTALL_HINT = "pip install 'judge-engine[data]'"
"""How to get pandas and pyarrow, the ``data`` extra."""

Kind = Literal["str", "int", "float", "bool"]
"""A column's type, as every output format spells it (Arrow: string, int64, float64, bool)."""

READ_BATCH_ROWS = 2048
"""Parquet dataset rows turned into Python dicts at a time."""
ROW_GROUP_ROWS = 131_072
"""Rows per Parquet row group written: large enough for readers to scan fast, small enough
that one group of Arrow buffers (~40 MB of outcome rows) is all a writer holds."""


def available() -> bool:
    """True when pyarrow can be imported."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def require(needed_for: str) -> None:
    """Check that pyarrow is installed before work that needs it starts.

    Raises:
        ConfigError: it is not; the message says what needed it and how to install it.
    """
    _pyarrow(needed_for)


def _pyarrow(needed_for: str) -> tuple[ModuleType, ModuleType]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ConfigError(f"{needed_for} needs pyarrow, which is not installed: {INSTALL_HINT}") from None
    return pyarrow, pyarrow.parquet


# --- reading a Parquet dataset ----------------------------------------------------------------


def read_rows(path: Path, *, batch_rows: int = READ_BATCH_ROWS) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, row) of a Parquet file, from 1, streamed ``batch_rows`` at a time.

    A null cell is left out of its row, as a JSONL line leaves out a key it lacks, so the same
    data gives the same items (and task ids) from either file. Values are plain JSON ones:
    timestamps, dates and times become ISO 8601 text, decimals floats, binary UTF-8 text, maps
    objects.

    Raises:
        ConfigError: pyarrow is not installed.
        DatasetError: not a Parquet file, or one that cannot be read (naming the last good row).
    """
    pa, pq = _pyarrow(f"{path}: reading a Parquet dataset")
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{path}: not a readable Parquet file ({exc})") from None
    names = parquet.schema_arrow.names
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise DatasetError(f"{path}: columns named {twice[0]!r} more than once (columns "
                           f"{', '.join(str(i + 1) for i, n in enumerate(names) if n == twice[0])}); rename them")
    number = 0
    batches = parquet.iter_batches(batch_size=batch_rows)
    while True:
        try:
            batch = next(batches, None)
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(f"{path}: unreadable after row {number} ({exc})") from None
        if batch is None:
            return
        for row in batch.to_pylist():
            number += 1
            yield number, {key: _plain(value) for key, value in row.items() if value is not None}


def _plain(value: Any) -> Any:
    """A Parquet value as JSON would hold it (text for times, float for decimals)."""
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list):
        if value and all(isinstance(pair, tuple) for pair in value):  # a map: (key, value) pairs
            return {str(key): _plain(item) for key, item in value}
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


# --- writing ----------------------------------------------------------------------------------


def _schema(pa: ModuleType, columns: Sequence[tuple[str, Kind]], metadata: Mapping[str, str] | None) -> Any:
    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    return pa.schema([pa.field(name, types[kind]) for name, kind in columns],
                     metadata=dict(metadata) if metadata else None)


def _record_batch(pa: ModuleType, schema: Any, rows: Sequence[Sequence[Any]]) -> Any:
    arrays = [pa.array([row[index] for row in rows], type=field.type) for index, field in enumerate(schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class ParquetSink:
    """A Parquet file written batch by batch: rows become Arrow at once, and every
    :data:`ROW_GROUP_ROWS` of them one row group. Use as a context manager; the file is complete
    only after a clean exit."""

    def __init__(self, path: Path, columns: Sequence[tuple[str, Kind]], *,
                 metadata: Mapping[str, str] | None = None) -> None:
        self._pa, pq = _pyarrow("writing Parquet")
        self._schema = _schema(self._pa, columns, metadata)
        self._writer = pq.ParquetWriter(path, self._schema, compression="zstd")
        self._pending: list[Any] = []
        self._pending_rows = 0

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        """Append rows (values in column order, None for null)."""
        if not rows:
            return
        self._pending.append(_record_batch(self._pa, self._schema, rows))
        self._pending_rows += len(rows)
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = self._pa.Table.from_batches(self._pending, schema=self._schema)
            self._writer.write_table(table, row_group_size=max(ROW_GROUP_ROWS, table.num_rows))
        self._pending, self._pending_rows = [], 0

    def __enter__(self) -> ParquetSink:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self._flush()
        self._writer.close()


def table(columns: Sequence[tuple[str, Kind]], batches: Iterable[Sequence[Sequence[Any]]]) -> Any:
    """Rows, batch by batch, as one ``pyarrow.Table`` (each batch is Arrow before the next is
    read, so the Python values of one batch are all that is held besides the table)."""
    pa, _ = _pyarrow("a run as a table")
    schema = _schema(pa, columns, None)
    return pa.Table.from_batches([_record_batch(pa, schema, rows) for rows in batches if rows], schema=schema)
