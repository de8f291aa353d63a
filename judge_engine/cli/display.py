"""Everything the command line draws on a terminal: the one module that imports rich.

* a session as it runs (:class:`SessionView`, from another thread: the run directory first, the
  start line, then a live table per judge on a terminal, or a progress line every N seconds
  otherwise; what a Ctrl-C is doing);
* every table, through one printer (:class:`FitTable`): drawn whole when it fits the terminal;
  otherwise only its prose wraps; when even that cannot fit, drawn long (column groups that each
  fit, the key columns repeated, or a block of "column  value" lines per row). A number or a
  name is never broken or cut;
* the end-of-run summary, the plan table, the ``stats``/``meta`` tables, the protocols table;
* suggested commands and paths, each on a line of its own that no terminal width breaks
  (:func:`command`);
* prose (:func:`say`, notes, table titles and prose cells) broken where
  :mod:`judge_engine.cli.line_breaks` says: never between a figure and its name (:func:`glued`);
* the primitives ``show`` prints transcripts with (:func:`panel`, :func:`rule`).

The engine never calls into this module (that would cost CPU on the hot path, and would make the
engine wait for a terminal): the views sample counters a few times a second and derive rates.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from rich.box import HEAVY_HEAD
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.measure import Measurement
from rich.panel import Panel
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from judge_engine.cli.line_breaks import (
    CONTINUED,
    UNIT_LEAST,
    line_spans,
    longest_unit,
    marked_lines,
)
from judge_engine.rundir.records import DEMO_NOTE, DEMO_TOKENS_NOTE
from judge_engine.running.runtime import JudgeRuntime, RunProgress
from judge_engine.util.money import dollars
from judge_engine.util.naming import judge_ref

if TYPE_CHECKING:
    from judge_engine.running.batch.board import ChunkView
    from judge_engine.running.estimate import JudgePlan, Span
    from judge_engine.running.session import RunResult
    from judge_engine.running.status import RunStatusReport
    from judge_engine.stats.sections import Section

Terminal: TypeAlias = Console
"""Where the command line prints (rich's console), as other ``cli`` modules name it."""

RATE_WINDOW_S = 20.0
PIPED_WIDTH = 160
GRACE_NOTE_S = 10.0
"""What the Ctrl-C message promises (the session's grace period)."""


def make_console(*, stderr: bool = False) -> Console:
    """A console that stays readable when piped (rich would otherwise squeeze tables to 80
    columns), unless the width is asked for (``COLUMNS=80 judge-engine plan ... | less``)."""
    console = Console(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(stderr=stderr, width=PIPED_WIDTH)
    return console


# --- tables -------------------------------------------------------------------------------------

WRAP_LEAST = 20
"""Narrowest a prose column with ``fold_long_words`` is given: a longer word (a URL, an exception
name) folds there rather than pushing the whole table into its long layout."""

Cell: TypeAlias = "str | Text"
"""A table cell: a ``str`` is shown literally (never read as markup); a ``Text`` keeps its styles."""

# --- prose: a figure stays with its name (where: cli/line_breaks.py) -----------------------------


def glued(text: Text | str, width: int) -> Text:
    """``text`` broken into lines of at most ``width`` cells between words, never between a
    figure and its name nor across a comparison (:func:`~judge_engine.cli.line_breaks.joined`),
    its styles kept; a word wider than ``width`` is left for the console to fold."""
    text = text if isinstance(text, Text) else Text(text)
    plain, offset, pieces = text.plain, 0, []
    for line in plain.split("\n"):
        pieces += [text[offset + a:offset + b] for a, b in line_spans(line, max(1, width), cell_len)]
        offset += len(line) + 1
    return Text("\n").join(pieces)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a :class:`FitTable`."""

    header: str
    justify: Literal["left", "right"] = "left"
    wrap: bool = False
    """Prose (a description, a list of names, a reason): may break between words. Every other
    column's cells are never broken: a number, a name or a path is shown whole or the table is
    drawn long."""
    key: bool = False
    """Names the row (a judge, a group): repeated in every part when the table is split into
    column groups, shown first in bold in a block."""
    fold_long_words: bool = False
    """With ``wrap``: a word longer than :data:`WRAP_LEAST` may be folded (error text)."""


class FitTable:
    """A table that fits the width it is drawn in without breaking a number or a name.

    Drawn as a plain rich table when its cells fit whole (the output is then what rich draws for
    it); else, when the prose columns (``wrap``) can take the room left, with only those wrapped;
    else long: split into column groups that each fit with the key columns repeated in each (a
    title says which part), or one block of ``column  value`` lines per row, whichever takes
    fewer lines. The layout is chosen when the table is rendered, so it follows the console it
    is printed on."""

    def __init__(self, columns: Sequence[Column | str], rows: Sequence[Sequence[Cell]], *, title: str = "",
                 title_justify: Literal["left", "center"] = "center", show_lines: bool = False,
                 box: bool = True) -> None:
        self.columns = [c if isinstance(c, Column) else Column(c) for c in columns]
        self.rows = [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
        self.title = title
        self.title_justify = title_justify
        self.show_lines = show_lines
        self.box = box
        self._natural = [max([_widest(Text(c.header)), *(_widest(row[i]) for row in self.rows)])
                         for i, c in enumerate(self.columns)]
        self._least = [self._least_width(i) for i in range(len(self.columns))]
        self._frames: dict[int, int] = {}

    def _least_width(self, index: int) -> int:
        column = self.columns[index]
        if not column.wrap:
            return self._natural[index]
        header = max((len(word) for word in column.header.split()), default=0)
        words = max((_longest_word(row[index]) for row in self.rows), default=0)
        units = max((longest_unit(row[index].plain, cell_len) for row in self.rows), default=0)
        return max(1, header, min(words, WRAP_LEAST) if column.fold_long_words else words, min(units, UNIT_LEAST))

    def _width(self, console: Console, indexes: Sequence[int], widths: Sequence[int]) -> int:
        """The drawn width of these columns at these cell widths (borders and padding added)."""
        if len(indexes) not in self._frames:  # rich's own count of borders and padding
            frame = Table(show_lines=self.show_lines, box=HEAVY_HEAD if self.box else None)
            for _ in indexes:
                frame.add_column(width=1)
            drawn = Measurement.get(console, console.options.update(max_width=10_000), frame).maximum
            self._frames[len(indexes)] = drawn - len(indexes)
        return sum(widths[i] for i in indexes) + self._frames[len(indexes)]

    def _table(self, console: Console, indexes: Sequence[int], widths: Sequence[int] | None, *, title: str) -> Table:
        drawn = self._width(console, indexes, self._natural) if widths is None else \
            self._width(console, range(len(indexes)), widths)  # widths: one per shown column
        heading = glued(Text(title, style="table.title"), drawn) if title else None
        table = Table(title=heading, title_justify=self.title_justify,
                      show_lines=self.show_lines, box=HEAVY_HEAD if self.box else None)
        for position, i in enumerate(indexes):
            column = self.columns[i]
            # Prose that wraps reads from the left, whatever side its column keeps when it fits.
            wrapped = widths is not None and column.wrap and widths[position] < self._natural[i]
            table.add_column(column.header, justify="left" if wrapped else column.justify, no_wrap=not column.wrap,
                             overflow="fold", width=None if widths is None else widths[position])
        for row in self.rows:  # prose cut here, so that a figure stays with its name
            table.add_row(*(glued(row[i], widths[position]) if widths is not None and self.columns[i].wrap else row[i]
                            for position, i in enumerate(indexes)))
        return table

    def _fitted(self, console: Console, indexes: Sequence[int], width: int, *, title: str) -> Table | None:
        """These columns as one table within ``width``, or None when they cannot fit."""
        if self._width(console, indexes, self._natural) <= width:
            return self._table(console, indexes, None, title=title)
        if self._width(console, indexes, self._least) > width:
            return None
        # Fixed widths for the prose columns: each its least, then the room left shared in
        # proportion to what each still wants.
        room = width - self._width(console, indexes, self._least)
        wants = {i: self._natural[i] - self._least[i] for i in indexes if self.columns[i].wrap}
        total = sum(wants.values()) or 1
        extra = {i: min(want, room * want // total) for i, want in wants.items()}
        for i in sorted(wants, key=lambda i: wants[i] - extra[i], reverse=True):
            more = min(wants[i] - extra[i], room - sum(extra.values()))
            extra[i] += max(0, more)
        widths = [self._least[i] + extra[i] if self.columns[i].wrap else self._natural[i] for i in indexes]
        return self._table(console, indexes, widths, title=title)

    def _groups(self, console: Console, shown: Sequence[int], width: int) -> list[Table] | None:
        """The column groups, each with the key columns, or None (no key, or no room for one).
        As many groups as packing them in order takes, evened out so the last is not a stub."""
        keys = [i for i in shown if self.columns[i].key]
        others = [i for i in shown if not self.columns[i].key]
        if not keys or not others:
            return None

        def pack(limit: int) -> list[list[int]]:
            parts: list[list[int]] = [[]]
            for i in others:
                if parts[-1] and self._width(console, [*keys, *parts[-1], i], self._least) > limit:
                    parts.append([])
                parts[-1].append(i)
            return parts

        parts = pack(width)
        low = max(self._width(console, [*keys, i], self._least) for i in others)
        if low > width:
            return None
        high = width
        while low < high:  # the narrowest limit that needs no more groups than the width does
            middle = (low + high) // 2
            if len(pack(middle)) <= len(parts):
                high = middle
            else:
                low = middle + 1
        parts = pack(high)
        tables = []
        for n, part in enumerate(parts, 1):
            title = f"{self.title} ({n}/{len(parts)})" if self.title else ""
            table = self._fitted(console, sorted([*keys, *part]), width, title=title)
            if table is None:
                return None
            tables.append(table)
        return tables

    def _blocks(self, shown: Sequence[int], width: int) -> list[RenderableType]:
        """One block per row: a ``column  value`` line per column, the row's keys first."""
        grid = Table.grid(padding=(0, 2), pad_edge=True)  # indented under the title
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        order = sorted(shown, key=lambda i: not self.columns[i].key)
        headers = {i: " ".join(self.columns[i].header.split()) for i in order}
        room = width - max(cell_len(h) for h in headers.values()) - 8  # the grid's padding: 2 + 4 + 2
        for n, row in enumerate(self.rows):
            if n:
                grid.add_row("", "")
            for i in order:
                value = glued(row[i], room) if self.columns[i].wrap else row[i].copy()
                if self.columns[i].key:
                    value.stylize("bold")
                grid.add_row(Text(headers[i]), value)
        title = [glued(Text(self.title, style="table.title"), width)] if self.title else []
        return [*title, grid]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        everything = list(range(len(self.columns)))
        whole = self._fitted(console, everything, width, title=self.title)
        if whole is None:  # the long layouts leave out columns empty in every row
            shown = [i for i in everything if any(row[i].plain.strip() for row in self.rows)] or everything
            whole = self._fitted(console, shown, width, title=self.title) if shown != everything else None
        if whole is not None:
            yield whole
            return
        layouts: list[list[RenderableType]] = [self._blocks(shown, width)]
        groups = self._groups(console, shown, width)
        if groups is not None:
            layouts.insert(0, list(groups))
        drawn = [console.render_lines(Group(*layout), options, pad=False) for layout in layouts]
        for line in min(drawn, key=len):
            yield from line
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        everything = range(len(self.columns))
        least = self._width(console, everything, self._least)
        natural = self._width(console, everything, self._natural)
        return Measurement(min(least, options.max_width), min(natural, options.max_width))


def _widest(cell: Text) -> int:
    return max((cell_len(line) for line in cell.plain.split("\n")), default=0)


def _longest_word(cell: Text) -> int:
    return max((cell_len(word) for word in cell.plain.split()), default=0)


def print_table(title: str, columns: Sequence[Column | str], rows: Sequence[Sequence[Cell]], *,
                console: Console | None = None, title_justify: Literal["left", "center"] = "center") -> None:
    """A table of text cells (shown literally), fitted to the console (:class:`FitTable`)."""
    (console or make_console()).print(FitTable(columns, rows, title=title, title_justify=title_justify))


def path_line(console: Console, label: str, path: object) -> None:
    """``label: path`` on a line of its own that the console never breaks (shown literally)."""
    console.print(Text(f"{label}: {path}"), soft_wrap=True, highlight=False)


def command(console: Console, text: str, *, lead: str = "") -> None:
    """A suggested command or a path: ``lead`` (prose, wrapped as usual), then the command on a
    line of its own, indented, never broken by the console (a narrow terminal soft-wraps it, so
    a copy and paste still gives the whole command)."""
    if lead:
        console.print(Text(lead), highlight=False)
    console.print(Text(f"  {text}"), soft_wrap=True, highlight=False)


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
        samples.append((now, judge.sent_requests, judge.sent_tokens, c.done - c.resumed))
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
    if judge.paused_for > 0:
        return f" (paused {judge.paused_for:.0f}s)"
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
    """A live view per judge: tasks done of the whole run's, then this session's figures (in
    flight, req/min, tok/min, 429s, retries, re-asks, cache hits, unscored, calls, cost) and ETA.
    A table when the terminal is wide enough for it whole; otherwise (80 columns) a few lines per
    judge, broken between figures, so nothing is ever cut."""

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
        batches = batch_lines(self._judges, width=self._console.width)
        if batches:
            parts.append(Text("\n".join(batches), style="dim"))
        if self.message:
            parts.append(Text(self.message, style="yellow"))
        return Group(*parts)

    def _row(self, judge: JudgeRuntime) -> dict[str, str]:
        c = judge.counters
        rpm, tpm, per_s = self._meters[judge.config.name].sample(judge)
        return {
            "judge": judge.config.name + _state(judge), "done": f"{c.done:,}", "total": f"{c.total:,}",
            "share": f"{c.done / c.total if c.total else 1.0:.0%}", "in flight": str(c.in_flight),
            "req/min": _compact(rpm), "tok/min": _compact(tpm), "429s": str(judge.rate_limited),
            "retries": str(c.retries), "re-asks": str(c.reasks), "cache hits": str(c.cache_hits),
            "unscored": str(c.unscored), "calls": f"{c.calls:,}", "cost": dollars(c.cost),
            "ETA": _duration(_eta(judge, per_s)),
        }

    def table(self, rows: Sequence[dict[str, str]]) -> Table:
        table = Table(title="judge-engine: tasks of the whole run, the rest this session", expand=False)
        columns = ("judge", "tasks (run)", "in flight", "req/min", "tok/min", "429s", "retries", "re-asks",
                   "cache hits", "unscored", "calls", "cost", "ETA")
        for column in columns:
            table.add_column(column, justify="right" if column != "judge" else "left", no_wrap=True)
        for row in rows:
            table.add_row(row["judge"], f"{row['done']}/{row['total']}", row["in flight"], row["req/min"],
                          row["tok/min"], row["429s"], row["retries"], row["re-asks"], row["cache hits"],
                          row["unscored"], row["calls"], row["cost"], row["ETA"])
        return table

    def lines(self, rows: Sequence[dict[str, str]]) -> Text:
        """A few lines per judge, for terminals too narrow for the table."""
        width = max(40, self._console.width - 1)
        text = Text()
        for row in rows:
            text.append(packed([row["judge"], f"tasks {row['done']}/{row['total']} ({row['share']}, run)",
                                f"in flight {row['in flight']}", f"ETA {row['ETA']}"],
                               width, separator="  ") + "\n", style="bold")
            figures = packed([f"this session: {row['calls']} calls", row["cost"], f"{row['req/min']} req/min",
                              f"{row['tok/min']} tok/min", f"{row['429s']} 429s", f"{row['retries']} retries",
                              f"{row['re-asks']} re-asks", f"{row['cache hits']} cached", f"{row['unscored']} unscored"],
                             width - 2, indent="")
            text.append("".join(f"  {line}\n" for line in figures.splitlines()), style="dim")
        text.rstrip()
        return text


def progress_lines(judges: Sequence[JudgeRuntime], meters: Mapping[str, RateMeter], elapsed_s: float) -> list[str]:
    """One line per judge, for output that is not a terminal (a long CI job is not silent)."""
    out = []
    for judge in judges:
        c = judge.counters
        rpm, _tpm, per_s = meters[judge.config.name].sample(judge)
        share = c.done / c.total if c.total else 1.0
        out.append(f"[{_duration(elapsed_s)}] {judge.config.name}{_state(judge)}: tasks {c.done:,}/{c.total:,} "
                   f"({share:.0%}, run) · this session: {c.calls:,} calls, {dollars(c.cost)}, {c.unscored} unscored, "
                   f"{c.retries} retries · {rpm:,.0f} req/min · ETA {_duration(_eta(judge, per_s))}")
    return out + batch_lines(judges, width=PIPED_WIDTH)


BATCH_ROWS = 6
"""Open batches shown per judge (the rest are counted)."""


def chunk_parts(view: ChunkView) -> list[str]:
    """One batch's figures: ``mqm-r1-00002 in_progress``, the provider's batch id,
    ``2,000/5,000 done``, ``12 failed``, ``age 2h58m``."""
    parts = [f"{view.chunk} {view.status}", *([view.batch_id] if view.batch_id else []),
             f"{view.completed:,}/{view.requests:,} done"]
    parts += [f"{n:,} {what}" for n, what in ((view.failed, "failed"), (view.expired, "expired")) if n]
    age = view.age_s
    return parts if age is None else [*parts, f"age {_duration(age)}"]


def batch_lines(judges: Sequence[JudgeRuntime], *, width: int = 80) -> list[str]:
    """Per batch-mode judge: what its batches are doing (a summary, then its open batches),
    broken between figures to fit ``width``."""
    import textwrap

    lines: list[str] = []
    for judge in judges:
        board = judge.batch
        if board is None:
            continue
        views = board.open_chunks()
        summary = [f"{judge.config.name}: {len(views)} open batch{'es' if len(views) != 1 else ''} ({board.api})"]
        if board.waiting:
            summary.append(f"{board.waiting:,} waiting for the next round")
        if board.online:
            summary.append(f"{board.online:,} sent on online")
        summary.append("all submitted" if board.submitted_all else "submitting")
        lines += packed(summary, width - 1).splitlines()
        for view in views[:BATCH_ROWS]:
            lines += [f"  {line}" for line in packed(chunk_parts(view), width - 3, separator=", ").splitlines()]
        if len(views) > BATCH_ROWS:
            lines.append(f"  ... {len(views) - BATCH_ROWS} more")
        if board.note:
            lines += textwrap.wrap(board.note, width - 1, initial_indent="  ", subsequent_indent="    ")
    return lines


def status_report(report: RunStatusReport, console: Console) -> None:
    """``judge-engine status``: the run, then per judge its tasks and (batch mode) its batches."""
    manifest = report.manifest
    state = "a judge-engine process is writing it now" if report.writing else "no process is writing it"
    status: str = manifest.status
    if status == "stopped" and manifest.stopped and manifest.stopped.get("reason"):
        status += f": {manifest.stopped['reason']}"
    if status == "running" and not report.writing:  # killed: run.json was never told
        status = "not running (its process ended without closing it; run.json still says running)"
    console.print(packed([f"run {manifest.run_id}: {status}", state, f"updated {manifest.updated_at}"],
                         console.width - 1), highlight=False)
    if manifest.demo:
        console.print(f"[yellow]{DEMO_NOTE}[/yellow]")
    stopped = manifest.stopped or {}
    if stopped.get("reason") == "disk":  # the path and why: room to make before a resume
        console.print(f"[yellow]{escape(str(stopped.get('message') or stopped.get('path')))}[/yellow]", highlight=False)
    for note in report.notes:
        console.print(f"[yellow]{escape(note)}[/yellow]")
    money = report.money
    console.print(packed([f"whole run: {money.spend.calls:,} calls", f"{money.spend.tokens:,} tokens",
                          *money.parts()], console.width - 1), highlight=False)
    if manifest.demo:
        console.print(f"[yellow]{DEMO_TOKENS_NOTE}[/yellow]")
    for judge in report.judges:
        share = judge.done / judge.tasks if judge.tasks else 1.0
        batches = [f"{judge.in_batches:,} in batches", f"{judge.waiting:,} waiting for another request"]
        if judge.to_collect:  # a cancelled (or ended) batch: resume keeps its answers and sends the rest
            batches[1:1] = [f"{judge.to_collect:,} in ended batches, to collect"]
        online = judge.mode == "online" and not (judge.in_batches or judge.waiting or judge.to_collect)
        done = f"{judge.done:,}/{judge.tasks:,} done ({share:.0%})" if judge.tasks else "no task (not asked)"
        console.print(packed([f"{judge.name} ({judge.mode}, {judge.model})", done, f"{judge.scored:,} scored", f"{judge.unscored:,} unscored" + (
                                  " (" + ", ".join(f"{c}={n:,}" for c, n in judge.unscored_by_code.items()) + ")"
                                  if judge.unscored_by_code else ""),
                              *([] if online else batches), f"{judge.not_sent:,} not sent yet",
                              f"{judge.money.spend.calls:,} calls", *judge.money.parts()], console.width - 1),
                      highlight=False)
        if not judge.chunks:
            continue
        # The provider's id beside the state: at 80 columns the figures go to a second part.
        columns = [Column(c, justify="left" if c in ("chunk", "state", "provider's batch") else "right",
                          key=c == "chunk")
                   for c in ("chunk", "state", "provider's batch", "round", "requests", "done", "failed", "expired",
                             "age")]
        rows = []
        for view in judge.chunks:
            age = view.age_s if view.open else None
            rows.append([view.chunk, view.status, view.batch_id or "-", str(view.round), f"{view.requests:,}",
                         f"{view.completed:,}", f"{view.failed:,}", f"{view.expired:,}",
                         _duration(age) if age is not None else ""])
        console.print(FitTable(columns, rows, title_justify="left", box=False))


def start_line(progress: RunProgress) -> str:
    """What the session is about to do (resumed, retried or fresh)."""
    total, done = progress.total, progress.done_before
    if progress.retry is not None:
        again = progress.judging_again
        codes = "every unscored task" if "unscored" in progress.retry else ", ".join(sorted(progress.retry))
        return (f"Judging again {again:,} tasks ({codes}) and {max(0, total - done - again):,} not yet judged; "
                f"{done:,} of {total:,} stay as they are")
    if done:
        return (f"Resuming: {done:,} of {total:,} tasks already done; judging the other {max(0, total - done):,}"
                + _escalating(progress.stages))
    if len(progress.stages) > 1:
        return f"Judging {total:,} tasks of stage {progress.stages[0]}" + _escalating(progress.stages)
    return f"Judging {total:,} tasks"


def _escalating(stages: Sequence[str]) -> str:
    """A cascade's total grows as items escalate: said at the start, or the end's count (the
    escalations' tasks included) reads as a mistake."""
    return f"; more as items escalate to {', '.join(stages[1:])}" if len(stages) > 1 else ""


def stop_message(calls: int) -> str:
    if not calls:
        return "Stopping: no new calls go out and none is in flight."
    return (f"Stopping: no new calls go out; finishing {calls} call{'s' if calls != 1 else ''} in flight "
            f"(at most {GRACE_NOTE_S:g}s). Ctrl-C again to abort {'them' if calls != 1 else 'it'}.")


class SessionView:
    """Shows a session while it runs, from a thread of its own, reading only its
    :class:`~judge_engine.running.runtime.RunProgress`: the run directory first, then the start line,
    then a live display (a terminal) or a progress line every ``every_s`` seconds, and what a
    Ctrl-C is doing. On exit, whatever it had not printed yet is printed, in order."""

    POLL_S = 0.05
    """How often the view looks at a session that is starting (its run directory, its start line).
    A running one wakes it (:attr:`RunProgress.changed <judge_engine.running.runtime.RunProgress.changed>`:
    a Ctrl-C), and so does a progress line when it is due; nothing else does: a paced run can wait
    on its pacer for minutes, and every wake-up of this thread costs the engine CPU (20 a second
    took 1.5 ms of CPU a second)."""

    def __init__(self, progress: RunProgress, *, console: Console, live: bool, every_s: float) -> None:
        self._progress = progress
        self._console = console
        self._live_wanted = live and console.is_terminal
        self._every_s = every_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="judge-engine-view", daemon=True)
        self._said_dir = self._said_start = self._said_stop = False
        self._live: LiveDisplay | None = None
        self._meters: dict[str, RateMeter] = {}
        self._started = time.monotonic()
        self._next_lines = 0.0

    def __enter__(self) -> SessionView:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._progress.changed.set()
        self._thread.join()
        self._step()  # anything the thread had no time to say
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def _loop(self) -> None:
        changed = self._progress.changed
        while True:
            changed.wait(self._next_look())
            changed.clear()  # before looking: what changed after this is seen now or wakes the next wait
            if self._done.is_set():
                return
            self._step()

    def _next_look(self) -> float | None:
        if not self._said_start:
            return self.POLL_S
        if self._live is None:
            return max(0.0, self._next_lines - time.monotonic())
        return None  # the live display redraws itself; a stop wakes this thread

    def _step(self) -> None:
        progress, console = self._progress, self._console
        if not self._said_dir and progress.run_dir is not None:
            self._said_dir = True
            path_line(console, "Run directory", progress.run_dir)
            if progress.demo and not self._live_wanted:  # the live display shows it above its figures
                console.print(f"[bold yellow]{DEMO_NOTE}[/bold yellow]")
            for warning in progress.warnings:
                console.print(f"[bold yellow]warning:[/bold yellow] {escape(warning)}", highlight=False)
        if not self._said_start and progress.started:
            self._said_start = True
            console.print(start_line(progress), highlight=False)
            self._meters = {j.config.name: RateMeter() for j in progress.judges}
            for judge in progress.judges:
                self._meters[judge.config.name].sample(judge)
            self._next_lines = time.monotonic() + self._every_s
            if self._live_wanted:
                self._live = LiveDisplay(progress.judges, console=console, banner=DEMO_NOTE if progress.demo else "")
                self._live.__enter__()
        if progress.stop_requested_at is not None and not self._said_stop and self._said_start:
            self._said_stop = True
            message = stop_message(progress.in_flight)
            if self._live is not None:
                self._live.message = message
            else:
                console.print(f"[yellow]{message}[/yellow]")
        if self._live is None and self._said_start and not self._done.is_set() and time.monotonic() >= self._next_lines:
            self._next_lines = time.monotonic() + self._every_s
            for line in progress_lines(progress.judges, self._meters, time.monotonic() - self._started):
                console.print(line, highlight=False, soft_wrap=True)


def _codes(by_code: Mapping[str, int]) -> str:
    return ", ".join(f"{code} {n:,}" for code, n in sorted(by_code.items(), key=lambda kv: -kv[1]))


def summary(result: RunResult, *, width: int = 80) -> Group:
    """The end-of-run summary: per judge, the whole run's outcomes and spend; then this session's
    share and the whole run's totals on two lines (they differ after a resume)."""
    manifest = result.manifest
    counts = manifest.counts.get("judges", {})
    spend = manifest.spend.get("judges", {})
    columns = [Column("judge", key=True), *(Column(c, justify="right") for c in
                                            ("scored", "unscored", "calls", "tokens", "cost"))]
    rows: list[list[Cell]] = []
    for judge in result.judges:
        per, paid = counts.get(judge.name, {}), spend.get(judge.name, {})
        label = Text(judge.name, style="bold")
        label.append(f"\n{judge.model}\n{judge.protocol}", style="dim")
        rows.append([label, f"{per.get('scored', 0):,}", f"{per.get('unscored', 0):,}", f"{paid.get('calls', 0):,}",
                     f"{paid.get('prompt_tokens', 0) + paid.get('completion_tokens', 0):,}",
                     _cost(paid, "\n")])
    cascade = (manifest.cascade or {}).get("name")
    for name in sorted(set(counts) - {judge.name for judge in result.judges}):  # juries, items: no calls of their own
        kind = "item decisions" if name.endswith(":item") else "cascade" if name == cascade else "jury"
        rows.append([Text(name, style="bold") + Text(f"\n{kind}", style="dim"), f"{counts[name].get('scored', 0):,}",
                     f"{counts[name].get('unscored', 0):,}", "", "", ""])
    table = FitTable(columns, rows, title=f"run {manifest.run_id}: {result.status} in {_duration(result.elapsed_s)}",
                     title_justify="left")
    # This session's calls per deployment: they add up to its calls on the "this session" line.
    lines = [f"{judge.name} this session: " + ", ".join(f"{name} {what}" for name, what in judge.deployments.items())
             for judge in result.judges if judge.deployments]
    from judge_engine.trust.cascade.report import summary_lines

    cascade_lines = summary_lines(manifest.cascade, manifest.counts)  # sentences: a figure stays with its name
    return Group(table, *(Text(packed(line.split(", "), width - 1, separator=", ")) for line in lines),
                 *(glued(line, width - 1) for line in cascade_lines),
                 *(Text(line) for line in totals_lines(result, width=width)))


def totals_lines(result: RunResult, *, width: int = 80) -> list[str]:
    """'this session: ...' and 'whole run: ...', each broken between figures to fit ``width``."""
    manifest = result.manifest
    sessions = manifest.sessions or [{}]
    session = sessions[-1]
    mine = (session.get("spend") or {}).get("total", {})
    retries = sum(j.retries for j in result.judges)
    reasks = sum(j.reasks for j in result.judges)
    limited = sum(j.rate_limited for j in result.judges)
    total = manifest.counts.get("total", {})
    paid = manifest.spend.get("total", {})
    unscored = total.get("unscored", 0)
    plural = "s" if len(sessions) != 1 else ""
    return [
        packed([f"this session: {session.get('judged', 0):,} tasks judged", f"{mine.get('calls', 0):,} calls",
                f"{limited:,} 429s", f"{retries:,} retries", f"{reasks:,} re-asks",
                f"{mine.get('cache_hits', 0):,} from the cache",
                f"{mine.get('prompt_tokens', 0) + mine.get('completion_tokens', 0):,} tokens",
                _cost(mine), *_estimated(mine)], width - 1),
        packed([f"whole run ({len(sessions)} session{plural}): {total.get('tasks', 0):,} tasks",
                f"{total.get('scored', 0):,} scored", unscored_part(unscored, total.get("unscored_by_code") or {}),
                f"{paid.get('calls', 0):,} calls",
                f"{paid.get('prompt_tokens', 0) + paid.get('completion_tokens', 0):,} tokens",
                _cost(paid), *_estimated(paid)], width - 1),
    ]


def unscored_part(unscored: int, by_code: Mapping[str, int]) -> str:
    """``N unscored`` with its reason codes, the failures apart from the codes that are a
    method's answer (:data:`judge_engine.cli.NOT_FAILURES`: a tie, an abstention, a task
    held back on purpose), which the exit code does not count either."""
    from judge_engine.cli import NOT_FAILURES

    if not unscored:
        return "0 unscored"
    failures = {code: n for code, n in by_code.items() if code not in NOT_FAILURES}
    answers = {code: n for code, n in by_code.items() if code in NOT_FAILURES}
    if not failures and answers:
        return f"{unscored:,} unscored, none a failure ({_codes(answers)})"
    if not answers:
        return f"{unscored:,} unscored ({_codes(by_code)})"
    return f"{unscored:,} unscored ({_codes(failures)}; not failures: {_codes(answers)})"


def _cost(spend: Mapping[str, Any], separator: str = " ") -> str:
    """A spend's cost, and the calls it leaves out: answered at no known price (never a silent $0);
    the part of it that is an estimate for calls billed but not read, when there is one."""
    unpriced = int(spend.get("unpriced") or 0)
    cost = dollars(float(spend.get("cost") or 0.0))
    if spend.get("estimated_calls"):
        cost += f"{separator}incl. ~{dollars(float(spend.get('estimated_cost') or 0.0))} est."
    return cost if not unpriced else f"{cost}{separator}+ {unpriced:,} unpriced"


def _estimated(spend: Mapping[str, Any]) -> list[str]:
    """The calls billed but not read (booked at an estimate), as a figure of a totals line."""
    calls = int(spend.get("estimated_calls") or 0)
    return [f"{calls:,} answers billed but not read (~{dollars(float(spend.get('estimated_cost') or 0.0))} "
            "estimated)"] if calls else []


def plan_table(plans: Sequence[JudgePlan]) -> FitTable:
    """One row per judge, narrow enough for 80 columns with short model names: a range is two
    lines, low above high ("to ..."); ``~`` marks a token count that is an estimate (the notes
    say why). Names and figures are never broken: a long model name draws it long."""
    columns = [Column("judge\nmodel\nprotocol", key=True),
               *(Column(name, justify="right") for name in
                 ("tasks", "prompt\ntokens", "completion\ntokens", "cost", "wall time\nbound by"))]
    rows: list[list[Cell]] = []
    for plan in plans:
        mark = "" if plan.tokens_exact else "~"
        tasks = f"{plan.tasks:,}" + (f"\n{plan.cached:,} cached" if plan.cached else "")
        paid = plan.batch.cost if plan.batch is not None and plan.batch.in_use else plan.cost
        # The limit's name alone ("concurrency", under "bound by"): whole, and as narrow as the column was.
        bound = plan.bound_by.removesuffix("-bound")
        cost = Text("no price", style="yellow") if paid is None else _span(paid, dollars)
        rows.append([f"{plan.judge}\n{plan.model}\n{plan.protocol}", tasks,
                     _span(plan.prompt_tokens, mark + "{:,}"), _span(plan.completion_tokens, "{:,}"),
                     cost, f"{_span(plan.wall_s, None)}\n{bound}"])
    return FitTable(columns, rows, title="plan (dry run: nothing sent)", title_justify="left",
                    show_lines=len(plans) > 1)


def _span(span: Span[Any], fmt: str | Callable[[Any], str] | None) -> str:
    def show(value: Any) -> str:
        if fmt is None:
            return _duration(value)
        return fmt.format(value) if isinstance(fmt, str) else fmt(value)

    low, high = show(span.low), show(span.high)
    return low if low == high else f"{low}\nto {high}"


def plan_lines(plans: Sequence[JudgePlan], *, items: int) -> list[str]:
    """What the table cannot say: estimates, warnings, assumptions and the totals."""
    lines = [escape(f"~ {judge_ref(p.judge)}: {p.token_note}") for p in plans if p.token_note]
    lines += [escape(f"note: {note}") for p in plans for note in p.notes]  # judges[mqm] is no markup
    lines += [f"[yellow]{escape(f'warning: {warning}')}[/yellow]" for p in plans for warning in p.warnings]
    typical: dict[str, int] = {}  # per protocol; a judge capped lower by max_tokens has a note
    for p in plans:
        typical[p.protocol] = max(typical.get(p.protocol, 0), p.completion_per_call)
    answers = ", ".join(f"{protocol} ~{tokens}" for protocol, tokens in typical.items())
    budgets = {p.judge: p.reasks for p in plans}
    budget = (str(plans[0].reasks) if len(set(budgets.values())) == 1
              else ", ".join(f"{judge} {n}" for judge, n in budgets.items()))  # fmt: skip
    lines.append(f"completion tokens per answer ({answers}): the protocol's typical answer, at most max_tokens; "
                 f"ranges: from no re-ask to every task re-asked its whole retries.reasks budget ({budget})")
    lines += [escape(line) for p in plans if (line := _batch_plan_line(p))]
    paid = [p.batch.cost if p.batch is not None and p.batch.in_use else p.cost for p in plans]
    priced = [c for c in paid if c is not None]
    unpriced = [p.judge for p, c in zip(plans, paid, strict=True) if c is None]
    if priced:
        low, high = sum(c.low for c in priced), sum(c.high for c in priced)
        cost = f"estimated cost {dollars(low)}" + (f" to {dollars(high)}" if dollars(high) != dollars(low) else "")
        cost += f" (without {', '.join(unpriced)}: no price)" if unpriced else ""
    else:
        cost = "estimated cost unknown (no judge's model has a price)"
    fastest, slowest = (_duration(max((getattr(p.wall_s, end) for p in plans), default=0.0)) for end in ("low", "high"))
    wall = fastest if fastest == slowest else f"{fastest} to {slowest}"
    lines.append(f"{items:,} items; every prompt rendered; {cost}; estimated wall time {wall} "
                 "(judges run in parallel)")
    return lines


def _batch_plan_line(plan: JudgePlan) -> str:
    """Online against batch: the two costs, where the batch price comes from, the window."""
    batch = plan.batch
    if batch is None or batch.cost is None or plan.cost is None:
        return ""
    source = "litellm's batch prices" if batch.listed else "half the online price (litellm lists no batch price)"
    online, batched = _span(plan.cost, dollars).replace("\n", " "), _span(batch.cost, dollars).replace("\n", " ")
    if batch.in_use:
        return (f"batch: {judge_ref(plan.judge)} runs in batch mode ({batch.api}, {batch.batches:,} batch"
                f"{'es' if batch.batches != 1 else ''}): {batched} at {source}, against {online} online; "
                f"results within {batch.window}")
    return (f"batch: {judge_ref(plan.judge)} would cost {batched} in batch mode (--batch; {source}, "
            f"results within {batch.window})")


# --- stats and meta -------------------------------------------------------------------------------


def render_sections(sections: Sequence[Section], notes: Sequence[str],
                    labels: Mapping[str, str] | None = None) -> None:
    """Print report sections as tables (a section that does not apply: one line saying why).
    ``labels``: how to show some judges' names (a judge ``--model`` swapped: its name with the
    model it ran, :func:`~judge_engine.util.naming.with_model`), in every column of names."""
    # Piped output has no terminal width; wide tables would otherwise be cut to 80 columns.
    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(width=240)
    for note in notes:
        say(console, f"[yellow]note:[/] {escape(note)}")
    for s in sections:
        if s.absent:  # one line saying why, instead of an empty table
            say(console, f"{escape(s.title)}: [yellow]not shown[/]: {escape(s.absent)}")
            continue
        rows = [{c: _labelled(r.get(c), labels) if c in JUDGE_NAMES and labels else r.get(c) for c in s.columns}
                for r in s.rows]
        console.print(FitTable(section_columns(s.columns), [[_cell(r[c], small=c in s.small_values,
                                                                   money=c in s.dollar_values, shown=s.formats.get(c))
                                                             for c in s.columns] for r in rows],
                               title=s.title, title_justify="left"))
        for note in s.notes:
            say(console, escape(f"  {note}"))


JUDGE_NAMES = frozenset({"judge", "jury", "juror", "jurors", "judges", "stage", "group"})
"""Section columns that hold judges' names (one, or a list; an estimate's group is its judge,
or ``judge / group``)."""


def _labelled(value: Any, labels: Mapping[str, str]) -> Any:
    """A cell of judges' names with each shown as ``labels`` says: one name, a list, or names
    joined by ``, ``, `` ~ `` (a pair of judges) or `` / `` (a judge's group)."""
    if isinstance(value, str):
        return "".join(labels.get(part, part) for part in _NAME_PARTS.split(value))
    if isinstance(value, list | tuple):
        return [labels.get(v, v) if isinstance(v, str) else v for v in value]
    return value


_NAME_PARTS = re.compile(r"(, | ~ | / )")
"""What joins several judges' names in one cell (kept when the cell is split)."""


LABELS = frozenset({"group", "judge", "human", "judges", "point", "statistic", "dimension", "field", "length_of",
                    "family", "own_systems", "system", "reference", "beaten_by", "by_code", "stage"})
"""Section columns of names and labels (left-justified); the others hold figures."""
ROW_NAMES = LABELS | {"temperature", "variant", "level", "t1", "t2", "jury", "juror", "candidate", "position",
                      "metric", "versus"}
"""Columns that say which row it is, when a section begins with them: the keys of its long layout."""
LISTS = frozenset({"judges", "own_systems", "jurors", "beaten_by", "by_code"})
"""Columns holding several names: they may wrap between names."""
PROSE = frozenset({"top_reason"})
"""Columns of sentences (a reason may be an error's text): they wrap, and fold a very long word."""


def section_columns(names: Sequence[str]) -> list[Column]:
    """A section's columns: labels on the left, figures on the right; its leading row names are
    its keys."""
    leading = 0
    while leading < len(names) and names[leading] in ROW_NAMES:
        leading += 1
    return [Column(name, justify="left" if name in LABELS else "right", wrap=name in LISTS | PROSE,
                   key=i < leading, fold_long_words=name in PROSE) for i, name in enumerate(names)]


def _cell(value: Any, *, small: bool = False, money: bool = False, shown: Callable[[float], str] | None = None) -> str:
    """A value as a table shows it: three decimals, or with ``small`` (p-values) two significant
    digits below 0.01, since a p of 3e-06 is not 0.000, nor 0.0013 0.001; with ``money``, as
    dollars (:func:`~judge_engine.util.money.dollars`); with ``shown``, a number as it writes it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if money and isinstance(value, int | float):
        return dollars(float(value))
    if shown is not None and isinstance(value, int | float):
        return shown(float(value))
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return f"{_cell(value[0])}..{_cell(value[1])}"  # an interval
    if isinstance(value, float):
        return f"{value:.2g}" if small and 0 < abs(value) < 0.01 else f"{value:.3f}"
    return str(value)


# --- show: transcripts ----------------------------------------------------------------------------


def rule(console: Console, text: str) -> None:
    """A heading line: ``text`` (literal) in a horizontal rule when it fits there whole; else the
    rule, then ``text`` broken between its `` · `` parts, so nothing is cut."""
    if cell_len(text) + 6 <= console.width:  # rich's rule: "── " and " ──" at least
        console.rule(Text(text))
        return
    console.rule()
    console.print(Text(packed(text.split(" · "), console.width - 1)), highlight=False)


def panel(console: Console, text: str, *, title: str, style: str = "none", marked: bool = False) -> None:
    """Text in a titled box; the text is shown literally (never read as markup). With
    ``marked``, a line of the text wider than the box is broken between words and each of its
    continuations starts with a dim ``↳`` (:func:`~judge_engine.cli.line_breaks.marked_lines`),
    so the text's own lines (a template's) read as written."""
    body = Text(text)
    if marked:
        lines = []
        for line in text.split("\n"):
            first, *more = marked_lines(line, console.width - 4, cell_len)  # inside the borders and padding
            lines.append(Text(first) + Text("").join(Text("\n") + Text(CONTINUED, style="dim") + Text(m) for m in more))
        body = Text("\n").join(lines)
    console.print(Panel(body, title=title, title_align="left", border_style=style))


def escape(text: str) -> str:
    """Run text made safe to put inside our markup (a judge's ``[bold]`` stays literal)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def say(console: Console, markup: str) -> None:
    """A line with rich markup (for our own words only: never for run text), broken to the
    console's width between words, never between a figure and its name (:func:`glued`)."""
    console.print(glued(Text.from_markup(markup), console.width), highlight=False)
