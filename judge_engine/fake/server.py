"""Run the fake server in-process: its own event loop in a daemon thread (tests, notebooks).

    with FakeServer(FakeConfig(rpm=60, window_s=1)) as server:
        client = OpenAI(base_url=server.base_url, api_key="x")
        ...
        assert server.stats()["rate_limited"] == 0

For a separate process (benchmarks, ``--demo``) see :class:`~judge_engine.fake.process.FakeServerProcess`;
both expose the same ``base_url``, ``stats()``, ``update(**patch)`` and ``reset()``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from judge_engine.fake.app import FakeApp
from judge_engine.fake.batch_state import BatchStore
from judge_engine.fake.config import FakeConfig

T = TypeVar("T")


class FakeServer:
    """The fake OpenAI-compatible server on 127.0.0.1, in a daemon thread of this process.

    Args:
        config: the behaviour; default: no limits, no faults, no latency.
        port: 0 lets the OS choose a free port.
        state_dir: keep the batch APIs' files and batches there, and serve those found there.
        read_only: with ``state_dir``, serve them and write nothing.
    """

    def __init__(self, config: FakeConfig | None = None, *, port: int = 0, state_dir: Path | None = None,
                 read_only: bool = False) -> None:
        self._app = FakeApp(config, store=BatchStore(state_dir, read_only=read_only) if state_dir else None)
        self._requested_port = port
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving; returns once the port is bound. Raises what start-up raised."""
        if self._thread is not None:
            raise RuntimeError("the fake server is already started")
        self._thread = threading.Thread(target=self._serve, name="judge-engine-fake", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Stop serving (in-flight requests are cancelled after a short grace period)."""
        if self._loop is not None and self._stopping is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to start(); the thread must not die silently
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._port = await self._app.start(self._requested_port)
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await self._app.stop()

    # --- what tests use -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the fake server is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (control routes live under ``/_fake``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    @property
    def config(self) -> FakeConfig:
        return self._app.config

    def stats(self) -> dict[str, Any]:
        """A consistent snapshot of the counters (see ``GET /_fake/stats``)."""
        return self._call(self._app.snapshot)

    def update(self, **patch: Any) -> FakeConfig:
        """Merge ``patch`` into the live config (JSON Merge Patch: ``None`` restores a default).
        Raises pydantic's ValidationError for a bad value; the old config then stays."""
        return self._call(lambda: self._app.patch(patch))

    def reset(self) -> None:
        """Clear counters, seen bodies (so fault draws start over) and rate windows."""
        self._call(self._app.reset)

    def _call(self, fn: Callable[[], T]) -> T:
        loop = self._loop
        if loop is None or self._thread is None:
            raise RuntimeError("the fake server is not started")

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=10)
