"""Texts with marked spans, as every card sends them: **segments**, ``[{"text", "marks":
[indices]}]``, the text cut at every span boundary, each piece listing the spans that cover it
(spans may overlap); and quotes found in a text server-side with :func:`judge_engine.util.text.locate`
(exact, else after folding case, quote marks and spacing), so the page never searches text, and
what is highlighted is what the protocol itself found.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judge_engine.util.text import locate

Segments = list[dict[str, Any]]


def segments(text: str, spans: Sequence[tuple[int, int, int]]) -> Segments:
    """``text`` cut at every boundary of ``spans`` (``(start, end, index)``), each piece with
    the indices of the spans covering it."""
    cuts = sorted({0, len(text), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    pieces = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        if start < end:
            pieces.append({"text": text[start:end], "marks": [i for s, e, i in spans if s <= start and end <= e]})
    return pieces


def find(needle: str, haystack: str) -> tuple[str, tuple[int, int] | None]:
    """(``exact``/``normalised``/``none``, offsets) of a quote in a text."""
    found = locate(needle, haystack) if needle.strip() else None
    if found is None:
        return "none", None
    return ("exact" if haystack[found[0]:found[1]] == needle.strip() else "normalised"), found
