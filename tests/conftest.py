"""Shared test fixtures: offline, deterministic, no secrets in the environment."""

from __future__ import annotations

import os
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
