"""The project's fake OpenAI-compatible server: deterministic answers to every protocol's prompt
(written by :mod:`judge_engine.fake.writers`), configurable rate limits (429 + Retry-After),
latency and faults, and both batch APIs (OpenAI's files + batches, Anthropic's Message Batches:
:mod:`judge_engine.fake.batches`) with a processing delay, failures, expiry and a quota. Used by the tests, by ``judge-engine run --demo`` and by the throughput
benchmarks; it binds 127.0.0.1 only.

* :class:`FakeServer`: in-process, its own event loop in a daemon thread (tests).
* :class:`FakeServerProcess`: a child process, ``python -m judge_engine.fake`` (benchmarks, demo).
* :class:`FakeConfig`: the behaviour, patchable live (``update(**patch)``, ``POST /_fake/config``).
"""

from __future__ import annotations

from judge_engine.fake.answers import MALFORMED_ANSWERS
from judge_engine.fake.app import FAKE_MODEL, FakeApp
from judge_engine.fake.config import FakeConfig, Storm
from judge_engine.fake.process import FakeServerProcess
from judge_engine.fake.server import FakeServer

__all__ = [
    "FAKE_MODEL",
    "MALFORMED_ANSWERS",
    "FakeApp",
    "FakeConfig",
    "FakeServer",
    "FakeServerProcess",
    "Storm",
]
