"""The direct transport sends what litellm sends, reads answers as litellm does, and is chosen
only where it applies.

``transport: auto`` sends OpenAI-compatible models over ``OpenAIHTTPProvider`` (a tenth of
litellm's CPU per call); these tests pin that the switch changes nothing a user can see: the
same request bodies on the wire, the same parsed answers, tokens, costs and kept headers, and the
same classification of failures. Every other engine test runs on the direct transport by default;
the fault tests in ``test_crash_and_limits.py`` and ``test_run_end_to_end.py`` run on both.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from judge_engine.cli import main
from judge_engine.errors import ReasonCode
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.inputs.config import JudgeConfig
from judge_engine.providers import Endpoint, for_judge
from judge_engine.providers.base import ErrorKind, ProviderRequest
from judge_engine.providers.litellm import LiteLLMProvider
from judge_engine.providers.openai_http import OpenAIHTTPProvider
from tests.harness import make_job
from tests.providers.test_provider_overhead import _requests as sdk_check_requests

KEY = "fake-test-key-0000"
COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "served-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Critical:\nno-error"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230},
}


@asynccontextmanager
async def capture_server(reply: Callable[[], web.Response]) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback server that records each request's JSON body and headers and answers ``reply()``."""
    seen: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append({"path": request.path, "body": await request.json(),
                     "authorization": request.headers.get("Authorization")})
        return reply()

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        await runner.cleanup()


def _requests(base_url: str, model: str) -> list[ProviderRequest]:
    """The request shapes the SDK-transform check uses (few-shot, unicode, JSON mode + params,
    multi-turn), for ``model``."""
    return [replace(request, model=model) for request in sdk_check_requests(base_url)]


def _reply() -> web.Response:
    return web.json_response(COMPLETION, headers={"x-ratelimit-limit-requests": "3000", "x-request-id": "r1",
                                                  "x-other": "dropped"})


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/gpt-4.1", "openai/my-local-llama"])
def test_direct_transport_sends_the_body_litellm_sends_and_reads_the_answer_the_same(model: str) -> None:
    async def scenario() -> None:
        async with capture_server(_reply) as (base_url, seen):
            direct, via_litellm = OpenAIHTTPProvider(api_key=KEY), LiteLLMProvider(api_key=KEY)
            try:
                for request in _requests(base_url, model):
                    seen.clear()
                    ours = await direct.complete(request)
                    theirs = await via_litellm.complete(request)
                    assert len(seen) == 2
                    assert seen[0]["path"] == seen[1]["path"] == "/v1/chat/completions"
                    assert seen[0]["body"] == seen[1]["body"], (seen[0]["body"], seen[1]["body"])
                    assert seen[0]["authorization"] == seen[1]["authorization"] == f"Bearer {KEY}"
                    assert (ours.content, ours.finish_reason, ours.prompt_tokens, ours.completion_tokens, ours.model) == \
                        (theirs.content, theirs.finish_reason, theirs.prompt_tokens, theirs.completion_tokens, theirs.model)
                    assert ours.cost == pytest.approx(theirs.cost, rel=1e-9)
                    assert dict(ours.headers) == {"x-ratelimit-limit-requests": "3000", "x-request-id": "r1"}
                    assert {k: v for k, v in theirs.headers.items() if k in ours.headers} == dict(ours.headers)
            finally:
                await direct.aclose()

    asyncio.run(scenario())


def _status_reply(status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None) -> Callable[[], web.Response]:
    def reply() -> web.Response:
        if isinstance(body, str):
            return web.Response(status=status, text=body, headers=headers, content_type="application/json")
        return web.json_response(body, status=status, headers=headers)
    return reply


