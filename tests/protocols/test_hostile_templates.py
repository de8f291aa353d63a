"""A custom judge's template is hostile input (issue 24, point 4): it reads the item it judges and
cannot change it, and a render is bounded in steps, size and time, its error naming the judge and
the option that holds the template. A template that fails on the dataset's first item stops the
run before anything is sent (exit 2); one that fails later leaves that task unscored
(``render_error``) and the run completes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.errors import TemplateError
from judge_engine.fake import FakeServer
from judge_engine.protocols import templating
from tests.harness import read_lines
from tests.protocols.test_custom_judges import JSON_OPTIONS, job, only_run

HIJACK = "{% set _ = item.update({'id': 'HIJACKED'}) %}{{ question }}"
BOUNDED_S = 10.0
"""What a render bomb may take end to end, the command's start included (a render stops at 1M
steps, ~0.5 s, or 2 s; the rest is the command's imports, slow on a loaded machine)."""


def inline(template: str, **options: Any) -> dict[str, Any]:
    return {"template": template, "template_file": None, **JSON_OPTIONS, **options}


# --- a template cannot change what it is given -------------------------------------------------


@pytest.mark.parametrize("template", [
    HIJACK,
    "{{ item.pop('id') }}",
    "{% set _ = item.setdefault('extra', 1) %}",
    "{% set _ = item.tags.append('x') %}",
    "{% set _ = candidates.reverse() %}",
    "{% set _ = item.clear() %}",
])
def test_a_template_cannot_change_its_item_or_other_variables(template: str) -> None:
    item = {"id": "q1", "tags": ["a"], "question": "?"}
    before = json.loads(json.dumps(item))
    candidates = [{"label": "A", "id": "1", "text": "x"}, {"label": "B", "id": "2", "text": "y"}]
    with pytest.raises(TemplateError, match=r"^protocol_options\.template: .*unsafe.*cannot change them"):
        templating.render_source(template, name="protocol_options.template", item=item, candidates=candidates, **item)
    assert item == before and [c["id"] for c in candidates] == ["1", "2"]


def test_package_templates_get_read_only_variables_too() -> None:
    assert templating._environment().is_safe_attribute([], "append", [].append) is False


def test_the_hijack_template_stops_the_run_before_anything_is_sent(tmp_path: Path, fake_server: FakeServer,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = job(tmp_path, fake_server, inline(HIJACK))
    assert main(["run", str(path), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert "config.yaml: judges[mine].protocol_options.template: access to attribute 'update' of 'dict'" in err
    assert "(item 'q0')" in err and "Traceback" not in err
    assert fake_server.stats()["requests_total"] == 0 and not (tmp_path / "runs").exists()


def test_a_template_that_fails_on_a_later_item_leaves_its_task_unscored_and_the_ids_intact(
        tmp_path: Path, fake_server: FakeServer) -> None:
    """``pop`` on the fifth item only: the first renders, so the run starts; the fifth task is
    ``render_error`` naming the template, every outcome keeps its item's id, and the run ends
    completed (it crashed, leaving run.json "running", before)."""
    path = job(tmp_path, fake_server, inline("{% if item.id == 'q4' %}{{ item.pop('id') }}{% endif %}{{ question }}"))
    assert main(["run", str(path), "--no-live"]) == 3  # completed with an unscored task
    run = only_run(tmp_path)
    outcomes = {o["item_id"]: o for o in read_lines(run / "outcomes.jsonl")}
    assert sorted(outcomes) == [f"q{i}" for i in range(9)]
    failed = outcomes["q4"]
    assert failed["status"] == "unscored" and failed["reason_code"] == "render_error"
    assert "protocol_options.template: access to attribute 'pop'" in failed["reason"]
    assert all(o["status"] == "scored" for i, o in outcomes.items() if i != "q4")
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    assert fake_server.stats()["requests_total"] == 8


# --- a render is bounded ------------------------------------------------------------------------


@pytest.mark.parametrize(("template", "expected"), [
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "more than 1,000,000 steps"),
    ("{{ range(100000)|map('string')|map('center', 2000)|join }}", "characters or elements together"),
    ("{{ (['x' * 1000] * 200000)|join }}", "would make a value of 200,000,000"),
    ("{{ 'x' * 10 ** 9 }}", "would make a value of 1,000,000,000"),
    ("{{ 2 ** 1000000000 }}", "to the power 1,000,000,000"),
    ("{{ '%999999999d' % 1 }}", "width past the size limit"),
    ("{{ '{:>999999999}'.format(1) }}", "width past the size limit"),
    ("{{ 'x'.ljust(10 ** 9) }}", "width or count of 1,000,000,000"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "8,388,608"),
    ("{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('x') }}", "8,388,608"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "calls itself too deeply"),
    ("{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}", "rendered more than 8,000,000 characters"),
    ("{% set s = 'a' * 1000 %}{{ s.replace('a', s).replace('a', s) }}", "1,000,000,000"),
    ("{{ [1]|batch(10 ** 9, 'x')|list }}", "width or count of 1,000,000,000"),
])
def test_a_render_bomb_stops_quickly_with_an_error_naming_the_template(template: str, expected: str) -> None:
    started = time.monotonic()
    with pytest.raises(TemplateError) as caught:
        templating.render_source(template, name="protocol_options.template_file (bomb.j2)", item={"id": "1"})
    assert time.monotonic() - started < BOUNDED_S
    assert str(caught.value).startswith("protocol_options.template_file (bomb.j2): ") and expected in str(caught.value)


@pytest.mark.slow
def test_the_time_bound_stops_a_render_that_is_slow_in_few_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templating, "MAX_RENDER_S", 0.05)
    with pytest.raises(TemplateError, match="longer than 0.05 s"):
        templating.render_source("{% for i in range(300) %}{{ range(100000)|sort(reverse=true)|first }}{% endfor %}",
                                 name="t")


def test_an_ordinary_template_renders_as_before() -> None:
    source = ("{% set ns = namespace(n=0) %}{% for c in candidates %}{{ c.label }}: {{ c.text }}\n"
              "{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }} of {{ candidates|length }}; {{ '%-5s|' % 'ab' }}"
              "{{ ', '.join(item.tags) ~ '.' }} {{ '{:>4}'.format(7) }} {{ question|upper|center(12) }}{{ 2 ** 10 }}")
    item = {"id": "1", "tags": ["x", "y"], "question": "why?"}
    candidates = [{"label": "A", "text": "one"}, {"label": "B", "text": "two"}]
    assert templating.render_source(source, item=item, candidates=candidates, **item) == (
        "A: one\nB: two\n2 of 2; ab   |x, y.    7     WHY?    1024")


@pytest.mark.parametrize("template", [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ question }}",
    "{{ (range(100000)|map('string')|map('center', 2000)|join)|length }}{{ question }}",
])
def test_a_bomb_template_is_exit_2_before_anything_is_sent(tmp_path: Path, fake_server: FakeServer,
                                                           capsys: pytest.CaptureFixture[str], template: str) -> None:
    path = job(tmp_path, fake_server, inline(template))
    started = time.monotonic()
    assert main(["run", str(path), "--no-live"]) == 2
    assert time.monotonic() - started < BOUNDED_S
    err = capsys.readouterr().err
    assert "judges[mine].protocol_options.template: rendering stopped: " in err and "Traceback" not in err
    assert fake_server.stats()["requests_total"] == 0


