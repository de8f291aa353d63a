"""The content encodings an answer may come in, and their decoding, bounded: the one home of the
optional decoders ``brotli`` (the ``Brotli`` package, 1.2 or later) and zstd (``compression.zstd``
on Python 3.14, else the ``backports.zstd`` package), both in the ``compression`` extra.

Which encodings are accepted is what is installed: :data:`ACCEPT_ENCODING` names exactly those
(gzip and deflate always), and the direct transport sends it, so a server that keeps to the
header never sends what cannot be read. One that sends another anyway (a gateway compressing
with br unasked) gets :class:`UndecodableError`: the answer was billed but cannot be read, a
transient failure booked at an estimate, never a verdict.
"""

from __future__ import annotations

import importlib
import sys
import zlib
from collections.abc import Callable
from typing import Any


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_brotli = _optional("brotli")
if _brotli is not None and "output_buffer_limit" not in (_brotli.Decompressor.process.__doc__ or ""):
    _brotli = None  # before 1.2 nothing bounds what it decodes to
_zstd = _optional("compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd")


class UndecodableError(ValueError):
    """An answer in an encoding this install cannot decode, or one that does not decode."""


def _inflate(body: bytes, limit: int, wbits: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(body, limit + 1)
    if len(out) <= limit and not inflater.unconsumed_tail:
        out += inflater.flush()
    return out if len(out) <= limit and not inflater.unconsumed_tail else out[:limit + 1]


def _gzip(body: bytes, limit: int) -> bytes:
    return _inflate(body, limit, 16 + zlib.MAX_WBITS)


def _deflate(body: bytes, limit: int) -> bytes:
    try:
        return _inflate(body, limit, zlib.MAX_WBITS)
    except zlib.error:
        return _inflate(body, limit, -zlib.MAX_WBITS)  # raw deflate, as some servers send it


def _br(body: bytes, limit: int) -> bytes:
    decoder = _brotli.Decompressor()
    out: bytes = decoder.process(body, output_buffer_limit=limit + 1)
    while len(out) <= limit and not decoder.is_finished() and not decoder.can_accept_more_data():
        out += decoder.process(b"", output_buffer_limit=limit + 1 - len(out))
    if len(out) <= limit and not decoder.is_finished():
        raise UndecodableError("the br body is cut short")
    return out


def _zst(body: bytes, limit: int) -> bytes:
    out = b""
    while body and len(out) <= limit:  # one frame after another, as a stream may hold several
        decoder = _zstd.ZstdDecompressor()
        out += decoder.decompress(body, limit + 1 - len(out))
        if len(out) <= limit and not decoder.eof:
            raise UndecodableError("the zstd body is cut short")
        body = decoder.unused_data
    return out


DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": _gzip, "x-gzip": _gzip, "deflate": _deflate,
    **({"br": _br} if _brotli is not None else {}),
    **({"zstd": _zst} if _zstd is not None else {}),
}
"""Each encoding this install decodes, and its decoder: the body, and the most bytes it may
decode to (past which it returns one byte more, for the caller to refuse)."""
ACCEPT_ENCODING = ", ".join(name for name in ("br", "zstd", "gzip", "deflate") if name in DECODERS)
"""The ``Accept-Encoding`` a request sends: exactly the encodings :func:`decode` reads."""


def decode(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` decoded from ``encoding`` (a ``Content-Encoding``; empty or ``identity``: as it
    is), never to more than ``limit`` bytes plus one (the caller refuses that many).

    Raises:
        UndecodableError: an encoding this install cannot decode (several stacked included), or
            a body that does not decode.
    """
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    decoder = DECODERS.get(encoding)
    if decoder is None:
        what = "not one this install decodes" if encoding in ("br", "zstd") else "not one we asked for"
        raise UndecodableError(f"the answer is encoded {encoding!r}, {what} (Accept-Encoding: {ACCEPT_ENCODING})")
    try:
        return decoder(body, limit)
    except UndecodableError:
        raise
    except Exception as exc:  # zlib.error, brotli.error, zstd.ZstdError: a body that does not decode
        raise UndecodableError(f"the {encoding} answer does not decode ({type(exc).__name__}: {exc})") from None
