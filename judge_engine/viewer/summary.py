"""What the overview says of each judge: counts, the score histogram, and the consistency of
its repeats and temperatures, computed from a run's index; and what its attempts were and cost
(:class:`AttemptTally`), counted from the transcript lines as the command line counts them.

The index figures are pure functions of an SQLite connection that has the run's ``tasks`` table
under ``schema``; the viewer's builder thread calls them, feeds the tally, and keeps the results
(:mod:`judge_engine.viewer.derived`).
"""

from __future__ import annotations

import math
import sqlite3
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from judge_engine.errors import RunDirError
from judge_engine.inputs.config import Retries
from judge_engine.rundir.records import AttemptRecord, JudgeEntry, Spend, transcript_record
from judge_engine.stats.consistency import mean_pairwise_spearman
from judge_engine.stats.correlation import spearman

PENDING_MAX = 10_000
"""Tasks whose last line so far is a failure their request goes on after, kept to follow it:
the oldest are let go past this many (a task's next attempt follows within its backoff, while
the tasks in flight write a few lines each; one left this long ended there)."""
TRANSPORT_RETRIES = Retries().transport
"""The budget of a judge whose recorded config does not say (the default)."""
EXACT_VALUES = 40
"""A judge with at most this many distinct scores gets one bar per score; more, :data:`BINS`."""
BINS = 20


def counts(db: sqlite3.Connection, schema: str) -> dict[str, dict[str, Any]]:
    """Judge -> ``{tasks, scored, unscored, undone, by_code: {reason code: n}}``."""
    found: dict[str, dict[str, Any]] = {}
    rows = db.execute(f"SELECT judge, coalesce(status, 'undone'), reason_code, count(*) FROM {schema}.tasks "
                      "GROUP BY 1, 2, 3")
    for judge, status, code, n in rows:
        entry = found.setdefault(judge, {"tasks": 0, "scored": 0, "unscored": 0, "undone": 0, "by_code": {}})
        entry["tasks"] += n
        entry[status if status in ("scored", "unscored") else "undone"] += n
        if status == "unscored":
            entry["by_code"][str(code)] = entry["by_code"].get(str(code), 0) + n
    return found


def histogram(db: sqlite3.Connection, schema: str, judge: str,
              score_range: Sequence[float] | None) -> dict[str, Any] | None:
    """The judge's score distribution: ``{bars: [{low, high, n}], exact, low, high}``; ``exact``
    when each bar is one score (``low == high``); ``low``..``high`` the axis it is drawn on: the
    judge's declared scale (``score_range``), widened to any score outside it, else the scores'
    own extremes. None when the judge has no score."""
    where = f"FROM {schema}.tasks WHERE judge = ? AND score IS NOT NULL"
    values = [v for (v,) in db.execute(f"SELECT DISTINCT score {where} LIMIT {EXACT_VALUES + 1}", (judge,))]
    if not values:
        return None
    if len(values) <= EXACT_VALUES:
        bars = [{"low": v, "high": v, "n": n}
                for v, n in db.execute(f"SELECT score, count(*) {where} GROUP BY score ORDER BY score", (judge,))]
        low, high = _axis(bars[0]["low"], bars[-1]["high"], score_range)
        return {"bars": bars, "exact": True, "low": low, "high": high}
    least, most = db.execute(f"SELECT min(score), max(score) {where}", (judge,)).fetchone()
    low, high = _axis(least, most, score_range)
    width = (high - low) / BINS
    bars = [{"low": low + i * width, "high": low + (i + 1) * width, "n": 0} for i in range(BINS)]
    rows = db.execute(f"SELECT min({BINS - 1}, CAST((score - ?) / ? AS INTEGER)), count(*) {where} GROUP BY 1",
                      (low, width, judge))
    for index, n in rows:
        bars[int(index)]["n"] += n
    return {"bars": bars, "exact": False, "low": low, "high": high}


def _axis(low: float, high: float, score_range: Sequence[float] | None) -> tuple[float, float]:
    """The span a histogram is drawn on: the declared scale, widened to the scores'."""
    if score_range and score_range[1] > score_range[0]:
        return min(low, score_range[0]), max(high, score_range[1])
    return low, high


def consistency(db: sqlite3.Connection, schema: str, judge: str, entry: JudgeEntry | None) -> dict[str, Any]:
    """How the judge agrees with itself: per temperature (and variant) with two repeats or more,
    the repeat figures (:mod:`judge_engine.stats.consistency`); with two temperatures or more,
    each temperature against the first by item means."""
    groups = db.execute(f"SELECT temperature, variant, count(DISTINCT repeat) FROM {schema}.tasks WHERE judge = ? "
                        "AND score IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2", (judge,)).fetchall()
    repeats = [_repeat_row(db, schema, judge, t, v) for t, v, n in groups if n >= 2]
    temperatures = sorted({t for t, _, _ in groups})
    return {"repeats": [r for r in repeats if r is not None],
            "temperatures": _temperature_rows(db, schema, judge, temperatures) if len(temperatures) >= 2 else []}


