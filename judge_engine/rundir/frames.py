"""The one home of pandas: a run as a DataFrame (:func:`load_run`), and a caller's DataFrame
as rows (:func:`frame_rows`, for ``calibrate``).

The columns are the long form of :mod:`judge_engine.rundir.layout` (what ``judge-engine export``
writes), built through Arrow (:mod:`judge_engine.util.parquet`) batch by batch, so a run of a
million tasks is never a million Python rows. pandas and pyarrow are the ``data`` extra.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_engine.errors import ConfigError
from judge_engine.rundir.export import run_items
from judge_engine.rundir.layout import outcome_batches, transcript_batches
from judge_engine.rundir.records import DEMO_NOTE, reason_codes
from judge_engine.rundir.store import read_manifest
from judge_engine.util.parquet import INSTALL_HINT, available, table

if TYPE_CHECKING:
    import pandas as pd

    from judge_engine.rundir.layout import Columns

CATEGORIES = ("judge", "protocol", "protocol_version", "model", "variant", "status", "reason_code", "event",
              "finish_reason", "error.kind")
"""Columns of few distinct values, read as pandas categories."""
NEVER_EMPTY = ("repeat", "attempts", "reasks", "cache_hits", "cache_hit")
"""Integer and boolean columns every row fills: numpy ``int64``/``bool``. Other integer and
boolean columns are pandas' nullable ``Int64``/``boolean`` whatever a run holds, so the dtypes
of two runs agree."""


def _pandas() -> Any:

    try:
        import pandas
    except ImportError:
        pandas = None
    if pandas is None or not available():
        raise ConfigError(f"load_run needs pandas and pyarrow (the data extra): {INSTALL_HINT}")
    return pandas


def load_run(path: str | Path, *, transcripts: bool = False, with_items: bool = False,
             items: str | Path | None = None) -> pd.DataFrame:
    """A run directory as a pandas DataFrame, in one call.

    Args:
        path: the run directory (``runs/latest`` works).
        transcripts: one row per transcript line (attempts, cache hits, protocol errors: attempt
            number, re-ask, cache hit, latency, usage, cost, finish reason, error, the answer's
            content) instead of one row per task. The request messages are not in it: read
            them with ``judge-engine show`` or :func:`judge_engine.rundir.store.iter_transcript`.
        with_items: join the dataset's items to the tasks, as ``export --with-items`` does: an
            ``item.<field>`` column per field, after the config's field mapping. The dataset
            is found where the run recorded it (or at the same place relative to the run, if
            the project moved); what ``export`` says beside the file (the dataset changed since
            the run, rows whose item is not in it) is a :class:`UserWarning`.
        items: the dataset's path if it moved since the run (``export --items``); implies
            ``with_items``.

    Returns:
        One row per task, its last outcome (a task judged again by ``resume --retry`` counts
        once), with the columns ``judge-engine export`` writes (``task_id`` ... ``at``,
        ``scores.<name>``, ``verdict.<field>``; see :mod:`judge_engine.rundir.layout`). ``judge``,
        ``status``, ``reason_code`` and the other few-valued columns are categories; ``score``
        is float with NaN when unscored; counts that can be empty (``verdict.errors.count``
        of an unscored task) are ``Int64``; ``at`` is a UTC timestamp.

    Raises:
        ConfigError: pandas or pyarrow is not installed (``pip install 'judge-engine[data]'``), or
            items asked for with ``transcripts`` (they are joined to the tasks).
        RunDirError: not a run directory, a malformed line, or a run that records no dataset.
        DatasetError: ``with_items`` and the dataset is gone (give ``items=``) or unreadable.
    """
    pd = _pandas()
    run_dir = Path(path)
    manifest = read_manifest(run_dir)  # a run directory of a format this version reads, or a clear error
    join = with_items or items is not None
    if join and transcripts:
        raise ConfigError("load_run: with_items joins the items to the tasks, not to transcripts=True's attempts; "
                          "load the tasks with with_items=True and merge on task_id")
    notes: list[str] = []
    if join:
        found = run_items(run_dir, manifest, path=None if items is None else Path(items), notes=notes)
        columns, batches = outcome_batches(run_dir, items=found, notes=notes)
    else:
        found = None
        columns, batches = transcript_batches(run_dir) if transcripts else outcome_batches(run_dir)
    # self_destruct frees each Arrow column once converted: the peak is about one copy of the run.
    frame = table(columns, batches).to_pandas(types_mapper=_nullable(pd), split_blocks=True, self_destruct=True)
    frame = _typed(pd, frame, columns)
    if found is not None and found.missing:
        notes.append(f"{found.missing} rows name an item that is not in the dataset: their item.* columns are empty")
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=2)
    if manifest.demo:  # as a Parquet export's metadata says it

        frame.attrs["judge_engine.synthetic"] = DEMO_NOTE
    return frame


def _nullable(pd: Any) -> Any:
    """Arrow integers and booleans as pandas' nullable types (so a missing count is <NA>, not
    a float, and a 64-bit seed keeps every digit)."""
    nullable = {"int64": pd.Int64Dtype(), "bool": pd.BooleanDtype()}
    return lambda arrow_type: nullable.get(str(arrow_type))


def _typed(pd: Any, frame: Any, columns: Columns) -> Any:

    for name, _ in columns:
        column = frame[name]
        if name in NEVER_EMPTY:
            frame[name] = column.astype("int64" if name != "cache_hit" else "bool")
        elif name in CATEGORIES:
            known = {"status": ["scored", "unscored"], "reason_code": reason_codes(),
                     "event": ["attempt", "protocol_error"]}.get(name, [])
            seen = [v for v in column.dropna().unique() if v not in known]
            frame[name] = pd.Categorical(column, categories=[*known, *sorted(seen)])
    if "at" in frame:  # lines of format 1 may lack it: NaT
        frame["at"] = pd.to_datetime(frame["at"].where(frame["at"] != ""), utc=True, format="ISO8601",
                                     errors="coerce")
    return frame


def is_frame(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame. pandas is never imported for the question: a
    caller holding a DataFrame has imported it already."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame)


def frame_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A DataFrame's rows as dicts, its missing values (NaN, None, ``pd.NA``, NaT) as None."""
    cleaned = frame.astype(object).where(frame.notna(), None)
    return [dict(row) for row in cleaned.to_dict(orient="records")]
