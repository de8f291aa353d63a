"""Reading a word list out of a model's answer, and which of its words count (CDAT and DAT).

The rules are the method's (``../shared/reference/cdat.md``; the paper's notebook), in order:

1. Zero-width and special space characters (``U+2000-200F``, ``U+2028-202F``, ``U+205F-206F``,
   ``U+FEFF``) become spaces.
2. Numbered markers ``1.`` to ``10.`` (``\\b(?:[1-9]|10)\\.``): the first token after each marker
   is a word, whatever follows it on the line (so "1. Apple - a fruit" gives "Apple").
3. No marker: the answer split on whitespace (a preamble's words are words then, as they are in
   the original). If that gives a single token, it is split again on commas and whitespace.
4. Each token keeps only ``[a-zA-Z-]`` and is lower-cased; a token without a letter is dropped;
   the list is cut to its first 10 words.

Then validity (the original ``validate``): a word counts if it is longer than one letter, a noun
(:class:`~judge_engine.protocols.lexicon.Lexicon`) and not a repeat of an earlier valid word. A list with
fewer than :data:`MINIMUM_VALID` valid words is not scored; only the first seven valid words are.

One departure, on purpose: the notebook finds the markers in the cleaned text (step 1) but splits
the *raw* answer in step 3, so two words joined only by a zero-width space become one word there.
The reference describes splitting the cleaned text, which is what its cleaning is for; that is
what is done here (it changes nothing for answers without such characters).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from judge_engine.protocols.lexicon import Lexicon

MAX_WORDS = 10
"""Words read from one answer; the rest are ignored."""
MINIMUM_VALID = 7
"""Valid words a list needs to be scored; exactly this many (the first ones) are scored."""

DropReason = Literal["no_letters", "beyond_ten", "too_short", "not_a_noun", "duplicate"]
"""Why a token did not become a scored word:

* ``no_letters``: nothing left after keeping letters and hyphens (a number, a bullet, "-").
* ``beyond_ten``: read after the first ten words.
* ``too_short``: one letter.
* ``not_a_noun``: the lexicon has no noun reading of it.
* ``duplicate``: the same word as an earlier valid word.
"""

_INVISIBLE = re.compile("[\u2000-\u200f\u2028-\u202f\u205f-\u206f\ufeff]")
_MARKER = re.compile(r"\b(?:[1-9]|10)\.")
_SEPARATORS = re.compile(r"[,\n\s]+")
_NOT_WORD = re.compile(r"[^a-zA-Z-]")
_NOT_WORD_OR_SPACE = re.compile(r"[^a-zA-Z- ]+")


@dataclass(frozen=True, slots=True)
class Dropped:
    """A token that is not one of the scored words, and why."""

    word: str
    reason: DropReason


@dataclass(frozen=True, slots=True)
class ParsedList:
    """The words read from an answer (at most ten, cleaned) and the tokens dropped on the way."""

    words: tuple[str, ...]
    dropped: tuple[Dropped, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckedList:
    """Which words of a list count.

    Attributes:
        valid: unique valid words in order (may be more than seven; the first seven are scored).
        dropped: every other word with its reason, in order.
    """

    valid: tuple[str, ...]
    dropped: tuple[Dropped, ...] = field(default=())

    @property
    def scorable(self) -> bool:
        return len(self.valid) >= MINIMUM_VALID

    @property
    def scored(self) -> tuple[str, ...]:
        """The words the scores are computed on: the first seven valid words (none if fewer)."""
        return self.valid[:MINIMUM_VALID] if self.scorable else ()


def tokens(answer: str) -> list[str]:
    """Steps 1-3: the raw tokens of an answer, before cleaning."""
    text = _INVISIBLE.sub(" ", answer)
    markers = list(_MARKER.finditer(text))
    words: list[str] = []
    for index, marker in enumerate(markers):
        end = markers[index + 1].start() if index + 1 < len(markers) else len(text)
        segment = text[marker.end() : end].split()
        if segment:
            words.append(segment[0])
    if not words:
        words = text.split()
    if len(words) == 1:
        words = [w for w in _SEPARATORS.split(words[0]) if w]
    return words


def parse_words(answer: str) -> ParsedList:
    """Steps 1-4: the (at most ten) cleaned words of an answer, and the tokens dropped."""
    words: list[str] = []
    dropped: list[Dropped] = []
    for token in tokens(answer):
        word = _NOT_WORD.sub("", token).lower()
        if not any(c.isalpha() for c in word):
            dropped.append(Dropped(token, "no_letters"))
        elif len(words) >= MAX_WORDS:
            dropped.append(Dropped(word, "beyond_ten"))
        else:
            words.append(word)
    return ParsedList(tuple(words), tuple(dropped))


def clean_word(word: str) -> str:
    """The original ``validate``'s cleaning: keep letters, hyphens and spaces, trim, lower-case.
    The identity on :func:`parse_words`'s output; it matters for word lists given directly (the
    stored baselines hold "Freedom" and the occasional two-word answer)."""
    return _NOT_WORD_OR_SPACE.sub("", word).strip().lower()


def check_words(words: Sequence[str], lexicon: Lexicon) -> CheckedList:
    """Which words count: longer than one letter, a noun, and not seen before (after cleaning).
    A repeated word that is not a noun is ``not_a_noun`` each time, as in the original."""
    valid: list[str] = []
    dropped: list[Dropped] = []
    for raw in words:
        word = clean_word(raw)
        if len(word) <= 1:
            dropped.append(Dropped(word or raw, "too_short"))
        elif word in valid:
            dropped.append(Dropped(word, "duplicate"))
        elif not lexicon.is_noun(word):
            dropped.append(Dropped(word, "not_a_noun"))
        else:
            valid.append(word)
    return CheckedList(tuple(valid), tuple(dropped))