def test_plan_names_the_judge_and_item_of_a_template_that_fails_on_a_later_item(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``plan`` renders every prompt: a template failing on the fifth item is exit 2 there."""
    path = job(tmp_path, None, inline("{{ question }}{{ 1 / (item.id != 'q4') }}"))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "judges[mine].protocol_options.template: ZeroDivisionError: division by zero (item 'q4')" in err


def test_a_system_template_is_named_by_its_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = job(tmp_path, None, {"system": "{{ item.pop('id') }}", **JSON_OPTIONS})
    assert main(["plan", str(path)]) == 2
    assert "judges[mine].protocol_options.system: access to attribute 'pop'" in capsys.readouterr().err


def test_a_template_file_is_named_with_its_path(tmp_path: Path, fake_server: FakeServer,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = job(tmp_path, fake_server, JSON_OPTIONS)
    (tmp_path / "rubric.j2").write_text("{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}")
    assert main(["run", str(path), "--no-live"]) == 2
    assert f"judges[mine].protocol_options.template_file ({tmp_path / 'rubric.j2'}): rendering stopped" in (
        capsys.readouterr().err)
    assert fake_server.stats()["requests_total"] == 0 and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("content", "expected"), [
    (b"Grade: caf\xe9 {{ question }}", "rubric.j2: not UTF-8 text (byte 10)"),
    (b"{{ question|nosuch }}", "rubric.j2: line 1: No filter named 'nosuch'."),
    (b"{% if question is nosuch %}{% endif %}", "rubric.j2): No test named 'nosuch'"),  # at render: clear already
    (None, "rubric.j2: not a file"),  # a FIFO: reading it would wait for a writer forever
])
def test_a_template_file_that_cannot_be_a_template_is_exit_2_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, expected: str) -> None:
    path = job(tmp_path, None, JSON_OPTIONS)
    rubric = tmp_path / "rubric.j2"
    rubric.unlink()
    if content is None:
        os.mkfifo(rubric)
    else:
        rubric.write_bytes(content)
    started = time.monotonic()
    assert main(["plan", str(path)]) == 2
    assert time.monotonic() - started < BOUNDED_S
    err = capsys.readouterr().err
    assert err.startswith("judge-engine: error: ") and expected in err and "Traceback" not in err, err
