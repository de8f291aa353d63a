"""The viewer's pieces on their own: segments, the search query, the list's filter, the
closed-form alpha, and the command line."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from judge_engine.stats.agreement import krippendorff_alpha
from judge_engine.viewer.catalog import Judge
from judge_engine.viewer.queries import filter_from, fts_query
from judge_engine.viewer.summary import interval_alpha
from judge_engine.viewer.verdicts import segments


def test_segments_cut_at_every_boundary_of_overlapping_spans() -> None:
    #            0123456789
    text = "abcdefghij"
    pieces = segments(text, [(2, 6, 0), (4, 8, 1), (4, 5, 2)])
    assert [(p["text"], p["marks"]) for p in pieces] == [
        ("ab", []), ("cd", [0]), ("e", [0, 1, 2]), ("f", [0, 1]), ("gh", [1]), ("ij", [])]
    assert segments("", []) == []
    assert segments("abc", []) == [{"text": "abc", "marks": []}]


def test_the_search_box_never_speaks_fts5() -> None:
    assert fts_query("Lampe") == '"Lampe"*'
    assert fts_query("  lamp   burn ") == '"lamp" "burn"*'
    assert fts_query('say "hi"') == '"say" """hi"""*'
    assert fts_query("AND OR") == '"AND" "OR"*'  # words, not operators
    assert fts_query("* ( ) -") is None


def test_a_shared_link_with_odd_values_still_opens() -> None:
    judges = [Judge(0, "a", "a", None), Judge(1, "a", "a (run)", None)]
    f = filter_from({"judge": "a (run),nope", "status": "weird", "sort": "sideways", "page": "0", "size": "9999"}, judges)
    assert f.judges == ("a (run)",) and f.status is None and f.sort == "item" and f.page == 1 and f.size == 200


def test_the_plan_of_judges_and_juries() -> None:
    """Item-variants x temperatures x repeats; a jury has the coordinates its jurors share."""
    from judge_engine.rundir.records import JudgeEntry, Manifest

    def entry(name: str, temperatures: list[float], repeats: int) -> JudgeEntry:
        return JudgeEntry(name, "m", "prometheus-relative", "1", {}, {}, temperatures, repeats, None,
                          len(temperatures) * repeats)

    manifest = Manifest(
        run_id="r", status="running", created_at="", updated_at="", package_version="", versions={}, demo=False,
        config_path="", config_path_from_run="", config={"juries": [{"name": "panel", "judges": ["a", "b"]}]},
        overrides={}, dataset={"items": 10, "variants": [20, 20]},
        judges=[entry("a", [0.0, 0.7], 3), entry("b", [0.7, 1.0], 2)])  # fmt: skip
    assert manifest.planned_tasks("a") == 20 * 2 * 3 and manifest.planned_tasks("b") == 20 * 2 * 2
    assert manifest.planned_tasks("panel") == 20 * 1 * 2  # T 0.7 only, repeats 0 and 1
    assert manifest.planned_tasks("nobody") is None
    older = Manifest.from_dict({**manifest.to_dict(), "dataset": {"items": 10}})  # no variants recorded
    assert older.planned_tasks("a") == 10 * 6


def _line(task: str, attempt: int, *, reask: int = 0, error: str | None = None, batch: bool = False) -> dict[str, object]:
    line: dict[str, object] = {"v": 2, "task_id": task, "judge": "j", "item_id": "i", "attempt": attempt,
                               "reask": reask, "at": "", "request": {}, "latency_s": 0.0}
    if error is not None:
        line["error"] = {"kind": error, "status": 500 if error == "retry" else 429, "message": error}
    else:
        line.update(response={"content": "x"}, usage={"prompt_tokens": 1, "completion_tokens": 1}, cost=0.5)
    if batch:
        line["batch"] = {"id": "b", "custom_id": "c", "chunk": "0"}
    return line


def test_the_tally_counts_retries_as_the_summary_does() -> None:
    """A retry is a transport failure within the task's budget (the one past it ends the task);
    429s do not use the budget; a re-ask counts once; a new session starts its attempts at 1."""
    from judge_engine.viewer.summary import AttemptTally

    tally = AttemptTally(budgets={"j": 2})
    lines = [
        _line("a", 1, error="retry"), _line("a", 2, error="rate_limited"), _line("a", 3, error="retry"),
        _line("a", 4),  # a: two retries, then an answer
        _line("b", 1, error="retry"), _line("b", 2, error="retry"), _line("b", 3, error="retry"),  # b: exhausted
        _line("b", 1, error="retry"), _line("b", 2),  # b again, a session later: one retry
        _line("c", 1), _line("c", 2, reask=1, error="rate_limited"), _line("c", 3, reask=1),  # one re-ask
        _line("d", 1, error="retry", batch=True), _line("d", 2, batch=True),  # a batch round, not a retry
        _line("e", 1, error="retry"),  # e: stopped (Ctrl-C) in its backoff: a retry was due
        _line("e", 1, error="retry"), _line("e", 2, error="retry"), _line("e", 3, error="retry"),  # resumed: two
    ]
    for line in lines[:6]:
        tally.add(line)
    tally = AttemptTally(tally.state(), budgets={"j": 2})  # the pass goes on from where it stopped
    for line in lines[6:]:
        tally.add(line)
    figures = tally.judges()["j"]
    assert (figures["retries"], figures["transport_errors"], figures["rate_limited"], figures["reasks"]) == (8, 11, 2, 1)
    assert figures["calls"] == len(lines) and figures["cost"] == 2.5 and tally.pending == {}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # krippendorff divides by zero on constant data
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.integers(-25, 0)), min_size=3, max_size=3), min_size=2, max_size=30))
def test_interval_alpha_is_krippendorffs(rows: list[list[int | None]]) -> None:
    matrix = np.array([[math.nan if v is None else float(v) for v in row] for row in rows])
    expected = krippendorff_alpha(rows, level="interval")
    found = interval_alpha(matrix)
    assert (math.isnan(found) and math.isnan(expected)) or math.isclose(found, expected, abs_tol=1e-9)


@pytest.mark.slow
def test_view_check_serves_once_and_exits(demo_runs: dict[str, Path]) -> None:
    result = subprocess.run([sys.executable, "-m", "judge_engine.cli", "view", str(demo_runs["literary_mt"]), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "viewer ok at http://127.0.0.1:" in result.stdout and "20 tasks" in result.stdout
    assert "DEMO RUN" in result.stdout


@pytest.mark.slow
def test_view_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "judge_engine.cli", "view", str(tmp_path), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "not a judge-engine run directory" in result.stderr


@pytest.mark.slow
def test_a_wider_bind_warns(demo_runs: dict[str, Path]) -> None:
    result = subprocess.run([sys.executable, "-m", "judge_engine.cli", "view", str(demo_runs["literary_mt"]), "--check",
                             "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "warning: listening on 0.0.0.0" in result.stdout


def test_the_viewer_reads_runs_and_never_imports_the_engine() -> None:
    import ast

    import judge_engine

    engine = ("judge_engine.running.engine", "judge_engine.running.task", "judge_engine.running.attempt", "judge_engine.lanes",
              "judge_engine.running.session", "judge_engine.running.cache", "judge_engine.cli", "judge_engine.running.runtime")
    for path in (Path(judge_engine.__file__).parent / "viewer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(engine), (path.name, node.module)


def test_a_generation_list_shows_each_word_valid_or_dropped_and_why() -> None:
    from judge_engine.rundir.records import OutcomeRecord
    from judge_engine.viewer.verdicts import card

    verdict = {"words": ["river", "run", "apple", "river"], "valid_words": ["river", "apple"],
               "dropped": [{"word": "run", "reason": "not_a_noun"}, {"word": "", "reason": "no_letters"},
                           {"word": "river", "reason": "duplicate"}], "lexicon": "packaged"}
    outcome = OutcomeRecord(task_id="t", item_id="i", judge="j", protocol="cdat", protocol_version="1", model="m",
                            temperature=0.5, repeat=0, variant="", status="unscored", verdict=verdict,
                            reason_code="too_few_valid")
    shown = card(outcome, {"id": "i", "cue": "water"}, None)
    assert shown["kind"] == "words" and shown["cue"] == "water"
    assert [(w["word"], w["valid"], w["reason"]) for w in shown["words"]] == [
        ("river", True, ""), ("run", False, "not_a_noun"), ("apple", True, ""), ("river", False, "duplicate"),
        ("", False, "no_letters")]


def _outcome(protocol: str, verdict: dict[str, Any], **more: Any) -> Any:
    from judge_engine.rundir.records import OutcomeRecord

    return OutcomeRecord(task_id="t", item_id="i", judge="j", protocol=protocol, protocol_version="1", model="m",
                         temperature=0.0, repeat=0, variant="", status="scored", verdict=verdict, **more)


def test_a_custom_card_locates_quotes_and_lists_the_rest_apart() -> None:
    from judge_engine.rundir.records import JudgeEntry
    from judge_engine.viewer.verdicts import card

    fields = {"why": {"type": "text"}, "best": {"type": "candidate", "score_map": {"c2": 1}},
              "quotes": {"type": "spans", "of": "answer"}, "ok": {"type": "boolean"}}
    entry = JudgeEntry("j", "m", "custom", "1", {"fields": fields, "score": "mean(best, ok)", "candidates": "options"},
                       {}, [0.0], 1, None, 1)
    verdict = {"why": "because", "best": "A", "quotes": [{"text": "THE “lamp”", "start": 4, "end": 14},
                                                         {"text": "a moon", "start": 0, "end": 6}],
               "ok": False, "best_id": "c2", "order": ["c2", "c1"]}
    item = {"id": "i", "answer": "See the \"lamp\" glow.", "options": [{"id": "c1", "text": "one"}, {"id": "c2", "text": "two"}]}
    shown = card(_outcome("custom", verdict), item, entry)
    assert [(f["name"], f["type"]) for f in shown["fields"]] == [("why", "text"), ("best", "candidate"), ("quotes", "spans"),
                                                                 ("ok", "boolean")]  # best_id and order go with best
    assert shown["spans"] == [{"field": "quotes", "text": "THE “lamp”", "where": "answer", "match": "normalised"},
                              {"field": "quotes", "text": "a moon", "where": "none", "match": "none"}]
    assert shown["texts"] == [{"field": "answer", "segments": [{"text": "See ", "marks": []},
                                                               {"text": "the \"lamp\"", "marks": [0]},
                                                               {"text": " glow.", "marks": []}]}]
    best = shown["fields"][1]
    assert (best["value"], best["id"], best["number"]) == ("A", "c2", 1)
    assert shown["candidates"] == [{"label": "A", "id": "c2", "text": "two", "picked_by": ["best"]},
                                   {"label": "B", "id": "c1", "text": "one", "picked_by": []}]
    assert shown["score"] == {"rule": "mean(best, ok)", "expression": True}
    gone = card(_outcome("custom", verdict), {"prompt": "Answer: See the \"lamp\" glow."}, entry)  # the dataset is gone
    assert gone["texts"][0]["field"] == "prompt" and gone["spans"][0]["where"] == "prompt"


def test_a_custom_card_without_its_declarations_reads_the_values() -> None:
    from judge_engine.viewer.verdicts import card

    verdict = {"note": "fine", "grade": 4, "flag": True, "bits": [{"text": "lamp", "start": 0, "end": 4}]}
    shown = card(_outcome("custom", verdict), {"id": "i", "body": "a lamp"}, None)
    assert [(f["name"], f["type"]) for f in shown["fields"]] == [("note", "text"), ("grade", "number"), ("flag", "boolean"),
                                                                 ("bits", "spans")]
    assert shown["spans"][0]["where"] == "body" and shown["texts"][0]["segments"][1] == {"text": "lamp", "marks": [0]}


def test_a_jury_card_names_each_juror_and_the_tasks_standing_for_it() -> None:
    from judge_engine.viewer.composed import parts
    from judge_engine.viewer.verdicts import card

    verdict = {"aggregate": "weighted", "scale": "categorical", "value": "pass", "tie": None, "voted": 1,
               "agreement": None, "weights": {"a": 2, "b": 1},
               "jurors": {"a": {"vote": "pass", "score": 1.0, "status": "scored", "reason_code": None, "task_id": "ta"},
                          "b": {"vote": None, "score": None, "status": "unscored", "reason_code": "unreadable",
                                "task_id": "tb"}}}
    outcome = _outcome("jury", verdict, score=1.0)
    shown = card(outcome, {}, None)
    assert shown["kind"] == "jury" and shown["weighted"] and shown["value"] == "pass"
    assert [(j["judge"], j["vote"], j["status"], j["reason_code"], j["weight"]) for j in shown["jurors"]] == [
        ("a", "pass", "scored", None, 2), ("b", None, "unscored", "unreadable", 1)]
    assert shown["parts"] == parts(outcome) == [{"judge": "a", "task_id": "ta"}, {"judge": "b", "task_id": "tb"}]
    assert parts(_outcome("custom", {"x": 1})) is None


def test_a_histogram_is_drawn_on_the_declared_scale() -> None:
    import sqlite3

    from judge_engine.viewer.summary import histogram

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE tasks (judge TEXT, score REAL)")
    db.executemany("INSERT INTO tasks VALUES ('a', ?)", [(3,), (4,), (4,), (8,), (None,)])
    db.executemany("INSERT INTO tasks VALUES ('b', ?)", [(i / 10,) for i in range(50)])
    exact = histogram(db, "main", "a", (1.0, 10.0))
    assert exact == {"bars": [{"low": 3, "high": 3, "n": 1}, {"low": 4, "high": 4, "n": 2}, {"low": 8, "high": 8, "n": 1}],
                     "exact": True, "low": 1, "high": 10}
    unscaled = histogram(db, "main", "a", None) or {}
    assert (unscaled["low"], unscaled["high"]) == (3, 8)  # no scale: the scores' own extremes
    binned = histogram(db, "main", "b", (0.0, 10.0)) or {}
    assert not binned["exact"] and (binned["low"], binned["high"]) == (0, 10)
    assert binned["bars"][0] == {"low": 0, "high": 0.5, "n": 5} and sum(b["n"] for b in binned["bars"]) == 50
    assert histogram(db, "main", "c", (1.0, 5.0)) is None


def test_the_cascade_card_adds_up_stage_by_stage_with_a_held_item_and_a_stage_not_asked() -> None:
    """Worked by hand: 10 items; cheap not asked; mid reached all 10, answered 5, sent 4 on and
    holds 1 (an outage); strong reached 4, answered 2, 1 waiting, abstained on 1."""
    from judge_engine.viewer.cascade import cascade_card

    section = {"name": "cascade", "items": 10, "guarantee": "g", "stages": [
        {"stage": "cheap", "judges": ["cheap"], "asked": False, "threshold": None, "reached": 0},
        {"stage": "mid", "judges": ["mid"], "asked": True, "threshold": 0.8, "reached": 10, "held": 1, "waiting": 0},
        {"stage": "strong", "judges": ["strong"], "asked": True, "threshold": 0.7, "reached": 4, "held": 0,
         "waiting": 1}]}
    counts = {"scored": 7, "by_code": {"abstained": 1, "item_incomplete": 1}}
    card = cascade_card(section, counts, {"cheap": 0.0, "mid": 0.25, "strong": 1.0}.get)
    rows = {r["stage"]: r for r in card["stages"]}
    assert [(rows[s]["reached"], rows[s]["answered"], rows[s]["escalated"], rows[s]["abstained"], rows[s]["held"],
             rows[s]["waiting"]) for s in ("cheap", "mid", "strong")] == [
        (0, 0, 0, 0, 0, 0), (10, 5, 4, 0, 1, 0), (4, 2, 0, 1, 0, 1)]
    for row in card["stages"]:
        assert row["reached"] == row["answered"] + row["escalated"] + row["abstained"] + row["held"] + row["waiting"]
    assert (card["answered"], card["abstained"], card["held"], card["waiting"]) == (7, 1, 1, 1)
    assert card["coverage"] == 0.7 and card["cost"] == 1.25
