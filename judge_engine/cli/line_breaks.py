"""Where a line of prose may break, for everything the command line prints (drawn by
:mod:`judge_engine.cli.display`, the one module that imports rich): between words, never between
a figure and its name nor across a comparison (``bound 0.254 > 0.15`` stays on one line), and a
template's line wider than its box broken with each continuation marked (:data:`CONTINUED`), so
its own lines still read as written.

Pure string work: widths are measured with the caller's function (``display`` passes rich's
cell width, so a wide character counts two).
"""

from __future__ import annotations

import re
from collections.abc import Callable

COMPARISONS = frozenset({"<", ">", "<=", ">=", "=", "==", "!=", "≤", "≥", "≠"})
_FIGURE = re.compile(r"[(\[~$±+-]*[\d.]*\d")
"""A word that is a figure: 0.254, $0.01, ~34,786, (0.5), 95.0%, -25."""
_CLOSED = (",", ";", ":", ")", ".")
_WORD = re.compile(r"\S+")
UNIT_LEAST = 32
"""Widest a run of words that must stay together (``strong 0.6060 < 0.6145``) asks of a prose
column: a longer one is broken between its words there, as a last resort."""
CONTINUED = "↳ "
"""Starts a line that continues the one above it (:func:`marked_lines`)."""

Measure = Callable[[str], int]


def joined(before: str, after: str) -> bool:
    """Whether two neighbouring words must stay on one line: a figure and the word before it
    (``bound 0.254``), a figure and the word after it (``20 items``, ``0 held``) unless
    punctuation closes the figure, and either side of a comparison (``0.254 > 0.15``)."""
    if before in COMPARISONS or after in COMPARISONS:
        return True
    if _FIGURE.match(after) and not before.endswith((",", ";", ":")):
        return True
    return bool(_FIGURE.match(before)) and not before.endswith(_CLOSED)


def units(line: str) -> list[list[re.Match[str]]]:
    """A line's words grouped into the runs that stay together (:func:`joined`)."""
    runs: list[list[re.Match[str]]] = []
    for word in _WORD.finditer(line):
        if runs and joined(runs[-1][-1].group(), word.group()):
            runs[-1].append(word)
        else:
            runs.append([word])
    return runs


def longest_unit(text: str, measure: Measure = len) -> int:
    """The widest run of words in ``text`` that stays together."""
    return max((measure(line[u[0].start():u[-1].end()]) for line in text.split("\n") for u in units(line)), default=0)


def line_spans(line: str, width: int, measure: Measure = len) -> list[tuple[int, int]]:
    """Where to cut ``line`` (no newline in it) into lines of at most ``width``, as ``(start,
    end)`` offsets: between words, and inside a run that stays together only when the run alone
    is wider than ``width``. A word wider than ``width`` is a line of its own (to fold)."""
    if measure(line) <= width:
        return [(0, len(line))]
    pieces: list[tuple[int, int]] = []
    for unit in units(line):
        start, end = unit[0].start(), unit[-1].end()
        if measure(line[start:end]) > width and len(unit) > 1:  # too wide even alone: its words
            pieces += [(w.start(), w.end()) for w in unit]
        else:
            pieces.append((start, end))
    spans: list[tuple[int, int]] = []
    first, last = 0, None  # the first line keeps its leading blanks
    for start, end in pieces:
        if last is not None and measure(line[first:end]) > width:
            spans.append((first, last))
            first = start
        last = end
    spans.append((first, last if last is not None else len(line)))
    return spans


def marked_lines(line: str, width: int, measure: Measure = len) -> list[str]:
    """A template's ``line`` in a box ``width`` wide: whole when it fits, else broken between
    words (a word wider than the box folds), each continuation to be shown after
    :data:`CONTINUED` (returned without it)."""
    parts: list[str] = []
    rest = line
    while measure(rest) > width - (len(CONTINUED) if parts else 0):
        room = width - (len(CONTINUED) if parts else 0)
        cut = rest.rfind(" ", 0, room + 1)
        if cut <= len(rest) - len(rest.lstrip(" ")):  # no blank to break at: fold the word
            cut = room
        parts.append(rest[:cut].rstrip(" "))
        rest = rest[cut:].lstrip(" ")
    return [*parts, rest]
