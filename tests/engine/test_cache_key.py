"""The cache key covers exactly what can change an answer."""

from __future__ import annotations

from judge_engine.config import JudgeConfig
from judge_engine.plan import build_protocol
from judge_engine.providers import Endpoint
from judge_engine.runtime import JudgeSetup

MESSAGES = [{"role": "user", "content": "judge this"}]


def _key(repeat: int = 0, messages=MESSAGES, temperature: float = 0.0, **judge: object) -> str:
    config = JudgeConfig.model_validate({"name": "j", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm", **judge})
    protocol = build_protocol(config)
    setup = JudgeSetup(config, protocol, Endpoint(config.model, config.api_base), ["b2:t"])
    return setup.key(setup.request(messages, temperature), repeat)


def test_what_can_change_the_answer_changes_the_key() -> None:
    base = _key()
    variants = [
        _key(repeat=1),
        _key(messages=[{"role": "user", "content": "judge that"}]),
        _key(temperature=0.7),
        _key(model="openai/gpt-4o"),
        _key(max_tokens=501),
        _key(params={"top_p": 0.9}),
        _key(protocol_options={"output": "json"}),  # response format
        _key(api_base="http://127.0.0.1:8000/v1"),  # another server is another model
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_what_cannot_change_the_answer_keeps_the_key() -> None:
    base = _key()
    assert _key(timeout_s=5) == base
    assert _key(limits={"rpm": 10, "concurrency": 2}) == base
    assert _key(retries={"transport": 0, "reasks": 0}) == base
    assert _key(name="renamed-judge") == base
    assert _key(api_key_env="OTHER_KEY") == base

