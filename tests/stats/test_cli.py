"""The stats and meta commands, in-process, on hand-written runs and tables."""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main, meta, stats
from tests.stats.fixtures import sample_records, write_run


def run_json(args: list[str], tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "out.json"
    assert main([*args, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_text(encoding="utf-8"))["sections"]


def rows_by(section: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [r for r in section["rows"] if all(r.get(k) == v for k, v in match.items())]


def test_register_sets_handlers() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    stats.register(commands)
    meta.register(commands)
    args = parser.parse_args(["stats", "somewhere"])
    assert callable(args.handler)
    assert callable(parser.parse_args(["meta", "t.csv"]).handler)


def test_stats_run_dir(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", sample_records(), torn=True)
    s = run_json(["stats", str(run)], tmp_path)
    t0, t1 = rows_by(s["consistency"], judge="a")
    assert (t0["temperature"], t0["share_small"]) == (0.0, 1.0)
    # T=1 pairwise |deltas|: i1 5,0,5; i2 0; i3 25,0,25; i4 1,0,1 -> 6 small, 2 medium, 2 large
    assert (t1["share_small"], t1["share_medium"], t1["share_large"]) == pytest.approx(
        (0.6, 0.2, 0.2)
    )
    assert t1["flip_rate"] == 0.75  # i1, i3, i4 change across repeats; i2 does not
    unscored = rows_by(s["unscored"], judge="a", temperature=1.0)[0]
    assert (unscored["unscored"], unscored["n"], unscored["top_reason"]) == (1, 12, "unparseable")
    assert unscored["by_code"] == "unreadable=1"  # the count per reason code, not only a sample reason
    dist = rows_by(s["distribution"], judge="b")[0]
    assert (dist["n"], dist["max"], dist["min"]) == (4, 0.0, -12.0)
    # T=0 item means: a (-1, -16/3, 0, -10), b (-2, -5, 0, -12): same order -> tau 1
    pair = rows_by(s["judge_agreement"], judges="a ~ b", temperature=0.0)[0]
    assert pair["kendall"] == pytest.approx(1.0) and pair["n_items"] == 4


def test_stats_csv_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = write_run(tmp_path / "run", sample_records())
    out = tmp_path / "out.csv"
    assert main(["stats", str(run), "--csv", str(out), "--plots", "--quiet"]) == 0
    with out.open(encoding="utf-8") as fh:
        sections = {r["section"] for r in csv.DictReader(fh)}
    assert sections == {"consistency", "temperatures", "dimensions", "distribution", "unscored",
                        "judge_agreement"}
    names = {p.name for p in (run / "plots").iterdir()}
    assert {"consistency.png", "distributions.png", "judge_agreement.png"} <= names


def test_stats_table_repeats(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    rows = [{"g": "x", "s": "[3, 3, 3]"}, {"g": "x", "s": "[2, 2, 3]"}, {"g": "y", "s": [1, 1, 1]}]
    path.write_text(json.dumps(rows), encoding="utf-8")
    s = run_json(["stats", str(path), "--repeats", "s", "--group", "g"], tmp_path)
    assert [r["group"] for r in s["consistency"]["rows"]] == ["x", "y", "all"]
    assert rows_by(s["consistency"], group="all")[0]["flip_rate"] == pytest.approx(1 / 3)


def test_meta_run_against_human_table(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", sample_records())
    human = tmp_path / "human.csv"
    human.write_text("item,mqm,lang\ni1,-1,de\ni2,-4,de\ni3,0,en\ni4,-9,en\n", encoding="utf-8")
    s = run_json(["meta", str(run), "--human-table", str(human), "--human-key", "item",
                  "--human", "mqm", "--group", "lang", "--temperature", "0", "--agreement",
                  "--bootstrap", "50"], tmp_path)  # fmt: skip
    pooled = rows_by(s["correlation"], group="all", judge="a")[0]
    assert pooled["n"] == 4 and pooled["kendall"] == pytest.approx(1.0)
    assert pooled["ci_low"] <= 1.0
    assert [r["group"] for r in rows_by(s["correlation"], judge="b")] == ["de", "en", "all"]
    assert "agreement" in s


def test_meta_on_a_run_with_no_outcomes_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not "no rows match the human table", which sends the user looking at the wrong file."""
    run = write_run(tmp_path / "run", sample_records())
    (run / "outcomes.jsonl").write_text("", encoding="utf-8")  # started, nothing finished yet
    human = tmp_path / "human.csv"
    human.write_text("item,mqm\ni1,-1\n", encoding="utf-8")
    assert main(["meta", str(run), "--human-table", str(human), "--human-key", "item", "--human", "mqm"]) == 2
    err = capsys.readouterr().err
    assert "no outcomes" in err and "match" not in err


def test_meta_spans(tmp_path: Path) -> None:
    pred = tmp_path / "pred.jsonl"
    pred.write_text(
        json.dumps({"pid": "p1", "resp": '[{"expression": "a red sky"}, {"expression": "zzz"}]'})
        + "\n" + json.dumps({"pid": "p2", "resp": []}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    gold = tmp_path / "gold.csv"
    gold.write_text("pid,expr\np1,red sky\np1,blue sea\np2,quiet\n", encoding="utf-8")
    s = run_json(["meta", str(pred), "--human-table", str(gold), "--key", "pid",
                  "--spans", "expr=resp"], tmp_path)  # fmt: skip
    row = s["spans"]["rows"][0]
    assert (row["tp"], row["fp"], row["fn"]) == (1, 1, 2)
    assert row["f1"] == pytest.approx(2 / 5)  # 2 TP / (2 TP + FP + FN) = 2 / 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["meta", "{t}", "--human", "nope", "--pred", "s"], "no column 'nope'"),
        (["meta", "{dir}/missing.csv", "--human", "h", "--pred", "s"], "missing.csv"),
        (["meta", "{t}", "--human-table", "{t2}", "--key", "id", "--human", "h", "--pred", "s"],
         "no rows"),
        (["meta", "{t}"], "nothing to compare"),
        (["meta", "{t}", "--adequacy", "--pred", "s"], "--adequacy needs"),
        (["stats", "{dir}/nowhere"], "no such file"),
        (["stats", "{t}"], "not a run directory"),
    ],
)  # fmt: skip
def test_bad_input_exits_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.csv").write_text("id,h,s\n1,1,2\n2,2,3\n", encoding="utf-8")
    (tmp_path / "t2.csv").write_text("id,x\n9,1\n", encoding="utf-8")
    paths = {"t": tmp_path / "t.csv", "t2": tmp_path / "t2.csv", "dir": tmp_path}
    assert main([a.format(**paths) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_negate_flips_correlation(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("h,s\n1,3\n2,2\n3,1\n", encoding="utf-8")
    args = ["meta", str(tmp_path / "t.csv"), "--human", "h", "--pred", "s"]
    assert run_json(args, tmp_path)["correlation"]["rows"][0]["kendall"] == pytest.approx(-1)
    flipped = run_json([*args, "--negate", "s"], tmp_path)["correlation"]["rows"][0]
    assert flipped["kendall"] == pytest.approx(1) and not math.isnan(flipped["pearson"])
