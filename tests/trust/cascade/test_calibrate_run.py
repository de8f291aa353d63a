"""``calibrate RUN_DIR --human-table``: a small run built by hand (every kind of stage: a judge of
one request, a judge's item line over its repeats, a jury) gives the rows and costs worked out
below, so its report is ``calibrate --rows`` of those rows; the human table's problems exit 2
naming the line; a real run of the cascade off calibrates end to end."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine import calibrate
from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.fake.writers.annotators import preferred
from judge_engine.rundir.records import AttemptRecord, OutcomeRecord
from judge_engine.rundir.store import RunStore
from judge_engine.running.session import prepare
from judge_engine.trust.cascade.rows import calibration_rows
from tests.trust.cascade.conftest import cascade_job, latest, pair

RELATIVE = {"model": "openai/gpt-4o-mini", "protocol": "prometheus-relative",
            "protocol_options": {"rubric": "helpfulness", "both_orders": False}}
ITEMS = ["i1", "i2", "i3", "i4", "i5"]


def _outcome(judge: str, item: str, *, verdict: dict[str, Any] | None = None, code: str | None = None,
             confidence: dict[str, Any] | None = None, protocol: str = "prometheus-relative", n: int = 0,
             cost: float = 0.0) -> OutcomeRecord:
    return OutcomeRecord(task_id=f"b2:{judge}-{item}-{n}", item_id=item, judge=judge, protocol=protocol,
                         protocol_version="1", model="openai/gpt-4o-mini", temperature=0.0, repeat=n, variant="",
                         status="unscored" if code else "scored", score=None if code else 1.0, verdict=verdict,
                         reason=code, reason_code=code, cost=cost, confidence=confidence, row=ITEMS.index(item))


def _winner(winner: str, p: float) -> dict[str, Any]:
    return {"verdict": {"winner": winner, "feedback": "."},
            "confidence": {"method": "logprobs", "value": p, "probs": {winner: p, "AB".replace(winner, ""): 1 - p}}}


def _attempt(judge: str, item: str, n: int, cost: float) -> AttemptRecord:
    return AttemptRecord(task_id=f"b2:{judge}-{item}-{n}", judge=judge, item_id=item, attempt=1, reask=0, at="",
                         request={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "?"}]},
                         response={"content": "[RESULT] A", "finish_reason": "stop"},
                         usage={"prompt_tokens": 10, "completion_tokens": 2}, cost=cost)


def _hand_built_run(tmp_path: Path) -> Path:
    with (tmp_path / "items.jsonl").open("w", encoding="utf-8") as handle:
        for item in ITEMS:
            handle.write(json.dumps({"id": item, "instruction": "?", "response_a": "a", "response_b": "b"}) + "\n")
    config = {"dataset": {"path": "items.jsonl"}, "output": {"dir": "runs"}, "cache": {"dir": "cache"},
              "judges": [{**RELATIVE, "name": "p1", "confidence": "logprobs"},
                         {**RELATIVE, "name": "p2", "repeats": 3, "confidence": "agreement"},
                         *({**RELATIVE, "name": name} for name in ("p3a", "p3b", "p3c"))],
              "juries": [{"name": "panel", "judges": ["p3a", "p3b", "p3c"]}],
              "cascade": {"stages": ["p1", "p2", "panel"], "thresholds": "thresholds.json", "enabled": False}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    prepared = prepare(tmp_path / "config.yaml", check_keys=False)
    store = RunStore.create(prepared.run_dir, prepared.manifest)
    lines = [
        # p1, one request per item: its own line decides (logprobs)
        _outcome("p1", "i1", **_winner("A", 0.9)), _outcome("p1", "i2", **_winner("A", 0.6)),
        _outcome("p1", "i3", code="unreadable"), _outcome("p1", "i4", **_winner("B", 0.8)),
        _outcome("p1", "i5", code="transport_exhausted"),
        # p2, three repeats: its item lines decide (agreement)
        *(_outcome("p2", item, n=n, **_winner("A", 0.5)) for item in ("i1", "i2", "i3", "i5") for n in range(3)),
        _outcome("p2:item", "i1", protocol="item", verdict={"prediction": "A"}, confidence={"value": 1.0}),
        _outcome("p2:item", "i2", protocol="item", verdict={"prediction": "B"}, confidence={"value": 0.666667}),
        _outcome("p2:item", "i3", protocol="item", code="item_tie", confidence={"value": 0.5}),
        _outcome("p2:item", "i5", protocol="item", verdict={"prediction": "B"}, confidence={"value": 1.0}),
        # the panel: its jury lines decide (the share of jurors that gave its value)
        *(_outcome(j, item, **_winner("A", 0.5)) for item in ("i1", "i2", "i3", "i5") for j in ("p3a", "p3b", "p3c")),
        _outcome("panel", "i1", protocol="jury", verdict={"value": "A", "jurors": {
            "p3a": {"vote": "A", "status": "scored"}, "p3b": {"vote": "A", "status": "scored"},
            "p3c": {"vote": "B", "status": "scored"}}}),
        _outcome("panel", "i2", protocol="jury", verdict={"value": "B", "jurors": {
            n: {"vote": "B", "status": "scored"} for n in ("p3a", "p3b", "p3c")}}),
        _outcome("panel", "i3", protocol="jury", code="jury_tie", verdict={"value": None, "jurors": {}}),
        _outcome("panel", "i5", protocol="jury", code="jury_incomplete", verdict={"value": None, "jurors": {
            "p3a": {"vote": None, "status": "unscored", "reason_code": "transport_exhausted"}}}),
    ]
    for line in lines:
        store.write_outcome(line)
    # Spend: p1 0.05 over its 5 items; p2 0.12 over 4; each juror 0.02 over 4.
    for item in ITEMS:
        store.write_transcript(_attempt("p1", item, 0, 0.01))
    for item in ("i1", "i2", "i3", "i5"):
        store.write_transcript(_attempt("p2", item, 0, 0.03))
        for juror in ("p3a", "p3b", "p3c"):
            store.write_transcript(_attempt(juror, item, 0, 0.005))
    store.close()
    return prepared.run_dir


EXPECTED_ROWS = [  # item, stage, prediction, confidence, label (i4 has no label)
    ("i1", "p1", "A", 0.9, "A"), ("i1", "p2", "A", 1.0, "A"), ("i1", "panel", "A", 2 / 3, "A"),
    ("i2", "p1", "A", 0.6, "B"), ("i2", "p2", "B", 0.666667, "B"), ("i2", "panel", "B", 1.0, "B"),
    ("i3", "p1", None, None, "A"), ("i3", "p2", None, None, "A"), ("i3", "panel", None, None, "A"),
    ("i5", "p1", None, None, "B"), ("i5", "p2", "B", 1.0, "B"), ("i5", "panel", None, None, "B"),
]
EXPECTED_COSTS = {"p1": 0.01, "p2": 0.03, "panel": 0.015}


def _human_table(tmp_path: Path) -> Path:
    path = tmp_path / "human.csv"
    path.write_text("id,human,note\ni1,A,x\ni2,B,\ni3,A,\ni4,,unsure\ni5,B,\nghost,A,not judged\n", encoding="utf-8")
    return path


def test_calibrate_run_dir_is_calibrate_rows_of_the_stages_decisions(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = _hand_built_run(tmp_path)
    found = calibration_rows(run, human_table=_human_table(tmp_path), key="id", label="human")
    got = sorted((r["item"], r["stage"], r["prediction"], r["confidence"], r["label"]) for r in found.rows)
    assert got == sorted(EXPECTED_ROWS, key=lambda r: (r[0], r[1]))
    assert found.stages == ["p1", "p2", "panel"]
    assert found.costs == pytest.approx(EXPECTED_COSTS)
    assert any("1 items the run judged have no human label" in n for n in found.notes)
    assert any("1 labelled items are not in" in n for n in found.notes)
    assert any(n.startswith("p1: 1 items have no decision for a reason outside the answers") for n in found.notes)
    assert any(n.startswith("panel: 1 items have no decision") for n in found.notes)
    settings = ["--risk", "0.5", "--delta", "0.5", "--min-items", "1"]
    assert main(["calibrate", str(run), "--human-table", str(tmp_path / "human.csv"), "--key", "id", "--label",
                 "human", *settings, "--json", str(tmp_path / "run.json")]) == 0
    with (tmp_path / "rows.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["item", "stage", "prediction", "confidence", "label"])
        writer.writerows([["" if v is None else repr(v) if isinstance(v, float) else v for v in row]
                          for row in EXPECTED_ROWS])
    costs = ",".join(f"{stage}={cost!r}" for stage, cost in found.costs.items()) if found.costs else ""
    assert main(["calibrate", "--rows", str(tmp_path / "rows.csv"), "--stages", "p1,p2,panel", "--costs", costs,
                 *settings, "--json", str(tmp_path / "rows.json")]) == 0
    from_run, from_rows = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("run", "rows"))
    assert from_run == from_rows
    assert from_run["stages"][0]["judged"] == 2 and from_run["items"] == 4
    assert calibrate(found.rows, stages=found.stages, risk=0.5, delta=0.5, min_items=1, costs=found.costs) == from_run


def test_the_cascade_guarantee_takes_the_runs_unlabelled_items(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """i4 has no human label: under --guarantee cascade its rows come with label None (they order
    the tests and are never calibrated on); under the stage guarantee they stay out."""
    run = _hand_built_run(tmp_path)
    found = calibration_rows(run, human_table=_human_table(tmp_path), key="id", label="human", unlabelled=True)
    unlabelled = sorted((r["stage"], r["prediction"], r["confidence"]) for r in found.rows if r["label"] is None)
    assert unlabelled == [("p1", "B", 0.8)]  # i4: only p1 judged it
    assert any("1 items the run judged have no human label: their confidences order the cascade guarantee's tests"
               in n for n in found.notes)
    settings = ["--risk", "0.5", "--delta", "0.5", "--min-items", "1"]
    assert main(["calibrate", str(run), "--human-table", str(tmp_path / "human.csv"), "--key", "id", "--label",
                 "human", *settings, "--guarantee", "cascade", "--json", str(tmp_path / "whole.json")]) in (0, 3)
    document = json.loads((tmp_path / "whole.json").read_text())
    assert document["guarantee"] == "cascade"
    assert (document["items"], document["calibration"]["unlabelled"], document["ordering"]["unlabelled"]) == (4, 1, 1)


@pytest.mark.parametrize(("table", "message"), [
    ("item,human\ni1,A\n", "no column 'id' (columns: item, human); --key names the item id column"),
    ("id,verdict\ni1,A\n", "no column 'human'"),
    ("id,human\ni1,A\ni2,B\ni1,B\n", "human.csv: line 4: item 'i1' labelled 'B', but "),
    ("id,human\ni1,A\ni2,B\ni1,B\n", "human.csv: line 2 labelled it 'A'"),  # both lines named (issue 35.5)
    ("id,human\n,A\n", "human.csv: line 2: no item id in column 'id'"),
])
def test_a_bad_human_table_exits_2_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str,
                                                    message: str) -> None:
    run = _hand_built_run(tmp_path)
    (tmp_path / "human.csv").write_text(table, encoding="utf-8")
    assert main(["calibrate", str(run), "--human-table", str(tmp_path / "human.csv"), "--label", "human",
                 "--risk", "0.2", "--delta", "0.2"]) == 2
    assert message in capsys.readouterr().err


def test_a_human_tables_identical_duplicates_are_counted_and_said(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35.5: two rows that label i1 and i2 again with the same labels were read silently.
    Now the report (and, with --json, standard error) counts them and names the first one's
    lines; the calibration is the one without them."""
    run = _hand_built_run(tmp_path)
    settings = ["--label", "human", "--risk", "0.5", "--delta", "0.5", "--min-items", "1"]
    (tmp_path / "once.csv").write_text("id,human\ni1,A\ni2,B\ni3,A\ni5,B\n", encoding="utf-8")
    (tmp_path / "twice.csv").write_text("id,human\ni1,A\ni2,B\ni3,A\ni5,B\ni1,A\ni2, B\n", encoding="utf-8")
    note = (f"{tmp_path / 'twice.csv'}: 2 duplicate rows (an item labelled again with the same label, e.g. 'i1' on "
            "line 6, first on line 2): each is counted once")
    assert main(["calibrate", str(run), "--human-table", str(tmp_path / "twice.csv"), *settings]) == 0
    assert note in " ".join(capsys.readouterr().out.split())  # a long tmp path wraps
    documents = []
    for table in ("once", "twice"):
        assert main(["calibrate", str(run), "--human-table", str(tmp_path / f"{table}.csv"), *settings, "--json"]) == 0
        captured = capsys.readouterr()
        documents.append(json.loads(captured.out))
    assert f"judge-engine calibrate: {note}" in captured.err.splitlines()
    assert documents[0] == documents[1] and documents[1]["items"] == 4


