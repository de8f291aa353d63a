"""An answer's token log-probabilities, in the one shape every transport reads them into.

OpenAI's chat completions (and every OpenAI-compatible server: vLLM, the fake server), Gemini
through litellm and OpenAI's batch results all give ``choices[0].logprobs.content``: a list of
``{token, logprob, bytes, top_logprobs: [{token, logprob}]}``. :func:`token_logprobs` turns that
into :class:`TokenLogprob` tuples with each token's character offset in the answer, which is
what a parser's character span is mapped through (:mod:`judge_engine.protocols.confidence`);
:func:`kept_tokens` keeps the few tokens at the verdict for the transcript and the cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One token of an answer: its log-probability and the most likely tokens at its position
    (``top_logprobs``), as the provider reported them.

    ``offset`` is the token's first character in the answer's text, computed once from the
    tokens' bytes when the answer arrives, so a reader maps the parser's character spans to
    tokens without the tokens before it (a transcript keeps only the tokens at the verdict).
    """

    offset: int
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()

    def to_list(self) -> list[Any]:
        """The compact form kept in transcripts and the cache: ``[offset, token, logprob, [[token, logprob], ...]]``."""
        return [self.offset, self.token, self.logprob, [[t, p] for t, p in self.top]]

    @classmethod
    def from_list(cls, raw: Sequence[Any]) -> TokenLogprob:
        return cls(int(raw[0]), str(raw[1]), float(raw[2]), tuple((str(t), float(p)) for t, p in raw[3] or ()))


FLOOR_LOGPROB = -9999.0
"""What an impossible token's log-probability is written as (OpenAI's own floor): JSON has no
minus infinity."""


ROUNDING = 1e-6
"""How far above 0 a provider's rounding may put a log-probability (a probability of 1)."""


def _finite(value: Any) -> float:
    number = float(value)
    if number > ROUNDING:  # a probability above 1: the answer's log-probs are not log-probs
        raise ValueError(f"a token's log-probability is {number:g}, above 0")
    return min(0.0, number) if number > FLOOR_LOGPROB else FLOOR_LOGPROB


def token_logprobs(content: str | None, entries: Any) -> tuple[TokenLogprob, ...] | None:
    """An answer's tokens from OpenAI's ``choices[0].logprobs.content`` shape (entries with
    ``token``, ``logprob``, ``bytes`` and ``top_logprobs``: dicts or objects), with character
    offsets; None when the answer carries no log-probs at all.

    Raises ValueError (or TypeError) for entries that are not log-probs (a log-probability above
    0, a byte outside 0-255, a value that is no number): the transports read that as a
    malformed answer.

    Offsets come from the tokens' bytes (a token may end inside a multi-byte character); a
    provider whose tokens do not spell the answer (special tokens, a trimmed text) is aligned
    token by token by searching its text from where the previous one ended.
    """
    if entries is None:
        return None
    text = content or ""
    encoded = text.encode()
    starts = {0: 0}
    position = 0
    for index, char in enumerate(text):
        position += len(char.encode())
        starts[position] = index + 1
    spelled = b"".join(_token_bytes(entry) for entry in entries)
    aligned = spelled == encoded
    byte_at, cursor = 0, 0
    tokens = []
    for entry in entries:
        token = str(_field(entry, "token") or "")
        if aligned:
            offset = starts.get(byte_at, _char_before(starts, byte_at))
            byte_at += len(_token_bytes(entry))
        else:
            found = text.find(token, cursor) if token else -1
            offset = found if found != -1 else cursor
            cursor = offset + len(token) if found != -1 else cursor
        top = tuple((str(_field(alt, "token") or ""), _finite(_field(alt, "logprob")))
                    for alt in _field(entry, "top_logprobs") or ())
        tokens.append(TokenLogprob(offset, token, _finite(_field(entry, "logprob")), top))
    return tuple(tokens)


def _field(entry: Any, name: str) -> Any:
    return entry.get(name) if isinstance(entry, Mapping) else getattr(entry, name, None)


def _token_bytes(entry: Any) -> bytes:
    raw = _field(entry, "bytes")
    if isinstance(raw, list | tuple) and all(isinstance(b, int) for b in raw):
        return bytes(raw)
    return str(_field(entry, "token") or "").encode()


def _char_before(starts: Mapping[int, int], byte_at: int) -> int:
    """The character holding byte ``byte_at`` (a token starting inside a multi-byte character)."""
    while byte_at > 0 and byte_at not in starts:
        byte_at -= 1
    return starts.get(byte_at, 0)


def kept_tokens(tokens: Sequence[TokenLogprob], spans: Iterable[tuple[int, int]]) -> tuple[TokenLogprob, ...]:
    """The tokens worth keeping of an answer: those overlapping a character span (the verdict),
    with the token before each span (what it follows: ``[[``, ``[RESULT]``) and the one after
    (whether a number ends there: ``1`` or ``10``). The rest of the answer's log-probs is not
    kept: a 500-token answer's top-10 log-probs are ~100 KB; the verdict's, a few hundred bytes."""
    ends = [token.offset for token in tokens[1:]] + [1 << 62]
    keep: set[int] = set()
    for start, end in spans:
        inside = [i for i, token in enumerate(tokens) if token.offset < max(end, start + 1) and ends[i] > start]
        if inside:
            keep.update(range(max(0, inside[0] - 1), min(len(tokens), inside[-1] + 2)))
    return tuple(tokens[i] for i in sorted(keep))
