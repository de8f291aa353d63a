"""The generation sections of ``stats`` on hand-written runs: a DAT run, ``not_embedded`` lists,
tasks with no answer, sections that need a baseline (no engine, no embedder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from tests.stats.fixtures import outcome, write_run


def _stats(run: Path, tmp_path: Path, *args: str) -> dict[str, Any]:
    report = tmp_path / "report.json"
    assert main(["stats", str(run), "--json", str(report), *args]) == 0
    sections: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))["sections"]
    return sections


def _list(item: str, judge: str, temperature: float, novelty: float | None, appropriateness: float | None = None,
          *, protocol: str = "cdat", code: str | None = None) -> dict[str, Any]:
    scores = {"novelty": novelty, **({"appropriateness": appropriateness} if appropriateness is not None else {})}
    record = outcome(item, judge, temperature, 0, novelty, protocol=protocol,
                     scores=scores if novelty is not None else {})
    return record | ({"reason_code": code, "reason": code} if code else {})


def test_a_dat_run_has_valid_responses_and_novelty_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 3 scored (70, 72, 74), 1 too_few_valid, 1 transport failure (no answer to read): 3 valid of 4.
    records = [_list(f"s{i}", "d", 1.0, v, protocol="dat") for i, v in enumerate((70.0, 72.0, 74.0))]
    records += [_list("s3", "d", 1.0, None, protocol="dat", code="too_few_valid"),
                _list("s4", "d", 1.0, None, protocol="dat", code="transport_exhausted")]
    run = write_run(tmp_path / "run", records)
    s = _stats(run, tmp_path)
    assert not {"appropriateness", "gate", "cdat_score", "elbow", "pareto"} & s.keys()
    (valid,) = s["valid_responses"]["rows"]
    assert (valid["answers"], valid["valid"], valid["rate"]) == (4, 3, 0.75)
    assert s["valid_responses"]["notes"] == ["not counted: d T=1, 1 tasks with no answer to read (transport_exhausted 1)"]
    (novelty,) = s["novelty"]["rows"]
    # mean 72; sd 2; SEM 2 / sqrt(3) = 1.1547; 1.96 SEM = 2.2632
    assert (novelty["n"], novelty["mean"]) == (3, 72.0) and novelty["ci_high"] == pytest.approx(74.2632, abs=1e-4)
    capsys.readouterr()
    random = _baseline(tmp_path / "random.json", "Random", [(120.0, 80.0), (121.0, 79.0)])
    assert main(["stats", str(run), "--baselines", str(random)]) == 2
    assert "no CDAT outcomes" in capsys.readouterr().err


def test_not_embedded_lists_are_valid_in_a_column_of_their_own_and_the_rest_says_so(tmp_path: Path) -> None:
    records = [_list(f"c{i}", "m", 0.5, None, code="not_embedded") for i in range(3)]
    records.append(_list("c3", "m", 0.5, None, code="too_few_valid"))
    s = _stats(write_run(tmp_path / "run", records), tmp_path)
    (valid,) = s["valid_responses"]["rows"]
    assert (valid["valid"], valid["answers"], valid["not_embedded"]) == (3, 4, 3)
    assert "not_embedded" in s["valid_responses"]["columns"]
    assert s["novelty"]["absent"].startswith("no list was scored")
    assert s["gate"]["absent"].startswith("needs the Random baseline")
    assert s["pareto"]["absent"] == "no CDAT list was scored"


def _baseline(path: Path, model: str, points: list[tuple[float, float]]) -> Path:
    rows = [{"Model": model, "Cue": f"c{i}", "Words": ["w"] * 10, "sbert_novelty": n, "sbert_appropriateness": a,
             "sbert_valid_count": 10} for i, (a, n) in enumerate(points)]
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def test_the_gate_elbow_and_front_on_known_values(tmp_path: Path) -> None:
    # Random at (120 +- 1, 80), Common at (140 +- 1, 60): the line x + y = 200. Model "good" at
    # (135 +- 1, 75): x + y = 210, 10 / sqrt(2) = 7.071 beyond the line; "near" at (121 +- 1, 79),
    # on the line and not significantly above Random: SD 1 on both sides, t = 1 / sqrt(1/3 + 1/3) = 1.2247,
    # Welch df = 4, two-sided p = 0.2879.
    spread = (-1.0, 0.0, 1.0)
    records = [_list(f"c{i}", "good", 1.0, 75.0, 135.0 + s) for i, s in enumerate(spread)]
    records += [_list(f"c{i}", "near", 1.0, 79.0, 121.0 + s) for i, s in enumerate(spread)]
    random = _baseline(tmp_path / "random.json", "Random", [(120.0 + s, 80.0) for s in spread])
    common = _baseline(tmp_path / "common.json", "Common", [(140.0 + s, 60.0) for s in spread])
    s = _stats(write_run(tmp_path / "run", records), tmp_path, "--baselines", str(random), str(common))
    gate = {r["judge"]: r for r in s["gate"]["rows"]}
    assert gate["good"]["passed"] and not gate["near"]["passed"] and gate["near"]["p"] == pytest.approx(0.2879, abs=1e-4)
    assert [r["judge"] for r in s["cdat_score"]["rows"]] == ["good"] and s["cdat_score"]["rows"][0]["cdat"] == 75.0
    assert s["cdat_score"]["notes"] == ["not shown: near T=1 (failed the gate)"]
    elbow = {r["judge"]: r["elbow"] for r in s["elbow"]["rows"]}
    assert elbow["good"] == pytest.approx(10 / 2**0.5) and elbow["near"] == pytest.approx(0.0, abs=1e-9)
    front = {r["point"]: r["front"] for r in s["pareto"]["rows"]}
    assert front == {"good": True, "near": True, "Random": None, "Common": None}  # baselines: listed, not candidates


def test_the_front_is_over_the_models_and_says_when_a_baseline_beats_a_front_model(tmp_path: Path) -> None:
    # Common at (140, 60), Random at (120, 80). "under" at (139, 59) is beaten by Common on both
    # axes; "wide" at (125, 70) beats neither model nor is beaten by one. Over the models both are
    # the front (the reference's "Pareto front of non-dominated models"); with the baselines as
    # candidates "under" would drop off it.
    spread = (-1.0, 0.0, 1.0)
    records = [_list(f"c{i}", "under", 1.0, 59.0, 139.0 + s) for i, s in enumerate(spread)]
    records += [_list(f"c{i}", "wide", 1.0, 70.0, 125.0 + s) for i, s in enumerate(spread)]
    random = _baseline(tmp_path / "random.json", "Random", [(120.0 + s, 80.0) for s in spread])
    common = _baseline(tmp_path / "common.json", "Common", [(140.0 + s, 60.0) for s in spread])
    s = _stats(write_run(tmp_path / "run", records), tmp_path, "--baselines", str(random), str(common))
    rows = {r["point"]: (r["front"], r["beaten_by"]) for r in s["pareto"]["rows"]}
    assert rows == {"under": (True, "Common"), "wide": (True, ""), "Random": (None, None), "Common": (None, None)}
    assert "on the front, but a baseline beats it on both axes: under T=1 (by Common)" in s["pareto"]["notes"]


def test_a_baseline_with_fewer_than_two_scored_lists_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", [_list("c0", "m", 1.0, 70.0, 130.0)])
    random = _baseline(tmp_path / "random.json", "Random", [(120.0, 80.0)])
    assert main(["stats", str(run), "--baselines", str(random)]) == 2
    assert f"{random}: 1 scored lists" in capsys.readouterr().err


def test_p_values_keep_their_digits_other_numbers_three_decimals(capsys: pytest.CaptureFixture[str]) -> None:
    from judge_engine.cli.display import render_sections
    from judge_engine.stats.sections import Section

    rows = [{"judge": "m", "p": 0.0013, "p_bh": 4.7e-09, "ci_low": 2.8e-17, "passed": False}]
    render_sections([Section("gate", "Gate", ["judge", "p", "p_bh", "ci_low", "passed"], rows,
                             small_values=("p", "p_bh"))], [])
    out = capsys.readouterr().out
    # 0.0013 failed alpha 0.001 and must not read 0.001; a Wilson bound's float dust stays 0.000.
    assert "0.0013" in out and "4.7e-09" in out and "0.000" in out and "e-17" not in out and " no " in out
