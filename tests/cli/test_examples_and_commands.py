"""Every example config runs end to end; the plan, show, protocols and schemas commands work."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.protocols import available, get_protocol
from judge_engine.protocols.embeddings import minilm_problem
from judge_engine.running.demo import demo_endpoint
from judge_engine.running.session import PreparedRun, execute, prepare
from tests.harness import TEST_KEY, TEST_KEY_ENV, make_job, read_lines

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (REPO / "examples").glob("*/config.yaml"))


EXAMPLE_PENDING: set[str] = set()
"""Protocols whose example is still to be written."""
GENERATION = {"cdat", "dat"}
"""Their first answer is the data: a list with too few nouns is recorded ``too_few_valid``, by design."""


def test_every_protocol_has_an_example() -> None:
    from judge_engine.inputs.config import load_config

    covered = {j.protocol for path in EXAMPLES for j in load_config(path).judges}
    assert covered == set(available()) - EXAMPLE_PENDING
    assert not covered & EXAMPLE_PENDING, "an example exists now: drop it from EXAMPLE_PENDING"


@pytest.mark.slow
@pytest.mark.parametrize("config", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_example_runs_end_to_end_against_the_fake_server(config: Path, tmp_path: Path, fake_server: FakeServer) -> None:
    if config.parent.name == "cdat" and minilm_problem():
        pytest.skip(minilm_problem() or "")
    prepared = _through_litellm(config, tmp_path, fake_server)
    # Every model as the fake serves it (OpenAI's API): the CDAT example names a Claude model too.
    where = {j.name: demo_endpoint(j, fake_server.base_url) for j in prepared.config.judges}
    result = asyncio.run(execute(prepared, where, install_signals=False))
    assert result.status == "completed"
    outcomes = read_lines(prepared.run_dir / "outcomes.jsonl")
    expected = sum(
        prepared.dataset.items * len(j.temperatures) * j.repeats * _variants(prepared, j.name)
        for j in prepared.config.judges
    )
    judges = {j.name: j for j in prepared.config.judges}
    juries = sum(  # one outcome per item at each coordinate the jurors share
        prepared.dataset.items * _variants(prepared, jury.judges[0]) * min(judges[j].repeats for j in jury.judges)
        * len(set.intersection(*(set(judges[j].temperatures) for j in jury.judges)))
        for jury in prepared.config.juries
    )
    items = sum(prepared.dataset.items * len(j.temperatures) for j in prepared.manifest.judges if j.item_outcomes)
    assert len(outcomes) == expected + juries + items  # an item decision per item of a judge of several requests
    unscored = [o for o in outcomes if o["status"] != "scored"]
    assert all(o["protocol"] in GENERATION and o["reason_code"] == "too_few_valid"
               or o["protocol"] == "item" and o["reason_code"] == "item_tie" for o in unscored), \
        [o["reason"] for o in unscored][:3]
    assert len(unscored) < len(outcomes) / 4
    protocols = {o["protocol"] for o in outcomes}
    assert protocols == {j.protocol for j in prepared.config.judges} | ({"jury"} if prepared.config.juries else set()) \
        | ({"item"} if items else set())
    totals = sum(prepared.tasks_of(judge) for judge in prepared.config.judges)
    assert totals == expected  # the live display's done/total counts every variant (from the scan)


def _through_litellm(config: Path, tmp_path: Path, fake_server: FakeServer) -> PreparedRun:
    """The example prepared against the fake server, every judge on the litellm transport."""
    overrides = {"api_base": fake_server.base_url, "output_dir": tmp_path / "runs", "cache_dir": tmp_path / "cache",
                 "cascade": False}  # every judge on every item (the cascade example's own run is the README's)
    prepared = prepare(config, overrides=overrides, check_keys=False)
    judges = [j.model_copy(update={"transport": "litellm"}) for j in prepared.config.judges]
    prepared.config = prepared.config.model_copy(update={"judges": judges})
    return prepared


def _variants(prepared, judge_name: str) -> int:
    from judge_engine.inputs.dataset import iter_items

    protocol = prepared.protocols[judge_name]
    first = next(iter_items(prepared.config.dataset, protocol.required_fields))
    return len(protocol.variants(first))


def test_demo_flag_runs_with_no_api_key_and_says_answers_are_synthetic(tmp_path: Path, capsys) -> None:
    config = REPO / "examples" / "literary_mt" / "config.yaml"
    code = main(["run", str(config), "--demo", "--no-live", "--limit", "5",
                 "--output", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache")])
    assert code == 0
    err = capsys.readouterr().err
    assert "synthetic" in err
    run = next((tmp_path / "runs").iterdir())
    assert json.loads((run / "run.json").read_text())["demo"] is True
    assert len(read_lines(run / "outcomes.jsonl")) == 5


@pytest.mark.slow
def test_latest_is_the_run_just_named_and_resume_takes_demo(tmp_path: Path, capsys, fake_server: FakeServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Running a completed config again names its run and points `latest` at it (before, `latest`
    kept the last run made); `resume RUN --demo` resumes a demo run (before, argparse read
    --demo as an abbreviation of --demo-batch-s) and is refused for a run that is not one."""
    config = REPO / "examples" / "literary_mt" / "config.yaml"
    where = ["--no-live", "--limit", "3", "--output", str(tmp_path / "demo"), "--cache-dir", str(tmp_path / "cache")]
    assert main(["run", str(config), "--demo", *where]) == 0
    first = (tmp_path / "demo" / "latest").resolve()
    assert main(["run", str(config), "--demo", "--model", "openai/gpt-4o", *where]) == 0
    assert (tmp_path / "demo" / "latest").resolve() != first
    assert main(["run", str(config), "--demo", *where]) == 0  # already complete
    assert (tmp_path / "demo" / "latest").resolve() == first
    assert main(["resume", str(first), "--demo", "--no-live"]) == 0
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    job = make_job(tmp_path, fake_server, items=2)
    assert main(["run", str(job.config), "--no-live"]) == 0
    capsys.readouterr()
    assert main(["resume", str(job.only_run()), "--demo", "--no-live"]) == 2
    err = capsys.readouterr().err
    assert "--demo: " in err and "is not a demo run" in err
    with pytest.raises(SystemExit) as stopped:  # an abbreviation is no option
        main(["resume", str(first), "--demo-b", "1"])
    assert stopped.value.code == 2


