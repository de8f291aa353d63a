"""Secrets out of text: key shapes and known values redacted."""

from __future__ import annotations

from judge_engine.util.redaction import redact


def test_redact_removes_keys_and_known_secrets() -> None:
    text = "Incorrect API key provided: sk-" + "abcdefghijklmnop1234 (Bearer abcdefghijkl) secret=hunter2hunter2"
    cleaned = redact(text, ["hunter2hunter2"])
    assert "sk-abcdefgh" not in cleaned and "hunter2" not in cleaned and "abcdefghijkl" not in cleaned
