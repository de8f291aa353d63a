"""The direct transport's HTTP/1.1 client (``providers/wire.py``) against real loopback servers:
every way an answer can be framed, connections kept and dropped, and what it refuses."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from judge_engine.providers import wire

BODY = json.dumps({"choices": [{"message": {"content": "ok"}}], "pad": "x" * 5000}).encode()


@asynccontextmanager
async def web_server(handle: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> AsyncIterator[tuple[str, list[int]]]:
    """An aiohttp server answering ``handle``; yields its URL and the client ports it saw (one per
    connection used)."""
    ports: list[int] = []

    async def recorded(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        ports.append(peer[1] if peer else -1)
        return await handle(request)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", recorded)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1/chat/completions", ports
    finally:
        await runner.cleanup()


@asynccontextmanager
async def raw_server(answer: bytes, *, close: bool = True) -> AsyncIterator[str]:
    """A TCP server that reads a request's head and writes ``answer`` as is (then closes)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        if close:
            writer.close()
        else:
            await asyncio.sleep(30)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        server.close()


def test_answers_framed_by_length_chunks_or_gzip_read_whole_and_the_connection_is_kept() -> None:
    async def go() -> None:
        async def by_length(request: web.Request) -> web.StreamResponse:
            assert await request.read() == b'{"q": 1}'
            return web.Response(body=BODY, content_type="application/json", headers={"X-Request-Id": "r1"})

        async def chunked(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            for start in range(0, len(BODY), 700):
                await response.write(BODY[start:start + 700])
            await response.write_eof()
            return response

        async def gzipped(request: web.Request) -> web.StreamResponse:
            return web.Response(body=gzip.compress(BODY), headers={"Content-Encoding": "gzip"})

        for handle in (by_length, chunked, gzipped):
            async with web_server(handle) as (url, ports):
                client = wire.Client()
                where = wire.target(url, {"Content-Type": "application/json"})
                answers = [await client.post(where, b'{"q": 1}', 5.0) for _ in range(3)]
                client.close()
                assert [a.status for a in answers] == [200] * 3
                assert all(a.body == BODY for a in answers), handle.__name__
                assert len(set(ports)) == 1, f"{handle.__name__}: {ports} (one kept connection)"
        async with web_server(by_length) as (url, _):
            (answer,) = await _post_async(url)
            assert answer.headers["x-request-id"] == "r1"  # names lower-cased

    asyncio.run(go())


async def _post_async(url: str) -> list[wire.Answer]:
    client = wire.Client()
    try:
        return [await client.post(wire.target(url, {}), b'{"q": 1}', 5.0)]
    finally:
        client.close()


def test_a_connection_the_server_closes_is_not_reused_and_no_request_fails_for_it() -> None:
    async def go() -> None:
        async def closing(request: web.Request) -> web.StreamResponse:
            return web.Response(body=BODY, headers={"Connection": "close"})

        async with web_server(closing) as (url, ports):
            client = wire.Client()
            where = wire.target(url, {})
            for _ in range(3):
                assert (await client.post(where, b"{}", 5.0)).body == BODY
            client.close()
            assert len(set(ports)) == 3  # each on a new connection

        async def plain(request: web.Request) -> web.StreamResponse:
            return web.Response(body=BODY)

        async with web_server(plain) as (url, ports):
            client = wire.Client()
            where = wire.target(url, {})
            await client.post(where, b"{}", 5.0)
            for idle in client._idle.values():  # the server drops the kept connection while idle
                for connection in idle:
                    assert connection.transport is not None
                    connection.transport.abort()
            await asyncio.sleep(0.05)
            assert (await client.post(where, b"{}", 5.0)).body == BODY
            client.close()
            assert len(set(ports)) == 2

    asyncio.run(go())


@pytest.mark.parametrize(("answer", "kind"), [
    (b"garbage that is no HTTP\r\n\r\n", wire.BadHTTPAnswerError),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"cut\":", wire.ConnectionClosedError),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":", wire.ConnectionClosedError),
    (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nnope", wire.BadHTTPAnswerError),
    (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\n{}", wire.BadHTTPAnswerError),
], ids=["not-http", "cut-by-length", "cut-in-a-chunk", "bad-gzip", "unknown-encoding"])
def test_an_answer_that_is_not_whole_http_is_an_error_never_an_answer(answer: bytes, kind: type[Exception]) -> None:
    async def go() -> None:
        async with raw_server(answer) as url:
            with pytest.raises(kind):
                await wire.Client().post(wire.target(url, {}), b"{}", 5.0)

    asyncio.run(go())


def test_a_body_that_ends_with_its_connection_and_a_deflated_one_are_read_and_interim_answers_skipped() -> None:
    async def go() -> None:
        early = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        async with raw_server(early + b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY) as url:
            answer = await wire.Client().post(wire.target(url, {}), b"{}", 5.0)
            assert (answer.status, answer.body, "link" in answer.headers) == (200, BODY, False)
        async with raw_server(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY) as url:
            assert (await wire.Client().post(wire.target(url, {}), b"{}", 5.0)).body == BODY
        deflated = zlib.compress(BODY)
        head = b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: %d\r\n\r\n" % len(deflated)
        async with raw_server(head + deflated) as url:
            assert (await wire.Client().post(wire.target(url, {}), b"{}", 5.0)).body == BODY

    asyncio.run(go())


def test_an_answer_larger_than_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_ANSWER_BYTES", 1000)

    async def go() -> None:
        async with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000) as url:
            with pytest.raises(wire.BadHTTPAnswerError, match="larger than 1000"):
                await wire.Client().post(wire.target(url, {}), b"{}", 5.0)

    asyncio.run(go())