def test_plan_counts_tokens_cost_and_time_offline(tmp_path: Path, capsys) -> None:
    job = make_job(tmp_path, None, items=10, judge={"repeats": 2, "limits": {"rpm": 60, "tpm": 1000000, "concurrency": 4}})
    assert main(["plan", str(job.config)]) == 0
    out = capsys.readouterr().out
    assert "20" in out and "RPM" in out  # 20 tasks; 60 RPM binds
    from judge_engine.running.estimate import plan_rows

    (plan,) = plan_rows(prepare(job.config, check_keys=False))
    assert plan.tasks == 20 and plan.prompt_tokens.low > 20 * 500
    assert plan.cost is not None and plan.cost.low > 0
    assert plan.wall_s.low == pytest.approx(20.0)  # 20 requests at 60 RPM
    assert not job.runs.exists()  # a dry run writes nothing


def test_plan_shows_template_problems_before_any_call(tmp_path: Path, capsys) -> None:
    job = make_job(tmp_path, None, items=3, judge={"protocol": "prometheus-absolute"})
    assert main(["plan", str(job.config)]) == 2
    assert "instruction" in capsys.readouterr().err  # the protocol's required field is missing


def test_show_prints_the_transcript_of_an_item(tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    fake_server.update(malformed_rate=0.5, seed=1)
    job = make_job(tmp_path, fake_server, items=6)
    code = main(["run", str(job.config), "--no-live"])
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert code == (3 if any(o["status"] == "unscored" for o in outcomes) else 0)
    reasked = next(o for o in outcomes if o["reasks"] > 0)
    capsys.readouterr()
    assert main(["show", str(job.only_run()), "--item", reasked["item_id"]]) == 0
    out = capsys.readouterr().out
    assert "sent first, folded: system prompt and 3 few-shot turns" in out and "You are an annotator" not in out
    assert "Your previous answer could not be used" in out  # the re-ask is the attempt's own: never folded
    assert main(["show", str(job.only_run()), "--item", reasked["item_id"], "--full"]) == 0
    out = capsys.readouterr().out
    assert "sent: system" in out and "You are an annotator" in out
    assert "Your previous answer could not be used" in out
    assert "re-asks: " in out and ("verdict" in out or "unscored" in out)
    assert main(["show", str(job.only_run()), "--item", "no-such-item"]) == 2


def test_protocols_command_lists_every_protocol(capsys) -> None:
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out
    for name in available():
        assert name in out


def test_schemas_have_not_drifted_from_the_output_models() -> None:
    from judge_engine.protocols.schemas import check_schemas

    assert check_schemas(REPO / "schemas") == [], "run: judge-engine schemas --dir schemas"
    # A custom judge's verdict is whatever its config declares: protocols --check CONFIG prints it.
    published = {name for name in available() if not get_protocol(name).output_per_config}
    assert published == set(available()) - {"custom"}
    assert {p.stem for p in (REPO / "schemas").glob("*.json")} == published
    for name in published:
        schema = json.loads((REPO / "schemas" / f"{name}.json").read_text())
        assert schema["properties"].keys() == get_protocol(name).output_model.model_fields.keys()


def test_help_is_fast_and_does_not_import_litellm() -> None:
    code = "import sys, time; t=time.perf_counter(); from judge_engine.cli import parser; parser(); print(time.perf_counter()-t, 'litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[1] == "False"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "judge_engine.cli", "--help"], capture_output=True, check=True)
    assert time.perf_counter() - started < 1.5  # generous for CI; the benchmark measures the real figure
