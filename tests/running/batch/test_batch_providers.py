"""The batch adapters: the bodies they send are the online path's, their results are read as an
online answer is, and the fake server's batch APIs behave as the real ones do."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from judge_engine.errors import ReasonCode
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.providers import batch_api_for
from judge_engine.providers.base import ProviderRequest
from judge_engine.providers.batch import ResultKind
from judge_engine.providers.litellm import LiteLLMProvider
from judge_engine.providers.openai_http import OpenAIHTTPProvider
from tests.providers.test_transports import _reply, _requests, capture_server
from tests.running.batch.conftest import ANTHROPIC_MODEL

ANTHROPIC_REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                   "content": [{"type": "text", "text": "Critical:\nno-error"}], "stop_reason": "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 3}}


@asynccontextmanager
async def anthropic_capture() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response(ANTHROPIC_REPLY)

    app = web.Application()
    app.router.add_post("/v1/messages", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


def _body(line: bytes) -> dict[str, Any]:
    request = json.loads(line)
    return request["body"] if "body" in request else request["params"]


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/my-local-llama"])
def test_an_openai_batch_request_is_the_body_the_online_transports_send(model: str) -> None:
    async def scenario() -> None:
        async with capture_server(_reply) as (base_url, seen):
            api = batch_api_for(model, base_url, api_key="k")
            requests = _requests(base_url, model)
            for provider in (OpenAIHTTPProvider(api_key="k"), LiteLLMProvider(api_key="k")):
                for request in requests:
                    await provider.complete(request)
                await provider.aclose()
            lines = [_body(api.request_line("x-1", r)) for r in requests]
            assert [s["body"] for s in seen] == lines + lines
            await api.aclose()

    asyncio.run(scenario())


def test_an_anthropic_batch_request_is_the_body_litellm_sends_anthropic() -> None:
    async def scenario() -> None:
        async with anthropic_capture() as (base_url, seen):
            requests = _requests(base_url, ANTHROPIC_MODEL)
            provider = LiteLLMProvider(api_key="k")
            for request in requests:
                await provider.complete(request)
            api = batch_api_for(ANTHROPIC_MODEL, base_url, api_key="k")
            assert seen == [_body(api.request_line("x-1", r)) for r in requests]
            assert any("system" in body for body in seen)
            await api.aclose()

    asyncio.run(scenario())


def test_openai_result_lines_are_read_as_answers_or_as_why_there_is_none() -> None:
    api = batch_api_for("openai/gpt-4o-mini", "http://127.0.0.1:9/v1", api_key="k")
    answer = {"custom_id": "a-1", "error": None, "response": {"status_code": 200, "body": {
        "model": "gpt-4o-mini", "choices": [{"message": {"content": "Critical:\nno-error"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 10}}}}
    result = api.read_result(json.dumps(answer).encode())
    assert result.kind is ResultKind.ANSWER and result.response is not None
    assert result.response.content == "Critical:\nno-error"
    assert result.response.cost == pytest.approx(1000 * 0.075e-6 + 10 * 0.3e-6)  # gpt-4o-mini's batch prices

    def kind(line: dict[str, Any]) -> tuple[ResultKind, ReasonCode | None]:
        read = api.read_result(json.dumps(line).encode())
        return read.kind, read.code

    def status(code: int, message: str) -> dict[str, Any]:
        return {"custom_id": "a-1", "error": None, "response": {"status_code": code, "body": {"error": {
            "message": message, "code": None}}}}

    assert kind(status(500, "server error")) == (ResultKind.FAILED, None)
    assert kind(status(429, "slow down")) == (ResultKind.FAILED, None)
    assert kind(status(400, "maximum context length is 128000 tokens")) == (ResultKind.REJECTED,
                                                                             ReasonCode.CONTEXT_TOO_LONG)
    assert kind(status(400, "something odd")) == (ResultKind.REJECTED, ReasonCode.PROVIDER_REJECTED)
    expired = {"custom_id": "a-1", "response": None, "error": {"code": "batch_expired", "message": "late"}}
    assert kind(expired) == (ResultKind.EXPIRED, None)
    assert kind({**expired, "error": {"code": "batch_cancelled", "message": "x"}}) == (ResultKind.CANCELLED, None)
    not_chat = {"custom_id": "a-1", "error": None, "response": {"status_code": 200, "body": {"oops": 1}}}
    assert kind(not_chat) == (ResultKind.FAILED, None)  # never an empty answer judged


def test_anthropic_result_lines_are_read_as_answers_or_as_why_there_is_none() -> None:
    api = batch_api_for(ANTHROPIC_MODEL, "http://127.0.0.1:9", api_key="k")

    def read(result: dict[str, Any]) -> Any:
        return api.read_result(json.dumps({"custom_id": "a-1", "result": result}).encode())

    text = read({"type": "succeeded", "message": {**ANTHROPIC_REPLY, "stop_reason": "max_tokens"}})
    assert text.kind is ResultKind.ANSWER and text.response.content == "Critical:\nno-error"
    assert text.response.finish_reason == "length"
    tool = read({"type": "succeeded", "message": {**ANTHROPIC_REPLY, "stop_reason": "tool_use", "content": [
        {"type": "tool_use", "id": "t", "name": "json_tool_call", "input": {"score": 4}}]}})
    assert json.loads(tool.response.content) == {"score": 4}  # JSON mode, as litellm reads it
    invalid = read({"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error",
                                                                              "message": "prompt is too long"}}})
    assert (invalid.kind, invalid.code) == (ResultKind.REJECTED, ReasonCode.CONTEXT_TOO_LONG)
    overloaded = read({"type": "errored", "error": {"type": "error", "error": {"type": "overloaded_error"}}})
    assert overloaded.kind is ResultKind.FAILED
    assert read({"type": "expired"}).kind is ResultKind.EXPIRED
    assert read({"type": "canceled"}).kind is ResultKind.CANCELLED


def _write(path: Path, api: Any, n: int) -> None:
    with path.open("wb") as handle:
        for i in range(n):
            request = ProviderRequest(model="m", messages=[{"role": "user", "content": f"Say {i}"}], temperature=0.0,
                                      max_tokens=20)
            handle.write(api.request_line(f"task{i:03d}-1", request))


@pytest.mark.slow
@pytest.mark.parametrize("anthropic", [False, True])
def test_the_fakes_batches_progress_end_and_can_be_cancelled_with_partial_results(tmp_path: Path,
                                                                                   anthropic: bool) -> None:
    knobs = FakeBatchConfig(processing_s=1.0, failure_rate=0.2, expire_rate=0.2)
    with FakeServer(FakeConfig(batch=knobs, require_api_key="secret")) as server:
        model, base = (ANTHROPIC_MODEL, server.url) if anthropic else ("openai/gpt-4o-mini", server.base_url)

        async def scenario() -> None:
            wrong = batch_api_for(model, base, api_key="wrong")
            with pytest.raises(Exception) as failure:
                await wrong.retrieve("nope")
            assert wrong.classify(failure.value).status == 401
            await wrong.aclose()
            api = batch_api_for(model, base, api_key="secret")
            _write(tmp_path / "a.jsonl", api, 40)
            file_id = await api.upload(tmp_path / "a.jsonl", "a.jsonl")
            started = time.time()
            info = await api.create(tmp_path / "a.jsonl", file_id, metadata={"judge_engine_chunk": "c"}, window="24h")
            seen = []
            while not info.ended:
                await asyncio.sleep(0.1)
                info = await api.retrieve(info.batch_id)
                seen.append(info.completed + info.failed)
            assert time.time() - started >= 0.9 and seen == sorted(seen) and len(set(seen)) > 2  # counts grow
            await api.download(info, tmp_path / "r.jsonl")
            kinds = [api.read_result(line).kind for line in (tmp_path / "r.jsonl").read_bytes().splitlines()]
            assert len(kinds) == 40 and {ResultKind.ANSWER, ResultKind.FAILED, ResultKind.EXPIRED} == set(kinds)
            assert info.status == ("ended" if anthropic else "expired")  # expired, with partial results
            found = await api.find({"judge_engine_chunk": "c"}, since=started - 5, requests=40, known=frozenset())
            assert found is not None and found[0].batch_id == info.batch_id and found[1] is anthropic
            # cancelled half way: what ran keeps its results, the rest is cancelled
            second = await api.create(tmp_path / "a.jsonl", file_id, metadata={}, window="24h")
            await asyncio.sleep(0.5)
            cancelled = await api.cancel(second.batch_id)
            while not cancelled.ended:
                await asyncio.sleep(0.05)
                cancelled = await api.retrieve(second.batch_id)
            await api.download(cancelled, tmp_path / "c.jsonl")
            kinds = [api.read_result(line).kind for line in (tmp_path / "c.jsonl").read_bytes().splitlines()]
            assert ResultKind.CANCELLED in kinds and ResultKind.ANSWER in kinds and len(kinds) == 40
            await api.aclose()

        asyncio.run(scenario())
        assert server.stats()["batch_submissions"]["task000"] == 2


def test_the_fakes_quota_refuses_a_batch_as_each_api_does(tmp_path: Path) -> None:
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=5.0, max_enqueued_tokens=100))) as server:
        async def scenario() -> None:
            openai = batch_api_for("openai/gpt-4o-mini", server.base_url, api_key="k")
            _write(tmp_path / "a.jsonl", openai, 30)
            file_id = await openai.upload(tmp_path / "a.jsonl", "a.jsonl")
            info = await openai.create(tmp_path / "a.jsonl", file_id, metadata={}, window="24h")
            assert info.refused and "token_limit_exceeded" in info.refused and not info.ended
            anthropic = batch_api_for(ANTHROPIC_MODEL, server.url, api_key="k")
            _write(tmp_path / "b.jsonl", anthropic, 30)
            with pytest.raises(Exception) as failure:
                await anthropic.create(tmp_path / "b.jsonl", None, metadata={}, window="24h")
            assert anthropic.classify(failure.value).status == 429
            for api in (openai, anthropic):
                await api.aclose()

        asyncio.run(scenario())
        assert server.stats()["batch_submissions"] == {} and server.stats()["batches_refused"] == 2


def test_a_batch_result_whose_usage_or_log_probs_are_not_what_they_say_is_failed_not_a_crash() -> None:
    """A 200 result with negative or 10^20 usage, or log-probabilities above 0, is a failed
    request (retried in the next round), as online: never an answer, never an exception that
    stops the collection."""
    openai = batch_api_for("openai/gpt-4o-mini", "http://127.0.0.1:9/v1", api_key="k")
    anthropic = batch_api_for(ANTHROPIC_MODEL, "http://127.0.0.1:9", api_key="k")
    choice = {"message": {"content": "yes"}, "finish_reason": "stop"}
    positive = {**choice, "logprobs": {"content": [{"token": "yes", "logprob": 3.0, "bytes": list(b"yes"),
                                                    "top_logprobs": []}]}}
    for usage, chosen in (({"prompt_tokens": -5}, choice), ({"prompt_tokens": 10**20}, choice), ({}, positive)):
        line = {"custom_id": "a-1", "error": None, "response": {"status_code": 200, "body": {
            "model": "gpt-4o-mini", "choices": [chosen], "usage": usage}}}
        assert openai.read_result(json.dumps(line).encode()).kind is ResultKind.FAILED, usage
    message = {**ANTHROPIC_REPLY, "usage": {"input_tokens": -5, "output_tokens": 3}}
    line = {"custom_id": "a-1", "result": {"type": "succeeded", "message": message}}
    assert anthropic.read_result(json.dumps(line).encode()).kind is ResultKind.FAILED
