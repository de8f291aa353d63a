"""The viewer's test harness: runs to open (demo runs of the examples, a run with faults and
re-asks, a run full of hostile text), and a viewer served from a thread of the test process.

The viewer is exercised over real HTTP on 127.0.0.1, as a browser reaches it; API tests read
its JSON with the standard library, browser tests drive Chromium (``test_browser*.py``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from judge_engine.viewer.server import Viewer

REPO = Path(__file__).resolve().parents[2]
DEMOS = ("literary_mt", "literary_mt_lit", "close_reading", "prometheus_absolute", "prometheus_relative", "ttct", "bws",
         "custom_rubric", "literary_systems")


class ServedViewer:
    """A :class:`Viewer` on its own event loop in a daemon thread (what ``judge-engine view``
    runs), with a small synchronous client."""

    def __init__(self, run_dirs: Sequence[Path], *, human: Any = None) -> None:
        self.viewer = Viewer(list(run_dirs), human=human)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ServedViewer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.viewer.start(), self._loop).result(timeout=60)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.viewer.stop(), self._loop).result(timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return self.viewer.url

    def get(self, path: str, *, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(self.url + path.lstrip("/"), headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def json(self, path: str) -> Any:
        status, _, body = self.get(path)
        assert status == 200, (path, status, body[:500])
        return json.loads(body)

    def ready(self, timeout_s: float = 60) -> ServedViewer:
        """Wait until everything the viewer derives is there (order indexes, counts, attempt
        counts, the items and their search index, consistency)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            overview = self.json("api/overview")
            derived = [run["derived"] for run in overview["runs"]]
            if all(d["items"] and d["attempts"] >= 1 for d in derived) and all(
                    j["consistency"] is not None for j in overview["judges"]):
                return self
            assert not any(d["problems"] for d in derived), derived
            time.sleep(0.05)
        raise AssertionError(f"the viewer did not finish deriving: {self.json('api/overview')['runs']}")


def run_demo(examples: Path, name: str, **overrides: Any) -> Path:
    """A demo run of ``examples/name``, on a thread of its own (a browser test's Playwright
    already runs an event loop on this one)."""
    from concurrent.futures import ThreadPoolExecutor

    import judge_engine

    with ThreadPoolExecutor(max_workers=1) as pool:
        result = pool.submit(judge_engine.run, examples / name / "config.yaml", demo=True, **overrides).result()
    assert result.status == "completed", result.failures
    return result.run_dir


@pytest.fixture(scope="session")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the examples (their runs go inside it)."""
    target = tmp_path_factory.mktemp("viewer-examples") / "examples"
    shutil.copytree(REPO / "examples", target, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    return target


class DemoRuns(dict[str, Path]):
    """Demo runs of the examples by name, each run the first time a test asks for it."""

    def __init__(self, examples: Path) -> None:
        super().__init__()
        self.examples = examples

    def __missing__(self, name: str) -> Path:
        assert name in DEMOS, name
        self[name] = run_demo(self.examples, name)
        return self[name]


@pytest.fixture(scope="session")
def demo_runs(examples: Path) -> DemoRuns:
    """Demo runs of the examples (``demo_runs["literary_mt"]``...), one per protocol family."""
    return DemoRuns(examples)


@pytest.fixture(scope="session")
def rich_custom_run(examples: Path) -> Path:
    """A demo run of a custom judge writing a field of every kind, scored 1-10
    (:data:`tests.viewer.runs.RICH_CUSTOM`)."""
    from tests.viewer.runs import RICH_CUSTOM

    (examples / "custom_rich").mkdir(exist_ok=True)
    (examples / "custom_rich" / "config.yaml").write_text(RICH_CUSTOM, encoding="utf-8")
    return run_demo(examples, "custom_rich")


@pytest.fixture(scope="session")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A GEMBA-MQM run against the fake server with a 429 storm at the start, 500s and
    malformed answers (re-asked): transcripts with every kind of attempt. Its ``RunResult``
    (what the command line summarises)."""
    import judge_engine
    from judge_engine.fake import FakeConfig, FakeServer
    from judge_engine.fake.config import Storm
    from tests.viewer.runs import faulty_job

    warm = tmp_path_factory.mktemp("viewer-warm-up")
    with FakeServer(FakeConfig()) as server:  # the first run of a process imports litellm & co (~1.5 s):
        judge_engine.run(faulty_job(warm, server.base_url, items=1))  # later than the storm, without this
    folder = tmp_path_factory.mktemp("viewer-faulty")
    config = FakeConfig(malformed_rate=0.3, error_500_rate=0.15, storm=Storm(start_s=0.0, duration_s=0.3, retry_after_s=0.2),
                        seed=3)
    with FakeServer(config) as server:
        return judge_engine.run(faulty_job(folder, server.base_url))


@pytest.fixture(scope="session")
def faulty_run(faulty: Any) -> Path:
    return Path(faulty.run_dir)


@pytest.fixture(scope="session")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.viewer.runs import write_hostile_run

    return write_hostile_run(tmp_path_factory.mktemp("viewer-hostile"))


@pytest.fixture
def served() -> Iterator[Any]:
    """``served(run_dirs)``: a viewer of those runs for this test, stopped after it."""
    started: list[ServedViewer] = []

    def start(run_dirs: Sequence[Path]) -> ServedViewer:
        viewer = ServedViewer(run_dirs).__enter__()
        started.append(viewer)
        return viewer

    yield start
    for viewer in started:
        viewer.__exit__()
