"""Errors that help the second time too (issue 26, point 8): an unknown key or name suggests the
nearest known one, a dataset's bad rows are reported together, a judge is named ``judges[NAME]``
in every message, and a missing API key says that ``--demo`` needs none."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.errors import ConfigError
from judge_engine.fake import FakeServer
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import MAX_SHOWN
from judge_engine.util.naming import did_you_mean, known_keys
from tests.harness import make_job

JURY = [{"name": "mqm", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm"},
        {"name": "mqm-b", "model": "openai/gpt-4o", "protocol": "gemba-mqm"},
        {"name": "mqm-c", "model": "openai/gpt-4.1-mini", "protocol": "gemba-mqm"}]
CUSTOM = {"name": "mqm", "protocol": "custom", "protocol_options": {
    "template": "{{ source }} -> {{ target }}", "output": "json", "score": "fluency",
    "fields": {"fluency": {"type": "integer", "min": 1, "max": 5}}}}


def _edit(config: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    data = yaml.safe_load(config.read_text())
    change(data)
    config.write_text(yaml.safe_dump(data))


def _plan_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Callable[[dict[str, Any]], Any],
                **job: Any) -> str:
    """``plan``'s error (exit 2, no traceback) for the test job edited by ``change``."""
    tmp_path.mkdir(exist_ok=True)
    config = make_job(tmp_path, None, items=3, **job).config
    _edit(config, change)
    capsys.readouterr()
    assert main(["plan", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("judge-engine: error: ") and "Traceback" not in err
    return err


# --- did you mean ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(budjet={"max_cost_usd": 1}), "budjet: unknown key; did you mean `budget`?"),
        (lambda d: d["judges"][0].update(temprature=[0.0]), "judges[mqm].temprature: unknown key; did you mean `temperatures`?"),
        (lambda d: d["judges"][0]["limits"].update(concurency=2), "judges[mqm].limits.concurency: unknown key; did you mean `concurrency`?"),
        (lambda d: d["judges"][0]["retries"].update(reask=1), "judges[mqm].retries.reask: unknown key; did you mean `reasks`?"),
        (lambda d: d["judges"][0].update(deployments=[{"api_bse": "http://127.0.0.1:9/v1"}]),
         "judges[mqm].deployments[0].api_bse: unknown key; did you mean `api_base`?"),
        (lambda d: d["judges"][0].update(batch={"poll_interval": 5}), "judges[mqm].batch.poll_interval: unknown key; did you mean `poll_interval_s`?"),
        (lambda d: d["judges"][0].update(budget={"max_cost": 5}), "judges[mqm].budget.max_cost: unknown key; did you mean `max_cost_usd`?"),
        (lambda d: d["judges"][0].update(confidence={"method": "logprobs", "top_logprob": 5}),
         "judges[mqm].confidence.top_logprob: unknown key; did you mean `top_logprobs`?"),
        (lambda d: d["dataset"].update(feilds={}), "dataset.feilds: unknown key; did you mean `fields`?"),
        (lambda d: d["output"].update(dri="runs"), "output.dri: unknown key; did you mean `dir`?"),
        (lambda d: d["cache"].update(enabeld=False), "cache.enabeld: unknown key; did you mean `enabled`?"),
        (lambda d: d["judges"][0].update(transport="direkt"), "judges[mqm].transport: Input should be 'auto', 'direct' or "
                                                              "'litellm'; did you mean `direct`?"),
    ],
)
def test_an_unknown_key_suggests_the_nearest_known_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       change: Callable[[dict[str, Any]], Any], expected: str) -> None:
    assert expected in _plan_error(tmp_path, capsys, change)


