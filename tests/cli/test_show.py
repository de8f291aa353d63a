"""``judge-engine show`` as a new user reads it (issue 26, item 6): the turns before the item's
own (GEMBA-MQM's system prompt and three few-shot turns) folded into one line with their count
and tokens, ``--full`` to unfold them; costs as dollars; a verdict field by field, never a
Python or JSON dict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.cli.show import folded_line, leading_messages, verdict_lines
from judge_engine.util.money import dollars
from tests.harness import make_job, read_lines

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


@pytest.fixture(scope="module")
def gemba_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo GEMBA-MQM run: one judge at two temperatures, so an item has two tasks with the same prompt."""
    root = tmp_path_factory.mktemp("gemba")
    job = make_job(root, None, items=3, judge={"temperatures": [0.0, 1.0]})
    assert main(["run", str(job.config), "--demo", "--no-live"]) == 0
    return job.only_run()


@pytest.fixture(scope="module")
def custom_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's custom judges and their jury (examples/custom_rubric), in demo mode."""
    out = tmp_path_factory.mktemp("custom")
    assert main(["run", str(REPO / "examples/custom_rubric/config.yaml"), "--demo", "--no-live",
                 "--output", str(out / "runs"), "--cache-dir", str(out / "cache")]) == 0
    (run,) = [p for p in (out / "runs").iterdir() if p.is_dir() and not p.is_symlink()]
    return run


def _show(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["show", *args]) == 0
    return capsys.readouterr().out


