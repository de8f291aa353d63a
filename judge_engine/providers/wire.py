"""The direct transport's HTTP/1.1 client: keep-alive connections on asyncio, answers read by
httptools (llhttp, Node's parser), and nothing else.

Why not aiohttp here (it serves the batch client, the fake server and the viewer): a paced run
wakes up for each request, and on a small machine the interpreter runs each wake-up's Python
cold, so what a request costs is mostly how much distinct Python it touches. aiohttp's
``ClientSession.post`` runs ~110 functions of its own per request (URL objects, cookies, tracing,
redirects, payload writers, a task per body); a bare aiohttp loop replaying the few-shot GEMBA
requests at the TPM-bound pace costs 0.68-0.74 ms of CPU a request, the same loop over this
client 0.42-0.44 (``benchmarks/floor.py --client aiohttp|wire``, issue 23.6).

What it does: ``POST`` with a body of known length, to ``http://`` or ``https://`` (the system's
CA store, as aiohttp's default; a non-ASCII host IDNA-encoded and a non-ASCII path
percent-encoded, as aiohttp did), one request per connection at a time, connections kept for
:data:`KEEP_IDLE_S` and reused newest first; answers framed by ``Content-Length``, chunks, or the
connection's close, decoded from gzip or deflate if a server sends them despite
``Accept-Encoding: identity``, interim 1xx answers skipped, with aiohttp's leniencies for small
servers' quirks. Bounded: :data:`MAX_ANSWER_BYTES` of body (decoded too), :data:`MAX_HEADERS`
header lines and :data:`MAX_HEAD_BYTES` of them. Bytes nobody asked for (a second answer glued
to the first, anything on an idle connection) drop the connection: they are never read into the
next answer. No proxies (aiohttp's session did not read them either), no redirects (a 3xx is an
answer like any other status), no cookies, no DNS cache of its own (a host is resolved only when
a connection is opened).

Errors: a connection that cannot be made raises the ``OSError`` the system gave (refused, DNS);
one that breaks before the answer ends raises :class:`ConnectionClosedError`; an answer that is
not HTTP, or is larger than :data:`MAX_ANSWER_BYTES`, raises :class:`BadHTTPAnswerError`; a call
past its ``timeout_s`` raises ``TimeoutError``. A connection is reused only after a whole answer.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import httptools

KEEP_IDLE_S = 15.0
"""How long an idle connection is kept for reuse (aiohttp's default keep-alive): servers close
theirs after 5-75 s, and a write to a connection the server already closed fails the request."""
MAX_ANSWER_BYTES = 64 * 2**20
"""Largest answer body read, before and after decoding (64 MiB: a chat completion is kilobytes);
past it, the answer is bad."""
MAX_HEAD_BYTES = 64 * 1024
"""Largest status line and headers read; MAX_HEADERS the most header lines (aiohttp's parser
allowed 8,190 bytes a field and 128 fields)."""
MAX_HEADERS = 256
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
"""What stays as is in a URL's path (RFC 3986's pchar and ``/``, and ``%`` of escapes already
made); anything else, a non-ASCII character, is percent-encoded as UTF-8, as aiohttp's yarl did."""


class ConnectionClosedError(ConnectionResetError):
    """The connection closed (or was reset) before the whole answer arrived."""


class BadHTTPAnswerError(ConnectionError):
    """What came back is not an HTTP/1.x answer this client can read (or is too large)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where requests go: parsed once per URL, with the request head's fixed part ready."""

    key: tuple[str, str, int]
    """(scheme, host, port): the connections that can carry a request there."""
    host: str
    port: int
    tls: bool
    head: bytes
    """``POST path HTTP/1.1`` and every header but ``Content-Length``, each line ending in CRLF."""


