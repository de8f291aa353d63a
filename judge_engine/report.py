"""Rich renderables: the live per-judge display, the end-of-run summary, the plan table.

The engine never calls into this module per task (that would cost CPU on the hot path): the
display samples the judges' counters a few times a second and derives rates from the samples.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from judge_engine.runtime import JudgeRuntime

RATE_WINDOW_S = 20.0
PIPED_WIDTH = 160


def make_console(*, stderr: bool = False) -> Console:
    """A console that stays readable when piped (rich would otherwise squeeze tables to 80 columns)."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=PIPED_WIDTH)
    return console


def _duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "-"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


class RateMeter:
    """Rates of one judge over the last :data:`RATE_WINDOW_S` seconds, from sampled counters."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int, int, int]] = deque()

    def sample(self, judge: JudgeRuntime) -> tuple[float, float, float]:
        """(requests/min, tokens/min, finished tasks/s)."""
        now = time.monotonic()
        c = judge.counters
        samples = self._samples
        samples.append((now, judge.lane.stats.requests, judge.lane.stats.tokens, c.done - c.resumed))
        while len(samples) > 2 and now - samples[0][0] > RATE_WINDOW_S:
            samples.popleft()
        first = samples[0]
        span = now - first[0]
        if span <= 0.5:
            return 0.0, 0.0, 0.0
        return (
            (samples[-1][1] - first[1]) / span * 60,
            (samples[-1][2] - first[2]) / span * 60,
            (samples[-1][3] - first[3]) / span,
        )


def _eta(judge: JudgeRuntime, per_s: float) -> float | None:
    remaining = max(0, judge.counters.total - judge.counters.done)
    if remaining == 0:
        return 0.0
    return remaining / per_s if per_s > 0 else None


def _state(judge: JudgeRuntime) -> str:
    if judge.stopped:
        return " (stopped)"
    if judge.stopping:
        return " (stopping)"
    if judge.lane.paused_for > 0:
        return f" (paused {judge.lane.paused_for:.0f}s)"
    return ""


def _compact(number: float) -> str:
    """1234 -> 1,234; 1234567 -> 1.23M: keeps token rates short on narrow terminals."""
    if number >= 1e6:
        return f"{number / 1e6:.2f}M"
    return f"{number:,.0f}"


WIDE_COLUMNS = 110
"""From this many columns the live display is one table row per judge; below, two lines each."""


class LiveDisplay:
    """A live view per judge: done/total, in flight, req/min, tok/min, 429s, retries, re-asks,
    cache hits, unscored, cost so far and ETA. On a terminal of :data:`WIDE_COLUMNS` or more it
    is a table; on a narrower one (80 columns) each judge takes two lines, so nothing is cut."""

    def __init__(self, judges: Sequence[JudgeRuntime], *, console: Console | None = None, banner: str = "") -> None:
        self._judges = list(judges)
        self._console = console or make_console(stderr=True)
        self._banner = banner
        self._meters = {j.config.name: RateMeter() for j in self._judges}
        self._live: Live | None = None
        self.message = ""
        """A line shown under the figures (e.g. what a Ctrl-C is doing)."""

    def __enter__(self) -> LiveDisplay:
        self._live = Live(self, console=self._console, refresh_per_second=4, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def __rich__(self) -> Group:
        parts: list[Any] = [Text(self._banner, style="bold yellow")] if self._banner else []
        parts.append(self.table() if self._console.width >= WIDE_COLUMNS else self.lines())
        if self.message:
            parts.append(Text(self.message, style="yellow"))
        return Group(*parts)

    def table(self) -> Table:
        table = Table(title="judge-engine", expand=False)
        for column in ("judge", "done/total", "in flight", "req/min", "tok/min", "429s", "retries",
                       "re-asks", "cache hits", "unscored", "cost $", "ETA"):
            table.add_column(column, justify="right" if column != "judge" else "left", no_wrap=True)
        for judge in self._judges:
            c = judge.counters
            rpm, tpm, per_s = self._meters[judge.config.name].sample(judge)
            table.add_row(
                judge.config.name + _state(judge), f"{c.done:,}/{c.total:,}", str(c.in_flight),
                f"{rpm:,.0f}", f"{tpm:,.0f}", str(judge.lane.stats.rate_limited), str(c.retries),
                str(c.reasks), str(c.cache_hits), str(c.unscored), f"{c.cost:.4f}", _duration(_eta(judge, per_s)),
            )
        return table

    def lines(self) -> Text:
        """Two lines per judge, for terminals narrower than :data:`WIDE_COLUMNS`."""
        text = Text()
        for judge in self._judges:
            c = judge.counters
            rpm, tpm, per_s = self._meters[judge.config.name].sample(judge)
            share = c.done / c.total if c.total else 1.0
            text.append(judge.config.name + _state(judge), style="bold")
            text.append(f"  {c.done:,}/{c.total:,} ({share:.0%})  in flight {c.in_flight}  "
                        f"ETA {_duration(_eta(judge, per_s))}  ${c.cost:.4f}\n")
            text.append(f"  {_compact(rpm)} req/min · {_compact(tpm)} tok/min · {judge.lane.stats.rate_limited} 429s · "
                        f"{c.retries} retries · {c.reasks} re-asks · {c.cache_hits} cached · {c.unscored} unscored\n",
                        style="dim")
        text.rstrip()
        return text


class ProgressLines:
    """Without a live display (``--no-live``, or output that is not a terminal): a progress line
    per judge every ``every_s`` seconds, so a long CI job is not silent. Prints from a thread,
    reading the judges' counters, like rich's own live refresh."""

    def __init__(self, judges: Sequence[JudgeRuntime], *, console: Console, every_s: float) -> None:
        self._judges = list(judges)
        self._console = console
        self._every_s = every_s
        self._meters = {j.config.name: RateMeter() for j in self._judges}
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="judge-engine-progress", daemon=True)

    def __enter__(self) -> ProgressLines:
        for judge in self._judges:
            self._meters[judge.config.name].sample(judge)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            for line in self.lines():
                self._console.print(line, highlight=False, soft_wrap=True)

    def lines(self) -> list[str]:
        elapsed = _duration(time.monotonic() - self._started)
        out = []
        for judge in self._judges:
            c = judge.counters
            rpm, _tpm, per_s = self._meters[judge.config.name].sample(judge)
            share = c.done / c.total if c.total else 1.0
            out.append(f"[{elapsed}] {judge.config.name}{_state(judge)}: {c.done:,}/{c.total:,} ({share:.0%}) · "
                       f"{rpm:,.0f} req/min · {c.unscored} unscored · {c.retries} retries · ${c.cost:.4f} · "
                       f"ETA {_duration(_eta(judge, per_s))}")
        return out


def _codes(by_code: Mapping[str, int]) -> str:
    return ", ".join(f"{code} {n:,}" for code, n in sorted(by_code.items(), key=lambda kv: -kv[1]))


def summary_table(manifest: Mapping[str, Any], judges: Sequence[JudgeRuntime], elapsed_s: float) -> Group:
    """The end-of-run summary: per judge, the whole run's outcomes and spend; then this session's
    share and the whole run's totals on two lines (they differ after a resume)."""
    counts = (manifest.get("counts") or {}).get("judges", {})
    spend = (manifest.get("spend") or {}).get("judges", {})
    table = Table(title=f"run {manifest.get('run_id')}: {manifest.get('status')} in {_duration(elapsed_s)}",
                  title_justify="left")
    for column in ("judge", "scored", "unscored", "calls", "tokens", "cost $"):
        table.add_column(column, justify="left" if column == "judge" else "right", no_wrap=column != "judge")
    for judge in judges:
        name = judge.config.name
        per, paid = counts.get(name, {}), spend.get(name, {})
        label = Text(name, style="bold")
        label.append(f"\n{judge.config.model} · {judge.protocol.name}", style="dim")
        table.add_row(label, f"{per.get('scored', 0):,}", f"{per.get('unscored', 0):,}", f"{paid.get('calls', 0):,}",
                      f"{paid.get('prompt_tokens', 0) + paid.get('completion_tokens', 0):,}",
                      f"{paid.get('cost', 0.0):.4f}")
    return Group(table, *(Text(line) for line in totals_lines(manifest, judges)))


