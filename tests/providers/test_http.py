"""The direct transport's HTTP client (``providers/http.py``, on aiohttp) against real loopback
servers: every way an answer can be framed, connections kept and dropped, and what it refuses.
(Until 0.2 these held the engine's own HTTP/1.1 client, ``wire.py``, to the same behaviours.)"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web

from judge_engine.providers import http
from judge_engine.providers.http import Answer, BadHTTPAnswerError, ChatClient, NotSentError
from judge_engine.providers.network import Network
from tests.netfronts import tcp_server

TRANSIENT = (BadHTTPAnswerError, aiohttp.ClientError, TimeoutError, ConnectionError)
"""What a broken answer raises: the transport's failure, retried, never an answer."""


def client() -> ChatClient:
    return ChatClient(Network(environ={}))


async def post(chat: ChatClient, url: str, body: bytes = b"{}", timeout_s: float = 5.0,
               headers: dict[str, str] | None = None) -> Answer:
    return await chat.post(url, body, headers or {"Content-Type": "application/json"}, timeout_s)

BODY = json.dumps({"choices": [{"message": {"content": "ok"}}], "pad": "x" * 5000}).encode()


@asynccontextmanager
async def web_server(handle: Callable[[web.Request], Awaitable[web.StreamResponse]], *, drop_idle: bool = False,
                     path: str = "/v1/chat/completions") -> AsyncIterator[tuple[str, list[int]]]:
    """An aiohttp server answering ``handle`` at ``path``; yields the chat URL and the client ports it
    saw (one per connection used). ``drop_idle``: each connection is closed by the server 50 ms after
    its answer, while the client keeps it idle."""
    ports: list[int] = []

    async def recorded(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        ports.append(peer[1] if peer else -1)
        if drop_idle and request.transport is not None:
            asyncio.get_running_loop().call_later(0.05, request.transport.close)
        return await handle(request)

    app = web.Application()
    app.router.add_post(path, recorded)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}{path}", ports
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

    async with tcp_server(serve, "/v1/chat/completions") as url:
        yield url


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
                chat = client()
                answers = [await post(chat, url, b'{"q": 1}') for _ in range(3)]
                await chat.aclose()
                assert [a.status for a in answers] == [200] * 3
                assert all(a.body == BODY for a in answers), handle.__name__
                assert len(set(ports)) == 1, f"{handle.__name__}: {ports} (one kept connection)"
        async with web_server(by_length) as (url, _):
            (answer,) = await _post_async(url)
            assert answer.headers["x-request-id"] == "r1"  # names lower-cased

    asyncio.run(go())


async def _post_async(url: str) -> list[Answer]:
    chat = client()
    try:
        return [await post(chat, url, b'{"q": 1}')]
    finally:
        await chat.aclose()


def test_a_connection_the_server_closes_is_not_reused_and_no_request_fails_for_it() -> None:
    async def go() -> None:
        async def closing(request: web.Request) -> web.StreamResponse:
            return web.Response(body=BODY, headers={"Connection": "close"})

        async with web_server(closing) as (url, ports):
            chat = client()
            for _ in range(3):
                assert (await post(chat, url)).body == BODY
            await chat.aclose()
            assert len(set(ports)) == 3  # each on a new connection

        async def plain(request: web.Request) -> web.StreamResponse:
            return web.Response(body=BODY)

        async with web_server(plain, drop_idle=True) as (url, ports):
            chat = client()
            await post(chat, url)
            await asyncio.sleep(0.1)  # the server drops the kept connection while it is idle
            assert (await post(chat, url)).body == BODY
            await chat.aclose()
            assert len(set(ports)) == 2

    asyncio.run(go())


@pytest.mark.parametrize("answer", [
    b"garbage that is no HTTP\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"cut\":",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":",
    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nnope",
], ids=["not-http", "cut-by-length", "cut-in-a-chunk", "bad-gzip"])
def test_an_answer_that_is_not_whole_http_is_an_error_never_an_answer(answer: bytes) -> None:
    async def go() -> None:
        async with raw_server(answer) as url:
            with pytest.raises(TRANSIENT):
                await post(client(), url)

    asyncio.run(go())


def test_a_body_that_ends_with_its_connection_and_a_deflated_one_are_read_and_interim_answers_skipped() -> None:
    async def go() -> None:
        early = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        async with raw_server(early + b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY) as url:
            answer = await post(client(), url)
            assert (answer.status, answer.body, "link" in answer.headers) == (200, BODY, False)
        async with raw_server(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY) as url:
            assert (await post(client(), url, timeout_s=5.0)).body == BODY
        deflated = zlib.compress(BODY)
        head = b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: %d\r\n\r\n" % len(deflated)
        async with raw_server(head + deflated) as url:
            assert (await post(client(), url, timeout_s=5.0)).body == BODY

    asyncio.run(go())


def test_an_answer_larger_than_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "MAX_ANSWER_BYTES", 1000)

    async def go() -> None:
        async with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000) as url:
            with pytest.raises(BadHTTPAnswerError, match="larger than 1000"):
                await post(client(), url, timeout_s=5.0)

    asyncio.run(go())