def test_a_one_row_human_table_says_how_many_labelled_items_are_needed(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35.5: one labelled item (i2, which p1 gets wrong) was refused with "stage 'p1': its
    predictions (A) never take a value the labels take (B)", exit 2. A threshold is tested from 30
    items, so nothing can be answered: exit 3, saying so and how many items are needed."""
    run = _hand_built_run(tmp_path)
    (tmp_path / "human.csv").write_text("id,human\ni2,B\n", encoding="utf-8")
    assert main(["calibrate", str(run), "--human-table", str(tmp_path / "human.csv"), "--label", "human",
                 "--risk", "0.2", "--delta", "0.2", "--json"]) == 3
    err = capsys.readouterr().err
    assert "never take a value" not in err
    assert ("judge-engine calibrate: 1 labelled item to calibrate on: at least 30 labelled items are needed, the "
            "fewest a threshold is tested with (--min-items 30)") in err.splitlines()


def test_a_run_of_the_cascade_off_calibrates_and_its_thresholds_run_the_cascade(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = cascade_job(tmp_path, fake_server, thresholds={"cheap": 0.9, "mid": 0.9, "strong": 0.9}, items=40)
    assert main(["run", str(job.config), "--no-cascade", "--no-live"]) == 0
    run = job.only_run()
    with (tmp_path / "human.csv").open("w", encoding="utf-8") as handle:
        handle.write("id,label\n" + "".join(f"{p['id']},{preferred(p['instruction'], p['response_a'], p['response_b'])}\n"
                                            for p in map(pair, range(40))))
    capsys.readouterr()
    assert main(["calibrate", str(run), "--human-table", str(tmp_path / "human.csv"), "--label", "label",
                 "--risk", "0.25", "--delta", "0.25", "--min-items", "10", "--output",
                 str(tmp_path / "thresholds.json")]) == 0
    said = capsys.readouterr().out
    assert "guaranteed: agreement with humans >= 75% on answered items" in said and "cost per item" in said
    document = json.loads((tmp_path / "thresholds.json").read_text())
    assert [s["stage"] for s in document["stages"]] == ["cheap", "mid", "strong"]
    assert all(s["cost_per_item"] > 0 for s in document["stages"]), "each stage's cost from the run's own spend"
    assert document["calibration"]["items"] == 40
    assert main(["run", str(job.config), "--no-live"]) == 0
    cascaded = next(p for p in job.run_dirs() if p != run)
    assert len(latest(cascaded, "cascade")) == 40
