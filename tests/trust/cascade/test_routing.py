"""A cascaded run asks each stage only about the items every earlier stage left below its
threshold (the fake server's request counts per model say so), writes one cascade line per item
that agrees with what the stages decided, never asks a stage with no threshold, counts abstained
items apart from failures (exit 0), and holds an item whose stage failed for a reason outside
the answers instead of paying the next stage for it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.rundir.store import read_manifest
from tests.trust.cascade.conftest import MODELS, cascade_job, decisions, expected, latest, lines

THRESHOLDS = {"cheap": 0.95, "mid": 0.9, "strong": 0.8}
ANNOTATOR_REQUESTS = 6  # 3 annotators x both orders


def test_each_stage_is_asked_only_about_the_items_the_earlier_stages_escalated(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = cascade_job(tmp_path, fake_server, thresholds=THRESHOLDS)
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    by_model = fake_server.stats()["by_model"]
    cascade = latest(run, "cascade")
    assert len(cascade) == 24 and Counter(o["judge"] for o in lines(run))["cascade"] == 24, "one line per item"
    mine = decisions(run)
    asked = {stage: set(mine[stage]) for stage in MODELS}
    # Against every stage's decision on every item (the same config with the cascade off; the cache
    # answers what the cascade already asked).
    assert main(["run", str(job.config), "--no-cascade", "--no-live"]) == 0
    full = decisions(next(p for p in job.run_dirs() if p != run))
    want = expected(full, THRESHOLDS, sorted(cascade))
    for stage in MODELS:
        escalated_here = {item for item, (_, _, stages) in want.items() if stage in stages}
        assert asked[stage] == escalated_here, stage
        assert by_model.get(MODELS[stage].split("/")[-1], 0) == ANNOTATOR_REQUESTS * len(escalated_here), stage
    for item, record in cascade.items():
        stage, prediction, stages = want[item]
        verdict = record.verdict or {}
        assert verdict["stage"] == stage and verdict["prediction"] == prediction
        assert [a["stage"] for a in verdict["asked"]] == [s for s in THRESHOLDS if s in stages]
        assert (record.reason_code == "abstained") == (stage is None)
    routes = Counter(v[0] for v in want.values())
    assert routes["cheap"] and routes["mid"] and routes["strong"] and routes[None], f"a mix of every route: {routes}"
    # Planned counts are what reached each stage, not every item: run.json, status and the summary agree.
    manifest = read_manifest(run)
    counts = manifest.counts["judges"]
    for stage in MODELS:
        reached = len(asked[stage])
        assert counts[stage]["planned"] == reached * ANNOTATOR_REQUESTS == counts[stage]["tasks"]
        assert counts[f"{stage}:item"]["planned"] == reached
    assert counts["cascade"]["planned"] == 24 and manifest.status == "completed"
    assert main(["status", str(run)]) == 0
    said = capsys.readouterr().out
    assert f"{len(asked['strong']) * ANNOTATOR_REQUESTS}/{len(asked['strong']) * ANNOTATOR_REQUESTS} done" in said
    assert f"{routes[None]} abstained" in said


def test_a_stage_with_no_threshold_is_never_asked_and_plan_says_so(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    thresholds = {"cheap": 0.95, "mid": None, "strong": 0.8}
    job = cascade_job(tmp_path, fake_server, thresholds=thresholds)
    assert main(["plan", str(job.config)]) == 0
    said = capsys.readouterr().out
    assert "mid: not asked (its calibration found no threshold: it answers nothing)" in said
    assert main(["protocols", "--check", str(job.config)]) == 0
    assert "mid: not asked (its calibration found no threshold" in capsys.readouterr().out
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    by_model = fake_server.stats()["by_model"]
    assert MODELS["mid"].split("/")[-1] not in by_model
    escalated = {item for item, (prediction, confidence) in decisions(run)["cheap"].items()
                 if prediction is None or confidence < 0.95}
    assert escalated and set(latest(run, "strong:item")) == escalated
    assert not latest(run, "mid") and read_manifest(run).counts["judges"]["mid"]["planned"] == 0
    capsys.readouterr()
    assert main(["status", str(run)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "mid (online, " in said and "no task (not asked)" in said and "0/0 done" not in said
    assert all(not any(a["stage"] == "mid" for a in (r.verdict or {})["asked"]) for r in latest(run, "cascade").values())


def test_abstained_items_are_counted_apart_and_the_run_exits_0(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = cascade_job(tmp_path, fake_server, thresholds={"cheap": 0.999, "mid": 0.999, "strong": 0.999})
    assert main(["run", str(job.config), "--no-live"]) == 0, "abstaining is the method working, not a failure"
    said = capsys.readouterr().err
    run = job.only_run()
    cascade = latest(run, "cascade")
    abstained = sum(1 for r in cascade.values() if r.reason_code == "abstained")
    assert abstained >= 20
    assert f"{abstained} abstained (no stage sure enough: not a failure)" in " ".join(said.split())
    counts = read_manifest(run).counts["judges"]["cascade"]
    assert counts["unscored_by_code"] == {"abstained": abstained}
    for record in cascade.values():
        if record.reason_code == "abstained":
            assert [a["route"] for a in (record.verdict or {})["asked"]] == ["escalate"] * 3
            assert record.reason and record.reason.startswith("no stage was sure enough")


def test_an_item_whose_stage_failed_for_an_outage_is_held_not_escalated_then_retried(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    # 500s with no transport retry: some annotator requests end transport_exhausted, so their
    # items' decision is item_incomplete: those items wait at that stage, the next is not paid.
    job = cascade_job(tmp_path, fake_server, thresholds=THRESHOLDS, judge={"retries": {"transport": 0}})
    fake_server.update(error_500_rate=0.04)
    assert main(["run", str(job.config), "--no-live"]) == 3
    run = job.only_run()
    cascade = latest(run, "cascade")
    held = {item: (r.verdict or {})["held_at"] for item, r in cascade.items() if r.reason_code == "item_incomplete"}
    assert "cheap" in held.values(), "some requests failed"
    order = list(MODELS)
    for item, stage in held.items():
        assert latest(run, f"{stage}:item")[item].reason_code == "item_incomplete"
        for later in order[order.index(stage) + 1:]:
            assert item not in latest(run, f"{later}:item") and item not in latest(run, later), (item, later)
    said = capsys.readouterr().err
    assert f"{len(held)} held at a stage (an outage there: resume --retry asks again)" in " ".join(said.split())
    failed = Counter(o["judge"] for o in lines(run) if o["reason_code"] == "transport_exhausted")
    fake_server.update(error_500_rate=0.0)
    before = fake_server.stats()["by_model"]
    assert main(["resume", str(run), "--retry", "transport_exhausted", "--no-live"]) == 0
    after = fake_server.stats()["by_model"]
    cascade = latest(run, "cascade")
    assert all(cascade[item].reason_code != "item_incomplete" for item in held)
    assert Counter(o["judge"] for o in lines(run))["cascade"] == 24 + len(held), "a held item's line superseded once"
    cheap = MODELS["cheap"].split("/")[-1]
    assert after[cheap] - before.get(cheap, 0) == failed["cheap"], "cheap: only its failed requests asked again"


def test_resume_retry_leaves_an_item_the_cascade_answered_alone(tmp_path: Path, fake_server: FakeServer) -> None:
    """``--retry`` judges again only what the cascade holds: an answered item's left-out
    request is not asked again (the stage is never asked twice about an item)."""
    job = cascade_job(tmp_path, fake_server, thresholds=THRESHOLDS, judge={"retries": {"reasks": 0}})
    fake_server.update(malformed_rate=0.05)
    main(["run", str(job.config), "--no-live"])
    run = job.only_run()
    unreadable = [o for o in lines(run) if o["reason_code"] == "unreadable"]
    assert unreadable, "some annotator answers were unreadable (left out of their item's decision)"
    fake_server.update(malformed_rate=0.0)
    before = fake_server.stats()["requests_total"]
    cascade_before = {k: v.to_dict() for k, v in latest(run, "cascade").items()}
    main(["resume", str(run), "--retry", "unreadable", "--no-live"])
    assert fake_server.stats()["requests_total"] == before
    assert {k: v.to_dict() for k, v in latest(run, "cascade").items()} == cascade_before


def test_config_errors_name_the_key(tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = cascade_job(tmp_path, fake_server, thresholds=THRESHOLDS)
    config = yaml.safe_load(job.config.read_text())
    for change, message in [
        ({"cascade": {**config["cascade"], "stages": ["cheap", "strong", "mid"]}},
         "cascade.thresholds: " + str(tmp_path / "thresholds.json") + " was calibrated for the stages cheap, mid, "
         "strong; the config's are cheap, strong, mid: calibrate again with --stages cheap,strong,mid"),
        ({"cascade": {**config["cascade"], "stages": ["cheap", "nobody"]}}, "cascade.stages: no judge or jury named nobody"),
        ({"cascade": {**config["cascade"], "thresholds": "missing.json"}}, "cascade.thresholds: "),
        ({"judges": [{**j, "confidence": "logprobs", "protocol": "prometheus-relative",
                      "protocol_options": {"rubric": "helpfulness"}} if j["name"] == "mid" else j
                     for j in config["judges"]]},
         "cascade.stages: a cascade's stages judge with one protocol (here: cheap pairwise-annotators, mid "
         "prometheus-relative, strong pairwise-annotators)"),
        ({"judges": [{**j, "confidence": None, "protocol": "prometheus-relative", "protocol_options": {}}
                     if j["name"] == "mid" else j for j in config["judges"]]},
         "judges[mid].confidence: a cascade stage needs a confidence to compare with its threshold"),
        ({"judges": [{**j, "temperatures": [0.0, 0.7]} if j["name"] == "mid" else j for j in config["judges"]]},
         "judges[mid].temperatures: a cascade stage judges each item at one temperature (now 2)"),
    ]:
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**config, **change}), encoding="utf-8")
        assert main(["run", str(tmp_path / "bad.yaml"), "--no-live"]) == 2
        assert message in capsys.readouterr().err
    assert fake_server.stats()["requests_total"] == 0


def test_the_cascade_run_is_its_own_run_and_its_thresholds_are_part_of_its_id(
        tmp_path: Path, fake_server: FakeServer) -> None:
    job = cascade_job(tmp_path, fake_server, thresholds=THRESHOLDS, items=4)
    assert main(["run", str(job.config), "--no-live"]) == 0
    assert main(["run", str(job.config), "--no-cascade", "--no-live"]) == 0
    assert len(job.run_dirs()) == 2
    document = json.loads((tmp_path / "thresholds.json").read_text())
    document["stages"][0]["threshold"] = 0.5
    (tmp_path / "thresholds.json").write_text(json.dumps(document))
    assert main(["run", str(job.config), "--no-live"]) == 0
    assert len(job.run_dirs()) == 3, "new thresholds: a new run (the cache answers what was asked before)"


def test_a_jury_stage_is_asked_only_about_escalated_items_and_decides_by_its_jurors_share(
        tmp_path: Path, fake_server: FakeServer) -> None:
    relative = {"protocol": "prometheus-relative", "protocol_options": {"rubric": "helpfulness", "both_orders": False},
                "api_base": fake_server.base_url, "api_key_env": "JUDGE_ENGINE_TEST_KEY", "timeout_s": 10,
                "limits": {"concurrency": 4}}
    jurors = {"j1": "openai/gpt-4.1-mini", "j2": "openai/gpt-4o", "j3": "openai/gpt-4.1"}
    config = {"dataset": {"path": "items.jsonl"}, "output": {"dir": "runs"}, "cache": {"dir": "cache"},
              "judges": [{**relative, "name": "solo", "model": "openai/gpt-4o-mini", "confidence": "logprobs"},
                         *({**relative, "name": name, "model": model} for name, model in jurors.items())],
              "juries": [{"name": "panel", "judges": list(jurors)}],
              "cascade": {"stages": ["solo", "panel"], "thresholds": "thresholds.json"}}
    cascade_job(tmp_path, None, thresholds={"solo": 0.9, "panel": 0.7}, items=20)  # the items and thresholds file
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    assert main(["run", str(tmp_path / "config.yaml"), "--no-live"]) == 0
    run = next(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    solo = latest(run, "solo")
    escalated = {item for item, r in solo.items() if not r.scored or (r.confidence or {}).get("value", 0) < 0.9}
    assert escalated and len(escalated) < 20
    by_model = fake_server.stats()["by_model"]
    for name, model in jurors.items():
        assert set(latest(run, name)) == escalated, name
        assert by_model[model.split("/")[-1]] == len(escalated), "each juror asked once per escalated item"
    everything = lines(run)
    assert Counter(o["judge"] for o in everything)["panel"] == len(escalated), "one jury line per item, made live"
    panel = latest(run, "panel")
    cascade = latest(run, "cascade")
    assert Counter((r.verdict or {})["stage"] for r in cascade.values())["panel"], "the panel answered some"
    for item, record in cascade.items():
        verdict = record.verdict or {}
        if item not in escalated:
            assert verdict["stage"] == "solo"
            continue
        votes = [j["vote"] for j in (panel[item].verdict or {})["jurors"].values()]
        share = votes.count(panel[item].verdict["value"]) / len(votes) if panel[item].scored else None  # type: ignore[index]
        if share is not None and share >= 0.7:
            assert verdict["stage"] == "panel" and verdict["confidence"] == pytest.approx(share)
        else:
            assert record.reason_code == "abstained" and verdict["asked"][-1]["stage"] == "panel"
