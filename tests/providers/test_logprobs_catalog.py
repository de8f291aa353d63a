"""What litellm's offline catalog knows of log-probs, as ``plan`` and ``run`` ask it."""

from __future__ import annotations

from typing import Any

import pytest

from judge_engine.inputs.config import JobConfig
from judge_engine.providers.catalog import logprobs_support, passed_through


@pytest.mark.parametrize(("model", "api_base", "gives"), [
    ("openai/gpt-4o-mini", None, True),
    ("gemini/gemini-1.5-pro", None, True),
    ("hosted_vllm/meta-llama/Llama-3.1-8B-Instruct", "http://127.0.0.1:8000/v1", True),
    ("openai/any-name-on-a-server", "http://127.0.0.1:8000/v1", True),
    ("anthropic/claude-3-5-haiku-latest", None, False),
    ("anthropic/claude-3-5-haiku-latest", "http://127.0.0.1:8000/v1", False),
    ("openai/o3-mini", None, False),
    ("openai/o1", None, False),
    ("openai/gpt-5", None, False),
    ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", None, False),
])
def test_the_catalog_says_which_models_give_logprobs(model: str, api_base: str | None, gives: bool) -> None:
    assert logprobs_support(model, api_base)[0] is gives


def test_gemini_gets_its_top_logprobs_instead_of_litellm_dropping_them() -> None:
    # litellm's Gemini config maps top_logprobs to Gemini's logprobs but does not list it as
    # supported, so with drop_params it would be dropped: the adapter allows it by name.
    assert passed_through("gemini/gemini-1.5-pro", None, ("logprobs", "top_logprobs")) == ("top_logprobs",)
    assert passed_through("openai/gpt-4o-mini", None, ("logprobs", "top_logprobs")) == ()
    assert passed_through("gemini/gemini-1.5-pro", None, ("temperature",)) == ()


def _config(**judge: Any) -> JobConfig:
    base = {"name": "j", "model": "openai/gpt-4o-mini", "protocol": "prometheus-relative",
            "protocol_options": {"rubric": "helpfulness"}}
    return JobConfig.model_validate({"dataset": {"path": "x.jsonl"}, "judges": [{**base, **judge}]})


@pytest.mark.parametrize(("judge", "said"), [
    ({"protocol": "gemba-mqm", "protocol_options": {}, "confidence": "logprobs"}, "does not say where its verdict is"),
    ({"confidence": "agreement"}, r"set repeats to 3 or more \(now 1\)"),
    ({"confidence": {"method": "logprobs", "score": "weighted"}}, "score: weighted needs a score made of closed"),
    ({"confidence": "logprobs", "model": "anthropic/claude-3-5-haiku-latest"}, "gives no token log-probs"),
])
def test_what_a_judges_confidence_needs_is_checked_before_anything_is_sent(judge: dict[str, Any], said: str) -> None:
    from judge_engine.errors import ConfigError
    from judge_engine.planning.plan import build_protocol
    from judge_engine.providers import check_logprobs
    from judge_engine.trust.decisions import check_confidence

    config = _config(**judge)
    with pytest.raises(ConfigError, match=said) as raised:  # the protocol's side, then the model's, as prepare() checks
        check_confidence(config, {j.name: build_protocol(j) for j in config.judges})
        check_logprobs(config)
    assert "judges[j].confidence" in str(raised.value)


def test_logprobs_asked_in_params_are_pointed_to_confidence() -> None:
    with pytest.raises(ValueError, match="confidence: logprobs"):
        _config(params={"logprobs": True})
