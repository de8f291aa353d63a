"""Run the fake server as a separate process, so that its CPU is not the client's (benchmarks,
``judge-engine run --demo``). Launches ``python -m judge_engine.fake``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from judge_engine.fake.config import FakeConfig
from judge_engine.util import jsonio

READY_PREFIX = "judge-engine fake server listening on "
"""The one line ``python -m judge_engine.fake`` prints once it serves, followed by the base URL."""


class FakeServerProcess:
    """The fake server in a child process on 127.0.0.1.

    Args:
        config: the behaviour; default: no limits, no faults, no latency.
        port: 0 lets the OS choose a free port.
        startup_timeout_s: how long to wait for the ready line.
        own_session: start the child in a session of its own, so a Ctrl-C at the terminal
            reaches only the parent, which stops the child when it is done with it
            (``--demo``: calls in flight must still get their answers).
        state_dir: keep the batch APIs' files and batches there, and serve those an earlier
            server left there (:mod:`judge_engine.fake.batch_state`); None: in memory only.
        read_only: with ``state_dir``, serve what is there and write nothing (a look beside the
            server that owns it).
    """

    def __init__(
        self,
        config: FakeConfig | None = None,
        *,
        port: int = 0,
        startup_timeout_s: float = 30.0,
        own_session: bool = False,
        state_dir: Path | None = None,
        read_only: bool = False,
    ) -> None:
        self.config = config if config is not None else FakeConfig()
        self._port = port
        self._timeout = startup_timeout_s
        self._own_session = own_session
        self._state = ["--state-dir", str(state_dir)] + (["--read-only"] if read_only else []) if state_dir else []
        self._process: subprocess.Popen[str] | None = None
        self._base_url: str | None = None

    def start(self) -> Self:
        """Launch the child and wait for its ready line. Raises RuntimeError if it never comes."""
        command = [
            sys.executable,
            "-m",
            "judge_engine.fake",
            "--port",
            str(self._port),
            "--config",
            jsonio.dumps(self.config.model_dump(mode="json", exclude_defaults=True)).decode(),
            "--parent",
            str(os.getpid()),
            *self._state,
        ]
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, text=True, start_new_session=self._own_session
        )
        line = _read_line(self._process, self._timeout)
        if not line.startswith(READY_PREFIX):
            self.stop()
            raise RuntimeError(f"the fake server did not start (it printed {line!r})")
        self._base_url = line[len(READY_PREFIX) :].strip()
        return self

    def stop(self) -> None:
        """SIGTERM the child, then SIGKILL it if it has not exited within 5 s."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("the fake server process is not running")
        return self._process.pid

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        if self._base_url is None:
            raise RuntimeError("the fake server process is not started")
        return self._base_url

    @property
    def url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def stats(self) -> dict[str, Any]:
        """The child's counters (``GET /_fake/stats``)."""
        return self._request("GET", "/_fake/stats")  # type: ignore[no-any-return]

    def update(self, **patch: Any) -> dict[str, Any]:
        """Merge ``patch`` into the child's live config; returns it (API key redacted)."""
        return self._request("POST", "/_fake/config", patch)  # type: ignore[no-any-return]

    def reset(self) -> None:
        """Clear the child's counters, seen bodies and rate windows."""
        self._request("POST", "/_fake/reset", {})

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else jsonio.dumps(payload)
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return jsonio.loads(response.read())


def _read_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The child's first stdout line, or "" after ``timeout`` or if it exits first."""
    lines: list[str] = []
    assert process.stdout is not None
    stdout = process.stdout
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0] if lines else ""
