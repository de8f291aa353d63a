"""Rich renderables: the live per-judge display, the end-of-run summary, the plan table.

The engine never calls into this module per task (that would cost CPU on the hot path): the
display samples the judges' counters a few times a second and derives rates from the samples.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from judge_engine.runtime import JudgeRuntime

if TYPE_CHECKING:
    from judge_engine.planning import JudgePlan, Span

RATE_WINDOW_S = 20.0
PIPED_WIDTH = 160


def make_console(*, stderr: bool = False) -> Console:
    """A console that stays readable when piped (rich would otherwise squeeze tables to 80
    columns), unless the width is asked for (``COLUMNS=80 judge-engine plan ... | less``)."""
    console = Console(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
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


def packed(parts: Sequence[str], width: int, *, indent: str = "  ", separator: str = " · ") -> str:
    """``parts`` joined on as few lines of ``width`` as possible, breaking only between parts
    (a figure and its label are never split); continuation lines are indented."""
    lines: list[str] = []
    line = ""
    for part in parts:
        candidate = f"{line}{separator}{part}" if line else part
        if line and len(candidate) > width:
            lines.append(line)
            line = indent + part
        else:
            line = candidate
    if line:
        lines.append(line)
    return "\n".join(lines)


class LiveDisplay:
    """A live view per judge: done/total, in flight, req/min, tok/min, 429s, retries, re-asks,
    cache hits, unscored, cost so far and ETA. A table when the terminal is wide enough for it
    whole; otherwise (80 columns) a few lines per judge, broken between figures, so nothing is
    ever cut."""

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
        rows = [self._row(judge) for judge in self._judges]
        table = self.table(rows)
        # Measured unconstrained: a table measured within the terminal's width always "fits", by
        # cutting its cells short.
        wanted = Measurement.get(self._console, self._console.options.update(max_width=10_000), table).maximum
        fits = wanted <= self._console.width
        parts.append(table if fits else self.lines(rows))
        if self.message:
            parts.append(Text(self.message, style="yellow"))
        return Group(*parts)

    def _row(self, judge: JudgeRuntime) -> dict[str, str]:
        c = judge.counters
        rpm, tpm, per_s = self._meters[judge.config.name].sample(judge)
        return {
            "judge": judge.config.name + _state(judge), "done": f"{c.done:,}", "total": f"{c.total:,}",
            "share": f"{c.done / c.total if c.total else 1.0:.0%}", "in flight": str(c.in_flight),
            "req/min": _compact(rpm), "tok/min": _compact(tpm), "429s": str(judge.lane.stats.rate_limited),
            "retries": str(c.retries), "re-asks": str(c.reasks), "cache hits": str(c.cache_hits),
            "unscored": str(c.unscored), "cost": f"{c.cost:.4f}", "ETA": _duration(_eta(judge, per_s)),
        }

    def table(self, rows: Sequence[dict[str, str]]) -> Table:
        table = Table(title="judge-engine", expand=False)
        columns = ("judge", "done/total", "in flight", "req/min", "tok/min", "429s", "retries", "re-asks",
                   "cache hits", "unscored", "cost $", "ETA")
        for column in columns:
            table.add_column(column, justify="right" if column != "judge" else "left", no_wrap=True)
        for row in rows:
            table.add_row(row["judge"], f"{row['done']}/{row['total']}", row["in flight"], row["req/min"],
                          row["tok/min"], row["429s"], row["retries"], row["re-asks"], row["cache hits"],
                          row["unscored"], row["cost"], row["ETA"])
        return table

    def lines(self, rows: Sequence[dict[str, str]]) -> Text:
        """A few lines per judge, for terminals too narrow for the table."""
        width = max(40, self._console.width - 1)
        text = Text()
        for row in rows:
            text.append(packed([row["judge"], f"{row['done']}/{row['total']} ({row['share']})",
                                f"in flight {row['in flight']}", f"ETA {row['ETA']}", f"${row['cost']}"],
                               width, separator="  ") + "\n", style="bold")
            figures = packed([f"{row['req/min']} req/min", f"{row['tok/min']} tok/min", f"{row['429s']} 429s",
                              f"{row['retries']} retries", f"{row['re-asks']} re-asks", f"{row['cache hits']} cached",
                              f"{row['unscored']} unscored"], width - 2, indent="")
            text.append("".join(f"  {line}\n" for line in figures.splitlines()), style="dim")
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


def summary_table(manifest: Mapping[str, Any], judges: Sequence[JudgeRuntime], elapsed_s: float,
                  *, width: int = 80) -> Group:
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
        label.append(f"\n{judge.config.model}\n{judge.protocol.name}", style="dim")
        table.add_row(label, f"{per.get('scored', 0):,}", f"{per.get('unscored', 0):,}", f"{paid.get('calls', 0):,}",
                      f"{paid.get('prompt_tokens', 0) + paid.get('completion_tokens', 0):,}",
                      f"{paid.get('cost', 0.0):.4f}")
    return Group(table, *(Text(line) for line in totals_lines(manifest, judges, width=width)))


def totals_lines(manifest: Mapping[str, Any], judges: Sequence[JudgeRuntime], *, width: int = 80) -> list[str]:
    """'this session: ...' and 'whole run: ...', each broken between figures to fit ``width``."""
    sessions = manifest.get("sessions") or [{}]
    session = sessions[-1]
    mine = (session.get("spend") or {}).get("total", {})
    retries = sum(j.counters.retries for j in judges)
    reasks = sum(j.counters.reasks for j in judges)
    limited = sum(j.lane.stats.rate_limited for j in judges)
    total = (manifest.get("counts") or {}).get("total", {})
    paid = (manifest.get("spend") or {}).get("total", {})
    unscored = total.get("unscored", 0)
    why = f" ({_codes(total.get('unscored_by_code') or {})})" if unscored else ""
    plural = "s" if len(sessions) != 1 else ""
    return [
        packed([f"this session: {session.get('judged', 0):,} tasks judged", f"{mine.get('calls', 0):,} calls",
                f"{limited:,} 429s", f"{retries:,} retries", f"{reasks:,} re-asks",
                f"{mine.get('cache_hits', 0):,} from the cache",
                f"{mine.get('prompt_tokens', 0) + mine.get('completion_tokens', 0):,} tokens",
                f"${mine.get('cost', 0.0):.4f}"], width - 1),
        packed([f"whole run ({len(sessions)} session{plural}): {total.get('tasks', 0):,} tasks",
                f"{total.get('scored', 0):,} scored", f"{unscored:,} unscored{why}", f"{paid.get('calls', 0):,} calls",
                f"{paid.get('prompt_tokens', 0) + paid.get('completion_tokens', 0):,} tokens",
                f"${paid.get('cost', 0.0):.4f}"], width - 1),
    ]


def plan_table(plans: Sequence[JudgePlan]) -> Table:
    """One row per judge, narrow enough for 80 columns: a range is two lines, low above high
    ("to ..."); ``~`` marks a token count that is an estimate (the notes say why)."""
    table = Table(title="plan (dry run: nothing sent)", title_justify="left", show_lines=len(plans) > 1)
    table.add_column("judge\nmodel\nprotocol", overflow="fold")
    for column in ("tasks", "prompt\ntokens", "completion\ntokens", "cost $", "wall\ntime"):
        table.add_column(column, justify="right", no_wrap=True)  # figures whole; names fold
    for plan in plans:
        mark = "" if plan.tokens_exact else "~"
        tasks = f"{plan.tasks:,}" + (f"\n{plan.cached:,} cached" if plan.cached else "")
        cost = "[yellow]no price[/yellow]" if plan.cost is None else _span(plan.cost, "{:.4f}")
        table.add_row(f"{plan.judge}\n{plan.model}\n{plan.protocol}", tasks,
                      _span(plan.prompt_tokens, mark + "{:,}"), _span(plan.completion_tokens, "{:,}"),
                      cost, f"{_span(plan.wall_s, None)}\n{plan.bound_by}")
    return table


def _span(span: Span[Any], fmt: str | None) -> str:
    def show(value: Any) -> str:
        return _duration(value) if fmt is None else fmt.format(value)

    low, high = show(span.low), show(span.high)
    return low if low == high else f"{low}\nto {high}"


def plan_lines(plans: Sequence[JudgePlan], *, items: int, run_dir: object) -> list[str]:
    """What the table cannot say: estimates, warnings, assumptions and the totals."""
    lines = [f"~ {p.judge}: {p.token_note}" for p in plans if p.token_note]
    lines += [f"note: {note}" for p in plans for note in p.notes]
    lines += [f"[yellow]warning: {warning}[/yellow]" for p in plans for warning in p.warnings]
    typical: dict[str, int] = {}  # per protocol; a judge capped lower by max_tokens has a note
    for p in plans:
        typical[p.protocol] = max(typical.get(p.protocol, 0), p.completion_per_call)
    answers = ", ".join(f"{protocol} ~{tokens}" for protocol, tokens in typical.items())
    budgets = {p.judge: p.reasks for p in plans}
    budget = (str(plans[0].reasks) if len(set(budgets.values())) == 1
              else ", ".join(f"{judge} {n}" for judge, n in budgets.items()))  # fmt: skip
    lines.append(f"completion tokens per answer ({answers}): the protocol's typical answer, at most max_tokens; "
                 f"ranges: from no re-ask to every task re-asked its whole retries.reasks budget ({budget})")
    priced = [p.cost for p in plans if p.cost is not None]
    unpriced = [p.judge for p in plans if p.cost is None]
    if priced:
        low, high = sum(c.low for c in priced), sum(c.high for c in priced)
        cost = f"estimated cost ${low:.4f}" + (f" to ${high:.4f}" if f"{high:.4f}" != f"{low:.4f}" else "")
        cost += f" (without {', '.join(unpriced)}: no price)" if unpriced else ""
    else:
        cost = "estimated cost unknown (no judge's model has a price)"
    fastest, slowest = (_duration(max((getattr(p.wall_s, end) for p in plans), default=0.0)) for end in ("low", "high"))
    wall = fastest if fastest == slowest else f"{fastest} to {slowest}"
    lines.append(f"{items:,} items; every prompt rendered; {cost}; estimated wall time {wall} "
                 f"(judges run in parallel); run dir {run_dir}")
    return lines
