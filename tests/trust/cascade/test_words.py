"""One vocabulary for a cascade (issue 34.4): ``calibrate``, ``plan``, ``stats``, ``show``,
``status`` and the viewer's data say ``reached``, ``answered``, ``escalated``, ``agreement``... as
:mod:`judge_engine.util.cascade_words` defines them (the docs' glossary is generated from it),
write one threshold with the same 4 decimals, and ``calibrate`` says what its bound is."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

import judge_engine
from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.writers.annotators import preferred
from judge_engine.util import cascade_words as words
from judge_engine.viewer.verdicts import cascade as cascade_card
from tests.harness import TEST_KEY, TEST_KEY_ENV, Job
from tests.trust.cascade.conftest import cascade_job, latest, pair

REPO = Path(__file__).resolve().parents[3]
STAGES = ["cheap", "mid", "strong"]
ITEMS = 12


def _rows() -> list[dict[str, Any]]:
    """60 labelled items. cheap: 0.55, right on every other one (50% errors: never answers).
    mid: 5/6 and right on items 0-39, 0.5 and wrong on every other one of 40-59. strong: 0.99
    and right everywhere.

    Risk 0.2, delta 0.2 / 3 (Bonferroni), --min-items 10: a threshold is tested from 13 items
    (ln 0.0667 / ln 0.8 = 12.1). mid, reached by all 60: 0.8333 holds 40, 0 errors, bound
    1 - 0.0667^(1/40) = 0.065, passes; 0.5 (60, 10 errors) fails: threshold 0.8333. strong gets
    the other 20 at 0.99, 0 errors: bound 1 - 0.0667^(1/20) = 0.127, passes."""
    rows = []
    for i in range(60):
        rows.append({"item": f"c{i}", "stage": "cheap", "prediction": "AB"[i % 2], "confidence": 0.55, "label": "A"})
        mid = ("A", 5 / 6) if i < 40 else ("AB"[i % 2], 0.5)
        rows.append({"item": f"c{i}", "stage": "mid", "prediction": mid[0], "confidence": mid[1], "label": "A"})
        rows.append({"item": f"c{i}", "stage": "strong", "prediction": "A", "confidence": 0.99, "label": "A"})
    return rows


SETTINGS = ["--stages", ",".join(STAGES), "--risk", "0.2", "--delta", "0.2", "--min-items", "10"]


@pytest.fixture(scope="module")
def cascaded(tmp_path_factory: pytest.TempPathFactory) -> Job:
    """A cascade run on 12 items with the thresholds calibrated on :func:`_rows`: cheap not
    asked, mid at 0.8333, strong at 0.99 (the fake's strong judge is rarely that sure: items
    abstain)."""
    folder = tmp_path_factory.mktemp("words")
    with pytest.MonkeyPatch.context() as patch, FakeServer(FakeConfig()) as server:
        patch.setenv(TEST_KEY_ENV, TEST_KEY)
        job = cascade_job(folder, server, thresholds={"cheap": 0.9, "mid": 0.9, "strong": 0.9}, items=ITEMS)
        judge_engine.calibrate(_rows(), stages=STAGES, risk=0.2, delta=0.2, min_items=10,
                               output=folder / "thresholds.json")
        assert main(["run", str(job.config), "--no-live"]) in (0, 3)
    (folder / "human.csv").write_text("id,label\n" + "".join(
        f"{p['id']},{preferred(p['instruction'], p['response_a'], p['response_b'])}\n" for p in map(pair, range(ITEMS))),
        encoding="utf-8")
    return job


def _said(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


def test_calibrate_says_reached_and_agreement_and_what_its_bound_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    assert main(["calibrate", "--rows", str(rows), *SETTINGS]) == 0
    said = _said(capsys)
    assert "┃ stage ┃ threshold ┃ reached ┃ answered ┃ errors ┃ agreement ┃ bound ┃" in said
    assert "│ mid │ 0.8333 │ 60 │ 40 │ 0 │ 100.0% │ 0.065 │" in said
    # the bound at the run's own level: delta 0.2 over 3 stages, so 1 - 0.0667 = 93.33%
    assert ("bound: the 93.33%-confidence upper limit of a stage's error rate, Clopper-Pearson (delta 0.2 over 3 "
            "stages, Bonferroni)") in said
    assert not re.search(r"\b(offered|agreed)\b", said)


def test_one_threshold_is_written_alike_everywhere(cascaded: Job, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """mid's threshold, 5/6, is 0.8333 in calibrate (above), plan, stats, show and the viewer's
    data; 3 decimals (0.833) nowhere."""
    monkeypatch.setenv("COLUMNS", "240")
    run = cascaded.only_run()
    said = {}
    assert main(["plan", str(cascaded.config)]) == 0
    said["plan"] = _said(capsys)
    assert main(["stats", str(run)]) == 0
    said["stats"] = _said(capsys)
    lines = latest(run, "cascade")
    asked_mid = next(item for item, r in sorted(lines.items()) if any(a["stage"] == "mid" for a in r.verdict["asked"]))
    assert main(["show", str(run), "--item", asked_mid, "--judge", "cascade"]) == 0
    said["show"] = _said(capsys)
    card = cascade_card(lines[asked_mid].verdict or {}, lines[asked_mid].reason_code)
    said["viewer"] = " ".join(a["threshold_text"] for a in card["asked"])
    for where, text in said.items():
        assert "0.8333" in text, where
        assert not re.search(r"(?<![\d.])0\.833(?!\d)", text), where
    assert "mid: answers at confidence >= 0.8333" in said["plan"]


def test_plan_stats_show_status_and_the_viewer_say_the_same_words(
        cascaded: Job, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    run = cascaded.only_run()
    assert main(["stats", str(run), "--human-table", str(cascaded.dir / "human.csv"), "--label", "label",
                 "--json", str(cascaded.dir / "stats.json")]) == 0
    stats = _said(capsys)
    assert "┃ stage ┃ threshold ┃ reached ┃ answered ┃ share ┃ escalated ┃ abstained ┃ held ┃ agreement ┃ cost ┃" in stats
    assert re.search(r"│ cheap │ not asked │ 0 │ 0 │ 0\.0% │", stats)
    section = json.loads((cascaded.dir / "stats.json").read_text())["sections"]["cascade"]
    total = next(r for r in section["rows"] if r["stage"] == "cascade")
    assert f"│ {100 * total['share']:.1f}% │" in stats  # shares and agreement as calibrate writes them

    assert main(["plan", str(cascaded.config)]) == 0
    plan = _said(capsys)
    assert "cheap: not asked (its calibration found no threshold: it answers nothing)" in plan
    assert re.search(r"mid: answers at confidence >= 0\.8333; reached by 100% of the calibration items, escalated "
                     r"33% of them", plan), plan
    assert "sends on" not in plan and "asked about" not in plan

    lines = latest(run, "cascade")
    abstained = next(item for item, r in sorted(lines.items()) if r.reason_code == "abstained")
    assert main(["show", str(run), "--item", abstained, "--judge", "cascade"]) == 0
    show = _said(capsys)
    assert "cascade (stage guarantee): abstained (no stage was sure enough); asked: mid " in show
    assert "< 0.8333 (escalated), strong " in show and "< 0.9900 (abstained); not asked: cheap" in show

    answered = next(item for item, r in sorted(lines.items()) if r.scored)
    assert main(["show", str(run), "--item", answered, "--judge", "cascade"]) == 0
    show = _said(capsys)
    assert re.search(r"confidence: \d\.\d{4} \(cascade\)", show) and " (answered)" in show

    assert main(["status", str(run)]) == 0
    status = _said(capsys)
    assert re.search(r"cascade \(stage guarantee\): 12 items; answered by mid \d+, strong \d+ \(cheap not asked: no threshold\); \d+ "
                     r"abstained", status), status

    card = cascade_card(lines[abstained].verdict or {}, "abstained")
    assert [a["then"] for a in card["asked"]] == [words.ESCALATED, words.ABSTAINED]  # nothing after the last
    assert card["asked"][0]["threshold_text"] == "0.8333"
    cards_js = (REPO / "judge_engine/viewer/static/cards.js").read_text(encoding="utf-8")
    assert "sent on" not in cards_js and "a.then" in cards_js


def test_the_docs_glossary_is_generated_from_the_words() -> None:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", REPO / "docs" / "_hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    glossary = hook.REFERENCES["cascade-words"]()
    for word, meaning in words.GLOSSARY.items():
        assert f"| **{word}** | {meaning} |" in glossary, word
    assert "<!-- reference: cascade-words -->" in (REPO / "docs" / "trust.md").read_text(encoding="utf-8")