def test_the_few_shot_turns_are_one_line_with_their_count_and_tokens(
        gemba_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = read_lines(gemba_run / "outcomes.jsonl")[0]["item_id"]
    out = _show(capsys, str(gemba_run), "--item", first)
    # Two tasks (T=0 and T=1): each folds the 7 messages GEMBA-MQM sends before the item's turn.
    folds = re.findall(r"sent first, folded: system prompt and 3 few-shot turns \(7 messages, ~([\d,]+) of the "
                       r"prompt's ([\d,]+) tokens\); --full shows them", re.sub(r"\s+", " ", out))
    assert len(folds) == 2
    share, prompt = (int(n.replace(",", "")) for n in folds[0])
    assert 0.6 * prompt < share < prompt  # the shots are most of GEMBA's prompt, the item's turn the rest
    assert "sent: system" not in out and out.count("─ sent: user ─") == 1 and "sent: assistant" not in out
    # The second task's item turn is the first one's: one line, naming where it was printed.
    assert "sent: user, the same message as above (mqm T=0.0 repeat 0)" in out
    assert len(out.splitlines()) < 120  # 300 lines for these two tasks before they were folded (the answers'
    # own lines vary with the model's persona: ~40 of these are the two answers)

    full = _show(capsys, str(gemba_run), "--item", first, "--full")
    assert "sent first, folded" not in full and "the same message as above" not in full
    assert full.count("─ sent: system ─") == 2 and full.count("─ sent: assistant ─") == 6
    assert full.count("─ sent: user ─") == 8
    assert len(full.splitlines()) > 3 * len(out.splitlines())


def test_costs_are_dollars_with_significant_digits_never_an_exponent(
        gemba_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = read_lines(gemba_run / "outcomes.jsonl")
    out = _show(capsys, str(gemba_run), "--item", outcomes[0]["item_id"])
    costs = re.findall(r"cost (\S+)", out)
    assert costs == [dollars(o["cost"]) for o in outcomes if o["item_id"] == outcomes[0]["item_id"]]
    assert all(re.fullmatch(r"\$0\.0*[1-9]\d{0,2}", c) for c in costs), costs  # 3 significant digits
    assert not re.search(r"\de-\d", out)  # never 2.955e-05


@pytest.mark.parametrize(("amount", "written"), [
    (0.0, "$0"), (2.955e-05, "$0.0000296"), (0.00021, "$0.00021"), (0.00017085, "$0.000171"),
    (0.0123456, "$0.0123"), (0.5, "$0.50"), (0.1, "$0.10"), (0.9996, "$1.00"), (1.0, "$1.00"),
    (12.345, "$12.35"), (1234.5, "$1,234.50"), (1e-9, "$0.000000001"), (-0.01, "-$0.01"),
])
def test_dollars(amount: float, written: str) -> None:
    assert dollars(amount) == written


def test_a_custom_judges_verdict_and_a_jurys_are_printed_field_by_field(
        custom_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = read_lines(custom_run / "outcomes.jsonl")
    json_judge = next(o for o in outcomes if o["judge"] == "helpful-json")
    out = _show(capsys, str(custom_run), "--item", json_judge["item_id"])
    assert "{'" not in out and '{"' not in out.split("answer ·")[-1]  # no dict, Python's or JSON's, after the answers
    panels = _panels(out, "verdict")
    verdict = json_judge["verdict"]  # the fields in the order the config declares them
    assert panels[0][0].startswith("reasoning: " + verdict["reasoning"][:20])
    assert f"score: {verdict['score']}" in panels[0]
    quotes = verdict["contradicted"]  # spans: each a record (the quote and where it was found)
    assert (f"contradicted: {len(quotes)}" if quotes else "contradicted: none") in panels[0]
    for quote in quotes:
        assert any(line.startswith("- ") and quote["text"][:20] in line for line in panels[0]), quote
    jury = next(o for o in outcomes if o["judge"] == "panel" and o["item_id"] == json_judge["item_id"])
    lines = " ".join(panels[-1])
    for juror, vote in jury["verdict"]["jurors"].items():
        assert f"{juror}: vote {vote['vote']:g} · score {vote['score']:g} · status {vote['status']}" in lines
    assert f"agreement: {jury['verdict']['agreement']:.4g}" in lines
    # The score line: the score once, a custom judge's "score" breakdown not repeated beside it.
    assert f"score: {json_judge['score']:g}\n" in out and "scores: score" not in out
    assert "scores: " + " · ".join(f"{k} {v:g}" for k, v in jury["scores"].items()) in out


def _panels(out: str, title: str) -> list[list[str]]:
    """The text lines inside each box titled ``title``."""
    found, current = [], None
    for line in out.splitlines():
        if line.startswith(f"╭─ {title} "):
            current = []
        elif current is not None and line.startswith("╰"):
            found.append(current)
            current = None
        elif current is not None:
            current.append(line.strip("│ ").rstrip())
    return found


def test_verdict_lines_nest_records_and_keep_the_verdicts_order() -> None:
    verdict = {"errors": [{"severity": "minor", "category": "fluency/grammar", "span": "nach"}],
               "ok": True, "empty": [], "note": "", "ratio": 1 / 3, "missing": None}
    assert verdict_lines(verdict) == [
        "errors: 1", "  - severity: minor", "    category: fluency/grammar", "    span: nach",
        "ok: yes", "empty: none", 'note: ""', "ratio: 0.3333", "missing: -"]
    assert verdict_lines({"jurors": {"a": {"vote": 3.0, "reason_code": None}}}) == ["jurors:", "  a: vote 3"]
    assert json.loads(json.dumps(verdict)) == verdict  # nothing above changed the record


def test_the_fold_is_only_what_comes_before_the_items_turn() -> None:
    system = {"role": "system", "content": "x" * 400}
    shot = [{"role": "user", "content": "u" * 400}, {"role": "assistant", "content": "a" * 400}]
    item = {"role": "user", "content": "i" * 400}
    assert leading_messages([item]) == 0  # one turn: nothing to fold
    assert leading_messages([{"role": "assistant", "content": "prefill"}]) == 0
    assert leading_messages([system, item]) == 1
    messages = [system, *shot, *shot, item]
    assert leading_messages(messages) == 5
    # Tokens: the reported prompt split by size (5 of 6 equal messages), or the size alone.
    assert "(5 messages, ~500 of the prompt's 600 tokens)" in folded_line(messages, 5, {"prompt_tokens": 600})
    assert "system prompt and 2 few-shot turns (5 messages, ~523 tokens)" in folded_line(messages, 5, None)
    assert ": 1 few-shot turn (2 messages, ~" in folded_line([*shot, item], 2, None)