def totals_lines(manifest: Mapping[str, Any], judges: Sequence[JudgeRuntime]) -> list[str]:
    """'this session: ...' and 'whole run: ...' lines."""
    sessions = manifest.get("sessions") or [{}]
    session = sessions[-1]
    mine = (session.get("spend") or {}).get("total", {})
    retries = sum(j.counters.retries for j in judges)
    reasks = sum(j.counters.reasks for j in judges)
    limited = sum(j.lane.stats.rate_limited for j in judges)
    lines = [
        f"this session: {session.get('judged', 0):,} tasks judged · {mine.get('calls', 0):,} calls "
        f"({limited:,} 429s, {retries:,} retries, {reasks:,} re-asks, {mine.get('cache_hits', 0):,} from the cache) · "
        f"{mine.get('prompt_tokens', 0) + mine.get('completion_tokens', 0):,} tokens · ${mine.get('cost', 0.0):.4f}"
    ]
    total = (manifest.get("counts") or {}).get("total", {})
    paid = (manifest.get("spend") or {}).get("total", {})
    unscored = total.get("unscored", 0)
    why = f" ({_codes(total.get('unscored_by_code') or {})})" if unscored else ""
    lines.append(
        f"whole run ({len(sessions)} session{'s' if len(sessions) != 1 else ''}): {total.get('tasks', 0):,} tasks · "
        f"{total.get('scored', 0):,} scored · {unscored:,} unscored{why} · {paid.get('calls', 0):,} calls · "
        f"{paid.get('prompt_tokens', 0) + paid.get('completion_tokens', 0):,} tokens · ${paid.get('cost', 0.0):.4f}"
    )
    return lines


def plan_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="plan (dry run: nothing sent)")
    for column in ("judge", "model", "protocol", "tasks", "cached", "prompt tokens", "est. completion tokens",
                   "est. cost $", "est. wall time", "bound by"):
        table.add_column(column, justify="left" if column in ("judge", "model", "protocol", "bound by") else "right")
    for row in rows:
        cost = row["cost"]
        table.add_row(
            row["judge"], row["model"], row["protocol"], f"{row['tasks']:,}", f"{row['cached']:,}",
            f"{row['prompt_tokens']:,}", f"{row['completion_tokens']:,}",
            "unknown price" if cost is None else f"{cost:.4f}",
            _duration(row["wall_s"]), row["bound_by"],
        )
    return table
