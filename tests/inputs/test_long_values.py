"""A model string or a config template far longer than any real one is refused when the config is
read (issue 34, point 8d), exit 2 naming the key, before anything is rendered or paced.

What was measured before the bounds (custom_rubric example, 2 cores): a 100,000-character model
ran everywhere in 3-6 s (no hang, but every message that names it printed it whole); a
100,000-character inline template made prompts of ~25,000 tokens, so a demo run waited on the
judge's tokens-per-minute pacing for 45 s (2 minutes when it repeats a variable 7,000 times),
which looks hung; and a template nested past Python's recursion limit (``{`` x 100,000, 5,000
nested ``if``) was a RecursionError traceback (exit 1)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from tests.harness import example_copy, make_job


def _custom(tmp_path: Path, change: Callable[[dict[str, Any]], Any]) -> Path:
    return example_copy(tmp_path, "custom_rubric", change)


def _refused(capsys: pytest.CaptureFixture[str], args: list[str]) -> list[str]:
    capsys.readouterr()
    started = time.monotonic()
    assert main(args) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err) < 2_000  # the value is never printed whole
    return err.splitlines()


def test_a_model_string_past_200_characters_is_refused_naming_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=3, judge={"model": "openai/" + "x" * 100_000})
    for command in (["plan", str(job.config)], ["run", str(job.config), "--demo", "--no-live"]):
        assert _refused(capsys, command) == [
            f"judge-engine: error: {job.config}: judges[mqm].model: at most 200 characters (a litellm model "
            "string such as openai/gpt-4o-mini); this one has 100,007"]
    assert not job.runs.exists()


def test_a_model_on_the_command_line_or_a_deployment_is_bounded_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=3)
    assert _refused(capsys, ["run", str(job.config), "--demo", "--no-live", "--model", "y" * 201]) == [
        "judge-engine: error: --model (judges[mqm].model): at most 200 characters (a litellm model string such as "
        "openai/gpt-4o-mini); this one has 201"]
    data = yaml.safe_load(job.config.read_text())
    data["judges"][0]["deployments"] = [{"name": "a", "model": "azure/" + "z" * 300}]
    job.config.write_text(yaml.safe_dump(data))
    assert _refused(capsys, ["plan", str(job.config)]) == [
        f"judge-engine: error: {job.config}: judges[mqm].deployments[0].model: at most 200 characters (a "
        "litellm model string such as openai/gpt-4o-mini); this one has 306"]
    data["judges"][0]["deployments"][0]["model"] = "azure/" + "z" * 194  # 200: the longest accepted
    job.config.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert main(["plan", str(job.config)]) == 0


def test_an_inline_template_of_100000_characters_is_refused_and_a_file_is_offered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def long(data: dict[str, Any]) -> None:
        data["judges"][1]["protocol_options"]["template"] = "Grade it. " * 9_990 + "{{ response }}"

    config = _custom(tmp_path, long)
    assert _refused(capsys, ["run", str(config), "--demo", "--no-live"]) == [
        "judge-engine: error: config.yaml: protocol custom: judges[helpful-regex].protocol_options.template: at "
        "most 50,000 characters inline (this one has 99,914); put a longer prompt in a file: template_file"]


def test_a_system_message_and_a_template_file_are_bounded_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def long_system(data: dict[str, Any]) -> None:
        data["judges"][1]["protocol_options"]["system"] = "s" * 50_001

    config = _custom(tmp_path / "a", long_system)
    assert _refused(capsys, ["plan", str(config)]) == [
        "judge-engine: error: config.yaml: protocol custom: judges[helpful-regex].protocol_options.system: at "
        "most 50,000 characters inline (this one has 50,001); put a longer prompt in a file: template_file"]
    config = _custom(tmp_path / "b", lambda data: None)
    rubric = config.parent / "rubric.j2"
    rubric.write_text("r" * 1_000_001 + "{{ response }}", encoding="utf-8")
    assert _refused(capsys, ["plan", str(config)]) == [
        f"judge-engine: error: config.yaml: protocol custom: judges[helpful-json].protocol_options: template_file "
        f"{rubric}: at most 1,000,000 characters (this one has 1,000,015)"]


@pytest.mark.parametrize("template", [
    "{" * 20_000,
    "{% if question %}\n" * 1_500 + "x" + "{% endif %}" * 1_500,
    "{{ " + "(" * 5_000 + "question" + ")" * 5_000 + " }}",
], ids=["braces", "blocks", "brackets"])
def test_a_template_nested_past_any_prompt_is_a_config_error_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], template: str) -> None:
    def nested(data: dict[str, Any]) -> None:
        data["judges"][1]["protocol_options"]["template"] = template

    config = _custom(tmp_path, nested)
    assert _refused(capsys, ["plan", str(config)]) == [
        "judge-engine: error: config.yaml: protocol custom: judges[helpful-regex].protocol_options: "
        "template: it nests too deeply to be read (brackets, blocks or an expression inside one another)"]
