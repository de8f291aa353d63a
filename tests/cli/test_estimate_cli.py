"""``judge-engine estimate`` and ``label-plan`` on a demo run of examples/literary_systems (four
systems, 25 human labels each): the issue's dict with --json, a table that fits 80 columns, a plan
whose probabilities the estimate reads back, ``stats --human-table`` beside the raw mean, and bad
input named with exit 2."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

import judge_engine
from judge_engine.cli import main

pytestmark = pytest.mark.slow  # see tests/conftest.py: python -m pytest --all runs it

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("estimate") / "literary_systems"
    shutil.copytree(REPO / "examples" / "literary_systems", target,
                    ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    result = judge_engine.run(target / "config.yaml", demo=True)
    assert result.status == "completed"
    return target


def _run(example: Path) -> Path:
    return example / "runs" / "latest"


def test_estimate_json_per_system(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["estimate", str(_run(example)), "--human-table", str(example / "humans.csv"), "--key", "id",
                 "--human", "mqm", "--by", "system", "--alpha", "0.1", "--json", "--differences"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["alpha"] == 0.1 and out["method"] == "ppi++" and out["estimator"] == "uniform"
    labels = list(csv.DictReader((example / "humans.csv").open(encoding="utf-8")))
    for group in out["groups"]:
        assert group["judge"] == "mqm-mini" and group["system"] == group["group"]
        assert group["n_labelled"] == sum(r["system"] == group["system"] for r in labels) == 25
        assert group["n_unlabelled"] == 25
        assert group["ci"][0] < group["estimate"] < group["ci"][1]
        assert set(group["classical"]) >= {"estimate", "ci"} and group["effective_labels"] > 0
    assert len(out["differences"]) == 6 and len(out["ranking"]) == 4
    assert any("DEMO RUN" in n for n in out["notes"])
    # the API on the same rows gives the same figures
    from judge_engine.trust.estimate_rows import estimate_run, human_labels

    again = estimate_run(_run(example), human_labels(example / "humans.csv", key="id", column="mqm"), by="system",
                         alpha=0.1)
    assert [g["ci"] for g in again["groups"]] == [g["ci"] for g in out["groups"]]


def test_the_table_fits_80_columns(example: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code = main(["estimate", str(_run(example)), "--human-table", str(example / "humans.csv"), "--human", "mqm",
                 "--by", "system", "--differences", "--target-width", "4"])
    text = capsys.readouterr().out
    assert code == 0
    assert max(len(line) for line in text.splitlines()) <= 80
    for system in ("gpt4o", "human", "m2m", "nllb"):
        assert system in text
    assert "Human-scale estimate per group (95%)" in text and "Differences between groups" in text
    assert "Labels needed for the target width" in text


def test_a_plan_is_read_back_as_the_active_estimate(example: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.csv"
    assert main(["label-plan", str(_run(example)), "--budget", "60", "--by", "system", "--output", str(plan),
                 "--seed", "4"]) == 0
    said = capsys.readouterr().out
    rows = list(csv.DictReader(plan.open(encoding="utf-8")))
    assert len(rows) == 200 and {r["system"] for r in rows} == {"gpt4o", "human", "m2m", "nllb"}
    assert sum(float(r["sampling_probability"]) for r in rows) == pytest.approx(60)
    drawn = [r for r in rows if r["selected"] == "true"]
    assert f"{len(drawn)} drawn" in said and "--by system" in said
    assert "prediction" not in rows[0]  # annotators do not see the judge's verdict
    truth = {r["id"]: r["mqm"] for r in csv.DictReader((example / "humans.csv").open(encoding="utf-8"))}
    for r in rows:  # the annotators: a number for every drawn row
        r["label"] = truth.get(r["id"], "-5") if r["selected"] == "true" else ""
    with plan.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["estimate", str(_run(example)), "--human-table", str(plan), "--human", "label", "--by", "system",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["estimator"] == "active"
    assert sum(g["n_labelled"] for g in out["groups"]) == len(drawn)


def test_a_plan_follows_the_repeats_spread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "literary_systems"
    shutil.copytree(REPO / "examples" / "literary_systems", target, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    config = (target / "config.yaml").read_text(encoding="utf-8")
    (target / "config.yaml").write_text(config.replace("temperatures: [0.0]", "temperatures: [1.0]\n    repeats: 3"),
                                        encoding="utf-8")
    result = judge_engine.run(target / "config.yaml", demo=True)
    plan = tmp_path / "plan.jsonl"
    assert main(["label-plan", str(result.run_dir), "--budget", "40", "--output", str(plan), "--max-cost", "2"]) == 0
    assert "uncertainty from predictions" in capsys.readouterr().out
    rows = [json.loads(line) for line in plan.read_text(encoding="utf-8").splitlines()]
    spread = [r["uncertainty"] for r in rows]
    probs = [r["sampling_probability"] for r in rows]
    assert max(spread) > 0 and probs[spread.index(max(spread))] > probs[spread.index(min(spread))]


def test_stats_shows_the_estimate_beside_the_raw_mean(example: Path, tmp_path: Path) -> None:
    doc = tmp_path / "stats.json"
    assert main(["stats", str(_run(example)), "--human-table", str(example / "humans.csv"), "--human", "mqm",
                 "--json", str(doc), "--quiet"]) == 0
    section = json.loads(doc.read_text(encoding="utf-8"))["sections"]["estimate"]
    (row,) = section["rows"]
    assert row["group"] == "mqm-mini" and row["labelled"] == 100 and row["items"] == 200
    assert row["judge_mean"] is not None and row["ci"][0] < row["estimate"] < row["ci"][1]


@pytest.mark.parametrize(("args", "message"), [
    (["--human", "score"], "no column 'score'"),
    (["--human", "system"], "line 2: column 'system': 'human' is not a number; for labels such as"),
    (["--human", "mqm", "--judge", "nobody"], "no judge named nobody"),
    (["--human", "mqm", "--by", "colour"], "--by colour: item"),
    (["--human", "mqm", "--alpha", "2"], "alpha: expected a number in (0, 1)"),
    (["--human", "mqm", "--key", "item"], "no column 'item'"),
])
def test_bad_input_is_named_with_exit_2(example: Path, args: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["estimate", str(_run(example)), "--human-table", str(example / "humans.csv"), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert "Traceback" not in err


def test_positive_turns_categories_into_a_share(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["estimate", str(_run(example)), "--human-table", str(example / "humans.csv"), "--human", "system",
                 "--positive", "m2m", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["groups"][0]["classical"]["estimate"] == pytest.approx(0.25)


def test_two_judges_differences_compare_systems_within_each_judge(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "literary_systems"
    shutil.copytree(REPO / "examples" / "literary_systems", target, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    config = (target / "config.yaml").read_text(encoding="utf-8")
    second = ("  - name: mqm-second\n    model: openai/gpt-4o\n    protocol: gemba-mqm\n    temperatures: [0.0]\n"
              "    max_tokens: 500\n    limits: {rpm: 3000, tpm: 1000000, concurrency: 64}\noutput:")
    (target / "config.yaml").write_text(config.replace("output:", second, 1), encoding="utf-8")
    result = judge_engine.run(target / "config.yaml", demo=True)
    assert result.status == "completed"
    code = main(["estimate", str(result.run_dir), "--human-table", str(target / "humans.csv"), "--key", "id",
                 "--human", "mqm", "--by", "system", "--differences", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and len(out["groups"]) == 8
    # 6 pairs of systems for each judge, never a pair across judges (their estimates share labels)
    assert len(out["differences"]) == 12 and len(out["ranking"]) == 8
    assert sorted({d["judge"] for d in out["differences"]}) == ["mqm-mini", "mqm-second"]
    of_group = {g["group"]: g["judge"] for g in out["groups"]}
    for d in out["differences"]:
        assert of_group[d["a"]] == of_group[d["b"]] == d["judge"], d
    assert any("one judge at a time" in n for n in out["notes"])
