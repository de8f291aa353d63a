"""Text normalisation: the one home of unidecode, with two levels for two different jobs.

**Comparing two expressions the way the authors did** (:func:`transliterate`). The
close-reading F1 of Death of the Novel(ty) (:func:`judge_engine.stats.spans.expressions_match`)
transliterates both strings to ASCII and nothing more; case, quote marks and spacing still count,
and the fuzzy ratio takes care of the rest. That rule reproduces the published numbers, so it
stays exactly the authors': no case folding, no quote folding.

**Finding where a quote sits in a text** (:func:`locate`). A judge that quotes a passage (a
close-reading expression, an MQM error span) often changes what it copies: another case, straight
for curly quote marks, one space for a line break. :func:`fold` transliterates, case-folds,
folds every quote mark to ``'`` and collapses whitespace, remembering for each folded character
the original character it came from, so a match in the folded text maps back to offsets
``[start, end)`` in the original.

The two must not be merged: folding more in the authors' matcher would change published F1,
and folding less in :func:`locate` would lose spans a reader sees are there.
"""

from __future__ import annotations

from unidecode import unidecode

QUOTE_MARKS = "\"'“”„‟‘’‚‛«»`´"
"""Every quote mark a judge may write for another: all fold to ``'``."""

_FOLD_QUOTES = str.maketrans({c: "'" for c in QUOTE_MARKS})


def transliterate(text: str) -> str:
    """``text`` in ASCII (unidecode): the authors' rule, with nothing folded (see above)."""
    return unidecode(text)


def locate(needle: str, haystack: str) -> tuple[int, int] | None:
    """Character offsets ``[start, end)`` of ``needle`` in ``haystack``, or None.

    An exact substring first; else a normalised match (:func:`fold` on both texts), with the
    offsets mapped back to the original ``haystack``. The needle is stripped first, and the first
    occurrence wins. A blank needle is never found.
    """
    needle = needle.strip()
    if not needle:
        return None
    start = haystack.find(needle)
    if start != -1:
        return start, start + len(needle)
    folded_haystack, origin = fold(haystack)
    folded_needle = fold(needle)[0].strip()
    if not folded_needle:
        return None
    # A match must not start or end inside one character's expansion ("—" folds to "--"): such a
    # span would cover half a character and map back to a longer text than the quote.
    at = folded_haystack.find(folded_needle)
    while at != -1:
        last = at + len(folded_needle) - 1
        starts_clean = at == 0 or origin[at - 1] != origin[at]
        ends_clean = last + 1 == len(origin) or origin[last + 1] != origin[last]
        if starts_clean and ends_clean:
            return origin[at], origin[last] + 1
        at = folded_haystack.find(folded_needle, at + 1)
    return None


def fold(text: str) -> tuple[str, list[int]]:
    """The normalised text (transliterated, case-folded, quote marks as ``'``, each run of
    whitespace one space) and, per normalised character, its index in ``text``."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        for piece in unidecode(char.translate(_FOLD_QUOTES)).casefold().translate(_FOLD_QUOTES):
            if piece.isspace():
                if chars and chars[-1] == " ":
                    continue
                piece = " "
            chars.append(piece)
            origin.append(index)
    return "".join(chars), origin