def test_a_juries_key_and_a_jurors_name_suggest_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def jury(**panel: Any) -> Callable[[dict[str, Any]], Any]:
        return lambda d: d.update(juries=[{"name": "panel", "judges": ["mqm", "mqm-b", "mqm-c"], **panel}])

    err = _plan_error(tmp_path / "key", capsys, jury(agregate="mean"), judges=JURY)
    assert "juries[panel].agregate: unknown key; did you mean `aggregate`?" in err
    err = _plan_error(tmp_path / "name", capsys, jury(judges=["mqm", "mqm-bb", "zzz"]), judges=JURY)
    assert "juries[panel].judges: no judge named mqm-bb (did you mean `mqm-b`?), zzz" in err


def test_protocol_names_and_options_suggest_the_nearest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _plan_error(tmp_path / "name", capsys, lambda d: d["judges"][0].update(protocol="gemba-mqn"))
    assert "judges[mqm].protocol: unknown protocol 'gemba-mqn'; did you mean `gemba-mqm`? (known: " in err
    err = _plan_error(tmp_path / "option", capsys, lambda d: d["judges"][0].update(protocol_options={"parsr": "strict"}))
    assert "judges[mqm].protocol_options.parsr: unknown option; did you mean `parser`?" in err
    err = _plan_error(tmp_path / "field", capsys, lambda d: d["judges"][0]["protocol_options"]["fields"]["fluency"]
                      .update(mn=1), judge=CUSTOM)
    assert "judges[mqm].protocol_options.fields.fluency.mn: unknown option; did you mean `min`?" in err  # no union tag
    err = _plan_error(tmp_path / "type", capsys, lambda d: d["judges"][0]["protocol_options"]["fields"]["fluency"]
                      .update(type="integr"), judge=CUSTOM)
    assert "judges[mqm].protocol_options.fields.fluency:" in err and "did you mean `integer`?" in err


def test_nothing_is_suggested_when_nothing_is_close(tmp_path: Path) -> None:
    job = make_job(tmp_path, None, items=3)
    _edit(job.config, lambda d: d.update(extra_section=1))
    with pytest.raises(ConfigError) as caught:
        load_config(job.config)
    assert str(caught.value) == f"{job.config}: extra_section: unknown key"
    assert did_you_mean("zzz", ["rpm", "tpm"]) == "" and did_you_mean("rpm", ["rpm"]) == ""
    assert did_you_mean("Temperatures", ["temperatures"]) == "did you mean `temperatures`?"


def test_the_keys_known_under_a_location_are_the_models_fields() -> None:
    from judge_engine.inputs.config import JobConfig
    from judge_engine.protocols.custom_options import CustomOptions

    assert known_keys(JobConfig, ("judges", 3, "deployments", 0, "limits")) == ["rpm", "tpm", "concurrency", "headroom",
                                                                                "burst"]
    assert known_keys(CustomOptions, ("fields", "score", "label")) == ["description", "type", "choices", "score_map"]
    assert known_keys(JobConfig, ("judges", 0, "params")) == []  # a free mapping: any key goes


def test_a_protocol_option_on_the_command_line_suggests_too(tmp_path: Path, fake_server: FakeServer,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, fake_server, items=2)
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = str(job.only_run())
    capsys.readouterr()
    for option, expected in [
        ("mqm.parsr=legacy-gemba", "--protocol-option 'mqm.parsr=legacy-gemba': judges[mqm].protocol_options: "
                                   "gemba-mqm has no option 'parsr'; did you mean `parser`?"),
        ("parsr=legacy-gemba", "no judge's protocol has an option 'parsr'; did you mean `parser`?"),
        ("mqn.parser=legacy-gemba", "--protocol-option 'mqn.parser=legacy-gemba': the run has no judges[mqn]; "
                                    "did you mean `mqm`? (judges: mqm)"),
    ]:
        assert main(["rescore", run, "--protocol-option", option]) == 2
        assert expected in capsys.readouterr().err


# --- every bad row of a dataset at once --------------------------------------------------------------