def test_a_silent_server_is_cut_at_the_timeout_and_a_refused_connection_is_an_os_error() -> None:
    async def go() -> None:
        async with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{", close=False) as url:
            started = asyncio.get_running_loop().time()
            with pytest.raises(http.UnreadAnswerError) as caught:  # its head came: billed, the body never whole
                await post(client(), url, timeout_s=0.3)
            assert asyncio.get_running_loop().time() - started < 1.5
            assert caught.value.status == 200 and isinstance(caught.value.__cause__, TimeoutError)
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises((ConnectionRefusedError, aiohttp.ClientConnectorError)):
            await post(client(), f"http://127.0.0.1:{port}/v1", timeout_s=5.0)

    asyncio.run(go())


@pytest.mark.parametrize(("url", "headers"), [
    ("ftp://example.com/v1", {}),
    ("http:///v1", {}),
    ("{local}", {"Authorization": "Bearer sk-x\r\nX-Injected: 1"}),
], ids=["not-http", "no-host", "line-break-in-a-header"])
def test_a_url_or_header_that_would_smuggle_a_line_is_refused_before_sending(url: str, headers: dict[str, str]) -> None:
    async def go() -> None:
        async with raw_server(_ok(BODY)) as local:
            with pytest.raises(NotSentError):
                await post(client(), url.format(local=local), headers=headers)

    asyncio.run(go())


def test_a_line_break_in_the_url_never_becomes_a_header() -> None:
    async def go() -> None:
        heads: list[bytes] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(_ok(BODY))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1\r\nX-Injected: 1"
        assert (await post(client(), url)).body == BODY
        server.close()
        assert b"\r\nX-Injected" not in heads[0]  # the URL's line break is dropped (WHATWG), never a header line

    asyncio.run(go())


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

    async with tcp_server(serve, "/v1") as url:
        yield url, connections


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Request-Id: first\r\n%s\r\n" % (len(body), extra) + body


def test_bytes_nobody_asked_for_never_reach_the_next_answer() -> None:
    """A second answer glued to the first, or bytes arriving on an idle connection, are never
    read as (or into) the next request's answer: the connection is dropped instead."""
    stray = b"HTTP/1.1 429 Too Many\r\nRetry-After: 999\r\nX-Request-Id: stale\r\nContent-Length: 0\r\n\r\n"

    async def go() -> None:
        async with keep_alive_server(_ok(BODY) + stray) as (url, connections):
            chat = client()
            first = await post(chat, url)
            assert first.body == BODY and first.headers["x-request-id"] == "first"
            await asyncio.sleep(0.05)
            assert first.headers["x-request-id"] == "first" and "retry-after" not in first.headers
            second = await post(chat, url)
            assert (second.status, second.body) == (200, BODY)
            assert connections == [1, 2]  # the out-of-step connection was not reused
            await chat.aclose()
        async with keep_alive_server(_ok(BODY), after=b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n_tail_", after_s=0.02) as (url, connections):
            chat = client()
            assert (await post(chat, url)).body == BODY
            await asyncio.sleep(0.1)  # the unasked bytes (an answer cut short) arrive while the connection is idle
            try:  # never read as (or into) the answer: the answer is the server's, or a transient failure
                assert (await post(chat, url, timeout_s=2.0)).body == BODY
            except TRANSIENT:
                pass
            await chat.aclose()
        async with keep_alive_server(_ok(BODY), after=_ok(b'{"stale": true}'), after_s=0.02) as (url, connections):
            chat = client()
            assert (await post(chat, url)).body == BODY
            await asyncio.sleep(0.1)  # a whole answer nobody asked for arrives while the connection is idle
            assert (await post(chat, url)).body == BODY
            assert connections == [1, 2]  # the connection it came on was dropped, not reused
            await chat.aclose()

    asyncio.run(go())


def test_a_small_gzip_that_decodes_past_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "MAX_ANSWER_BYTES", 100_000)
    bomb = gzip.compress(b"\0" * 5_000_000)
    assert len(bomb) < 100_000

    async def go() -> None:
        async with raw_server(_ok(bomb, b"Content-Encoding: gzip\r\n")) as url:
            with pytest.raises(BadHTTPAnswerError, match="decodes to more than 100000"):
                await post(client(), url, timeout_s=5.0)
        async with raw_server(_ok(gzip.compress(b"\0" * 99_000), b"Content-Encoding: gzip\r\n")) as url:
            assert (await post(client(), url, timeout_s=5.0)).body == b"\0" * 99_000

    asyncio.run(go())


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
    b"HTTP/1.1 200 OK\r\nX-Odd: a\x01b\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\n{}\r\n0\r\n\r\n",
], ids=["bare-lf", "control-in-header", "space-after-chunk-size"])
def test_quirks_of_small_servers_that_aiohttp_read_are_read(answer: bytes) -> None:
    async def go() -> None:
        async with raw_server(answer) as url:
            assert (await post(client(), url, timeout_s=5.0)).body == b"{}"

    asyncio.run(go())


@pytest.mark.parametrize("head", [
    b"".join(b"X-H%d: v\r\n" % i for i in range(300)),
    b"X-Big: " + b"v" * 100_000 + b"\r\n",
    b"X-Same: v\r\n" * 300,
], ids=["300-headers", "100-kb-header", "one-header-300-times"])
def test_headers_past_the_limits_are_refused(head: bytes) -> None:
    async def go() -> None:
        async with raw_server(b"HTTP/1.1 200 OK\r\n" + head + b"Content-Length: 2\r\n\r\n{}") as url:
            with pytest.raises(TRANSIENT):
                await post(client(), url, timeout_s=5.0)

    asyncio.run(go())


def test_a_non_ascii_host_and_path_are_sent_encoded() -> None:
    async def go() -> None:
        seen: list[str] = []

        async def handle(request: web.Request) -> web.StreamResponse:
            seen.append(request.raw_path)
            return web.Response(body=BODY)

        async with web_server(handle, path="/v1/é") as (url, _):
            assert (await post(client(), url + "?q=ü")).body == BODY
        assert seen == ["/v1/%C3%A9?q=%C3%BC"]

    asyncio.run(go())
