"""``pairwise-annotators``: the reference's prompts byte for byte on its own example pool, its
reading of answers, its options; the fake server answers its prompts within 10 tokens."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judge_engine.errors import ConfigError, VerdictError
from judge_engine.fake.writers import get_writer
from judge_engine.protocols.annotators import PairwiseAnnotators

ITEM = {"id": "x", "instruction": "Name a prime.", "response_a": "Seven.", "response_b": "Nine {x} is {0}."}


def reference_prompts(reference: Path) -> dict[str, str]:
    """The JSON block of ``cascade.md``: the reference's ``model/prompts.py`` texts."""
    text = (reference / "cascade.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(\{.*?\})\n```", text, re.DOTALL)
    assert block is not None
    return dict(json.loads(block.group(1)))


def reference_render(prompts: dict[str, str], pool: list[dict], annotator: int, a: str, b: str,
                     instruction: str) -> str:
    """``OpenAIModel.prepare_fewshot_prompt`` of the reference, as its code builds it."""
    prompt = prompts["fewshot_inst_prompt"]
    for example in pool[annotator]["evaluated_samples"]:
        preferred = "[[A]]" if example["preferences"]["human"] == 1 else "[[B]]"
        prompt += "\n" + prompts["fewshot_example_prompt"].format(
            instruction=example["instruction"], assistant_a=example["outputs"][0],
            assistant_b=example["outputs"][1], preferred_response=preferred)
    return prompt + "\n" + prompts["fewshot_query_prompt"].format(instruction=instruction, assistant_a=a,
                                                                    assistant_b=b)


def test_the_prompts_are_the_references_byte_for_byte_on_its_pool(shared_data: Path, shared_reference: Path) -> None:
    pool_file = shared_data / "trust_or_escalate" / "fewshot.jsonl"
    pool = [json.loads(line) for line in pool_file.read_text(encoding="utf-8").splitlines()]
    prompts = reference_prompts(shared_reference)
    protocol = PairwiseAnnotators.from_options({"examples_file": str(pool_file)})
    assert protocol.variants(ITEM) == ("a1-AB", "a1-BA", "a2-AB", "a2-BA", "a3-AB", "a3-BA")
    for annotator in range(3):
        for order, (a, b) in (("AB", ("Seven.", "Nine {x} is {0}.")), ("BA", ("Nine {x} is {0}.", "Seven."))):
            messages = protocol.render(ITEM, f"a{annotator + 1}-{order}")
            expected = reference_render(prompts, pool, annotator, a, b, "Name a prime.")
            assert messages == [{"role": "system", "content": prompts["system_prompt"]},
                                {"role": "user", "content": expected}]
            assert messages[1]["content"].encode() == expected.encode()
    # The item's braces are text, never format fields.
    assert "Nine {x} is {0}." in protocol.render(ITEM, "a1-AB")[1]["content"]


def pool(tmp_path: Path, lines: list[dict]) -> Path:
    path = tmp_path / "pool.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


EXAMPLE = {"instruction": "q", "outputs": ["a", "b"], "preferences": {"human": 1}}


def test_the_reading_is_the_references_and_there_is_no_reask(tmp_path: Path) -> None:
    protocol = PairwiseAnnotators.from_options({"examples_file": str(pool(tmp_path, [EXAMPLE] * 9))})
    assert protocol.reasks is False and protocol.reads_truncated
    assert protocol.request_defaults == {"max_tokens": 10, "confidence": {"method": "logprobs", "top_logprobs": 10}}
    assert protocol.parse(" [[B]] because", ITEM, "a2-AB").preferred == "B"
    assert protocol.parse("[[B]] then [[A]]", ITEM, "a2-AB").shown == "A"  # the reference tests [[A]] first
    assert protocol.parse("[[A]]", ITEM, "a2-BA").model_dump() == {"shown": "A", "preferred": "B"}
    with pytest.raises(VerdictError) as raised:
        protocol.parse("Assistant A", ITEM, "a1-AB")
    assert raised.value.code == "unreadable"
    assert protocol.request_group("a3-BA") == "a3"


def test_a_pool_of_single_examples_is_dealt_to_n_annotators_of_k(tmp_path: Path) -> None:
    lines = [{**EXAMPLE, "instruction": f"q{n}"} for n in range(6)]
    protocol = PairwiseAnnotators.from_options({"examples_file": str(pool(tmp_path, lines)), "annotators": 2,
                                                "examples": 3})
    assert [[e.instruction for e in a] for a in protocol.options.pool] == [["q0", "q1", "q2"], ["q3", "q4", "q5"]]
    with pytest.raises(ConfigError, match="do not fit the pool"):
        PairwiseAnnotators.from_options({"examples_file": str(pool(tmp_path, lines)), "annotators": 3,
                                         "examples": 3})
    with pytest.raises(ConfigError, match="preferences.human"):
        PairwiseAnnotators.from_options({"examples_file": str(pool(tmp_path, [{"instruction": "q"}]))})


def test_the_fake_server_answers_its_prompts_within_ten_tokens(tmp_path: Path) -> None:
    protocol = PairwiseAnnotators.from_options({"examples_file": str(pool(tmp_path, [EXAMPLE] * 9))})
    answers = {protocol.parse(get_writer("pairwise-annotators")(protocol.render(ITEM, v), seed=1, temperature=0.0,
                                                                 json_mode=False) or "", ITEM, v).preferred
               for v in protocol.variants(ITEM)}
    assert len(answers) == 1  # the writer's truth is the pair's, whatever the order and annotator
