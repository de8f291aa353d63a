"""The fake server's judge of the model's strength and its log-probs: OpenAI's shape, none for
the models real providers give none, Gemini's digits, and a confidence that tracks correctness."""

from __future__ import annotations

import math
import statistics

from judge_engine.fake.answers import as_judged, finish, logprobs_field, with_logprobs
from judge_engine.fake.logprobs import gives_logprobs, judge, strength, tokenize


def test_models_real_providers_answer_without_logprobs_get_none() -> None:
    assert not any(gives_logprobs(m) for m in ("claude-3-5-haiku-latest", "openai/claude-x", "o1", "o3-mini",
                                               "o4-mini-2025", "gpt-5-mini"))
    assert all(gives_logprobs(m) for m in ("gpt-4o-mini", "gemini-1.5-pro", "llama-3-70b", "mistral-7b"))
    assert (strength("gpt-4o-mini"), strength("gpt-4o"), strength("llama-3")) == ("weak", "strong", "mid")


def test_a_strength_word_counts_where_a_part_of_the_name_starts() -> None:
    # "gemini" holds "mini": Gemini Pro was a weak judge before the words had to start a part
    assert [strength(m) for m in ("gemini/gemini-1.5-pro", "gemini-2.5-flash", "o3-mini", "llama-3-70b",
                                  "mistral-7b", "qwen-17b")] == ["strong", "weak", "weak", "strong", "weak", "mid"]


def test_the_logprobs_are_openais_shape_and_spell_the_answer() -> None:
    messages = [{"role": "user", "content": "Rate it: write a score that is an integer between 1 and 10."}]
    content, belief = judge("Good. [RESULT] 7", messages, model="gpt-4o", seed=1, temperature=0.0, item_key="k")
    assert belief is not None
    answer = with_logprobs(finish(messages, content, "custom"), content, belief, model="gemini-pro", top=5, seed=0)
    field = logprobs_field(answer)["logprobs"]
    entries = field["content"]
    assert "".join(e["token"] for e in entries) == content
    assert all(len(e["top_logprobs"]) <= 5 and bytes(e["bytes"]) == e["token"].encode() for e in entries)
    at = next(e for e in entries if e["token"].strip() == belief.chosen[:1])
    assert math.exp(at["logprob"]) > 0.05 and sum(math.exp(a["logprob"]) for a in at["top_logprobs"]) <= 1.0001
    assert tokenize(" 10", "gemini-1.5-pro") == [" 1", "0"] and tokenize(" 10", "gpt-4o") == [" 10"]
    none = with_logprobs(finish(messages, content, "custom"), content, belief, model="claude-3-opus", top=5, seed=0)
    assert logprobs_field(none) == {"logprobs": None}


def test_a_stronger_model_is_right_more_often_and_surer_when_right() -> None:
    messages = [{"role": "user", "content": "judge"}]
    results: dict[str, list[tuple[bool, float]]] = {}
    for model in ("gpt-4o-mini", "gpt-4o"):
        for n in range(400):
            content, belief = as_judged(messages, "[[A]]", "pairwise-annotators", model=model, temperature=0.0) \
                if n == 0 else judge("[[A]]", messages, model=model, seed=n, temperature=0.0, item_key=f"item {n}")
            assert belief is not None
            results.setdefault(model, []).append((belief.chosen == "A", belief.probs[belief.chosen]))
    accuracy = {m: sum(ok for ok, _ in r) / len(r) for m, r in results.items()}
    assert 0.6 < accuracy["gpt-4o-mini"] < accuracy["gpt-4o"]
    # Confidence tracks correctness: the weak judge's surest third is right far more often than
    # its least sure third (measured over 2,000 items: 0.55, 0.73, 0.86 by third).
    weak = sorted(results["gpt-4o-mini"], key=lambda r: r[1])
    third = len(weak) // 3
    assert statistics.fmean(ok for ok, _ in weak[-third:]) > statistics.fmean(ok for ok, _ in weak[:third]) + 0.2
