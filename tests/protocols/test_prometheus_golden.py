"""Golden tests: our Prometheus templates against the library's texts and the 861 rendered prompts.

The rendered prompts in ``shared/data/prometheus`` were made by the library's templates with the
training/eval wording of task item 3 (``"Feedback: (write a feedback ...``), so they are re-rendered
with ``wording: eval``. The library's own prompt texts (``shared/reference/prometheus.md``) are
re-rendered with ``wording: library`` and the placeholders as values.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from judge_engine.protocols import templating
from judge_engine.protocols.prometheus import PrometheusAbsolute, PrometheusRelative
from judge_engine.protocols.prometheus_rubrics import (
    HELPFULNESS,
    LITERARY_SQM,
    Rubric,
    parse_rubric_text,
)

_SENTINEL = "\x00{}\x00"
_FIELDS = ("instruction", "response", "reference_answer", "rubric")


def extraction_pattern(template: str) -> re.Pattern[str]:
    """A regex for prompts rendered from ``template``: the template rendered with sentinels in
    place of the item fields, escaped, and each sentinel turned into a named group."""
    rendered = templating.render(
        template,
        **{name: _SENTINEL.format(name) for name in _FIELDS},
        low=1,
        high=5,
        feedback_prefix="Feedback: ",
    )
    pattern = re.escape(rendered)
    for name in _FIELDS:
        pattern = pattern.replace(re.escape(_SENTINEL.format(name)), f"(?P<{name}>.*?)")
    return re.compile(rf"\A{pattern}\Z", re.DOTALL)


def _golden_prompts(data: Path) -> list[tuple[str, str]]:
    folder = data / "prometheus"
    prompts = []
    for name in ("mt_bench_eval.json", "vicuna_eval.json"):
        prompts += [("with", row["instruction"]) for row in json.loads((folder / name).read_text())]
    hhh = json.loads((folder / "hhh_alignment_eval.json").read_text())
    prompts += [("without", row["chosen_instruction"]) for row in hhh]
    return prompts


def test_all_861_rendered_prompts_are_byte_exact(shared_data: Path) -> None:
    prompts = _golden_prompts(shared_data)
    assert len(prompts) == 861
    patterns = {
        "with": extraction_pattern("prometheus_absolute/absolute.j2"),
        "without": extraction_pattern("prometheus_absolute/absolute_wo_ref.j2"),
    }
    protocols = {
        mode: PrometheusAbsolute.from_options({"reference": mode, "wording": "eval"})
        for mode in patterns
    }
    exact = 0
    for mode, prompt in prompts:
        match = patterns[mode].match(prompt)
        assert match is not None, prompt[:200]
        item: dict[str, Any] = {
            "instruction": match["instruction"],
            "response": match["response"],
            "rubric": parse_rubric_text(match["rubric"]),
        }
        if mode == "with":
            item["reference_answer"] = match["reference_answer"]
        messages = protocols[mode].render(item)
        assert messages[-1]["content"] == prompt
        assert messages[0]["role"] == "system"
        exact += 1
    assert exact == 861


def test_rubric_text_round_trips_through_parse_and_render(shared_data: Path) -> None:
    prompts = _golden_prompts(shared_data)
    for _, prompt in prompts[:50]:
        text = prompt.split("###Score Rubrics:\n")[1].removesuffix("\n\n###Feedback: ")
        assert parse_rubric_text(text).render() == text


# --- the library's own texts, from the reference file ----------------------------------------


def _reference_blocks(reference: Path) -> dict[str, str]:
    text = (reference / "prometheus.md").read_text(encoding="utf-8")
    return dict(re.findall(r"--- (\w+) ---\n````text\n(.*?)\n````", text, re.DOTALL))


_PLACEHOLDERS = {
    "instruction": "{instruction}",
    "response": "{response}",
    "reference_answer": "{reference_answer}",
    "response_a": "{response_A}",
    "response_b": "{response_B}",
}


@pytest.mark.parametrize(
    ("block", "template"),
    [
        ("ABSOLUTE_PROMPT", "absolute.j2"),
        ("ABSOLUTE_PROMPT_WO_REF", "absolute_wo_ref.j2"),
    ],
)
def test_absolute_templates_are_the_library_prompts(shared_reference: Path, block: str, template: str) -> None:
    expected = _reference_blocks(shared_reference)[block]
    rendered = templating.render(
        f"prometheus_absolute/{template}",
        **_PLACEHOLDERS,
        rubric="{rubric}",
        low=1,
        high=5,
        feedback_prefix="",
    )
    assert rendered == expected


@pytest.mark.parametrize(
    ("block", "template"),
    [("RELATIVE_PROMPT", "relative.j2"), ("RELATIVE_PROMPT_WO_REF", "relative_wo_ref.j2")],
)
def test_relative_templates_are_the_library_prompts(shared_reference: Path, block: str, template: str) -> None:
    expected = _reference_blocks(shared_reference)[block]
    rendered = templating.render(f"prometheus_relative/{template}", **_PLACEHOLDERS, rubric="{rubric}")
    assert rendered == expected


def test_system_prompts_and_rubrics_are_the_library_texts(shared_reference: Path) -> None:
    blocks = _reference_blocks(shared_reference)
    assert templating.render("prometheus_absolute/system.j2") == blocks["ABS_SYSTEM_PROMPT"]
    assert templating.render("prometheus_relative/system.j2") == blocks["REL_SYSTEM_PROMPT"]
    assert HELPFULNESS.render() == blocks["HELPFULNESS_RUBRIC"]
    template = Rubric(
        criteria="{criteria}", descriptions={k: f"{{score{k}_description}}" for k in range(1, 6)}
    )
    assert template.render() == blocks["SCORE_RUBRIC_TEMPLATE"]


def test_literary_system_prompt_and_rubric_are_the_reference_texts(shared_reference: Path) -> None:
    text = (shared_reference / "prometheus.md").read_text(encoding="utf-8")
    system = re.search(r'^System prompt: "(.*)"$', text, re.MULTILINE)
    assert system is not None
    assert templating.render("prometheus_absolute/system_literary.j2") == system.group(1)
    assert f'criteria: "{LITERARY_SQM.criteria}"' in text
    for score, description in LITERARY_SQM.descriptions.items():
        assert f'- score {score}: "{description}"' in text


def test_relative_render_uses_the_criteria_line_only() -> None:
    protocol = PrometheusRelative.from_options({"rubric": "helpfulness", "reference": "without"})
    item = {"instruction": "Q", "response_a": "a", "response_b": "b"}
    prompt = protocol.render(item)[-1]["content"]
    assert prompt.endswith(f"###Score Rubric:\n[{HELPFULNESS.criteria}]\n\n###Feedback: ")
