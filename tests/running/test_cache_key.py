"""The cache key covers exactly what can change an answer."""

from __future__ import annotations

from judge_engine.inputs.config import JudgeConfig
from judge_engine.planning.plan import Task, build_protocol
from judge_engine.providers import Endpoint
from judge_engine.running.runtime import JudgeSetup

MESSAGES = [{"role": "user", "content": "judge this"}]


def _key(repeat: int = 0, messages=MESSAGES, temperature: float = 0.0, item: str = "i1", **judge: object) -> str:
    config = JudgeConfig.model_validate({"name": "j", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm", **judge})
    protocol = build_protocol(config)
    setup = JudgeSetup(config, protocol, Endpoint(config.model, config.api_base), ["b2:t"])
    task = Task("t", "j", {"id": item}, "", temperature, repeat)
    return setup.key(setup.request(messages, temperature), task)


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
    assert _key(item="i2") == base  # a judge asked the same question answers the same


def test_a_generation_protocols_items_are_draws_each_with_its_own_key() -> None:
    """DAT renders the same prompt for every item: each item is a draw of its own."""
    options = {"protocol": "dat", "protocol_options": {"embedder": "none"}}
    assert _key(item="s1", **options) != _key(item="s2", **options)
    assert _key(item="s1", **options) == _key(item="s1", **options)