def _error(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


@pytest.mark.parametrize(
    ("reply", "kind", "retry_after", "code"),
    [
        (_status_reply(429, _error("Rate limit reached"), {"retry-after": "7"}), ErrorKind.RATE_LIMITED, 7.0, None),
        (_status_reply(429, _error("slow down"), {"retry-after-ms": "1500"}), ErrorKind.RATE_LIMITED, 1.5, None),
        (_status_reply(401, _error("Incorrect API key provided: sk-abcdefghijklmnop", "invalid_api_key")),
         ErrorKind.FATAL, None, None),
        (_status_reply(404, _error("The model does not exist", "model_not_found")), ErrorKind.FATAL, None, None),
        (_status_reply(400, _error("This model's maximum context length is 8192 tokens", "context_length_exceeded")),
         ErrorKind.ITEM, None, ReasonCode.CONTEXT_TOO_LONG),
        (_status_reply(400, _error("The response was filtered due to the prompt triggering Azure OpenAI's "
                                   "content management policy.", "content_filter")),
         ErrorKind.ITEM, None, ReasonCode.CONTENT_FILTER),
        (_status_reply(418, _error("I'm a teapot")), ErrorKind.ITEM, None, ReasonCode.PROVIDER_REJECTED),
        (_status_reply(400, _error("Unrecognized request argument supplied: foo")), ErrorKind.FATAL, None, None),
        (_status_reply(500, _error("The server had an error")), ErrorKind.RETRY, None, None),
        (_status_reply(503, "<html>overloaded</html>"), ErrorKind.RETRY, None, None),
        (_status_reply(200, '{"choices": [{"message": {"content": "cut'), ErrorKind.RETRY, None, None),
        (_status_reply(200, {"object": "error", "message": "no choices"}), ErrorKind.RETRY, None, None),
    ],
    ids=["429-seconds", "429-ms", "401", "404", "400-context", "400-content-filter", "418", "400-bad-param", "500",
         "503-html", "200-cut-body", "200-no-choices"],
)
def test_direct_transport_classifies_failures(reply: Callable[[], web.Response], kind: ErrorKind,
                                              retry_after: float | None, code: ReasonCode | None) -> None:
    async def scenario() -> BaseException:
        async with capture_server(reply) as (base_url, _seen):
            return await _failure_of(_hi(base_url))

    error = asyncio.run(scenario())
    verdict = OpenAIHTTPProvider(api_key=KEY).classify(error)
    assert verdict.kind is kind, verdict
    assert verdict.retry_after_s == retry_after
    assert verdict.code == code
    assert not verdict.unreachable  # each of these came from a server that answered
    assert KEY not in verdict.message and "sk-abcdefghijklmnop" not in verdict.message


def test_direct_transport_cuts_a_hanging_request_and_a_refused_connection_is_retried() -> None:
    with FakeServer(FakeConfig(hang_rate=1.0, hang_s=30.0)) as server:
        error = asyncio.run(asyncio.wait_for(_failure_of(_hi(server.base_url, timeout_s=0.3)), timeout=5))
        hang = OpenAIHTTPProvider(api_key=KEY).classify(error)
        assert hang.kind is ErrorKind.RETRY and not hang.unreachable  # the server was reached
    refused = asyncio.run(_failure_of(_hi(server.base_url)))  # the server is gone now
    verdict = OpenAIHTTPProvider(api_key=KEY).classify(refused)
    assert verdict.kind is ErrorKind.RETRY and verdict.unreachable


@pytest.mark.parametrize("api_base", ["http://127.0.0.1:9/v1", "http://no-such-host.invalid/v1"],
                         ids=["refused", "dns"])
def test_litellm_says_when_nothing_reached_the_endpoint(api_base: str) -> None:
    from judge_engine.providers.litellm import LiteLLMProvider

    provider = LiteLLMProvider(api_key=KEY)

    async def failure() -> BaseException:
        try:
            await provider.complete(_hi(api_base, timeout_s=5))
        except Exception as exc:
            return exc
        raise AssertionError("the request should have failed")

    verdict = provider.classify(asyncio.run(failure()))
    assert verdict.kind is ErrorKind.RETRY and verdict.unreachable, verdict


def _hi(base_url: str, *, timeout_s: float = 120.0) -> ProviderRequest:
    return ProviderRequest(model="openai/gpt-4o-mini", api_base=base_url, temperature=0.0, max_tokens=10,
                           timeout_s=timeout_s, messages=[{"role": "user", "content": "hi"}])


async def _failure_of(request: ProviderRequest) -> BaseException:
    """What the direct transport raises for ``request`` (it must fail: the classifier decides)."""
    direct = OpenAIHTTPProvider(api_key=KEY)
    try:
        await direct.complete(request)
    except Exception as exc:
        return exc
    finally:
        await direct.aclose()
    raise AssertionError(f"the request to {request.api_base} should have failed")


def _judge(model: str, transport: str, api_base: str | None = "http://127.0.0.1:9/v1") -> JudgeConfig:
    return JudgeConfig(name="j", model=model, protocol="gemba-mqm", api_base=api_base, transport=transport)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "api_base", "transport", "expected"),
    [
        ("openai/gpt-4o-mini", "http://127.0.0.1:9/v1", "auto", OpenAIHTTPProvider),
        ("gpt-4o-mini", None, "auto", OpenAIHTTPProvider),
        ("openai/gpt-4o-mini", "http://127.0.0.1:9/v1", "litellm", LiteLLMProvider),
        ("anthropic/claude-3-5-haiku-latest", None, "auto", LiteLLMProvider),
        ("gemini/gemini-1.5-flash", None, "auto", LiteLLMProvider),
        ("openai/o3-mini", None, "auto", LiteLLMProvider),  # litellm rewrites system messages for it
        ("gpt-5", None, "auto", LiteLLMProvider),
        ("openai/gpt-4o-mini", "http://127.0.0.1:9/v1", "direct", OpenAIHTTPProvider),
    ],
)
def test_auto_transport_goes_direct_only_for_openai_compatible_models(model: str, api_base: str | None,
                                                                      transport: str, expected: type) -> None:
    provider = for_judge(_judge(model, transport, api_base), Endpoint(model, api_base, "k"))
    assert type(provider) is expected


def test_direct_transport_for_a_non_openai_model_is_a_config_error(tmp_path: Path, capsys) -> None:
    job = make_job(tmp_path, None, items=3, judge={"model": "anthropic/claude-3-5-haiku-latest", "transport": "direct"})
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert "judges[mqm].transport" in err and "anthropic/claude-3-5-haiku-latest" in err


def test_transport_does_not_change_the_run_or_its_cache(tmp_path: Path) -> None:
    """Switching transport resumes the same run and reuses the cache: answers are the same."""
    with FakeServer(FakeConfig()) as server:
        job = make_job(tmp_path, server, items=12, judge={"transport": "direct"})
        assert main(["run", str(job.config), "--no-live"]) == 0
        sent = server.stats()["requests_total"]
        assert sent == 12
        make_job(tmp_path, server, items=12, judge={"transport": "litellm"})
        assert main(["run", str(job.config), "--no-live", "--new-run"]) == 0
        assert server.stats()["requests_total"] == sent  # every answer came from the cache
        assert len(job.run_dirs()) == 2
