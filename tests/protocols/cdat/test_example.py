"""``examples/cdat`` end to end, as a user runs it: ``run --demo``, then ``stats --baselines`` with
the example's baseline files; every generation section is there and finite, the plane is drawn;
the bad inputs of ``--baselines``; and the example without the embeddings extra."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.protocols import embeddings
from judge_engine.protocols.embeddings import minilm_problem

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "cdat"
GENERATION = ["valid_responses", "novelty", "appropriateness", "gate", "cdat_score", "elbow", "pareto"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example run with --demo, once for the module (the embedder loads once per process)."""
    if minilm_problem():
        pytest.skip(minilm_problem() or "")
    out = tmp_path_factory.mktemp("cdat")
    shutil.copytree(EXAMPLE, out / "cdat", ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    assert main(["run", str(out / "cdat" / "config.yaml"), "--demo", "--no-live", "--allow-unscored"]) == 0
    return out / "cdat" / "runs" / "latest"


def _stats(run: Path, tmp_path: Path, *args: str) -> dict[str, Any]:
    report = tmp_path / "report.json"
    assert main(["stats", str(run), "--json", str(report), *args]) == 0
    sections: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))["sections"]
    return sections


@pytest.mark.slow
def test_the_demo_run_holds_every_judge_and_some_lists_too_few_to_score(demo_run: Path) -> None:
    outcomes = [json.loads(line) for line in (demo_run / "outcomes.jsonl").read_text().splitlines()]
    assert len(outcomes) == 12 * 2 * 3  # cues x temperatures x judges
    assert {o["reason_code"] for o in outcomes} == {None, "too_few_valid"}
    assert {o["protocol"] for o in outcomes} == {"cdat", "dat"}


def test_stats_with_both_baselines_shows_every_section_finite(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plots = tmp_path / "plots"
    s = _stats(demo_run, tmp_path, "--baselines", str(EXAMPLE / "random.json"), str(EXAMPLE / "common.json"),
               "--plots", str(plots))
    assert all(s[name]["rows"] and not s[name]["absent"] for name in GENERATION)
    out = capsys.readouterr().out
    assert ": not shown:" not in out.split("Valid responses")[1]  # every generation section is a table
    valid = {(r["judge"], r["temperature"]): r for r in s["valid_responses"]["rows"]}
    assert set(valid) == {(j, t) for j in ("gpt-4o-mini", "claude-haiku", "gpt-4o-mini-dat") for t in (0.5, 1.5)}
    assert all(r["answers"] == 12 and 0 < r["valid"] <= 12 and r["rate"] == r["valid"] / 12 for r in valid.values())
    assert any(r["valid"] < 12 for r in valid.values())
    # The DAT judge has novelty, no appropriateness, no gate.
    assert {r["judge"] for r in s["novelty"]["rows"]} == {"gpt-4o-mini", "claude-haiku", "gpt-4o-mini-dat"}
    assert {r["judge"] for r in s["gate"]["rows"]} == {"gpt-4o-mini", "claude-haiku"}
    for name, keys in (("gate", ("mean", "t", "p", "p_bh", "random")), ("elbow", ("elbow", "ci_low", "ci_high")),
                       ("pareto", ("appropriateness", "novelty"))):
        assert all(math.isfinite(r[k]) for r in s[name]["rows"] for k in keys), name
    gate = s["gate"]["rows"]
    assert all(r["passed"] == (r["p_bh"] <= 0.001 and r["mean"] > r["random"]) for r in gate)
    passed = {(r["judge"], r["temperature"]) for r in gate if r["passed"]}
    assert {(r["judge"], r["temperature"]) for r in s["cdat_score"]["rows"]} == passed and passed
    novelty = {(r["judge"], r["temperature"]): r["mean"] for r in s["novelty"]["rows"]}
    assert all(r["cdat"] == novelty[(r["judge"], r["temperature"])] for r in s["cdat_score"]["rows"])
    front = [r for r in s["pareto"]["rows"] if r["front"]]
    assert {r["point"] for r in s["pareto"]["rows"]} >= {"Random", "Common"} and front
    assert {p.name for p in plots.iterdir()} == {"distributions.png", "cdat_plane.png"}  # no agreement between models
    assert (plots / "cdat_plane.png").read_bytes()[:4] == b"\x89PNG"


def test_stats_with_random_only_explains_the_elbow_in_one_line(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = _stats(demo_run, tmp_path, "--baselines", str(EXAMPLE / "random.json"))
    assert s["gate"]["rows"] and s["elbow"]["absent"].startswith("needs both baselines")
    assert any("Common not given" in n for n in s["pareto"]["notes"])
    out = capsys.readouterr().out
    assert out.count("Elbow distance from the Common-Random line: not shown: needs both baselines") == 1


@pytest.mark.parametrize(("files", "words"), [
    (["nowhere.json"], "nowhere.json: baseline file not found"),
    (["common.json", "random.json"], "given as Random"),
    (["random.json", "common.json", "random.json"], "not 3 files"),
])
def test_bad_baselines_are_exit_2_naming_the_file(
    files: list[str], words: str, demo_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", str(demo_run), "--baselines", *(str(EXAMPLE / f) for f in files)]) == 2
    assert words in capsys.readouterr().err


def test_without_the_embeddings_extra_the_example_refuses_to_start_and_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(embeddings, "minilm_missing", lambda: ["torch", "sentence_transformers"])
    code = main(["run", str(EXAMPLE / "config.yaml"), "--demo", "--no-live", "--output", str(tmp_path / "runs"),
                 "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'judge-engine[embeddings]'" in err
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in err  # the CPU build, not PyPI's CUDA one
    assert "embedder: none" in err and not (tmp_path / "runs").exists()  # nothing sent, nothing spent