def _scores_by_item(db: sqlite3.Connection, schema: str, judge: str, temperature: float,
                    variant: str | None) -> np.ndarray:
    """Items x repeats of the judge's scores at one temperature (NaN: a repeat without a score),
    built in arrays (a million tasks cost a few MB, not Python lists of floats)."""
    rows = db.execute(f"SELECT item_id, repeat, score FROM {schema}.tasks WHERE judge = ? AND temperature = ? AND "
                      "variant IS ? AND score IS NOT NULL ORDER BY item_id", (judge, temperature, variant))
    items, columns, scores = array("q"), array("q"), array("d")
    repeats: dict[int, int] = {}
    current, item = None, -1
    for item_id, repeat, score in rows:
        if item_id != current:
            current, item = item_id, item + 1
        items.append(item)
        columns.append(repeats.setdefault(repeat, len(repeats)))
        scores.append(score)
    matrix = np.full((item + 1, len(repeats)), np.nan)
    matrix[np.frombuffer(items, dtype=np.int64), np.frombuffer(columns, dtype=np.int64)] = np.frombuffer(scores)
    return matrix


def interval_alpha(matrix: np.ndarray) -> float:
    """Krippendorff's alpha with the interval metric over items x raters (NaN: missing), in
    closed form: ``1 - D_o / D_e`` with the squared differences summed from each item's sums of
    values and of squares, so memory stays linear in the items (the ``krippendorff`` package,
    behind :func:`judge_engine.stats.agreement.krippendorff_alpha`, builds value-by-value
    matrices per item: 1.6 GB at 250,000 items). Equal to that function (a test holds them
    together); NaN when no item has two values or all values are equal."""
    finite = np.isfinite(matrix)
    counts = finite.sum(axis=1)
    keep = counts >= 2
    if not keep.any():
        return math.nan
    values = np.where(finite, matrix, 0.0)[keep]
    m = counts[keep].astype(float)
    s1, s2 = values.sum(axis=1), (values * values).sum(axis=1)
    n = m.sum()
    observed = float(np.sum((2 * m * s2 - 2 * s1 * s1) / (m - 1))) / n
    expected = (2 * n * s2.sum() - 2 * s1.sum() ** 2) / (n * (n - 1))
    return math.nan if expected <= 0 else 1.0 - observed / float(expected)


def _repeat_row(db: sqlite3.Connection, schema: str, judge: str, temperature: float,
                variant: str | None) -> dict[str, Any] | None:

    matrix = _scores_by_item(db, schema, judge, temperature, variant)
    paired = matrix[np.isfinite(matrix).sum(axis=1) >= 2] if matrix.size else matrix
    if not len(paired):
        return None
    with np.errstate(invalid="ignore"):
        sds = np.nanstd(paired, axis=1)
        identical = np.nanmax(paired, axis=1) == np.nanmin(paired, axis=1)
    return {"temperature": temperature, "variant": variant or "", "items": int(len(paired)),
            "repeats": int(paired.shape[1]), "mean_spearman": _number(mean_pairwise_spearman(paired)),
            "alpha_interval": _number(interval_alpha(paired)), "mean_sd": _number(float(np.mean(sds))),
            "identical": float(np.mean(identical))}


def _temperature_rows(db: sqlite3.Connection, schema: str, judge: str,
                      temperatures: Sequence[float]) -> list[dict[str, Any]]:
    """Each temperature against the first: the items scored at both, the Spearman correlation
    of their mean scores, and the mean absolute difference of those means."""
    means = (f"SELECT item_id, avg(score) AS mean FROM {schema}.tasks WHERE judge = ? AND temperature = ? "
             "AND score IS NOT NULL GROUP BY item_id")
    found = []
    for temperature in temperatures[1:]:
        pairs = array("d")
        for a, b in db.execute(f"SELECT a.mean, b.mean FROM ({means}) a JOIN ({means}) b USING (item_id)",
                               (judge, temperatures[0], judge, temperature)):
            pairs.extend((a, b))
        both = np.frombuffer(pairs).reshape(-1, 2) if pairs else np.zeros((0, 2))
        found.append({"temperature": temperature, "against": temperatures[0], "items": int(len(both)),
                      "spearman": _number(spearman(both[:, 0], both[:, 1])) if len(both) >= 2 else None,
                      "mean_abs_delta": _number(float(np.mean(np.abs(both[:, 0] - both[:, 1])))) if len(both) else None})
    return found


