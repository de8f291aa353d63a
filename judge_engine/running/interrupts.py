"""Ctrl-C and SIGTERM during a session (:func:`judge_engine.running.session.execute`).

While the engine runs, the first signal stops dispatching and gives the calls in flight
:data:`GRACE_S` seconds; the second cancels them. Once the engine is done the run is being
recorded, and a signal changes nothing: ``run.json`` and the exit code must not come to say
different things because a Ctrl-C landed between the two.
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judge_engine.running.engine import Engine
    from judge_engine.running.runtime import RunProgress

GRACE_S = 10.0
"""How long in-flight calls may finish after the first Ctrl-C."""


class Interrupts:
    """Ctrl-C and SIGTERM during a session. While the engine runs, the first stops dispatching
    (the calls in flight finish, within :data:`GRACE_S` seconds) and the second cancels those
    calls. Once the engine is done (:meth:`recording`), a signal changes nothing: the run is
    being recorded, and a Ctrl-C then must not leave ``run.json`` saying one thing and the exit
    code another. :meth:`restore` hands the signals back when the session ends."""

    def __init__(self, engine: Engine, main: asyncio.Task[Any] | None, progress: RunProgress) -> None:
        self._engine, self._main, self._progress = engine, main, progress
        self._loop = asyncio.get_running_loop()
        self._count = 0
        self._recording = False
        self._grace: asyncio.TimerHandle | None = None
        self._installed: list[signal.Signals] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._loop.add_signal_handler(sig, self._on_signal)
                self._installed.append(sig)
            except (NotImplementedError, RuntimeError):
                pass

    def _on_signal(self) -> None:
        if self._recording:
            return
        self._count += 1
        main = self._main
        if main is None:
            self._engine.request_stop()
            return
        if self._count >= 2:
            main.cancel()
            return
        self._engine.request_stop()
        self._progress.request_stop()  # wakes the view, which sleeps until it has something to say
        self._grace = self._loop.call_later(GRACE_S, lambda: main.cancel() if not main.done() else None)

    def recording(self) -> None:
        """The engine is done: from now on a signal changes nothing (and the grace period's
        cancel, if one is pending, is called off)."""
        self._recording = True
        if self._grace is not None:
            self._grace.cancel()

    def restore(self) -> None:
        for sig in self._installed:
            self._loop.remove_signal_handler(sig)
        self._installed.clear()
