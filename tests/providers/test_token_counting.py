"""``plan``'s prompt token counts: each model's own tokenizer, as litellm selects it for the
model's bare name (litellm's tables hold bare names: alone, it counts ``openai/gpt-4o-mini`` with
cl100k_base), and an estimate marked as such where no tokenizer is available offline (issue 13,
item 10)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from judge_engine.providers.catalog import count_prompt_tokens, load_litellm, prompt_counter
from tests.harness import make_job

TEXTS = [
    "hello",
    "Grüße, \"quoted\"\n\ttabs ✓ 朱自清《背影》",
    "The lamp had burned low, and the room smelled of wax. " * 60,
    "<|endoftext|> is a special token written as plain text",
]


@pytest.mark.parametrize(("model", "bare"), [("openai/gpt-4o-mini", "gpt-4o-mini"), ("openai/my-local-llama", "my-local-llama"),
                                           ("anthropic/claude-3-5-haiku-latest", "claude-3-5-haiku-latest")])
def test_counts_match_litellm_token_counter(model: str, bare: str) -> None:
    litellm = load_litellm()
    for text in TEXTS:
        ours = count_prompt_tokens(model, [{"role": "user", "content": text}]) - 3 - 4
        theirs = int(litellm.token_counter(model=bare, text=text))
        # litellm extrapolates very long texts (off by a token or so); short ones must be exact.
        assert abs(ours - theirs) <= max(0, theirs // 100), (text[:30], ours, theirs)


def test_message_overhead_is_counted_per_message() -> None:
    one = count_prompt_tokens("openai/gpt-4o-mini", [{"role": "user", "content": "hello"}])
    two = count_prompt_tokens("openai/gpt-4o-mini", [{"role": "system", "content": "hello"},
                                                     {"role": "user", "content": "hello"}])
    assert one == 3 + 4 + 1 and two == one + 4 + 1


def _gemba_prompt(tmp_path: Path) -> list[Any]:
    """The 8 messages (system, 3 shots, the item) GEMBA-MQM sends for the first item of a job."""
    from judge_engine.inputs.dataset import iter_items
    from judge_engine.running.session import prepare

    prepared = prepare(make_job(tmp_path, None, items=1).config, check_keys=False)
    protocol = prepared.protocols["mqm"]
    return protocol.render(next(iter_items(prepared.config.dataset, protocol.required_fields)))


def _litellm_count(bare: str, messages: list[Any]) -> int:
    """Our message accounting (3 + 4 per message) around each text encoded whole with the
    tokenizer litellm selects for ``bare`` (its ``token_counter`` encodes 1,024-character chunks,
    which drifts by up to a token per chunk)."""
    litellm = load_litellm()
    from litellm.litellm_core_utils.token_counter import openai_tokenizer_encoding
    from litellm.utils import huggingface_tokenizer_kind

    if huggingface_tokenizer_kind(bare) == "anthropic":
        def count(text: str) -> int:
            return int(litellm.token_counter(model=bare, text=text))
    else:
        encoding = openai_tokenizer_encoding(bare)

        def count(text: str) -> int:
            return len(encoding.encode(text, disallowed_special=()))
    return 3 + sum(4 + count(m["content"]) for m in messages)


def test_gpt_4o_mini_and_gpt_4_get_their_own_tokenizers(tmp_path: Path) -> None:
    messages = _gemba_prompt(tmp_path)
    mini, gpt4 = count_prompt_tokens("openai/gpt-4o-mini", messages), count_prompt_tokens("gpt-4", messages)
    # o200k_base and cl100k_base split this prompt differently (measured: 1,133 vs 1,177).
    assert mini != gpt4
    assert mini == _litellm_count("gpt-4o-mini", messages)  # litellm's o200k_base for gpt-4o-mini
    assert gpt4 == _litellm_count("gpt-4", messages)  # and cl100k_base for gpt-4
    # The route prefix changes nothing here; litellm alone counts the prefixed name as cl100k.
    assert count_prompt_tokens("gpt-4o-mini", messages) == mini
    assert _litellm_count("openai/gpt-4o-mini", messages) == gpt4
    assert (prompt_counter("openai/gpt-4o-mini").tokenizer, prompt_counter("gpt-4").tokenizer) == ("o200k_base", "cl100k_base")
    assert prompt_counter("openai/gpt-4o-mini").exact and prompt_counter("gpt-4").exact


def test_claude_and_open_models_are_marked_estimates(tmp_path: Path) -> None:
    messages = _gemba_prompt(tmp_path)
    claude = prompt_counter("anthropic/claude-sonnet-4-5")
    # litellm packages one Anthropic tokenizer, Claude 2's; Anthropic publishes none for Claude 3+.
    assert not claude.exact and "no offline tokenizer for anthropic/claude-sonnet-4-5" in claude.note
    assert count_prompt_tokens("anthropic/claude-sonnet-4-5", messages) == _litellm_count("claude-sonnet-4-5", messages)
    started = time.monotonic()
    llama = prompt_counter("hosted_vllm/meta-llama/Llama-3.1-8B-Instruct")
    count_prompt_tokens("hosted_vllm/meta-llama/Llama-3.1-8B-Instruct", messages)
    # litellm would fetch Xenova/llama-3-tokenizer from the Hub (~20 s of retries offline).
    assert time.monotonic() - started < 5
    assert not llama.exact and "Hugging Face" in llama.note and llama.tokenizer == "cl100k_base"
    for model in ("openai/my-local-llama", "gemini/gemini-2.0-flash", "anthropic/claude-3-5-haiku-latest"):
        assert not prompt_counter(model).exact and "no offline tokenizer" in prompt_counter(model).note