def _number(value: float) -> float | None:
    """JSON has no NaN: an undefined figure is null."""
    return None if value is None or math.isnan(value) else round(float(value), 4)


class AttemptTally:
    """Each judge's attempts, from its transcript lines in order, with the command line's
    definitions: what they cost is :class:`~judge_engine.rundir.records.Spend` (``calls``: requests
    sent, failed ones included, cache hits and replayed answers not); ``retries`` the transport
    failures (5xx, timeouts, resets) the task was to try again, within its judge's budget
    (``retries.transport``: a request's failure past it ends the task, and is no retry), as the
    run's summary counts them; ``rate_limited`` the 429 answers (waited out by the lane, never
    retries); ``reasks`` the unusable answers sent back (each re-ask once, however many attempts
    it took); ``transport_errors`` every transport failure, ``rejected`` the requests the
    provider refused for the item, ``failed`` any other failed attempt, ``protocol_errors`` the
    protocol's own exceptions.

    A request's failures are followed from line to line: the task's next attempt of the same
    session (a resumed session numbers its attempts from 1 again). A batch result that failed is
    carried to another round, which is not a transport retry. (A judge with several deployments
    that hands a request over to another one after failures counts those failures here as
    retries; the summary does not.)"""

    def __init__(self, state: Any = None, *, budgets: Mapping[str, int] | None = None) -> None:
        state = state if isinstance(state, dict) else {}
        self.budgets = dict(budgets or {})
        """Judge -> its transport retry budget (``retries.transport``)."""
        self.figures: dict[str, dict[str, int]] = {k: dict(v) for k, v in (state.get("judges") or {}).items()}
        self.spend = {k: Spend.from_dict(v) for k, v in (state.get("spend") or {}).items()}
        self.pending: dict[str, tuple[int, int]] = {k: (int(v[0]), int(v[1]))
                                                    for k, v in (state.get("pending") or {}).items()}
        """Task -> (its last attempt, its request's transport failures so far), for the tasks
        whose last line is a failure the request goes on after (a 5xx, a 429)."""

    def state(self) -> dict[str, Any]:
        """What :meth:`__init__` continues from."""
        return {"judges": self.figures, "spend": {k: v.to_dict() for k, v in self.spend.items()},
                "pending": {k: list(v) for k, v in self.pending.items()}}

    def add(self, raw: dict[str, Any]) -> None:
        """Count one transcript line (one this package cannot read is skipped)."""
        try:
            record = transcript_record(raw, requests=False)
        except RunDirError:  # the tally goes on; the transcript view says what is wrong with it
            return
        figures = self.figures.setdefault(record.judge, {})
        self.spend.setdefault(record.judge, Spend()).add(record)
        if not isinstance(record, AttemptRecord):
            _add(figures, "protocol_errors")
            return
        before = self.pending.pop(record.task_id, None)
        failures = before[1] if before is not None and record.attempt == before[0] + 1 else None
        if record.reask > 0 and failures is None:  # a re-ask's first attempt
            _add(figures, "reasks")
        if not record.error:
            return
        kind = str(record.error.get("kind") or "")
        _add(figures, {"rate_limited": "rate_limited", "retry": "transport_errors", "item": "rejected"}.get(kind, "failed"))
        if kind not in ("retry", "rate_limited") or record.batch is not None:
            return
        failures = (failures or 0) + (kind == "retry")
        if kind == "retry":
            if failures > self.budgets.get(record.judge, TRANSPORT_RETRIES):
                return  # the budget is spent: the task ends here
            _add(figures, "retries")
        self.pending[record.task_id] = (record.attempt, failures)
        if len(self.pending) > PENDING_MAX:
            for task in list(self.pending)[: PENDING_MAX // 2]:
                del self.pending[task]

    def judges(self) -> dict[str, dict[str, Any]]:
        """Judge -> its figures and spend (``calls``, ``cache_hits``, tokens, ``cost``...), a copy."""
        names = set(self.figures) | set(self.spend)
        return {name: {**self.figures.get(name, {}), **self.spend.get(name, Spend()).to_dict()} for name in names}


def _add(figures: dict[str, int], name: str) -> None:
    figures[name] = figures.get(name, 0) + 1


def transport_budgets(config: Mapping[str, Any]) -> dict[str, int]:
    """Judge -> ``retries.transport``, from a run's recorded (resolved) config."""
    found = {}
    for judge in config.get("judges") or []:
        if isinstance(judge, Mapping) and judge.get("name"):
            found[str(judge["name"])] = int((judge.get("retries") or {}).get("transport", TRANSPORT_RETRIES))
    return found
