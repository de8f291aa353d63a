"""What stands between a judge and its endpoint on a company network, on 127.0.0.1, for the tests:
a forward proxy (plain requests and ``CONNECT`` tunnels, with or without ``Proxy-Authorization``,
logging every request and tunnel it carries) and a TLS front (a server's certificate, signed by a
CA the test makes with trustme, in front of a plain server). Each runs its own event loop in a
daemon thread, as :class:`judge_engine.fake.FakeServer` does, so a run's engine can reach it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@contextlib.asynccontextmanager
async def tcp_server(serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]], path: str
                     ) -> AsyncIterator[str]:
    """A TCP server on the running loop whose every connection ``serve`` handles byte by byte
    (what a gateway or a server does to a connection, written out); yields its URL with ``path``."""
    listener = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}{path}"
    finally:
        listener.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(Exception):
        writer.close()


async def _splice(a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                  b: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
    await asyncio.gather(_pipe(a[0], b[1]), _pipe(b[0], a[1]))


class _Looped:
    """A server on its own event loop in a daemon thread; ``port`` once started."""

    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def __enter__(self) -> _Looped:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> asyncio.base_events.Server:
        raise NotImplementedError


@dataclass
class Logged:
    """What a proxy carried: a plain request (``method``, the absolute URL) or a tunnel
    (``CONNECT``, ``host:port``), and the ``Proxy-Authorization`` it came with."""

    method: str
    target: str
    authorization: str | None


@dataclass
class ForwardProxy(_Looped):
    """An HTTP forward proxy on 127.0.0.1. ``credentials``: ``user:password`` it requires (a 407
    without them). Every request it forwards and every tunnel it opens is in :attr:`log`."""

    credentials: str | None = None
    log: list[Logged] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    @property
    def url(self) -> str:
        auth = f"{self.credentials}@" if self.credentials else ""
        return f"http://{auth}127.0.0.1:{self.port}"

    async def _start(self) -> asyncio.base_events.Server:
        return await asyncio.start_server(self._serve, "127.0.0.1", 0)

    def _allowed(self, headers: dict[str, str]) -> bool:
        if self.credentials is None:
            return True
        expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
        return headers.get("proxy-authorization") == expected

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        self.log.append(Logged(method, target, headers.get("proxy-authorization")))
        if not self._allowed(headers):
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\n"
                         b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            try:
                upstream = await asyncio.open_connection(host.strip("[]"), int(port))
            except OSError:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
                writer.close()
                return
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await _splice((reader, writer), upstream)
            return
        parts = urlsplit(target)
        upstream = await asyncio.open_connection(parts.hostname, parts.port or 80)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        kept = [line for line in lines[1:] if line and line.split(":", 1)[0].strip().lower() not in
                ("proxy-authorization", "proxy-connection", "connection", "keep-alive")]
        # One request per connection: the next one comes through here again, and is logged.
        rewritten = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
        upstream[1].write(rewritten.encode("latin-1"))
        await _splice((reader, writer), upstream)


@dataclass
class TLSFront(_Looped):
    """TLS on 127.0.0.1 in front of a plain server at ``backend`` (``host:port``), with ``context``."""

    backend: tuple[str, int] = ("127.0.0.1", 0)
    context: ssl.SSLContext | None = None
    connections: int = 0
    """Connections a client opened (each a TLS handshake tried, whether or not it succeeded)."""
    handshakes: int = 0
    """TLS handshakes that succeeded."""

    def __post_init__(self) -> None:
        super().__init__()

    async def _start(self) -> asyncio.base_events.Server:
        return await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            assert self.context is not None
            await writer.start_tls(self.context)
        except (ssl.SSLError, ConnectionError, OSError):
            writer.close()
            return
        self.handshakes += 1
        try:
            upstream = await asyncio.open_connection(*self.backend)
        except OSError:
            writer.close()
            return
        await _splice((reader, writer), upstream)


@contextlib.contextmanager
def tls_front(backend_url: str, context: ssl.SSLContext) -> Iterator[TLSFront]:
    """A TLS front for the server at ``backend_url`` (its host and port)."""
    parts = urlsplit(backend_url)
    with TLSFront(backend=(parts.hostname or "127.0.0.1", parts.port or 80), context=context) as front:
        yield front


# --- gateways and servers that misbehave (issue 35) ------------------------------------------------


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, list[str], bytes] | None:
    """One request off a connection: its method, target, header lines and body (by its
    ``Content-Length``); None when the connection ends first."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = [line for line in lines[1:] if line]
    length = next((int(line.split(":", 1)[1]) for line in headers if line.lower().startswith("content-length:")), 0)
    try:
        body = await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return method, target, headers, body


@dataclass
class Gateway(_Looped):
    """An HTTP gateway on 127.0.0.1 in front of the server at ``backend`` (``host:port``).

    A request to a path in ``moved`` is answered ``status`` with that Location (a path: the same
    origin; a URL: any other); a request to a path in ``served`` is forwarded to the backend at
    the path it maps to; any other is forwarded as is. ``close_kept``: each answer is followed at
    once by the connection's close, without a ``Connection: close`` header (the server that
    closes every kept connection). Every request is in :attr:`log`, with its ``Authorization``."""

    backend: tuple[str, int] = ("127.0.0.1", 0)
    moved: dict[str, str] = field(default_factory=dict)
    status: int = 307
    served: dict[str, str] = field(default_factory=dict)
    close_kept: bool = False
    log: list[Logged] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        super().__init__()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _start(self) -> asyncio.base_events.Server:
        return await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while (request := await _read_request(reader)) is not None:
                method, target, headers, body = request
                authorization = next((line.split(":", 1)[1].strip() for line in headers
                                      if line.lower().startswith("authorization:")), None)
                self.log.append(Logged(method, target, authorization))
                if target in self.moved:
                    answer = (f"HTTP/1.1 {self.status} Moved\r\nLocation: {self.moved[target]}\r\n"
                              "Content-Length: 0\r\n\r\n").encode("latin-1")
                else:
                    answer = await self._forward(method, self.served.get(target, target), headers, body)
                writer.write(answer)
                await writer.drain()
                if self.close_kept:
                    break
        except (ConnectionError, OSError):
            pass
        with contextlib.suppress(Exception):
            writer.close()

    async def _forward(self, method: str, path: str, headers: list[str], body: bytes) -> bytes:
        """The backend's answer to the request, its own ``Connection`` header left out (the
        gateway says nothing about closing)."""
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.backend)
        kept = [line for line in headers if line.split(":", 1)[0].strip().lower() not in ("connection", "keep-alive")]
        upstream_writer.write("\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""])
                              .encode("latin-1") + body)
        await upstream_writer.drain()
        answer = await upstream_reader.read()
        upstream_writer.close()
        head, _, rest = answer.partition(b"\r\n\r\n")
        lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
        return b"\r\n".join(lines) + b"\r\n\r\n" + rest


@contextlib.contextmanager
def dead_proxy(how: str) -> Iterator[str]:
    """The URL of a proxy that is not there: ``refused`` (nothing listens on its port) or
    ``silent`` (its queue of connections is full, so a connection is never answered: a proxy
    that drops what it is sent)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    fillers: list[socket.socket] = []
    try:
        if how == "refused":
            listener.close()
        else:
            listener.listen(0)
            for _ in range(3):  # a backlog of 0 takes one; the next connections wait unanswered
                filler = socket.socket()
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
                fillers.append(filler)
        yield f"http://judge:s3cret-proxy-pw@127.0.0.1:{port}"
    finally:
        for sock in (listener, *fillers):
            sock.close()
