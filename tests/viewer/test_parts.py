"""The viewer's pieces on their own: segments, the search query, the list's filter, the
closed-form alpha, and the command line."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    from judge_engine.records import JudgeEntry, Manifest

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


def test_view_check_serves_once_and_exits(demo_runs: dict[str, Path]) -> None:
    result = subprocess.run([sys.executable, "-m", "judge_engine.cli", "view", str(demo_runs["literary_mt"]), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "viewer ok at http://127.0.0.1:" in result.stdout and "20 tasks" in result.stdout
    assert "DEMO RUN" in result.stdout


def test_view_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "judge_engine.cli", "view", str(tmp_path), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "not a judge-engine run directory" in result.stderr


def test_a_wider_bind_warns(demo_runs: dict[str, Path]) -> None:
    result = subprocess.run([sys.executable, "-m", "judge_engine.cli", "view", str(demo_runs["literary_mt"]), "--check",
                             "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "warning: listening on 0.0.0.0" in result.stdout


def test_the_viewer_reads_runs_and_never_imports_the_engine() -> None:
    import ast

    import judge_engine

    engine = ("judge_engine.engine", "judge_engine.task", "judge_engine.attempt", "judge_engine.lanes",
              "judge_engine.session", "judge_engine.cache", "judge_engine.cli", "judge_engine.runtime")
    for path in (Path(judge_engine.__file__).parent / "viewer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(engine), (path.name, node.module)


def test_a_generation_list_shows_each_word_valid_or_dropped_and_why() -> None:
    from judge_engine.records import OutcomeRecord
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