def _bad_rows(path: Path, bad: dict[int, str]) -> None:
    """Replace the given 1-based lines of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, text in bad.items():
        lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_three_bad_rows_are_reported_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=10)
    items = tmp_path / "items.jsonl"
    _bad_rows(items, {3: '{"id": "x", "src": "a"', 6: '{"id": "y", "src": "a", "src_lang": "en", "tgt_lang": "de"}',
                      9: json.dumps({"id": "item-00001", "src": "a", "tgt": "b", "src_lang": "en", "tgt_lang": "de"})})
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"judge-engine: error: {items}: 3 lines cannot be used:",
        f"  {items}:3: not valid JSON: unexpected end of data at the end of the line (is it cut off?)",
        f"  {items}:6: column 'tgt' (mapped to 'target') is missing",
        f"  {items}:9: duplicate id 'item-00001' (first on line 2)",
    ]
    assert not job.runs.exists()


def test_a_hundred_bad_rows_show_the_first_twenty_and_count_the_rest(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=150)
    items = tmp_path / "items.jsonl"
    _bad_rows(items, {n: "[1, 2]" for n in range(51, 151)})
    assert main(["plan", str(job.config)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"judge-engine: error: {items}: 100 lines cannot be used:"
    assert lines[1:-1] == [f"  {items}:{n}: each line must be a JSON object" for n in range(51, 51 + MAX_SHOWN)]
    assert lines[-1] == "  ... and 80 more" and MAX_SHOWN == 20


def test_one_bad_row_is_one_line_and_rows_past_the_limit_are_not_read(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=10)
    items = tmp_path / "items.jsonl"
    _bad_rows(items, {4: "[4]", 8: "[8]"})
    assert main(["plan", str(job.config), "--limit", "5"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"judge-engine: error: {items}:4: each line must be a JSON object"]


def test_bad_rows_of_a_csv_and_a_protocols_own_checks_are_reported_together(tmp_path: Path) -> None:
    from judge_engine.errors import DatasetError
    from judge_engine.inputs.config import DatasetConfig
    from judge_engine.inputs.dataset import scan

    path = tmp_path / "items.csv"
    path.write_text("id,text\na,one\nb,two,three\nc,\nd,four\na,five\n", encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        scan(DatasetConfig(path=path), ["text"], [lambda item: ["too short"] if item["text"] == "four" else []])
    assert str(caught.value).splitlines() == [
        f"{path}: 4 lines cannot be used:",
        f"  {path}:3: more values than header columns",
        f"  {path}:4: required field 'text' is missing or empty",
        f"  {path}:5: too short",
        f"  {path}:6: duplicate id 'a' (first on line 2)",
    ]


def test_every_value_no_config_can_hold_is_named_at_once(tmp_path: Path) -> None:
    job = make_job(tmp_path, None, items=3)
    _edit(job.config, lambda d: (d["judges"][0].update(temperatures=[0.0, float("nan")]),
                                 d["judges"][0]["limits"].update(rpm=float("inf"))))
    with pytest.raises(ConfigError) as caught:
        load_config(job.config)
    assert [line.split(": ")[1] for line in str(caught.value).splitlines()] == [
        "judges[mqm].limits.rpm", "judges[mqm].temperatures[1]"]  # in the file's order (keys dumped sorted)


# --- one way to name a judge -----------------------------------------------------------------------


def _only_as_config_key(message: str, name: str = "mqm") -> bool:
    """``name`` appears in ``message``, and only as ``judges[name]``."""
    bare = re.compile(rf"(?<![\w\[-]){re.escape(name)}(?![\w\]:-])")  # mqm:item is its items' outcomes
    return f"judges[{name}]" in message and not bare.search(message.replace(f"judges[{name}]", ""))


def _messages(tmp_path: Path) -> dict[str, str]:
    """The messages this point made consistent, each produced as a user meets it."""
    from judge_engine.inputs.config import JobConfig
    from judge_engine.providers import check_credentials
    from judge_engine.running.budget import BudgetStop, guard_for
    from judge_engine.running.estimate import budget_warnings, plan_rows, self_preference_lines
    from judge_engine.running.session import prepare
    from judge_engine.trust.decisions import item_lines
    from judge_engine.util.naming import judge_stopped

    job = make_job(tmp_path, None, items=4, judge={"max_tokens": 30, "budget": {"max_cost_usd": 1e-9},
                                                   "confidence": "agreement", "repeats": 3})
    prepared = prepare(job.config, check_keys=False)
    (plan,) = plan_rows(prepared)
    own = dataclasses.replace(plan, self_judged=2, self_systems=("gpt-4o",))  # two items of its family
    config = prepared.config
    keyless = JobConfig.model_validate({**config.model_dump(), "judges": [
        {**config.judges[0].model_dump(), "api_base": None, "api_key_env": None}]})
    unpriced = JobConfig.model_validate({**config.model_dump(), "judges": [
        {**config.judges[0].model_dump(), "model": "openai/no-such-model"}]})
    messages = {
        "plan note": plan.notes[0],
        "budget warning": budget_warnings([plan], config)[0],
        "confidence line": item_lines(config, prepared.protocols)[0],
        "budget stop": BudgetStop("mqm", "cost", 1.0, 0.5).message,
        "a judge stops": judge_stopped("mqm", "openai/gpt-4o-mini", "AuthenticationError (HTTP 401): bad key"),
        "self-preference": self_preference_lines([own], items=4)[0],
    }
    for name, call in (("missing key", lambda: check_credentials(keyless)),
                       ("no price", lambda: guard_for(unpriced, [], lambda _: 0.0))):
        with pytest.raises(ConfigError) as caught:
            call()
        messages[name] = str(caught.value)
    return messages


def test_every_message_names_a_judge_as_the_config_does(tmp_path: Path) -> None:
    messages = _messages(tmp_path)
    assert len(messages) == 8
    assert {name: text for name, text in messages.items() if not _only_as_config_key(text)} == {}
    assert messages["plan note"].startswith("judges[mqm].max_tokens: 30 is below")
    assert messages["budget stop"].startswith("stopped at judges[mqm].budget of $1")
    assert messages["a judge stops"] == "judges[mqm] (openai/gpt-4o-mini) stopped: AuthenticationError (HTTP 401): bad key"


def test_a_judge_that_stops_is_named_as_the_config_does(tmp_path: Path, fake_server: FakeServer,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.update(require_api_key="another-key")
    job = make_job(tmp_path, fake_server, items=3)
    assert main(["run", str(job.config), "--no-live"]) == 1
    said = capsys.readouterr()
    assert "judges[mqm] (openai/gpt-4o-mini) stopped: " in " ".join((said.out + said.err).split())


def test_the_config_and_its_yaml_checks_name_a_judge_by_its_name(tmp_path: Path) -> None:
    job = make_job(tmp_path, None, items=3)
    _edit(job.config, lambda d: d["judges"][0].update(temperatures=[float("nan")]))
    with pytest.raises(ConfigError, match=re.escape("judges[mqm].temperatures[0]: nan is not a number")):
        load_config(job.config)
    _edit(job.config, lambda d: d["judges"][0].update(temperatures=[0.0], repeats=0))
    with pytest.raises(ConfigError, match=re.escape("judges[mqm].repeats: ")):
        load_config(job.config)
    _edit(job.config, lambda d: d["judges"].append({**d["judges"][0], "repeats": 0}))  # two named mqm: by position
    with pytest.raises(ConfigError, match=re.escape("judges[1].repeats: ")):
        load_config(job.config)


# --- a missing key ------------------------------------------------------------------------------------


def test_a_missing_api_key_says_the_demo_needs_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=3, judge={"api_key_env": None})
    _edit(job.config, lambda d: [d["judges"][0].pop(k) for k in ("api_base", "api_key_env")])
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "judges[mqm]: openai/gpt-4o-mini needs an API key in the environment, and OPENAI_API_KEY is not set" in err
    assert "Nothing was sent; `judge-engine run CONFIG --demo` runs without a key (synthetic answers)." in err
    assert not job.runs.exists()


def test_an_api_key_env_that_is_not_set_says_so_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=3, judge={"api_key_env": "NO_SUCH_KEY_VARIABLE"})
    _edit(job.config, lambda d: d["judges"][0].pop("api_base"))
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert "judges[mqm].api_key_env: environment variable NO_SUCH_KEY_VARIABLE is not set" in err and "--demo" in err


@pytest.mark.parametrize("placeholder", ["...", "sk-...", "<your key>", "YOUR_API_KEY"])
def test_a_placeholder_key_pasted_from_a_readme_is_refused_before_anything_is_sent(
        placeholder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`export OPENAI_API_KEY=...` as the README writes it: before, the run sent every task and
    spent its retries before it failed."""
    monkeypatch.setenv("OPENAI_API_KEY", placeholder)
    job = make_job(tmp_path, None, items=3, judge={"api_key_env": None})
    _edit(job.config, lambda d: [d["judges"][0].pop(k) for k in ("api_base", "api_key_env")])
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "judges[mqm]: openai/gpt-4o-mini's key in the environment is a placeholder" in err and "--demo" in err
    assert not job.runs.exists()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-a-real-looking-key-0123456789")
    assert main(["plan", str(job.config)]) == 0  # a key that is no placeholder passes


