"""Issue 35, point 3: answers the provider billed but the engine could not read (a 2xx in an
encoding nobody asked for, a body cut after its head, a timeout after sending) are booked at an
estimate, counted apart in run.json's spend, shown by ``status`` and the summary, and counted by
the budget; what can be decoded is. Against a gateway on 127.0.0.1 in front of the fake server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.lanes import rough_prompt_tokens
from judge_engine.providers.catalog import cost_per_token
from judge_engine.rundir.records import Spend
from tests.harness import make_job, read_lines, read_transcripts

MODEL = "openai/gpt-4o-mini"
NOT_BROTLI = b"\x8b\x7f not a brotli stream at all \xff\xfe"


class Gateway:
    """A gateway on its own loop in a daemon thread: every request forwarded to the fake server,
    its answer returned as ``mode`` says: ``br``/``zstd``/``gzip`` (encoded so), ``unreadable`` (200,
    ``Content-Encoding: br`` over bytes no decoder reads), ``cut`` (200, a body cut after its head),
    ``silent`` (no answer). It counts the requests and keeps the ``Accept-Encoding`` of each."""

    def __init__(self, backend: FakeServer, mode: str) -> None:
        self.backend, self.mode = backend, mode
        self.requests = 0
        self.accepted: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    def __enter__(self) -> Gateway:
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> int:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _stop(self) -> None:
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in handlers:  # a silent answer's handler, still waiting
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        self.accepted.append(request.headers.get("Accept-Encoding", ""))
        body = await request.read()
        if self.mode == "silent":
            await asyncio.sleep(30)
        if self.mode == "unreadable":
            return web.Response(body=NOT_BROTLI, headers={"Content-Encoding": "br", "Content-Type": "application/json"})
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "x-fake-sample")}
        async with aiohttp.ClientSession() as session, session.post(
                f"{self.backend.base_url}/chat/completions", data=body,
                headers={**headers, "Content-Type": "application/json"}) as answer:
            raw = await answer.read()
        if self.mode == "cut":
            response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": str(len(raw))})
            await response.prepare(request)
            await response.write(raw[: len(raw) // 2])
            assert request.transport is not None
            request.transport.close()
            return response
        return web.Response(body=_encoded(raw, self.mode), status=answer.status,
                            headers={"Content-Encoding": self.mode, "Content-Type": "application/json"})


def _encoded(raw: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        import gzip

        return gzip.compress(raw)
    if encoding == "br":
        return bytes(pytest.importorskip("brotli").compress(raw))
    return bytes(pytest.importorskip("backports.zstd").compress(raw))


@pytest.fixture
def gateway(fake_server: FakeServer, request: pytest.FixtureRequest) -> Iterator[Gateway]:
    with Gateway(fake_server, request.param) as front:
        yield front


def _booked(line: dict[str, Any]) -> float:
    """What an unread call is booked at: its prompt counted locally, and max_tokens (300)."""
    prices = cost_per_token(MODEL)
    assert prices is not None
    return rough_prompt_tokens(line["request"]["messages"]) * prices[0] + 300 * prices[1]


def _one_call(job_dir: Path) -> float:
    return max(_booked(line) for line in read_transcripts(job_dir))


@pytest.mark.parametrize("gateway", ["unreadable", "cut"], indirect=True)
def test_answers_billed_but_not_read_are_booked_at_an_estimate_and_shown(
        tmp_path: Path, gateway: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    # 8 tasks: fewer than the 10 exhausted in a row that stop a failing endpoint's judge
    job = make_job(tmp_path, gateway, items=8, judge={"retries": {"transport": 2}})  # type: ignore[arg-type]
    assert main(["run", str(job.config), "--no-live"]) == 3  # nothing scored: every task failed
    run = job.only_run()
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len(outcomes) == 8 and {o["reason_code"] for o in outcomes} == {"transport_exhausted"}
    lines = read_transcripts(run)
    assert len(lines) == 24 == gateway.requests  # 3 attempts a task, each a line
    assert all(line["estimated"] is True and line["error"]["kind"] == "retry"
               and line["usage"]["completion_tokens"] == 300 for line in lines)
    assert all(line["cost"] == pytest.approx(_booked(line)) for line in lines)
    spend = json.loads((run / "run.json").read_text())["spend"]["total"]
    assert spend["calls"] == spend["estimated_calls"] == 24
    assert spend["cost"] == pytest.approx(spend["estimated_cost"]) == pytest.approx(sum(_booked(x) for x in lines))
    assert spend["cost"] > 0.001
    assert spend["prompt_tokens"] == spend["completion_tokens"] == 0  # tokens stay what providers reported
    summary = " ".join(capsys.readouterr().err.split())
    assert "24 answers billed but not read (~$" in summary, summary
    assert main(["status", str(run)]) == 0
    status = " ".join(capsys.readouterr().out.split())
    assert "of it estimated for 24 answers billed but not read" in status, status
    assert main(["show", str(run), "--item", outcomes[0]["item_id"]]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "of it estimated: 3 answers billed but not read" in shown and "booked at ~$" in shown, shown


@pytest.mark.parametrize("gateway", ["unreadable", "cut"], indirect=True)
def test_the_litellm_transport_books_them_too(tmp_path: Path, gateway: Gateway) -> None:
    job = make_job(tmp_path, gateway, items=4, judge={"transport": "litellm", "retries": {"transport": 1}})  # type: ignore[arg-type]
    assert main(["run", str(job.config), "--no-live"]) == 3
    lines = read_transcripts(job.only_run())
    assert len(lines) == 8 == gateway.requests and all(line["estimated"] and line["cost"] > 0 for line in lines)
    spend = json.loads((job.only_run() / "run.json").read_text())["spend"]["total"]
    assert spend["estimated_calls"] == spend["calls"] == 8 and spend["cost"] > 0


@pytest.mark.parametrize("gateway", ["silent"], indirect=True)
def test_a_request_sent_and_never_answered_is_booked_at_an_estimate(tmp_path: Path, gateway: Gateway) -> None:
    job = make_job(tmp_path, gateway, items=4, judge={"timeout_s": 0.5, "retries": {"transport": 0}})  # type: ignore[arg-type]
    assert main(["run", str(job.config), "--no-live"]) == 3
    lines = read_transcripts(job.only_run())
    assert len(lines) == 4 and all(line["estimated"] and line["cost"] > 0 for line in lines)
    spend = json.loads((job.only_run() / "run.json").read_text())["spend"]["total"]
    assert spend["estimated_calls"] == 4 and spend["cost"] > 0


@pytest.mark.parametrize("gateway", ["unreadable"], indirect=True)
def test_a_budget_stops_a_gateway_whose_answers_cannot_be_read(tmp_path: Path, gateway: Gateway) -> None:
    job = make_job(tmp_path, gateway, items=80, judge={"limits": {"concurrency": 4}})  # type: ignore[arg-type]
    assert main(["run", str(job.config), "--no-live", "--budget", "0.01"]) == 4
    run = job.only_run()
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "stopped" and manifest["stopped"]["reason"] == "budget"
    one = _one_call(run)
    spent = manifest["spend"]["total"]["cost"]
    assert 0.01 - 2 * one <= spent <= 0.01 + 4 * one, (spent, one)  # within the calls in flight of the limit
    assert gateway.requests == manifest["spend"]["total"]["estimated_calls"] <= 0.01 / one + 4


@pytest.mark.parametrize("gateway", ["gzip", "br", "zstd"], indirect=True)
def test_an_encoded_answer_that_can_be_decoded_is_scored(tmp_path: Path, gateway: Gateway) -> None:
    from judge_engine.providers import content_encoding as encodings

    if gateway.mode not in encodings.DECODERS:
        pytest.skip(f"no {gateway.mode} decoder installed (the compression extra)")
    job = make_job(tmp_path, gateway, items=10)  # type: ignore[arg-type]
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 10 and {o["status"] for o in outcomes} == {"scored"}
    assert not any(line.get("estimated") for line in read_transcripts(job.only_run()))


@pytest.mark.parametrize("gateway", ["gzip"], indirect=True)
def test_the_request_accepts_exactly_the_encodings_that_decode(tmp_path: Path, gateway: Gateway) -> None:
    job = make_job(tmp_path, gateway, items=3)  # type: ignore[arg-type]
    assert main(["run", str(job.config), "--no-live"]) == 0
    named = {tuple(part.strip() for part in header.split(",")) for header in gateway.accepted}
    assert len(named) == 1
    (accepted,) = named
    assert {"gzip", "deflate"} <= set(accepted) <= {"gzip", "deflate", "br", "zstd"}
    from judge_engine.providers import content_encoding as encodings

    for name in accepted:  # each one named decodes (and nothing else is named)
        assert name in encodings.DECODERS
    assert set(accepted) == set(encodings.DECODERS) - {"x-gzip"}
    with pytest.raises(encodings.UndecodableError, match="not one"):
        encodings.decode(b"x", "compress", 100)


def test_an_old_runs_spend_without_estimates_reads_as_none() -> None:
    old: dict[str, Any] = {"calls": 3, "cache_hits": 0, "prompt_tokens": 30, "completion_tokens": 9, "cost": 0.5}
    spend = Spend.from_dict(old)
    assert (spend.estimated_calls, spend.estimated_cost) == (0, 0.0) and spend.to_dict() == old
    both = spend.plus(Spend(calls=1, cost=0.25, estimated_calls=1, estimated_cost=0.25))
    assert both.to_dict()["estimated_calls"] == 1 and both.cost == 0.75
    assert both.minus(spend).estimated_cost == 0.25


def _raised_from(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error


def test_whether_a_failed_request_may_have_been_billed_reads_both_clients() -> None:
    import socket

    import httpx

    from judge_engine.providers.base import fate_unknown

    request = httpx.Request("POST", "http://127.0.0.1/v1")
    sent = [TimeoutError(), aiohttp.ServerDisconnectedError(), aiohttp.ClientPayloadError("cut"),
            httpx.ReadTimeout("slow", request=request), httpx.RemoteProtocolError("gone", request=request),
            _raised_from(RuntimeError("litellm's wrapper"), httpx.ReadTimeout("slow", request=request))]
    never = [aiohttp.ConnectionTimeoutError(), ConnectionRefusedError(), socket.gaierror(-2, "no such host"),
             httpx.ConnectTimeout("slow", request=request), httpx.ConnectError("refused", request=request),
             _raised_from(RuntimeError("litellm's wrapper"), httpx.ConnectTimeout("slow", request=request)),
             ValueError("not a network failure")]
    assert [fate_unknown(e) for e in sent] == [True] * len(sent)
    assert [fate_unknown(e) for e in never] == [False] * len(never)
