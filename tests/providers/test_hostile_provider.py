"""A hostile provider's answers (issue 24, found by ``benchmarks/attack.py``'s provider family).

A gateway may echo the key into the answer's text, report usage that is no count of tokens
(negative, 10^20, NaN), log-probabilities above 0, or a Retry-After of forever. None of it may
reach a file as if it were true: the key is redacted, the answer is malformed (retried like a
cut body), and a 429 that asks to wait more than a day stops the judge instead of sleeping.
A gateway key given in ``params.extra_headers`` is never recorded either.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from judge_engine.errors import MalformedResponseError
from judge_engine.providers.base import ErrorKind, ProviderRequest, parse_retry_after
from judge_engine.providers.http import UnreadAnswerError
from judge_engine.providers.litellm import LiteLLMProvider
from judge_engine.providers.openai_http import OpenAIHTTPProvider
from judge_engine.util.logprobs import token_logprobs
from judge_engine.util.redaction import MARK, redact_params
from tests.harness import make_job
from tests.providers.test_http import web_server
from tests.providers.test_transports import COMPLETION, capture_server

KEY = "hostile" + "GatewayKey-6a1f0c"
"""Shaped like no API key: only redaction by what it is can catch it."""
TRANSPORTS: dict[str, Callable[[], Any]] = {"direct": lambda: OpenAIHTTPProvider(api_key=KEY),
                                            "litellm": lambda: LiteLLMProvider(api_key=KEY)}


def _completion(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(COMPLETION)
    document.update(changes.pop("top", {}))
    document["choices"][0].update(changes)
    return document


async def _outcome(transport: str, reply: Callable[[], web.Response]) -> tuple[Any, BaseException | None, Any]:
    """What ``transport`` made of ``reply``: (the response, the error, the provider)."""
    provider = TRANSPORTS[transport]()
    async with capture_server(reply) as (base_url, _seen):
        request = ProviderRequest(model="openai/gpt-4o-mini", api_base=base_url, temperature=0.0, max_tokens=10,
                                  timeout_s=10, messages=[{"role": "user", "content": "hi"}])
        try:
            return await provider.complete(request), None, provider
        except Exception as exc:
            return None, exc, provider
        finally:
            await provider.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_key_the_gateway_writes_into_the_answer_is_redacted(transport: str) -> None:
    text = f"Critical:\nno-error\n\n(debug: Authorization: Bearer {KEY})"
    answer = _completion(message={"role": "assistant", "content": text})
    response, error, _ = asyncio.run(_outcome(transport, lambda: web.json_response(answer)))
    assert error is None, error
    assert KEY not in response.content and MARK in response.content
    assert response.content.startswith("Critical:\nno-error")  # the model's own words stay


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("usage", [{"prompt_tokens": -5, "completion_tokens": 3},
                                   {"prompt_tokens": 10**20, "completion_tokens": 3}], ids=["negative", "huge"])
def test_usage_that_is_no_count_of_tokens_is_a_malformed_answer_retried(transport: str, usage: dict[str, int]) -> None:
    answer = _completion(top={"usage": usage})
    response, error, provider = asyncio.run(_outcome(transport, lambda: web.json_response(answer)))
    assert response is None, f"accepted usage {usage}: spend {response.cost}, tokens {response.prompt_tokens}"
    assert isinstance(error, MalformedResponseError), repr(error)
    assert provider.classify(error).kind is ErrorKind.RETRY


def test_a_log_probability_above_zero_is_no_log_probability() -> None:
    entry = {"token": "yes", "logprob": 5.0, "bytes": list(b"yes"), "top_logprobs": []}
    with pytest.raises(ValueError, match="above 0"):
        token_logprobs("yes", [entry])
    rounded = token_logprobs("yes", [{**entry, "logprob": 1e-9}])  # a provider's rounding of a probability of 1
    assert rounded is not None and rounded[0].logprob == 0.0
    answer = _completion(message={"role": "assistant", "content": "yes"}, logprobs={"content": [entry]})
    _, error, _ = asyncio.run(_outcome("direct", lambda: web.json_response(answer)))
    assert isinstance(error, MalformedResponseError), repr(error)


@pytest.mark.parametrize("transport", [*TRANSPORTS, "batch"])
@pytest.mark.parametrize("retry_after", ["inf", "1e12", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_a_retry_after_of_more_than_a_day_stops_the_judge(transport: str, retry_after: str) -> None:
    error_body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    reply = lambda: web.json_response(error_body, status=429, headers={"Retry-After": retry_after})  # noqa: E731
    if transport == "batch":
        from judge_engine.errors import HTTPStatusError
        from judge_engine.providers.http import BatchHTTP

        verdict = BatchHTTP({}, secret=KEY).classify(HTTPStatusError(429, "Rate limit reached",
                                                                       {"retry-after": retry_after}))
    else:
        _, error, provider = asyncio.run(_outcome(transport, reply))
        assert error is not None
        verdict = provider.classify(error)
    assert verdict.kind is ErrorKind.FATAL, verdict
    assert "more than a day" in verdict.message and "resume" in verdict.message


def test_an_ordinary_retry_after_is_still_waited_out_and_nonsense_is_no_wait() -> None:
    assert parse_retry_after({"Retry-After": "2.5"}) == 2.5
    assert parse_retry_after({"Retry-After": "nan"}) == 0.0  # no wait, as before: never a NaN sleep
    assert parse_retry_after({"retry-after-ms": "-10"}) == 0.0
    assert parse_retry_after({"Retry-After": "Fri, 31 Dec 99999 23:59:59 GMT"}) is None  # no datetime: no wait


def test_a_gateway_key_in_extra_headers_is_never_recorded() -> None:
    params = {"extra_headers": {"X-Gateway-Key": KEY, "Authorization": f"Bearer {KEY}", "X-Trace": "t1"},
              "top_p": 0.9}
    request = ProviderRequest(model="openai/gpt-4o-mini", api_base=None, temperature=0.0, max_tokens=10,
                              timeout_s=10, messages=[{"role": "user", "content": "hi"}], params=params)
    sent = request.as_sent()
    assert KEY not in repr(sent)
    assert sent["extra_headers"] == {"X-Gateway-Key": MARK, "Authorization": MARK, "X-Trace": "t1"}
    assert sent["top_p"] == 0.9
    assert request.params["extra_headers"]["X-Gateway-Key"] == KEY  # what is sent keeps it
    assert redact_params({"top_p": 0.9}) == {"top_p": 0.9}


def test_a_gateway_key_in_extra_headers_is_not_in_the_recorded_config(tmp_path: Path) -> None:
    from judge_engine.inputs.config import load_config

    job = make_job(tmp_path, None, items=2, judge={"params": {"extra_headers": {"X-Gateway-Key": KEY, "X-Trace": "t1"}}})
    config = load_config(job.config)
    assert config.judges[0].params["extra_headers"]["X-Gateway-Key"] == KEY  # what is sent keeps it
    recorded = config.manifest_view()
    assert KEY not in repr(recorded)
    assert recorded["judges"][0]["params"]["extra_headers"] == {"X-Gateway-Key": MARK, "X-Trace": "t1"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_answer_with_a_lone_surrogate_is_malformed_not_a_crash_when_recorded(transport: str) -> None:
    body = json.dumps(_completion(message={"role": "assistant", "content": "Critical:\nno-error"}))
    body = body.replace("no-error", "no-error \\ud800")  # the JSON escape of a lone surrogate
    reply = lambda: web.Response(body=body.encode(), content_type="application/json")  # noqa: E731
    response, error, provider = asyncio.run(_outcome(transport, reply))
    assert response is None, repr(response.content)
    assert isinstance(error, MalformedResponseError), repr(error)
    assert provider.classify(error).kind is ErrorKind.RETRY


def test_a_body_that_stalls_after_its_headers_is_cut_at_the_direct_transports_timeout() -> None:
    """The direct transport declares that its own timeout covers a whole call (the attempt then
    schedules no guard timer, issue 23.6): a gateway that sends the headers and half the body,
    then nothing, must still be cut at ``timeout_s``, not waited on."""

    async def stall(request: web.Request) -> web.StreamResponse:
        body = json.dumps(COMPLETION).encode()
        response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": str(len(body))})
        await response.prepare(request)
        await response.write(body[: len(body) // 2])
        await asyncio.sleep(30)
        return response

    async def call() -> tuple[BaseException | None, float]:
        async with web_server(stall) as (url, _):
            provider = OpenAIHTTPProvider(api_key=KEY)
            request = ProviderRequest(model="openai/gpt-4o-mini", api_base=url.removesuffix("/chat/completions"),
                                      temperature=0.0, max_tokens=10, timeout_s=0.5,
                                      messages=[{"role": "user", "content": "hi"}])
            error, elapsed = None, 0.0
            for _ in range(2):  # the first call also resolves the model's route (litellm's import)
                started = asyncio.get_running_loop().time()
                try:
                    await provider.complete(request)
                except Exception as exc:
                    error = exc
                elapsed = asyncio.get_running_loop().time() - started
            await provider.aclose()
        return error, elapsed

    assert OpenAIHTTPProvider.enforces_timeout
    error, elapsed = asyncio.run(call())
    assert isinstance(error, UnreadAnswerError) and isinstance(error.__cause__, TimeoutError), error
    assert 0.4 <= elapsed < 2.0
    classified = OpenAIHTTPProvider(api_key=KEY).classify(error)
    assert classified.kind is ErrorKind.RETRY and classified.billed  # its head came: billed, booked at an estimate
    assert "timed out while reading it" in classified.message
