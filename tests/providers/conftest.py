"""Fixtures of the provider tests that meet real loopback servers: a fake server, and a network
environment with no proxy or certificate variable of the machine's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from judge_engine.fake import FakeConfig, FakeServer

NETWORK_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                     "no_proxy", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")


@pytest.fixture
def clean_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of the machine's proxies or certificates: a test sets what it means to."""
    for name in NETWORK_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(FakeConfig()) as fake:
        yield fake
