"""Rich renderables: the live per-judge display, the end-of-run summary, the plan table.

The engine never calls into this module per task (that would cost CPU on the hot path): the
display samples the judges' counters a few times a second and derives rates from the samples.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from judge_engine.judging import JudgeRuntime

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


class LiveDisplay:
    """A live table: per judge done/total, in flight, req/min, tok/min, 429s, retries, cache hits,
    unscored, cost so far and ETA."""

    def __init__(self, judges: Sequence[JudgeRuntime], *, console: Console | None = None, banner: str = "") -> None:
        self._judges = list(judges)
        self._console = console or make_console(stderr=True)
        self._banner = banner
        self._samples: dict[str, deque[tuple[float, int, int, int]]] = {
            j.config.name: deque() for j in self._judges
        }
        self._live: Live | None = None

    def __enter__(self) -> LiveDisplay:
        self._live = Live(self, console=self._console, refresh_per_second=4, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def __rich__(self) -> Group:
        return Group(*([Text(self._banner, style="bold yellow")] if self._banner else []), self.table())

    def _rates(self, judge: JudgeRuntime) -> tuple[float, float, float]:
        """(requests/min, tokens/min, finished tasks/s) over the last RATE_WINDOW_S seconds."""
        now = time.monotonic()
        c = judge.counters
        samples = self._samples[judge.config.name]
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

    def table(self) -> Table:
        table = Table(title="judge-engine", expand=False)
        for column in ("judge", "done/total", "in flight", "req/min", "tok/min", "429s", "retries",
                       "cache hits", "unscored", "cost $", "ETA"):
            table.add_column(column, justify="right" if column != "judge" else "left")
        for judge in self._judges:
            c = judge.counters
            rpm, tpm, per_s = self._rates(judge)
            remaining = max(0, c.total - c.done)
            eta = remaining / per_s if per_s > 0 else (0.0 if remaining == 0 else None)
            name = judge.config.name + (" [red](stopped)[/red]" if judge.stopped else "")
            if judge.lane.paused_for > 0:
                name += f" [yellow](paused {judge.lane.paused_for:.0f}s)[/yellow]"
            table.add_row(
                name, f"{c.done}/{c.total}", str(c.in_flight), f"{rpm:,.0f}", f"{tpm:,.0f}",
                str(judge.lane.stats.rate_limited), str(c.retries), str(c.cache_hits), str(c.unscored),
                f"{c.cost:.4f}", _duration(eta),
            )
        return table


def summary_table(manifest: Mapping[str, Any], judges: Sequence[JudgeRuntime], elapsed_s: float) -> Table:
    """The end-of-run summary."""
    table = Table(title=f"run {manifest.get('run_id')}: {manifest.get('status')} in {_duration(elapsed_s)}")
    for column in ("judge", "model", "protocol", "scored", "unscored", "calls", "429s", "retries",
                   "re-asks", "cache hits", "cost $"):
        table.add_column(column, justify="left" if column in ("judge", "model", "protocol") else "right")
    counts = (manifest.get("counts") or {}).get("judges", {})
    for judge in judges:
        c = judge.counters
        per = counts.get(judge.config.name, {})
        table.add_row(
            judge.config.name, judge.config.model, judge.protocol.name,
            str(per.get("scored", 0)), str(per.get("unscored", 0)), str(c.calls),
            str(judge.lane.stats.rate_limited), str(c.retries), str(c.reasks), str(c.cache_hits), f"{c.cost:.4f}",
        )
    return table


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
