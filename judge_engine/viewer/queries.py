"""The task list: filters, sorts and pages as SQL over the open runs' indexes.

A page is ``LIMIT size OFFSET (page - 1) * size`` of one ordered query. Every order has an
index to walk (:data:`judge_engine.viewer.derived.TASK_INDEXES`, built by the viewer on a run's
first open), wide enough that a filter is checked on the index entry itself, never on the row;
so a page costs at most one walk of an index, however selective the filter and however deep the
page (~50 ms at a million tasks). Two cases are chosen here rather than left to SQLite's
planner, which guesses them wrong:

* **scores first, then the rest.** ``score`` (lowest first) and ``score-desc`` list the tasks
  that have a score in that order, then the unscored and undone ones by item; the two parts are
  two range walks of the score index, and the page's offset is split between them by a count.
* **disagreement** walks the items from the most disputed down (a temporary table of each
  item's spread, :meth:`TaskList.build_spread`) and each item's tasks through the item index.
* **few matches** (:data:`FEW`): a filter that leaves few tasks is answered by finding them
  first, then sorting them, whatever the order.

Several runs are one ``UNION ALL`` with the order on the whole, which SQLite answers by merging
the runs' own ordered walks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from judge_engine.viewer.catalog import Catalog, Judge, OpenRun

SORTS = ("item", "score", "score-desc", "disagreement")
STATUSES = ("scored", "unscored", "undone")
PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_WHOLE = 10**9
"""The largest page, size, repeat or run number a query may give (SQLite's OFFSET is 64-bit)."""
FEW = 20_000
"""Matching tasks up to which a page is found by filter first, then sorted (walking an order
index for them could pass most of it)."""

_COLUMNS = "task_id, item_id, judge, temperature, repeat, variant, status, reason_code, score"
_BY_ITEM = "item_id, judge, temperature, repeat, variant"
_SELECTED = ", ".join(f"t.{c} AS {c}" for c in _COLUMNS.split(", "))


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which tasks a list shows (every field optional), in which order, which page."""

    judges: tuple[str, ...] = ()
    """Judge labels (any of them)."""
    status: str | None = None
    reason_code: str | None = None
    temperature: float | None = None
    repeat: int | None = None
    min_score: float | None = None
    max_score: float | None = None
    item: str | None = None
    """Only this item id."""
    text: str | None = None
    """Words every matching item's fields contain (the last one as a prefix)."""
    sort: str = "item"
    page: int = 1
    size: int = PAGE_SIZE


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One row of a list page."""

    run: int
    task_id: str
    item_id: str
    judge: str
    temperature: float | None
    repeat: int | None
    variant: str | None
    status: str | None
    reason_code: str | None
    score: float | None


def fts_query(text: str) -> str | None:
    """The FTS5 query for words typed in the search box: each word a quoted phrase (so no
    character of the user's is read as query syntax), all of them required, the last one a
    prefix (results come while the word is being typed). None when nothing searchable is left."""
    words = [w for w in re.split(r"\s+", text.strip()) if w]
    words = [w.replace('"', '""') for w in words if any(c.isalnum() for c in w)]
    if not words:
        return None
    return " ".join(f'"{w}"' for w in words[:-1]) + (" " if len(words) > 1 else "") + f'"{words[-1]}"*'


class TaskList:
    """Answers list pages for a catalog (on its query thread)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.spread_ready = False
        self.spread_covers: tuple[object, ...] | None = None
        self.spread_group = 1
        """The most tasks one item has (over the open runs): how far a page of the disagreement
        order, walked from its far end, may reach into its neighbours' items."""
        self._searched: dict[int, str] = {}

    # --- the SQL of one run's part ---------------------------------------------------------------

    def _where(self, run: OpenRun, f: TaskFilter, *, searchable: bool,
               walk: bool) -> tuple[list[str], list[Any]] | None:
        """WHERE clauses and arguments of ``f`` in ``run``; None when the run has no match.
        ``walk``: the query walks an order index, so the equality filters are marked ``+``
        (checked on each entry, never used to seek: a seek on a later column of the index
        would make SQLite sort what the walk already has in order)."""
        plus = "+" if walk else ""
        clauses: list[str] = []
        args: list[Any] = []
        if f.judges:
            names = [j.name for label in f.judges if (j := self.catalog.judge(label)) is not None and j.run == run.number]
            if not names:
                return None
            clauses.append(f"{plus}t.judge IN ({','.join('?' * len(names))})")
            args += names
        if f.status == "undone":
            clauses.append("t.status IS NULL")
        elif f.status is not None:
            clauses.append(f"{plus}t.status = ?")
            args.append(f.status)
        for column, value in (("reason_code", f.reason_code), ("temperature", f.temperature), ("repeat", f.repeat)):
            if value is not None:
                clauses.append(f"{plus}t.{column} = ?")
                args.append(value)
        if f.item is not None:
            clauses.append("t.item_id = ?")
            args.append(f.item)
        if f.min_score is not None:
            clauses.append("t.score >= ?")
            args.append(f.min_score)
        if f.max_score is not None:
            clauses.append("t.score <= ?")
            args.append(f.max_score)
        query = fts_query(f.text) if f.text else None
        if query is not None:
            if not searchable:
                return None
            clauses.append(f"t.item_id IN {self._found(run, query)}")
        return clauses, args

    def _found(self, run: OpenRun, query: str) -> str:
        """A temporary table of the items of ``run`` that match a search, kept while the same
        words are searched: a page's counts and rows, and the next page, use it again instead
        of asking FTS5 and the items table each time."""
        table = f"temp.viewer_found_{run.number}"
        if self._searched.get(run.number) != query:
            schema, db = run.derived_schema, self.catalog.db
            db.execute(f"DROP TABLE IF EXISTS {table}")
            db.execute(f"CREATE TEMP TABLE viewer_found_{run.number} (item_id TEXT PRIMARY KEY) WITHOUT ROWID")
            db.execute(f"INSERT OR IGNORE INTO {table} SELECT item_id FROM {schema}.viewer_items WHERE id IN "
                       f"(SELECT rowid FROM {schema}.viewer_items_text WHERE viewer_items_text MATCH ?) ORDER BY 1",
                       (query,))
            self._searched[run.number] = query
        return table

    def _parts(self, f: TaskFilter, searchable: Sequence[bool], extra: str = "", *,
               walk: Sequence[bool] = ()) -> list[tuple[OpenRun, str, list[Any]]]:
        """Per run with a match: the run, its WHERE and its arguments (``walk``: per run, whether
        the query walks its order index)."""
        parts = []
        for run in self.catalog.runs:
            walking = bool(walk) and walk[run.number]
            found = self._where(run, f, searchable=searchable[run.number], walk=walking)
            if found is None:
                continue
            clauses, args = found
            if extra:
                clauses = [*clauses, extra]
            parts.append((run, " WHERE " + " AND ".join(clauses) if clauses else "", args))
        return parts

    # --- counting and paging ---------------------------------------------------------------------

    def count(self, f: TaskFilter, searchable: Sequence[bool], indexed: Sequence[bool], *,
              scored: bool = False) -> tuple[int, int]:
        """(matching tasks, those with a score; 0 unless ``scored``). A filter on the judge,
        status or reason alone is counted in the engine's own index of those; any other in an
        order index, which holds every filter column and the score, so both counts come from one
        walk (SQLite would otherwise pick an index it must leave for the rows: ~0.4 s instead of
        ~0.05 s at a million tasks)."""
        hint = ""
        if f.text or f.item:  # a seek per matching item
            hint = "viewer_tasks_by_item"
        elif f.min_score is not None or f.max_score is not None:
            hint = "viewer_tasks_by_score"
        elif f.temperature is not None or f.repeat is not None:
            hint = "viewer_tasks_by_item"
        total = with_score = 0
        db = self.catalog.db
        for run, where, args in self._parts(f, searchable):
            table = f"{run.schema}.tasks t" + (f" INDEXED BY {hint}" if hint and indexed[run.number] else "")
            if scored and hint and indexed[run.number]:
                n, m = db.execute(f"SELECT count(*), count(t.score) FROM {table}{where}", args).fetchone()
            else:
                (n,) = db.execute(f"SELECT count(*) FROM {table}{where}", args).fetchone()
                m = 0
                if scored:
                    by_score = f"{run.schema}.tasks t" + (" INDEXED BY viewer_tasks_by_score" if indexed[run.number]
                                                          else "")
                    scored_where = (where + " AND" if where else " WHERE") + " t.score IS NOT NULL"
                    (m,) = db.execute(f"SELECT count(*) FROM {by_score}{scored_where}", args).fetchone()
            total, with_score = total + int(n), with_score + int(m)
        return total, with_score

    def page(self, f: TaskFilter, searchable: Sequence[bool], indexed: Sequence[bool]) -> tuple[int, list[TaskRow]]:
        """(matching tasks, the rows of page ``f.page``)."""
        total, scored = self.count(f, searchable, indexed, scored=f.sort in ("score", "score-desc"))
        offset = (f.page - 1) * f.size
        if offset >= total:
            return total, []
        if total <= FEW:  # few matches: SQLite finds them by the filter, then sorts them
            indexed = [False] * len(indexed)
        if f.sort in ("score", "score-desc"):
            rows: list[TaskRow] = []
            if offset < scored:
                desc = " DESC" if f.sort == "score-desc" else ""
                order = ", ".join(f"{c}{desc}" for c in ("score", *_BY_ITEM.split(", ")))
                rows = self._select(f, searchable, indexed, "viewer_tasks_by_score", "t.score IS NOT NULL", order,
                                    f.size, offset)
            if len(rows) < f.size:
                rest = max(0, offset - scored)
                rows += self._select(f, searchable, indexed, "viewer_tasks_by_item", "t.score IS NULL", _BY_ITEM,
                                     f.size - len(rows), rest)
            return total, rows
        if f.sort == "disagreement":
            return total, self._by_disagreement(f, searchable, indexed, total, offset)
        return total, self._select(f, searchable, indexed, "viewer_tasks_by_item", "", _BY_ITEM, f.size, offset)

    def _select(self, f: TaskFilter, searchable: Sequence[bool], indexed: Sequence[bool], index: str, extra: str,
                order: str, limit: int, offset: int) -> list[TaskRow]:
        arms, args = [], []
        for run, where, part_args in self._parts(f, searchable, extra, walk=indexed):
            hint = f" INDEXED BY {index}" if indexed[run.number] else ""
            arms.append(f"SELECT {run.number} AS run, {_SELECTED} FROM {run.schema}.tasks t{hint}{where}")
            args += part_args
        if not arms:
            return []
        sql = " UNION ALL ".join(arms) + f" ORDER BY {order} LIMIT ? OFFSET ?"
        return [TaskRow(*row) for row in self.catalog.db.execute(sql, [*args, limit, offset])]

    def _by_disagreement(self, f: TaskFilter, searchable: Sequence[bool], indexed: Sequence[bool], total: int,
                         offset: int) -> list[TaskRow]:
        if not self.spread_ready:
            return self._select(f, searchable, indexed, "viewer_tasks_by_item", "", _BY_ITEM, f.size, offset)
        arms, args = [], []
        few = total <= FEW or not any(indexed)
        for run, where, part_args in self._parts(f, searchable, walk=() if few else indexed):
            if few:
                source = f"{run.schema}.tasks t JOIN temp.viewer_spread s ON s.item_id = t.item_id"
            else:
                hint = " INDEXED BY viewer_tasks_by_item" if indexed[run.number] else ""
                source = (f"temp.viewer_spread s INDEXED BY viewer_spread_order CROSS JOIN {run.schema}.tasks t{hint} "
                          "ON t.item_id = s.item_id")
            arms.append(f"SELECT {run.number} AS run, {_SELECTED}, s.spread AS spread FROM {source}{where}")
            args += part_args
        if not arms:
            return []
        if len(arms) > 1:
            order = "spread DESC, item_id, judge, temperature, repeat, variant"
        elif few:
            order = "s.spread DESC, t.item_id, t.judge, t.temperature, t.repeat, t.variant"
        elif offset + f.size > total - offset:
            return self._from_the_end(arms[0], args, f.size, offset, total)
        else:  # walking the spread order, each item's tasks come in the item index's order
            order = "s.spread DESC, s.item_id"
        sql = " UNION ALL ".join(arms) + f" ORDER BY {order} LIMIT ? OFFSET ?"
        return [TaskRow(*row[:10]) for row in self.catalog.db.execute(sql, [*args, f.size, offset])]

    def _from_the_end(self, arm: str, args: list[Any], size: int, offset: int, total: int) -> list[TaskRow]:
        """A page in the far half of the disagreement walk, walked from the other end (half the
        work at most). Walked backwards, items come in reverse but each item's tasks still come
        forwards, so the window read reaches one item's worth (:attr:`spread_group`) past the
        page on each side; each item's tasks are turned round, and the page cut from the middle."""
        low, high = max(0, total - offset - size), total - offset  # the page, counted from the end
        start, stop = max(0, low - self.spread_group), min(total, high + self.spread_group)
        sql = arm + " ORDER BY s.spread ASC, s.item_id DESC LIMIT ? OFFSET ?"
        rows = [TaskRow(*row[:10]) for row in self.catalog.db.execute(sql, [*args, stop - start, start])]
        backwards = [row for _, tasks in groupby(rows, key=lambda r: (r.run, r.item_id)) for row in reversed(list(tasks))]
        return list(reversed(backwards[low - start: high - start]))

    # --- disagreement -----------------------------------------------------------------------------

    def spread_unit(self) -> str:
        """What a spread is measured in: ``score`` (the scores' own units) when every open judge
        with a known score range has the same one (a jury has its jurors'), else ``share`` (a
        share of each judge's range, 0..1), so that scales that differ are never subtracted."""
        return "score" if len({j.score_range for j in self.catalog.judges if j.score_range}) <= 1 else "share"

    def spread_expression(self, run: OpenRun) -> str:
        """SQL of a task's score on the common scale (:meth:`spread_unit`). As a share, a judge
        whose range is unknown is left out (NULL): its scores cannot be put on the others' scale."""
        if self.spread_unit() == "score":
            return "t.score"
        cases = " ".join(f"WHEN {_quote(j.name)} THEN (t.score - {low!r}) / {high - low!r}"
                         for j in self.catalog.judges if j.run == run.number
                         if (scale := j.score_range) is not None for low, high in [scale])
        return f"(CASE t.judge {cases} END)" if cases else "NULL"

    def _spread_source(self, where: str = "", args: Sequence[Any] = ()) -> tuple[str, list[Any]]:
        arms, all_args = [], []
        for run in self.catalog.runs:
            arms.append(f"SELECT t.item_id AS item_id, {self.spread_expression(run)} AS v FROM {run.schema}.tasks t{where}")
            all_args += list(args)
        sql = ("SELECT item_id, CASE WHEN count(v) >= 2 THEN max(v) - min(v) ELSE -1 END, count(v), count(*) FROM ("
               + " UNION ALL ".join(arms) + ") GROUP BY item_id")
        return sql, all_args

    def spreads(self, item_ids: Sequence[str]) -> dict[str, float | None]:
        """The disagreement of each of ``item_ids`` (max - min of its scores on the common
        scale, in :meth:`spread_unit`; None with fewer than two scores), computed now."""
        if not item_ids:
            return {}
        marks = ",".join("?" * len(item_ids))
        sql, args = self._spread_source(f" WHERE t.item_id IN ({marks})", list(item_ids))
        return {item: (None if spread < 0 else float(spread)) for item, spread, _, _ in self.catalog.db.execute(sql, args)}

    def build_spread(self, covers: tuple[object, ...]) -> None:
        """(Re)build the temporary table the disagreement order walks: one row per item, its
        spread (-1 below two scores, so those come last), indexed by spread."""
        db = self.catalog.db
        sql, args = self._spread_source()
        db.execute("DROP TABLE IF EXISTS temp.viewer_spread")
        db.execute("CREATE TEMP TABLE viewer_spread (item_id TEXT PRIMARY KEY, spread REAL NOT NULL, "
                   "scored INTEGER NOT NULL, tasks INTEGER NOT NULL) WITHOUT ROWID")
        db.execute("INSERT INTO temp.viewer_spread " + sql, args)
        db.execute("CREATE INDEX temp.viewer_spread_order ON viewer_spread (spread DESC, item_id)")
        (group,) = db.execute("SELECT max(tasks) FROM temp.viewer_spread").fetchone()
        self.spread_ready, self.spread_covers, self.spread_group = True, covers, int(group or 1)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def filter_from(params: dict[str, str], judges: Sequence[Judge]) -> TaskFilter:
    """A :class:`TaskFilter` from a page's query string (unknown values are ignored, so an old
    shared link still opens).

    Raises:
        ValueError: a number that is not one, or not one the list can use (naming the parameter).
    """
    labels = {j.label for j in judges}

    def number(key: str) -> float | None:
        return real_parameter(params, key)
    repeat = whole_parameter(params, "repeat")
    page = whole_parameter(params, "page") or 1
    size = whole_parameter(params, "size") or PAGE_SIZE
    status = params.get("status") or None
    sort = params.get("sort") or "item"
    return TaskFilter(
        judges=tuple(j for j in params.get("judge", "").split(",") if j in labels),
        status=status if status in STATUSES else None, reason_code=params.get("reason") or None,
        temperature=number("temperature"), repeat=repeat,
        min_score=number("min"), max_score=number("max"), item=params.get("item") or None,
        text=params.get("q") or None, sort=sort if sort in SORTS else "item", page=max(1, page),
        size=min(MAX_PAGE_SIZE, max(1, size)),
    )


def real_parameter(params: dict[str, str], key: str) -> float | None:
    """The query parameter ``key`` as a finite number, or None when it is not given.

    Raises:
        ValueError: not a finite number (naming ``key``).
    """
    text = params.get(key, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{key}: {text[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{key}: {text[:40]!r} is not a finite number")
    return value


def whole_parameter(params: dict[str, str], key: str) -> int | None:
    """The query parameter ``key`` as a whole number (at most :data:`MAX_WHOLE` either way), or
    None when it is not given; what is outside the caller's range it clamps or finds nothing for.

    Raises:
        ValueError: not a whole number, or a larger one (naming ``key``).
    """
    text = params.get(key, "").strip()
    if not text:
        return None
    if not re.fullmatch(r"[+-]?[0-9]{1,12}(\.0*)?", text) or abs(int(float(text))) > MAX_WHOLE:
        raise ValueError(f"{key}: {text[:40]!r} is not a whole number up to {MAX_WHOLE:,}")
    return int(float(text))
