"""The adapter's request-body shortcut sends exactly what the OpenAI SDK's own transform would.

``_skip_identity_transform`` skips ``async_maybe_transform`` for chat bodies of plain JSON values;
``benchmarks/provider_overhead.py --verify`` runs the SDK's transform next to it on every call and
asserts equal bodies. This is that check on a handful of request shapes through litellm's real
HTTP path to the fake server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from benchmarks.provider_overhead import install_transform_check
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.protocols import get_protocol
from judge_engine.providers.base import ProviderRequest
from judge_engine.providers.litellm import LiteLLMProvider

MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def checked() -> Iterator[list[int]]:
    counter, restore = install_transform_check()
    try:
        yield counter
    finally:
        restore()


def _requests(base_url: str) -> list[ProviderRequest]:
    protocol = get_protocol("gemba-mqm")()
    item = {"id": "a", "source": "The lamp had burned low.", "target": "Die Lampe war heruntergebrannt.",
            "source_lang": "English", "target_lang": "German"}
    rendered = [dict(m) for m in protocol.render(item)]
    common = {"model": MODEL, "api_base": base_url, "timeout_s": 10.0}
    return [
        ProviderRequest(messages=rendered, temperature=0.0, max_tokens=300, **common),
        ProviderRequest(messages=[{"role": "user", "content": "Grüße, \"quoted\"\n\ttabs ✓"}], temperature=0.7,
                        max_tokens=None, **common),
        ProviderRequest(messages=rendered, temperature=0.0, max_tokens=50,
                        response_format=protocol.response_format() or {"type": "json_object"},
                        params={"top_p": 0.9, "seed": 7, "stop": ["\n\n", "END"]}, **common),
        ProviderRequest(messages=[*rendered, {"role": "assistant", "content": "{}"},
                                  {"role": "user", "content": "again"}], temperature=1.0, max_tokens=None,
                        **common),
    ]


def test_request_bodies_equal_the_sdk_transform(checked: list[int]) -> None:
    with FakeServer(FakeConfig()) as server:
        requests = _requests(server.base_url)
        provider = LiteLLMProvider(api_key="fake-test-key-0000")

        async def send_all() -> None:
            for request in requests:
                response = await provider.complete(request)
                assert response.content

        asyncio.run(send_all())
    assert checked[0] == len(requests)
