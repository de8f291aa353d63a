"""Shared test fixtures: offline, deterministic, no secrets in the environment."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.harness import _test_key, fake_server  # noqa: F401  (fixtures, found by name: a test key in every

# test's environment, and a fake server on 127.0.0.1 for a test that asks for one)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

_SECRET_ENV = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "TOGETHER_API_KEY",
    "TOGETHERAI_API_KEY",
    "AZURE_API_KEY",
    "MISTRAL_API_KEY",
)


@pytest.fixture(autouse=True)
def _no_real_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real provider with a real key."""
    for name in _SECRET_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` beside the checkout; skips the test when it is absent (a user's clone)."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    return path


@pytest.fixture
def shared_reference() -> Path:
    """``../shared/reference``; skips the test when it is absent."""
    path = SHARED / "reference"
    if not path.is_dir():
        pytest.skip("../shared/reference is not beside this checkout")
    return path


# The quick suite and the whole one. `python -m pytest` leaves out the tests marked slow (kill -9,
# soak, browser and long end-to-end runs), so that a contributor's loop stays under 3 minutes on
# two cores; `--all` runs them too, as CI does. A path or node id on the command line runs what it
# names, slow or not: asking for a file is asking for its tests. A quick test that takes longer than
# SLOW_S is named at the end, so that the quick suite stays quick as tests are added.

SLOW_S = 3.0
_SLOW_LEFT_OUT = pytest.StashKey[int]()
_TOOK_LONG = pytest.StashKey[dict[str, float]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all", action="store_true", default=False,
                     help="run the slow tests too (kill, soak, browser, long end-to-end runs), as CI does")


def _quick(config: pytest.Config) -> bool:
    return not (config.getoption("--all") or config.getoption("file_or_dir") or config.getoption("markexpr"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[_TOOK_LONG] = {}
    if not _quick(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    config.stash[_SLOW_LEFT_OUT] = len(slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    started = time.monotonic()
    try:
        return (yield)
    finally:
        took = time.monotonic() - started
        if took > SLOW_S and item.get_closest_marker("slow") is None:
            item.config.stash.setdefault(_TOOK_LONG, {})[item.nodeid] = took


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    took_long = config.stash.get(_TOOK_LONG, {})
    if took_long and _quick(config):
        terminalreporter.write_line(f"quick tests that took over {SLOW_S:.0f} s (mark them @pytest.mark.slow if they "
                                    "always do):")
        for nodeid, took in sorted(took_long.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"  {took:5.1f} s  {nodeid}")
    left_out = config.stash.get(_SLOW_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(f"{left_out} slow tests left out (kill, soak, browser, long end-to-end runs): "
                                    "python -m pytest --all runs every test, as CI does")
