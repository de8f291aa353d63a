"""What gateways, proxies and servers do to a run (issue 35, points 1, 2 and 4), on the direct
transport, through real loopback servers (:mod:`tests.netfronts`): a gateway that redirects (the
same origin and another, 307 and 301), a proxy that wants credentials, a proxy that is not there
(refused, or dropping what it is sent), and a server that closes every kept connection right
after its answer. Each failed on the engine before issue 35: a redirect was every item's verdict
(``provider_rejected``), a silent proxy was retried as the provider failing, and requests sent on
a connection the server had closed were lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.providers.http import ChatClient
from judge_engine.providers.network import Network
from tests.harness import TEST_KEY, make_job, read_lines
from tests.netfronts import ForwardProxy, Gateway, dead_proxy, tcp_server

CHAT = "/v1/chat/completions"
pytestmark = pytest.mark.usefixtures("clean_network")  # tests/providers/conftest.py


def _port(server: FakeServer) -> int:
    return int(server.base_url.rsplit(":", 1)[1].split("/")[0])


def _run(job: Any) -> tuple[int, float]:
    started = time.monotonic()
    code = main(["run", str(job.config), "--no-live"])
    return code, time.monotonic() - started


def _outcomes(job: Any) -> list[dict[str, Any]]:
    path = job.only_run() / "outcomes.jsonl"
    return read_lines(path) if path.exists() else []


def _said(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().err.split())


# --- 1. redirects ----------------------------------------------------------------------------------


def test_a_307_to_another_origin_stops_the_judge_naming_the_location_and_sends_nothing_there(
        tmp_path: Path, server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = f"http://127.0.0.1:{_port(server)}{CHAT}"
    with Gateway(backend=("127.0.0.1", _port(server)), moved={CHAT: elsewhere}, status=307) as gateway:
        job = make_job(tmp_path, server, judge={"api_base": gateway.url + "/v1"})
        code, took = _run(job)
        said = _said(capsys)
        assert code == 1 and took < 60
        assert elsewhere in said and f"update api_base to http://127.0.0.1:{_port(server)}/v1" in said
        assert "Traceback" not in said
        assert server.stats()["requests_total"] == 0  # the key never went to the other origin
        assert 1 <= len(gateway.log) <= 16 and all(e.authorization == f"Bearer {TEST_KEY}" for e in gateway.log)
        assert not [o for o in _outcomes(job) if o.get("reason_code") == "provider_rejected"]


@pytest.mark.parametrize("status", [307, 308])
def test_a_307_or_308_to_the_same_origin_is_followed_with_the_post_and_its_body(
        tmp_path: Path, server: FakeServer, status: int) -> None:
    with Gateway(backend=("127.0.0.1", _port(server)), moved={CHAT: "/v2/chat/completions"}, status=status,
                 served={"/v2/chat/completions": CHAT}) as gateway:
        job = make_job(tmp_path, server, judge={"api_base": gateway.url + "/v1"})
        assert _run(job)[0] == 0
        outcomes = _outcomes(job)
        assert len(outcomes) == 20 and all(o["status"] == "scored" for o in outcomes)
        moved = [e for e in gateway.log if e.target == "/v2/chat/completions"]
        assert len(moved) == server.stats()["requests_total"] == 20 and {e.method for e in moved} == {"POST"}
        if status == 308:  # a permanent move: asked at the new address once one request has learned it
            assert len([e for e in gateway.log if e.target == CHAT]) <= 16


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_301_302_or_303_even_to_the_same_origin_stops_the_judge(
        tmp_path: Path, server: FakeServer, status: int, capsys: pytest.CaptureFixture[str]) -> None:
    with Gateway(backend=("127.0.0.1", _port(server)), moved={CHAT: "/v2/chat/completions"}, status=status,
                 served={"/v2/chat/completions": CHAT}) as gateway:
        job = make_job(tmp_path, server, judge={"api_base": gateway.url + "/v1"})
        assert _run(job)[0] == 1
        said = _said(capsys)
        assert f"{gateway.url}/v2/chat/completions" in said and "api_base" in said and f"HTTP {status}" in said
        assert server.stats()["requests_total"] == 0
        assert not [e for e in gateway.log if e.target != CHAT]  # never asked again as a GET (or at all)
        assert not [o for o in _outcomes(job) if o.get("reason_code") == "provider_rejected"]


def test_a_redirect_loop_on_the_same_origin_stops_after_a_few_hops() -> None:
    async def go() -> None:
        with Gateway(moved={CHAT: CHAT}, status=307) as gateway:
            chat = ChatClient(Network(environ={}))
            answer = await chat.post(gateway.url + CHAT, b"{}", {"Content-Type": "application/json"}, 5.0)
            await chat.aclose()
            assert answer.status == 307 and len(gateway.log) == 4  # the request and 3 hops

    asyncio.run(go())


# --- 2. a proxy that refuses us ----------------------------------------------------------------------


def test_a_proxy_that_wants_credentials_none_given_meets_one_request_and_the_judge_stops(
        tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with ForwardProxy(credentials="judge:right") as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        job = make_job(tmp_path, server)
        code, took = _run(job)
        said = _said(capsys)
        assert code == 1 and took < 60
        assert f"the proxy http://127.0.0.1:{proxy.port}" in said and "407" in said and "authentication" in said
        assert len(proxy.log) <= 10  # not every request in flight, nor a retry storm
        assert server.stats()["requests_total"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(("how", "what"), [("refused", "connection refused"), ("silent", "timed out")])
def test_a_dead_proxy_stops_the_judge_naming_it_without_its_password(
        tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        how: str, what: str) -> None:
    with dead_proxy(how) as url:
        monkeypatch.setenv("HTTP_PROXY", url)
        job = make_job(tmp_path, server, judge={"timeout_s": 3})
        code, took = _run(job)
        said = _said(capsys)
        address = url.rsplit("@", 1)[1]
        assert code == 1 and took < 30
        assert f"the proxy http://[REDACTED]@{address} cannot be reached ({what}" in said
        assert "s3cret-proxy-pw" not in said and "transport_exhausted" not in said
        assert _outcomes(job) == []  # the proxy's failure is no task's


def test_a_dead_endpoint_without_a_proxy_is_still_cannot_reach(
        tmp_path: Path, server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, server, judge={"api_base": "http://127.0.0.1:9/v1"})
    assert _run(job)[0] == 1
    said = _said(capsys)
    assert "cannot reach http://127.0.0.1:9/v1" in said and "proxy" not in said.split("stopped:", 1)[1][:200]


# --- 4. kept connections the server closed -----------------------------------------------------------


def test_a_server_closing_every_kept_connection_loses_no_task_without_retries(tmp_path: Path,
                                                                              server: FakeServer) -> None:
    with Gateway(backend=("127.0.0.1", _port(server)), close_kept=True) as gateway:
        job = make_job(tmp_path, server, judge={"api_base": gateway.url + "/v1", "retries": {"transport": 0}})
        assert _run(job)[0] == 0
        outcomes = _outcomes(job)
        assert len(outcomes) == 20 and all(o["status"] == "scored" for o in outcomes)
        assert server.stats()["requests_total"] == 20 == len(gateway.log)  # no request lost, none sent twice


@asynccontextmanager
async def _closes_the_second_request() -> AsyncIterator[tuple[str, list[int]]]:
    """A server that answers a connection's first request and closes it when a second arrives,
    without answering (the server that closed a kept connection as the request left)."""
    seen: list[int] = []
    connections: list[int] = []
    body = b'{"choices": [{"message": {"content": "ok"}}]}'

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections) + 1)
        number = connections[-1]
        for turn in range(2):
            try:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            seen.append(number)
            if turn == 1:
                break
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await writer.drain()
        writer.close()

    async with tcp_server(serve, CHAT) as url:
        yield url, seen


def test_a_request_whose_kept_connection_closed_before_any_answer_is_sent_again_on_a_new_one() -> None:
    async def go() -> None:
        async with _closes_the_second_request() as (url, seen):
            chat = ChatClient(Network(environ={}))
            for _ in range(3):
                answer = await chat.post(url, b"{}", {"Content-Type": "application/json"}, 5.0)
                assert answer.status == 200
            await chat.aclose()
            assert seen == [1, 1, 2, 2, 3]  # each reused connection's request sent again, once, on a new one

    asyncio.run(go())


def test_a_kept_connection_closed_right_after_its_answer_is_never_reused() -> None:
    async def go() -> None:
        with FakeServer(FakeConfig()) as fake, Gateway(backend=("127.0.0.1", _port(fake)), close_kept=True) as gateway:
            chat = ChatClient(Network(environ={}))
            body = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
            for _ in range(10):
                answer = await chat.post(gateway.url + CHAT, body, {"Content-Type": "application/json"}, 5.0)
                assert answer.status == 200
            await chat.aclose()
            assert gateway.connections == len(gateway.log) == 10  # each on its own connection, none resent

    asyncio.run(go())


def test_requests_through_a_proxy_not_yet_proven_go_one_at_a_time_and_a_407_is_not_asked_again() -> None:
    async def go() -> None:
        with ForwardProxy(credentials="judge:right") as proxy:
            chat = ChatClient(Network(environ={"HTTP_PROXY": f"http://127.0.0.1:{proxy.port}"}))
            answers = await asyncio.gather(*(chat.post(f"http://127.0.0.1:9{CHAT}", b"{}", {}, 5.0) for _ in range(16)))
            await chat.aclose()
            assert {a.status for a in answers} == {407} and len(proxy.log) == 1

    asyncio.run(go())


def test_a_slow_answer_through_a_good_proxy_holds_the_others_back_for_a_second_at_most(server: FakeServer) -> None:
    server.update(latency_s=1.0)

    async def go() -> None:
        with ForwardProxy() as proxy:
            chat = ChatClient(Network(environ={"HTTP_PROXY": proxy.url}))
            body = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
            started = time.monotonic()
            answers = await asyncio.gather(*(chat.post(server.base_url + "/chat/completions", body,
                                                       {"Content-Type": "application/json"}, 10.0) for _ in range(8)))
            took = time.monotonic() - started
            await chat.aclose()
            assert {a.status for a in answers} == {200} and took < 1.0 + 1.0 + 1.5  # one grace, not one per request

    asyncio.run(go())


def test_a_proxy_refusing_the_connect_of_an_https_endpoint_meets_one_request(
        tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with ForwardProxy(credentials="judge:right") as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://judge:wrong@127.0.0.1:{proxy.port}")
        job = make_job(tmp_path, server, judge={"api_base": "https://localhost:9/v1"})
        assert _run(job)[0] == 1
        said = _said(capsys)
        assert f"the proxy http://[REDACTED]@127.0.0.1:{proxy.port}" in said and "407" in said and "wrong" not in said
        assert [e.method for e in proxy.log] == ["CONNECT"]


@pytest.mark.slow
def test_an_endpoint_that_drops_connections_without_a_proxy_is_cannot_reach_not_a_task_verdict(
        tmp_path: Path, server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    with dead_proxy("silent") as url:  # a listener that never answers, here as the endpoint itself
        address = url.rsplit("@", 1)[1]
        job = make_job(tmp_path, server, judge={"api_base": f"http://{address}/v1", "timeout_s": 1,
                                                "retries": {"transport": 1}})
        assert _run(job)[0] == 1
        said = _said(capsys)
        assert f"cannot reach http://{address}/v1" in said and "timed out" in said
        assert _outcomes(job) == []  # an outage is no task's verdict (before: transport_exhausted)


def test_on_the_litellm_transport_a_301_that_httpx_turned_into_a_get_stops_the_judge(
        tmp_path: Path, server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """httpx (under litellm) follows redirects itself: a 301 arrives as a GET, whose 405 was
    retried as transient (232 requests at the gateway); it is the configuration, so the judge stops."""
    with Gateway(backend=("127.0.0.1", _port(server)), moved={CHAT: "/v2/chat/completions"}, status=301,
                 served={"/v2/chat/completions": CHAT}) as gateway:
        job = make_job(tmp_path, server, judge={"api_base": gateway.url + "/v1", "transport": "litellm"})
        assert _run(job)[0] == 1
        said = _said(capsys)
        assert "405" in said and "api_base" in said
        assert len(gateway.log) <= 2 * 16  # each request in flight once, and its GET