def test_a_silent_server_is_cut_at_the_timeout_and_a_refused_connection_is_an_os_error() -> None:
    async def go() -> None:
        async with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{", close=False) as url:
            started = asyncio.get_running_loop().time()
            with pytest.raises(TimeoutError):
                await wire.Client().post(wire.target(url, {}), b"{}", 0.3)
            assert asyncio.get_running_loop().time() - started < 1.5
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(ConnectionRefusedError):
            await wire.Client().post(wire.target(f"http://127.0.0.1:{port}/v1", {}), b"{}", 5.0)

    asyncio.run(go())


@pytest.mark.parametrize(("url", "headers"), [
    ("ftp://example.com/v1", {}),
    ("http:///v1", {}),
    ("http://example.com/v1", {"Authorization": "Bearer sk-x\r\nX-Injected: 1"}),
    ("http://example.com/v1\r\nX-Injected: 1", {}),
])
def test_a_url_or_header_that_would_smuggle_a_line_is_refused_before_sending(url: str, headers: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        wire.target(url, headers)


def test_the_request_head_names_the_host_path_and_length() -> None:
    where = wire.target("https://api.example.com:8443/v1/chat/completions?x=1", {"Authorization": "Bearer k"})
    assert where.key == ("https", "api.example.com", 8443) and where.tls
    head = where.head.decode()
    assert head.startswith("POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: api.example.com:8443\r\n")
    assert "Authorization: Bearer k\r\n" in head and head.endswith("\r\n")
    assert wire.target("http://[::1]/v1", {}).head.decode().split("\r\n")[1] == "Host: [::1]"


@asynccontextmanager
async def keep_alive_server(answer: bytes, after: bytes = b"", after_s: float = 0.0) -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP server that answers every request on a connection with ``answer``, then (after
    ``after_s``) writes ``after`` unasked; yields its URL and a count of connections per request."""
    connections: list[int] = []
    opened: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(len(opened) + 1)
        number = opened[-1]
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                connections.append(number)
                writer.write(answer)
                await writer.drain()
                if after:
                    await asyncio.sleep(after_s)
                    writer.write(after)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", connections
    finally:
        server.close()


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Request-Id: first\r\n%s\r\n" % (len(body), extra) + body


def test_bytes_nobody_asked_for_never_reach_the_next_answer() -> None:
    """A second answer glued to the first, or bytes arriving on an idle connection, are never
    read as (or into) the next request's answer: the connection is dropped instead."""
    stray = b"HTTP/1.1 429 Too Many\r\nRetry-After: 999\r\nX-Request-Id: stale\r\nContent-Length: 0\r\n\r\n"

    async def go() -> None:
        async with keep_alive_server(_ok(BODY) + stray) as (url, connections):
            client, where = wire.Client(), wire.target(url, {})
            first = await client.post(where, b"{}", 5.0)
            assert first.body == BODY and first.headers == {"content-length": str(len(BODY)), "x-request-id": "first"}
            await asyncio.sleep(0.05)
            assert first.headers["x-request-id"] == "first" and "retry-after" not in first.headers
            second = await client.post(where, b"{}", 5.0)
            assert (second.status, second.body) == (200, BODY)
            assert connections == [1, 2]  # the out-of-step connection was not reused
            client.close()
        async with keep_alive_server(_ok(BODY), after=b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n_tail_", after_s=0.02) as (url, connections):
            client, where = wire.Client(), wire.target(url, {})
            assert (await client.post(where, b"{}", 5.0)).body == BODY
            await asyncio.sleep(0.1)  # the unasked bytes arrive while the connection is idle
            assert (await client.post(where, b"{}", 5.0)).body == BODY
            assert connections == [1, 2]
            client.close()

    asyncio.run(go())


def test_a_small_gzip_that_decodes_past_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_ANSWER_BYTES", 100_000)
    bomb = gzip.compress(b"\0" * 5_000_000)
    assert len(bomb) < 100_000

    async def go() -> None:
        async with raw_server(_ok(bomb, b"Content-Encoding: gzip\r\n")) as url:
            with pytest.raises(wire.BadHTTPAnswerError, match="decodes to more than 100000"):
                await wire.Client().post(wire.target(url, {}), b"{}", 5.0)
        async with raw_server(_ok(gzip.compress(b"\0" * 99_000), b"Content-Encoding: gzip\r\n")) as url:
            assert (await wire.Client().post(wire.target(url, {}), b"{}", 5.0)).body == b"\0" * 99_000

    asyncio.run(go())


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
    b"HTTP/1.1 200 OK\r\nX-Odd: a\x01b\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\n{}\r\n0\r\n\r\n",
], ids=["bare-lf", "control-in-header", "space-after-chunk-size"])
def test_quirks_of_small_servers_that_aiohttp_read_are_read(answer: bytes) -> None:
    async def go() -> None:
        async with raw_server(answer) as url:
            assert (await wire.Client().post(wire.target(url, {}), b"{}", 5.0)).body == b"{}"

    asyncio.run(go())


@pytest.mark.parametrize("head", [
    b"".join(b"X-H%d: v\r\n" % i for i in range(300)),
    b"X-Big: " + b"v" * 100_000 + b"\r\n",
    b"X-Same: v\r\n" * 300,
], ids=["300-headers", "100-kb-header", "one-header-300-times"])
def test_headers_past_the_limits_are_refused(head: bytes) -> None:
    async def go() -> None:
        async with raw_server(b"HTTP/1.1 200 OK\r\n" + head + b"Content-Length: 2\r\n\r\n{}") as url:
            with pytest.raises(wire.BadHTTPAnswerError, match="headers"):
                await wire.Client().post(wire.target(url, {}), b"{}", 5.0)

    asyncio.run(go())


def test_a_non_ascii_host_and_path_are_encoded_as_aiohttp_did_and_a_bad_host_is_refused() -> None:
    head = wire.target("http://bücher.example/v1/é?q=ü", {}).head.decode()
    assert head.startswith("POST /v1/%C3%A9?q=%C3%BC HTTP/1.1\r\nHost: xn--bcher-kva.example\r\n")
    assert wire.target("http://h.example/v1/a%20b", {}).head.startswith(b"POST /v1/a%20b ")
    for bad in ("http://a..b/v1", f"http://{'x' * 64}.example/v1"):
        with pytest.raises(ValueError, match="not a valid name"):
            wire.target(bad, {})


def test_idle_connections_past_their_keep_are_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "KEEP_IDLE_S", 0.2)

    async def go() -> None:
        async with keep_alive_server(_ok(BODY)) as (url, connections):
            client, where = wire.Client(), wire.target(url, {})
            await asyncio.gather(*(client.post(where, b"{}", 5.0) for _ in range(3)))
            assert len(client._idle[where.key]) == 3
            for _ in range(5):  # one at a time: the newest is reused, the two others age out
                await asyncio.sleep(0.08)
                await client.post(where, b"{}", 5.0)
            assert len(client._idle[where.key]) == 1 and len(set(connections)) == 3
            client.close()

    asyncio.run(go())
