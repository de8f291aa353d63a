"""Where a parser read a verdict's values in an answer, and how probable each value was there.

A protocol's parser says where it read each value of its verdict (:class:`VerdictSpan`: the
score after ``[RESULT]``, the label after ``[[``, a JSON field's value found by
:func:`json_value_span`) and which values it accepts there; :func:`value_probabilities` maps
those characters to the answer's tokens (by each token's character offset) and reads, among the
top log-probs at that position, the probability of every accepted value. A digit anywhere else
in the answer is never read. What a task's confidence is made of these readings is
:mod:`judge_engine.protocols.confidence`.

**The rule, value by value.** The first token of the span may carry characters before it (a
token `` 4`` for the span ``4``): an alternative at that position is read with the same
characters removed, or with its leading whitespace removed (``5`` and `` 5`` both mean 5); a
token that runs past the span (``4.``) is read with the same tail removed. Then a value's
probability is the sum, over the alternatives that spell it, of:

- an alternative that spells the whole value: its probability, times the probability that the
  value ends there when the answer itself went on from that token (1 minus the probability of
  the alternatives at the next position that would continue it: a digit after ``1`` makes
  ``10``); when the alternative is not the answer's own token, what would follow it was never
  generated, and the value is taken to end there (``1`` is 1, not the start of 10);
- an alternative that spells the start of the value: followed only along the answer's own
  tokens (``1`` then ``0`` for 10, as Gemini writes numbers digit by digit), multiplying the
  probabilities position by position; a start the answer did not take cannot be followed, and
  adds nothing.

A value absent from the top log-probs has probability 0 (so the probabilities need not sum to
1).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from judge_engine.util.logprobs import TokenLogprob


@dataclass(frozen=True, slots=True)
class VerdictSpan:
    """Where :meth:`Protocol.parse` read one value of a verdict in the answer's text, and what
    that value could have been: the position at which the value's token probabilities are read
    (:mod:`judge_engine.protocols.confidence`), never a digit elsewhere in the text.

    Attributes:
        field: the verdict field the value fills (``score``, ``winner``, ``q7``...).
        start, end: the value's characters in the answer (``answer[start:end]`` is it as written).
        values: every value the parser accepts there, as written -> as the verdict holds it (a
            number for a scale; the item's own label for a label, so a swapped order maps
            ``A`` to ``B``). A closed integer scale is what a weighted score needs.
    """

    field: str
    start: int
    end: int
    values: Mapping[str, str | int]

    @property
    def numeric(self) -> bool:
        return bool(self.values) and all(isinstance(v, int) and not isinstance(v, bool) for v in self.values.values())


def scale_values(low: int, high: int) -> dict[str, int]:
    """A closed integer scale's values as written (``"1"``...) -> the numbers."""
    return {str(value): value for value in range(low, high + 1)}


def value_probabilities(span: VerdictSpan, tokens: Sequence[TokenLogprob]) -> dict[str, float] | None:
    """Each accepted value's probability at ``span`` (values as written), or None when the
    tokens at the span were not kept (an answer read by another parser than the one that kept
    them). See the module docstring for the rule."""
    first = _token_at(tokens, span.start)
    if first is None:
        return None
    token = tokens[first]
    lead = token.token[: max(0, span.start - token.offset)]
    tail = token.token[span.end - token.offset:] if _end(token) > span.end else ""
    return {written: _spelled(tokens, first, written, lead, tail) for written in span.values}


def chosen_value(span: VerdictSpan, answer: str) -> str | None:
    """The accepted value the answer wrote at the span (compared without case as parsers do)."""
    shown = answer[span.start:span.end].strip()
    if shown in span.values:
        return shown
    folded = {key.casefold(): key for key in span.values}
    return folded.get(shown.casefold())


def _end(token: TokenLogprob) -> int:
    return token.offset + len(token.token)


def _token_at(tokens: Sequence[TokenLogprob], char: int) -> int | None:
    for index, token in enumerate(tokens):
        if token.offset <= char < max(_end(token), token.offset + 1):
            return index
    return None


def _next(tokens: Sequence[TokenLogprob], index: int) -> int | None:
    """The token right after ``index`` in the answer, if it was kept."""
    following = index + 1
    if following < len(tokens) and tokens[following].offset == _end(tokens[index]):
        return following
    return None


def _alternatives(token: TokenLogprob) -> list[tuple[str, float]]:
    """The top log-probs at a token's position, with the token itself when a provider left it out."""
    seen = dict(token.top)
    if token.token not in seen:
        seen[token.token] = token.logprob
    return list(seen.items())


def _spelled(tokens: Sequence[TokenLogprob], index: int, value: str, lead: str = "", tail: str = "") -> float:
    """The probability that the answer writes ``value`` from token ``index`` on."""
    own = tokens[index].token
    total = 0.0
    for alternative, logprob in _alternatives(tokens[index]):
        text = _trimmed(alternative, lead, tail)
        p = math.exp(logprob)
        if text == value:
            ends = _ends_after(tokens, index) if alternative == own and not tail else 1.0
            total += p * ends
        elif text and value.startswith(text) and alternative == own and not tail:
            following = _next(tokens, index)
            if following is not None:
                total += p * _spelled(tokens, following, value[len(text):])
    return total


def _trimmed(alternative: str, lead: str, tail: str) -> str:
    text = alternative[len(lead):] if lead and alternative.startswith(lead) else alternative.lstrip()
    if tail and text.endswith(tail):
        text = text[: -len(tail)]
    return text.strip()


def _ends_after(tokens: Sequence[TokenLogprob], index: int) -> float:
    """The probability that a value ends after the answer's own token ``index``: 1 minus the
    alternatives at the next position that would continue the word (a letter or a digit)."""
    following = _next(tokens, index)
    if following is None:
        return 1.0
    going_on = sum(math.exp(lp) for alt, lp in _alternatives(tokens[following]) if alt[:1].isalnum())
    return max(0.0, 1.0 - going_on)


_JSON_TOKENS = re.compile(r'"(?:\\.|[^"\\])*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def json_value_span(text: str, field: str) -> tuple[int, int] | None:
    """The characters of a top-level JSON field's value in ``text`` (a string's without its
    quotes), found by walking the JSON's tokens, so a field name quoted inside another value
    (feedback that says ``"score": 3``) is never taken for the field. Keys compare without case."""
    depth = 0
    previous: tuple[str, int, int] | None = None
    wanted = field.casefold()
    found_key = False
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if found_key:
            if token == ":":
                continue
            if token.startswith('"'):
                return match.start() + 1, match.end() - 1
            return (match.start(), match.end()) if token not in "{}[]," else None
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
        elif token == ":" and depth == 1 and previous is not None and previous[0].startswith('"'):
            found_key = previous[0][1:-1].casefold() == wanted
        previous = (token, match.start(), match.end())
    return None
