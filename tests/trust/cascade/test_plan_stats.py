"""``plan`` estimates a cascade from its calibration's escalation rates; ``stats`` shows its
coverage, each stage's share, agreement with a human table and its cost against the last stage
alone, on a run whose figures are worked out by hand."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.rundir.records import AttemptRecord, OutcomeRecord
from judge_engine.rundir.store import RunStore, read_manifest
from judge_engine.running.estimate import expected_plans, plan_rows, stage_costs
from judge_engine.running.session import prepare
from tests.trust.cascade.conftest import cascade_job, write_thresholds_file


def test_plan_estimates_each_stage_from_the_calibrations_share_of_items(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = cascade_job(tmp_path, None, thresholds={"cheap": 0.9, "mid": 0.8, "strong": 0.7})
    # The calibration: 200 items, cheap asked about all, mid about 80 (40%), strong about 20 (10%).
    write_thresholds_file(tmp_path / "thresholds.json", ["cheap", "mid", "strong"],
                          {"cheap": 0.9, "mid": 0.8, "strong": 0.7}, offered={"cheap": 200, "mid": 80, "strong": 20},
                          items=200)
    prepared = prepare(job.config, check_keys=False)
    assert prepared.cascade is not None
    plans = {p.judge: p for p in plan_rows(prepared)}
    full = {name: plans[name].cost for name in ("cheap", "mid", "strong")}
    assert all(c is not None for c in full.values())
    low = full["cheap"].low + 0.4 * full["mid"].low + 0.1 * full["strong"].low  # type: ignore[union-attr]
    alone = full["strong"].low  # type: ignore[union-attr]
    scaled = {p.judge: p for p in expected_plans(prepared.cascade, list(plans.values()))}
    assert [scaled[n].tasks for n in ("cheap", "mid", "strong")] == [144, round(144 * 0.4), round(144 * 0.1)]
    assert scaled["mid"].cost.low == pytest.approx(0.4 * full["mid"].low)  # type: ignore[union-attr]
    assert stage_costs(prepared.cascade, list(plans.values()))["strong"] == (alone, full["strong"].high)  # type: ignore[union-attr]
    capsys.readouterr()
    assert main(["plan", str(job.config)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "mid: answers at confidence >= 0.8000; reached by 40% of the calibration items" in said
    found = re.search(r"expected cost \$([0-9.]+)(?:-[0-9.]+)? against \$([0-9.]+)(?:-[0-9.]+)? for strong", said)
    assert found is not None, said
    assert float(found.group(1)) == pytest.approx(low, abs=5e-5)
    assert float(found.group(2)) == pytest.approx(alone, abs=5e-5)
    assert f"({100 * low / alone:.0f}%)" in said


# --- stats on a hand-built cascaded run ---------------------------------------------------------------

STAGES = ["cheap", "mid", "strong"]
#          item: (stage answered or None, the route at each stage asked, prediction, held at)
ENDINGS: dict[str, tuple[str | None, list[str], str | None, str | None]] = {
    "i0": ("cheap", ["answer"], "A", None), "i1": ("cheap", ["answer"], "A", None),
    "i2": ("cheap", ["answer"], "B", None), "i3": ("cheap", ["answer"], "B", None),
    "i4": ("cheap", ["answer"], "A", None),
    "i5": ("mid", ["escalate", "answer"], "A", None), "i6": ("mid", ["escalate", "answer"], "B", None),
    "i7": ("strong", ["escalate", "escalate", "answer"], "A", None),
    "i8": (None, ["escalate", "escalate", "escalate"], None, None),
    "i9": (None, ["escalate", "hold"], None, "mid"),
}
HUMAN = {"i0": "A", "i1": "A", "i2": "B", "i3": "A", "i4": "A", "i5": "A", "i6": "A", "i7": "A", "i8": "B"}
"""i3 disagrees with cheap, i6 with mid; i9 has no label."""
SPEND = {"cheap": 0.10, "mid": 0.20, "strong": 0.30}
"""Spent over the items each judged: cheap 10, mid 5 (i5-i9), strong 2 (i7, i8)."""


def _cascade_line(item: str) -> OutcomeRecord:
    stage, routes, prediction, held = ENDINGS[item]
    asked = [{"stage": s, "route": r, "prediction": prediction if r == "answer" else None,
              "confidence": 0.9 if r == "answer" else 0.5, "threshold": 0.8} for s, r in zip(STAGES, routes, strict=False)]
    code = None if stage else "item_incomplete" if held else "abstained"
    return OutcomeRecord(task_id=f"b2:cascade-{item}", item_id=item, judge="cascade", protocol="cascade",
                         protocol_version="1", model="m", temperature=0.0, repeat=0, variant="",
                         status="scored" if stage else "unscored", score=1.0 if stage else None, reason_code=code,
                         verdict={"stage": stage, "prediction": prediction, "confidence": 0.9 if stage else None,
                                  "threshold": 0.8, "held_at": held, "asked": asked, "not_asked": []})


def _judged(judge: str, item: str, cost: float) -> tuple[OutcomeRecord, AttemptRecord]:
    task = f"b2:{judge}-{item}"
    return (OutcomeRecord(task_id=task, item_id=item, judge=judge, protocol="pairwise-annotators",
                          protocol_version="1", model="m", temperature=0.0, repeat=0, variant="", status="scored",
                          score=1.0, verdict={"label": "A"}),
            AttemptRecord(task_id=task, judge=judge, item_id=item, attempt=1, reask=0, at="",
                          request={"model": "m", "messages": [{"role": "user", "content": "?"}]},
                          response={"content": "[[A]]", "finish_reason": "stop"}, usage={"prompt_tokens": 1}, cost=cost))


def _hand_built_cascaded_run(tmp_path: Path) -> Path:
    job = cascade_job(tmp_path, None, thresholds={"cheap": 0.8, "mid": 0.8, "strong": 0.8}, items=10)
    config = yaml.safe_load(job.config.read_text())
    config["cascade"]["enabled"] = False
    job.config.write_text(yaml.safe_dump(config))
    prepared = prepare(job.config, check_keys=False)
    section: dict[str, Any] = {"name": "cascade", "items": 10, "thresholds": str(tmp_path / "thresholds.json"),
                               "guarantee": "agreement with humans >= 80%", "stages": [
                                   {"stage": s, "judges": [s], "decides": f"{s}:item", "threshold": 0.8, "asked": True,
                                    "reached": n, "held": int(s == "mid"), "waiting": 0}
                                   for s, n in zip(STAGES, (10, 5, 2), strict=True)]}
    prepared.manifest.cascade = section
    store = RunStore.create(prepared.run_dir, prepared.manifest)
    for judge, items in (("cheap", list(ENDINGS)), ("mid", ["i5", "i6", "i7", "i8", "i9"]), ("strong", ["i7", "i8"])):
        for item in items:
            outcome, attempt = _judged(judge, item, SPEND[judge] / len(items))
            store.write_transcript(attempt)
            store.write_outcome(outcome)
    for item in ENDINGS:
        store.write_outcome(_cascade_line(item))
    store.close()
    return prepared.run_dir


def test_stats_shows_coverage_shares_agreement_and_cost_against_the_last_stage_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _hand_built_cascaded_run(tmp_path)
    (tmp_path / "human.csv").write_text("id,label\n" + "".join(f"{k},{v}\n" for k, v in HUMAN.items()))
    assert main(["stats", str(run), "--human-table", str(tmp_path / "human.csv"), "--label", "label",
                 "--json", str(tmp_path / "stats.json")]) == 0
    section = json.loads((tmp_path / "stats.json").read_text())["sections"]["cascade"]
    rows = {r["stage"]: r for r in section["rows"]}
    # i8 is abstained after strong, the last stage: not sent on (issue 34: it read "escalated 1")
    assert [(rows[s]["reached"], rows[s]["answered"], rows[s]["escalated"], rows[s]["abstained"], rows[s]["held"])
            for s in STAGES] == [(10, 5, 5, 0, 0), (5, 2, 2, 0, 1), (2, 1, 0, 1, 0)]
    assert all(rows[s]["reached"] == rows[s]["answered"] + rows[s]["escalated"] + rows[s]["abstained"]
               + rows[s]["held"] for s in STAGES)
    assert [rows[s]["share"] for s in STAGES] == [0.5, 0.2, 0.1]
    assert rows["cheap"]["agreement"] == 0.8 and rows["mid"]["agreement"] == 0.5 and rows["strong"]["agreement"] == 1.0
    total = rows["cascade"]
    assert total["answered"] == 8 and total["share"] == 0.8 and total["abstained"] == 1 and total["held"] == 1
    assert total["agreement"] == 6 / 8 and total["labelled"] == 8
    assert total["cost"] == pytest.approx(0.6)
    assert total["alone"] == pytest.approx(0.30 / 2 * 10)  # strong's cost per item it judged, on all 10 items
    assert total["ratio"] == pytest.approx(0.6 / 1.5)
    said = " ".join(capsys.readouterr().out.split())
    assert "coverage 80.0%: 8 of 10 items answered, 1 abstained (no stage sure enough), 1 held" in said
    assert "strong alone on all 10 items: about $1.50 (its cost per item in this run); ratio 40.0%" in said
    assert main(["status", str(run)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "answered by cheap 5, mid 2, strong 1; 1 abstained" in said


@pytest.mark.parametrize("columns", ["80", "240"], ids=["long layout", "table"])
def test_stats_writes_the_cascade_costs_as_dollars(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    """The cost column is dollars as money.dollars writes them (SPEND: $0.10, $0.20, $0.30; the
    cascade $0.60), at 80 columns (a block per row) and wide (a table); JSON keeps the numbers."""
    monkeypatch.setenv("COLUMNS", columns)
    run = _hand_built_cascaded_run(tmp_path)
    assert main(["stats", str(run), "--json", str(tmp_path / "stats.json")]) == 0
    out = capsys.readouterr().out
    shown = out[out.index("cascade: agreement with humans"):]
    for cost in ("$0.10", "$0.20", "$0.30", "$0.60"):
        assert re.search(rf"[\s│]{re.escape(cost)}[\s│]", shown), cost
    said = " ".join(shown.split())
    assert "the cascade cost $0.60; strong alone on all 10 items: about $1.50" in said
    rows = json.loads((tmp_path / "stats.json").read_text())["sections"]["cascade"]["rows"]
    assert [r["cost"] for r in rows] == pytest.approx([0.10, 0.20, 0.30, 0.60])


def test_stats_without_a_human_table_says_how_to_get_agreement(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    run = _hand_built_cascaded_run(tmp_path)
    assert main(["stats", str(run), "--json", str(tmp_path / "stats.json")]) == 0
    section = json.loads((tmp_path / "stats.json").read_text())["sections"]["cascade"]
    assert all(r["agreement"] is None or math.isnan(r["agreement"]) for r in section["rows"])
    assert "agreement with humans: give --human-table FILE --key ID --label COLUMN" in section["notes"]
    assert read_manifest(run).cascade is not None