def target(url: str, headers: dict[str, str]) -> Target:
    """The :class:`Target` of ``url`` with ``headers`` sent on every request.

    Raises:
        ValueError: not an ``http(s)://host`` URL, or a header name or value with a line break
            (a header that would smuggle another).
    """
    if any(c <= " " or c == "\x7f" for c in url):
        raise ValueError("the URL holds a space or a control character")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL with a host (scheme {parts.scheme!r})")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    path = quote(parts.path or "/", safe=_PATH_SAFE) + (f"?{quote(parts.query, safe=_PATH_SAFE + '?')}"
                                                        if parts.query else "")
    try:
        host = parts.hostname.encode("idna").decode("ascii")  # bücher.example -> xn--bcher-kva.example
    except UnicodeError:
        raise ValueError("the URL's host is not a valid name (an empty or over-long label)") from None
    authority = f"[{host}]" if ":" in host else host
    if parts.port:
        authority += f":{parts.port}"
    lines = [f"POST {path} HTTP/1.1", f"Host: {authority}", "Accept-Encoding: identity", "Connection: keep-alive"]
    for name, value in headers.items():
        lines.append(f"{name}: {value}")
    for line in lines:
        if any(c in line for c in "\r\n\0"):
            raise ValueError(f"a header or the URL holds a line break: {line.split(':')[0]!r}")
    return Target((parts.scheme, host, port), host, port, tls, ("\r\n".join(lines) + "\r\n").encode("latin-1"))


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer: its status, headers (lower-case names; repeated ones joined by ``, ``)
    and whole body."""

    status: int
    headers: dict[str, str]
    body: bytes


class _Connection(asyncio.Protocol):
    """One keep-alive connection; httptools calls the ``on_*`` methods as the answer arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        # What aiohttp's parser let through, so that a small local server's quirks (a bare LF, a
        # control character in a header, a space after a chunk's size) are read, not re-asked and
        # paid for again: leniencies about reading, none about framing.
        self._parser.set_dangerous_leniencies(lenient_headers=True, lenient_optional_cr_before_lf=True,
                                              lenient_spaces_after_chunk_size=True)
        self._waiter: asyncio.Future[Answer] | None = None
        self._complete = False
        self._reset()

    def _reset(self) -> None:
        """Forget the answer read so far (a new request's, or the real one after an interim 1xx)."""
        self._headers: dict[str, str] = {}
        self._chunks: list[bytes] = []
        self._size = 0
        self._head_bytes = 0
        """Bytes of the header lines parsed (a whole head can arrive in one read)."""
        self._unfinished_head = 0
        """Bytes read while the head is unfinished (the parser holds a partial line meanwhile)."""
        self._header_lines = 0
        self._headers_done = False
        self._keep_alive = False

    # --- asyncio ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            # Bytes nobody asked for (on an idle connection, or after a whole answer): never read
            # into the next request's answer; the connection is dropped instead.
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(BadHTTPAnswerError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(BadHTTPAnswerError(f"the answer is not HTTP/1.x: {exc}"))
        if not self._headers_done and not self.closed:
            # Still in the head: the parser holds an unfinished header line in memory meanwhile.
            self._unfinished_head += len(data)
            if self._unfinished_head > MAX_HEAD_BYTES:
                self._fail(BadHTTPAnswerError(f"the answer's headers are larger than {MAX_HEAD_BYTES} bytes"))

    def eof_received(self) -> bool | None:
        return None  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        framed = "content-length" in self._headers or "chunked" in self._headers.get("transfer-encoding", "")
        if self._headers_done and not framed and exc is None:
            self.on_message_complete()  # a body that ends with its connection (HTTP/1.0 style)
        else:
            closed = ConnectionClosedError("the server closed the connection before the whole answer arrived")
            closed.__cause__ = exc
            waiter.set_exception(closed)

    # --- httptools ---------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._complete:  # a second answer to one request: the connection is out of step
            self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4
        self._header_lines += 1
        if self._header_lines > MAX_HEADERS or self._head_bytes > MAX_HEAD_BYTES:
            self._fail(BadHTTPAnswerError(f"the answer's headers are more than {MAX_HEADERS} or larger than "
                                          f"{MAX_HEAD_BYTES} bytes"))
            return
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._keep_alive = self._parser.should_keep_alive()  # read here: the parser resets at the end

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > MAX_ANSWER_BYTES:
            self._fail(BadHTTPAnswerError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes"))
            return
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            self._reset()
            return
        self._complete = True
        headers, body = self._headers, b"".join(self._chunks)
        self._headers, self._chunks = {}, []  # the answer's own: nothing read later changes it
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            try:
                body = _inflate(body, encoding)
            except (zlib.error, BadHTTPAnswerError) as exc:
                self._fail(exc if isinstance(exc, BadHTTPAnswerError) else
                           BadHTTPAnswerError(f"the {encoding} body does not decode: {exc}"))
                return
        elif encoding not in ("identity", ""):
            self._fail(BadHTTPAnswerError(f"the answer is encoded as {encoding!r}, which this client does not read"))
            return
        waiter.set_result(Answer(status, headers, body))

    # --- one request ---------------------------------------------------------------------------------

    def send(self, data: bytes) -> asyncio.Future[Answer]:
        """Write a whole request; the future is its answer."""
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._complete = False
        self._reset()
        self.transport.write(data)
        return self._waiter

    def reusable(self) -> bool:
        """Whether the last answer ended cleanly on a connection both sides keep open."""
        return self._complete and self._keep_alive and not self.closed

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.closed = True

    def _fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.close()


def _inflate(body: bytes, encoding: str) -> bytes:
    """A gzip or deflate body decoded, never past :data:`MAX_ANSWER_BYTES` (a few kilobytes of
    gzip can hold gigabytes).

    Raises:
        zlib.error: it does not decode.
        BadHTTPAnswerError: it decodes to more than the limit.
    """
    if encoding != "deflate":
        return _bounded_inflate(body, 16 + zlib.MAX_WBITS)
    try:
        return _bounded_inflate(body, zlib.MAX_WBITS)
    except zlib.error:
        return _bounded_inflate(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send it


def _bounded_inflate(body: bytes, wbits: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(body, MAX_ANSWER_BYTES + 1)
    if len(out) <= MAX_ANSWER_BYTES and not inflater.unconsumed_tail:
        out += inflater.flush()
    if len(out) > MAX_ANSWER_BYTES or inflater.unconsumed_tail:
        raise BadHTTPAnswerError(f"the answer decodes to more than {MAX_ANSWER_BYTES} bytes")
    return out


class Client:
    """Connections to any number of targets, kept alive between requests (see the module)."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._tls: ssl.SSLContext | None = None

    async def post(self, where: Target, body: bytes, timeout_s: float) -> Answer:
        """``POST`` ``body`` to ``where`` and read the whole answer, in at most ``timeout_s``."""
        async with asyncio.timeout(timeout_s):
            connection = self._take(where.key) or await self._connect(where)
            try:
                answer = await connection.send(
                    where.head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            except BaseException:
                connection.close()  # a cancelled or failed request leaves the connection unusable
                raise
        if connection.reusable():
            connection.idle_since = now = time.monotonic()
            idle = self._idle.setdefault(where.key, [])
            idle.append(connection)
            while idle[0].idle_since < now - KEEP_IDLE_S:  # the oldest first: let go of the expired
                idle.pop(0).close()
        else:
            connection.close()
        return answer

    def _take(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        oldest_kept = time.monotonic() - KEEP_IDLE_S
        while idle:
            connection = idle.pop()  # the newest: the least likely to be closed by the server
            if connection.idle_since < oldest_kept:  # and the rest are older still
                for old in (connection, *idle):
                    old.close()
                idle.clear()
            elif connection.closed:
                connection.close()
            else:
                return connection
        return None

    async def _connect(self, where: Target) -> _Connection:
        loop = asyncio.get_running_loop()
        if where.tls:
            if self._tls is None:
                self._tls = ssl.create_default_context()
            _, connection = await loop.create_connection(_Connection, where.host, where.port, ssl=self._tls,
                                                         server_hostname=where.host, happy_eyeballs_delay=0.25)
        else:
            _, connection = await loop.create_connection(_Connection, where.host, where.port,
                                                         happy_eyeballs_delay=0.25)
        return connection

    def close(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
