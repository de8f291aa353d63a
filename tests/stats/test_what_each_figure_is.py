"""``stats`` says what each figure is and leaves out what does not apply (issue 26, item 7), on
hand-computed values: the sample SD, a jury's agreement within one point beside its exact
agreement and its alpha, generation runs without judge agreement and temperature flips, and a
Pareto table that names the models that beat a model."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.stats.agreement import agreement_within, krippendorff_alpha, percent_agreement
from judge_engine.stats.runs import read_run
from judge_engine.stats.sections import SAMPLE_SD_NOTE, distribution_section
from tests.stats.fixtures import outcome, write_run


def _stats(run: Path, tmp_path: Path, *args: str) -> dict[str, Any]:
    report = tmp_path / "report.json"
    assert main(["stats", str(run), "--json", str(report), *args]) == 0
    sections: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))["sections"]
    return sections


def test_the_distributions_sd_is_the_sample_sd_and_says_so(tmp_path: Path) -> None:
    # Scores 1, 2, 3, 4: mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5;
    # sample SD sqrt(5 / 3) = 1.2910 (pandas' std()), not the population's sqrt(5 / 4) = 1.1180.
    records = [outcome(f"i{i}", "a", 0.0, 0, float(score)) for i, score in enumerate((1, 2, 3, 4))]
    records.append(outcome("i0", "b", 0.0, 0, 7.0))  # one score: no SD
    section = distribution_section(read_run(write_run(tmp_path / "run", records)))
    rows = {r["judge"]: r for r in section.rows}
    assert rows["a"]["sd"] == pytest.approx(math.sqrt(5 / 3)) and rows["a"]["sd"] == pytest.approx(1.2910, abs=1e-4)
    assert math.isnan(rows["b"]["sd"])
    assert SAMPLE_SD_NOTE in section.notes and "n - 1" in SAMPLE_SD_NOTE
    pd = pytest.importorskip("pandas")
    assert rows["a"]["sd"] == pytest.approx(float(pd.Series([1.0, 2.0, 3.0, 4.0]).std()))


def test_agreement_within_one_point() -> None:
    # Item 1 (8, 9, 9): pairs 8-9, 8-9, 9-9, all within one (exact: only 9-9, 1/3).
    # Item 2 (1, 5, 6): only 5-6 within one: 1/3 (exact: 0). Item 3 (3, 3, missing): 1 (exact 1).
    votes = [[8, 9, 9], [1, 5, 6], [3, 3, None]]
    assert agreement_within(votes, 1.0) == pytest.approx((1 + 1 / 3 + 1) / 3)  # 7/9 = 0.7778
    assert percent_agreement(votes) == pytest.approx((1 / 3 + 0 + 1) / 3)  # 4/9 = 0.4444
    assert agreement_within(votes, 0.0) == pytest.approx(percent_agreement(votes))
    assert agreement_within([[1, None], [None, None]]) != agreement_within([[1, None], [None, None]])  # NaN: no pair


def _jury(item: str, votes: tuple[float, float]) -> dict[str, Any]:
    verdict = {"aggregate": "mean", "scale": "ordinal", "value": sum(votes) / 2, "voted": 2,
               "jurors": {"a": {"vote": votes[0], "score": votes[0], "status": "scored"},
                          "b": {"vote": votes[1], "score": votes[1], "status": "scored"}}}
    return outcome(item, "panel", 0.0, 0, sum(votes) / 2, protocol="jury", verdict=verdict)


def test_a_jurys_agreement_on_a_grade_scale_has_alpha_and_within_one_beside_exact(tmp_path: Path) -> None:
    # Votes (1, 1), (2, 3), (3, 3), (1, 3). Exact: 1, 0, 1, 0 -> 0.5. Within one: 1, 1, 1, 0 -> 0.75.
    # Ordinal alpha: pairable values 1 x3, 2 x1, 3 x4 (n = 8); mid-ranks r1 = 1.5, r2 = 3 + 0.5 = 3.5,
    # r3 = 4 + 2 = 6, so d(1,2) = 4, d(2,3) = 6.25, d(1,3) = 20.25. Within items (ordered pairs,
    # / (m - 1) = 1): 2 x 6.25 + 2 x 20.25 = 53. Over all value pairs: 2 (3 x 1 x 4 + 3 x 4 x 20.25
    # + 1 x 4 x 6.25) = 560. alpha = 1 - (8 - 1) x 53 / 560 = 0.3375.
    pairs = ((1.0, 1.0), (2.0, 3.0), (3.0, 3.0), (1.0, 3.0))
    assert krippendorff_alpha([list(p) for p in pairs], level="ordinal") == pytest.approx(0.3375)
    s = _stats(write_run(tmp_path / "run", [_jury(f"i{i}", p) for i, p in enumerate(pairs)]), tmp_path)
    (row,) = s["jury_agreement"]["rows"]
    assert (row["coefficient"], row["value"]) == ("alpha_ordinal", pytest.approx(0.3375))
    assert row["exact_agreement"] == pytest.approx(0.5) and row["within_one"] == pytest.approx(0.75)
    assert "within_one" in s["jury_agreement"]["columns"]
    notes = " ".join(s["jury_agreement"]["notes"])
    assert "at most 1 apart (8 and 9 agree here, not in exact_agreement)" in notes


def test_a_jury_of_labels_has_no_within_one(tmp_path: Path) -> None:
    records = []
    for i, votes in enumerate((("pass", "pass"), ("pass", "fail"))):
        verdict = {"scale": "categorical", "value": votes[0], "jurors": {"a": {"vote": votes[0]}, "b": {"vote": votes[1]}}}
        records.append(outcome(f"i{i}", "panel", 0.0, 0, None, protocol="jury", verdict=verdict, status="scored"))
    s = _stats(write_run(tmp_path / "run", records), tmp_path)
    assert "within_one" not in s["jury_agreement"]["columns"]
    assert s["jury_agreement"]["rows"][0]["exact_agreement"] == pytest.approx(0.5)


def _list(item: str, judge: str, temperature: float, novelty: float, appropriateness: float,
          protocol: str = "cdat") -> dict[str, Any]:
    return outcome(item, judge, temperature, 0, novelty, protocol=protocol,
                   scores={"novelty": novelty, "appropriateness": appropriateness})


def test_a_generation_run_leaves_out_judge_agreement_and_temperatures_with_one_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two models at two temperatures, the same cues: the tables would compare the models'
    # lists as verdicts on shared answers, and every list across temperatures as a "flip" (1.0).
    records = [_list(f"c{i}", model, t, 70.0 + i + t + shift, 130.0 + i)
               for i in range(5) for t in (0.5, 1.5) for model, shift in (("m1", 0.0), ("m2", 0.3))]
    s = _stats(write_run(tmp_path / "run", records), tmp_path)
    out = capsys.readouterr().out
    for name, words in (("judge_agreement", "each model is scored on lists it wrote"),
                        ("temperatures", "a list at another temperature is a new answer")):
        assert not s[name]["rows"] and s[name]["absent"].startswith("generation run (cdat): ") and words in s[name]["absent"]
        assert out.count(f"{s[name]['title']}: not shown: generation run (cdat)") == 1
    assert s["distribution"]["rows"] and s["novelty"]["rows"]  # what does apply is still there


def test_in_a_mixed_run_the_generation_judges_are_named_and_the_judges_compared(tmp_path: Path) -> None:
    records = [_list(f"c{i}", "gen", 0.0, 70.0 + i, 130.0) for i in range(4)]
    records += [outcome(f"c{i}", judge, 0.0, 0, float(i + (judge == "b"))) for i in range(4) for judge in ("a", "b")]
    s = _stats(write_run(tmp_path / "run", records), tmp_path)
    assert [r["judges"] for r in s["judge_agreement"]["rows"]] == ["a ~ b"]
    assert any(n.startswith("not shown: gen left out (generation run (cdat): ") for n in s["judge_agreement"]["notes"])


def test_beaten_by_names_the_models_that_beat_a_model(tmp_path: Path) -> None:
    # At T=1: "top" (140, 80) beats "low" (120, 60) and "mid" (130, 70) on both axes; "mid" beats
    # "low"; "odd" (150, 50) beats nobody and nobody beats it (more appropriate, less novel).
    means = {"top": (140.0, 80.0), "mid": (130.0, 70.0), "low": (120.0, 60.0), "odd": (150.0, 50.0)}
    records = [_list(f"c{i}", model, 1.0, novelty + s, appropriateness + s)
               for model, (appropriateness, novelty) in means.items() for i, s in enumerate((-1.0, 0.0, 1.0))]
    s = _stats(write_run(tmp_path / "run", records), tmp_path)
    rows = {r["point"]: (r["front"], r["beaten_by"]) for r in s["pareto"]["rows"]}
    assert rows == {"top": (True, ""), "odd": (True, ""), "mid": (False, "top"), "low": (False, "mid, top")}
    assert "beaten_by" in s["pareto"]["columns"]  # shown without any baseline
    assert any(n.startswith("beaten_by: the models, then the baselines") for n in s["pareto"]["notes"])
