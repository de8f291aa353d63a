"""The one home of pyarrow: Parquet datasets read in batches.

pyarrow is an optional extra (``pip install 'judge-engine[data]'``) and is imported when first
needed; without it, whatever needed it raises a :class:`~judge_engine.errors.ConfigError` that
says how to install it.

- :func:`read_rows`: a Parquet dataset's rows as dicts, one batch at a time (a million rows are
  never a million dicts), numbered from 1 for error messages (``items.parquet:row 7``).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from judge_engine.errors import ConfigError, DatasetError

INSTALL_HINT = "pip install 'judge-engine[data]'"
"""How to get pandas and pyarrow, the ``data`` extra."""

READ_BATCH_ROWS = 2048
"""Parquet dataset rows turned into Python dicts at a time."""


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
    timestamps, dates and times become ISO 8601 text, decimals floats, binary UTF-8 text.

    Raises:
        ConfigError: pyarrow is not installed.
        DatasetError: not a Parquet file, or one that cannot be read (naming the last good row).
    """
    pa, pq = _pyarrow(f"{path}: reading a Parquet dataset")
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{path}: not a readable Parquet file ({exc})") from None
    number = 0
    batches = parquet.iter_batches(batch_size=batch_rows)
    while True:
        try:
            batch = next(batches, None)
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(f"{path}: unreadable after row {number} ({exc})") from None
        if batch is None:
            return
        for row in batch.to_pylist(maps_as_pydicts="lossy"):
            number += 1
            yield number, {key: _plain(value) for key, value in row.items() if value is not None}


def _plain(value: Any) -> Any:
    """A Parquet value as JSON would hold it (text for times, float for decimals)."""
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list):
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
