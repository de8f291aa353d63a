"""Demo judges disagree as real ones do (issue 26): the README's example with its model swapped,
and a jury of three demo judges, opened in the viewer, have items to sort by disagreement; the
jury's jurors do not all agree. (API tests: no browser needed.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from tests.viewer.conftest import run_demo

MODELS = ("openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash")


def _beside_literary_mt(examples: Path, name: str, judges: list[dict[str, Any]], **extra: Any) -> Path:
    """A config of its own over the literary_mt example's items (its runs apart from the example's)."""
    folder = examples / name
    folder.mkdir(exist_ok=True)
    config = yaml.safe_load((examples / "literary_mt" / "config.yaml").read_text(encoding="utf-8"))
    config.update(judges=judges, **extra)
    config["dataset"]["path"] = "../literary_mt/items.jsonl"
    (folder / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return folder


def _spreads(viewer: Any) -> list[float]:
    page = viewer.json("api/tasks?sort=disagreement&size=200")
    return [row["spread"] for row in page["rows"]]


@pytest.mark.slow
def test_the_readme_example_with_its_model_swapped_disagrees_with_itself(
        served: Any, examples: Path, demo_runs: dict[str, Path]) -> None:
    """``run examples/literary_mt/config.yaml --demo --model anthropic/claude-sonnet-4-5`` beside
    the example's own run: the same judge name, another model, other scores (every spread was 0)."""
    judge = yaml.safe_load((examples / "literary_mt" / "config.yaml").read_text(encoding="utf-8"))["judges"]
    _beside_literary_mt(examples, "literary_mt_swapped", judge)
    swapped = run_demo(examples, "literary_mt_swapped", model="anthropic/claude-sonnet-4-5")
    viewer = served([demo_runs["literary_mt"], swapped]).ready()
    spreads = _spreads(viewer)
    assert len(spreads) == 40 and spreads == sorted(spreads, reverse=True)
    assert sum(s > 0 for s in spreads) >= 20  # most items: measured 17 of 20 (34 of 40 rows)
    top = viewer.json(f"api/item?id={viewer.json('api/tasks?sort=disagreement&size=1')['rows'][0]['item_id']}")
    assert {t["run"] for t in top["tasks"]} == {0, 1} and top["spread"] == spreads[0] > 0


def test_a_jury_of_three_demo_judges_does_not_always_agree(
        served: Any, examples: Path, tmp_path: Path, capsys: Any) -> None:
    judges = [{"name": model.split("/")[1], "model": model, "protocol": "gemba-mqm", "temperatures": [0.0],
               "max_tokens": 500} for model in MODELS]
    jury = {"name": "panel", "judges": [j["name"] for j in judges], "aggregate": "median"}
    _beside_literary_mt(examples, "literary_mt_jury", judges, juries=[jury])
    run = run_demo(examples, "literary_mt_jury")
    outcomes = [json.loads(line) for line in (run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()]
    panel = [o for o in outcomes if o["judge"] == "panel"]
    assert len(panel) == 20 and all(o["status"] == "scored" for o in panel)
    agreement = [o["verdict"]["agreement"] for o in panel]
    assert min(agreement) < 1 and sum(a < 1 for a in agreement) >= 10  # jurors split on most items
    report = tmp_path / "stats.json"
    assert main(["stats", str(run), "--json", str(report)]) == 0
    (row,) = json.loads(report.read_text(encoding="utf-8"))["sections"]["jury_agreement"]["rows"]
    assert row["n_items"] == 20 and row["exact_agreement"] < 1 and row["value"] < 1  # measured: 0.18, ICC 0.38
    capsys.readouterr()

    viewer = served([run]).ready()
    spreads = _spreads(viewer)
    assert spreads == sorted(spreads, reverse=True) and spreads[0] > 0
    assert sum(s > 0 for s in spreads) >= len(spreads) // 2
