"""Retry-After in every form a provider writes it: seconds, milliseconds, an HTTP date."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from judge_engine.providers.base import parse_retry_after


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"Retry-After": "0.5"}, 0.5),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # the finer header wins
        ({"retry-after": "120"}, 120.0),  # no upper cap
        ({"llm_provider-retry-after": "3"}, 3.0),
        ({}, None),
        (None, None),
        ({"retry-after": "soon"}, None),
    ],
)
def test_retry_after_forms(headers, expected) -> None:
    assert parse_retry_after(headers) == expected


def test_retry_after_http_date() -> None:
    now = time.time()
    value = parse_retry_after({"retry-after": formatdate(now + 90, usegmt=True)}, now=now)
    assert value is not None and 88 <= value <= 91