@pytest.mark.parametrize(("model", "shown"), [
    ("☃ ünï 💥", "'☃ ünï 💥'"),
    ("gpt4o-typo", "'gpt4o-typo'"),
    # litellm's call hung on 100,000 characters; the config now refuses a model past 200
    # (tests/inputs/test_long_values.py), and the longest it accepts is still cut short here
    ("m" * 200, "'" + "m" * 60 + "... (200 characters)'"),
])
@pytest.mark.slow
def test_a_model_litellm_names_no_provider_for_is_refused_before_anything_is_sent(
        model: str, shown: str, tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, the run started, sent the first task, and stopped the judge with litellm's "LLM
    Provider NOT provided" (exit 1, a run left behind); a 100,000-character name hung in it (now
    refused as too long before this check)."""
    job = make_job(tmp_path, fake_server, items=3, judge={"model": model})
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"judges[mqm].model: litellm names no provider for {shown}: write it as provider/model" in err
    assert "Traceback" not in err and len(err) < 400
    assert not job.runs.exists() and fake_server.stats()["requests_total"] == 0
    assert main(["plan", str(job.config)]) == 0  # plan warns of an unknown model (--strict: exit 2)
    assert main(["plan", str(job.config), "--strict"]) == 2
    assert main(["run", str(job.config), "--no-live", "--demo"]) == 0  # the demo's fake serves any name
    _edit(job.config, lambda d: d["judges"][0].update(params={"custom_llm_provider": "openai"}))
    assert main(["plan", str(job.config)]) == 0  # a provider named for litellm passes


def test_a_deployment_whose_model_no_provider_serves_is_named(tmp_path: Path, fake_server: FakeServer,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, fake_server, items=3, judge={"deployments": [
        {"name": "a"}, {"name": "b", "model": "gpt4o-typo", "api_base": fake_server.base_url}]})
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "judges[mqm].deployments[1].model: litellm names no provider for 'gpt4o-typo'" in err
    assert not job.runs.exists() and fake_server.stats()["requests_total"] == 0


def test_a_mistyped_option_is_named_with_the_nearest_one_its_command_knows(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["run", "config.yaml", "--modle", "openai/gpt-4o"])
    assert stopped.value.code == 2
    assert "unrecognized arguments: --modle openai/gpt-4o; did you mean `--model`?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["show", "runs/latest", "--xyzzy"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --xyzzy" in err and "did you mean" not in err  # nothing near: no guess
