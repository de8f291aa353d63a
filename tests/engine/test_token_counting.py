"""Prompt token counts (TPM pacing, ``plan``) agree with litellm's own counter."""

from __future__ import annotations

import pytest

from judge_engine.providers.litellm import count_prompt_tokens, load_litellm

TEXTS = [
    "hello",
    "Grüße, \"quoted\"\n\ttabs ✓ 朱自清《背影》",
    "The lamp had burned low, and the room smelled of wax. " * 60,
    "<|endoftext|> is a special token written as plain text",
]


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/my-local-llama", "anthropic/claude-3-5-haiku-latest"])
def test_counts_match_litellm_token_counter(model: str) -> None:
    litellm = load_litellm()
    for text in TEXTS:
        ours = count_prompt_tokens(model, [{"role": "user", "content": text}]) - 3 - 4
        theirs = int(litellm.token_counter(model=model, text=text))
        # litellm extrapolates very long texts (off by a token or so); short ones must be exact.
        assert abs(ours - theirs) <= max(0, theirs // 100), (text[:30], ours, theirs)


def test_message_overhead_is_counted_per_message() -> None:
    one = count_prompt_tokens("openai/gpt-4o-mini", [{"role": "user", "content": "hello"}])
    two = count_prompt_tokens("openai/gpt-4o-mini", [{"role": "system", "content": "hello"},
                                                     {"role": "user", "content": "hello"}])
    assert one == 3 + 4 + 1 and two == one + 4 + 1
