"""The viewer as a person uses it, in headless Chromium: a demo run's overview, the list paged
and filtered (and its URL shared), an item's MQM spans at the right characters, a transcript,
all by keyboard; the demo label on every page of a demo run, and on none of a real run's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_engine.rundir.records import DEMO_NOTE
from judge_engine.rundir.store import latest_outcome_records
from judge_engine.util.text import locate
from tests.viewer.browser import Watched, launch, watched
from tests.viewer.conftest import ServedViewer

pytestmark = pytest.mark.slow  # see tests/conftest.py: python -m pytest --all runs it

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)").expect


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module")
def viewer(demo_runs: dict[str, Path]) -> Iterator[ServedViewer]:
    with ServedViewer([demo_runs["literary_mt"]]) as served:
        yield served.ready()


@pytest.fixture
def tab(browser: Any) -> Iterator[Watched]:
    yield from watched(browser)


def banner(page: Any) -> str:
    """The demo label, as shown (empty when hidden)."""
    label = page.locator("#demo")
    return str(label.inner_text()) if label.is_visible() else ""


def rows(page: Any) -> list[str]:
    return [str(t) for t in page.locator("table.tasks tbody tr td:first-child").all_inner_texts()]


def test_overview(tab: Watched, viewer: ServedViewer) -> None:
    page = tab.open(viewer.url, ".judge h2")
    assert banner(page) == DEMO_NOTE
    assert page.locator(".judge h2").inner_text() == "mqm-mini"
    judge = viewer.json("api/overview")["judges"][0]
    assert page.locator(".judge .histogram rect.bar").count() == len(judge["histogram"]["bars"])
    assert "20 tasks" in page.locator(".judge .counts").inner_text()
    assert page.locator(".run .badge.status-completed").inner_text() == "completed"
    assert tab.errors == []


def test_list_pages_filters_and_keeps_them_in_the_url(tab: Watched, viewer: ServedViewer) -> None:
    page = tab.open(viewer.url + "#/tasks?size=5", "table.tasks tbody tr")
    assert banner(page) == DEMO_NOTE
    first = rows(page)
    assert first == ["lit-001", "lit-002", "lit-003", "lit-004", "lit-005"]
    page.click("#next")
    expect(page.locator("#page-info")).to_have_text(re.compile("^page 2 "))
    assert rows(page) == ["lit-006", "lit-007", "lit-008", "lit-009", "lit-010"] and "page=2" in page.url
    page.keyboard.press("n")
    expect(page.locator("#page-info")).to_have_text(re.compile("^page 3 "))
    page.keyboard.press("p")
    expect(page.locator("#page-info")).to_have_text(re.compile("^page 2 "))

    page.select_option("select[name=sort]", "score")
    page.wait_for_url("**sort=score**")
    expect(page.locator("#page-info")).to_have_text(re.compile("^page 1 "))
    scores = [float(s) for s in page.locator("table.tasks tbody td.num:nth-child(7)").all_inner_texts()]
    assert scores == sorted(scores)

    page.keyboard.press("/")
    page.keyboard.type("Lampe")
    expect(page.locator("table.tasks tbody tr")).to_have_count(1)
    assert rows(page) == ["lit-001"] and "q=Lampe" in page.url
    shared = page.url
    again = tab.page.context.new_page()
    again.goto(shared)  # a shared link opens the same view
    again.wait_for_selector("table.tasks tbody tr")
    assert rows(again) == ["lit-001"] and again.locator("#search").input_value() == "Lampe"
    assert again.locator("select[name=sort]").input_value() == "score"
    again.close()
    assert tab.errors == []


def test_keyboard_from_list_to_item_to_transcript_and_back(tab: Watched, viewer: ServedViewer,
                                                           demo_runs: dict[str, Path]) -> None:
    page = tab.open(viewer.url + "#/tasks", "table.tasks tbody tr.selected")
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.locator("tr.selected td:first-child").inner_text() == "lit-003"
    page.keyboard.press("Enter")
    page.wait_for_selector(".task-card")
    assert "id=lit-003" in page.url and banner(page) == DEMO_NOTE
    assert page.locator("h1").inner_text().startswith("Item lit-003")

    page.keyboard.press("Enter")  # the selected task's transcript
    page.wait_for_selector("section.attempt")
    assert banner(page) == DEMO_NOTE
    outcome = next(o for o in latest_outcome_records(demo_runs["literary_mt"]).values() if o.item_id == "lit-003")
    assert outcome.task_id in page.locator("h1").inner_text()
    answer = page.locator("section.attempt .answer pre").inner_text()
    assert answer.startswith("Critical:")
    shared = page.locator("details.shared")
    assert shared.get_attribute("open") is None  # the few-shot prefix is folded...
    shared.locator("summary").click()  # ...one click away
    assert "You are an annotator for the quality of machine translation" in shared.inner_text()

    page.keyboard.press("Escape")
    page.wait_for_selector(".task-card")
    assert "id=lit-003" in page.url
    page.keyboard.press("]")
    expect(page.locator("h1")).to_contain_text("lit-004")
    page.keyboard.press("Escape")
    page.wait_for_selector("table.tasks tbody tr")
    assert page.url.endswith("#/tasks")
    assert tab.errors == []


def test_mqm_spans_are_highlighted_at_their_characters(tab: Watched, viewer: ServedViewer,
                                                        demo_runs: dict[str, Path]) -> None:
    checked = 0
    for outcome in latest_outcome_records(demo_runs["literary_mt"]).values():
        errors = (outcome.verdict or {}).get("errors") or []
        if not any(e["span_found"] == "target" for e in errors):
            continue
        page = tab.open(viewer.url + f"#/item?id={outcome.item_id}", ".task-card .target .marked")
        expect(page.locator("h1 .mono")).to_have_text(outcome.item_id)  # not the previous item, still shown
        target = viewer.json(f"api/item?id={outcome.item_id}")["fields"]["target"]
        container = page.locator(".task-card .target .marked")
        assert container.inner_text() == target
        marks = page.evaluate("""() => {
            const box = document.querySelector('.task-card .target .marked');
            return [...box.querySelectorAll('mark')].map((mark) => {
                const range = document.createRange();
                range.setStart(box, 0);
                range.setEndBefore(mark);
                return {start: range.toString().length, text: mark.textContent, cls: mark.className, title: mark.title};
            });
        }""")
        for error in (e for e in errors if e["span_found"] == "target"):
            start, end = locate(error["span"], target)  # type: ignore[misc]
            covering = [m for m in marks if start <= m["start"] and m["start"] + len(m["text"]) <= end]
            assert "".join(m["text"] for m in covering) == target[start:end]
            assert all(f"{error['severity']} · {error['category']}" in m["title"] for m in covering)
            checked += 1
        worst = {"critical": 3, "major": 2, "minor": 1}
        for mark in marks:
            lines = mark["title"].split("\n")
            assert mark["cls"] == "sev-" + max((ln.split(" · ")[0] for ln in lines), key=worst.__getitem__)
    assert checked >= 5
    assert tab.errors == []


def test_close_reading_expressions_are_marked(tab: Watched, demo_runs: dict[str, Path]) -> None:
    with ServedViewer([demo_runs["close_reading"]]) as served:
        served.ready()
        page = tab.open(served.url + "#/item?id=cr-001", ".task-card .spans .marked")
        passage = served.json("api/item?id=cr-001")["fields"]["passage"]
        assert page.locator(".task-card .spans .marked").first.inner_text() == passage
        assert page.locator(".task-card .spans mark.match-exact").count() >= 1
        assert page.locator(".task-card ol.expressions li").count() >= 1
        assert tab.errors == []


def test_a_real_runs_pages_are_not_labelled_synthetic(tab: Watched, demo_runs: dict[str, Path],
                                                      faulty_run: Path) -> None:
    """Opened beside a demo run, a real run's transcript and item have no demo label; the demo
    run's have one naming it, and so has the overview."""
    with ServedViewer([demo_runs["literary_mt"], faulty_run]) as served:
        served.ready()
        named = served.json("api/overview")["synthetic"]
        page = tab.open(served.url, ".judge h2")
        assert banner(page) == named and "DEMO RUN" in named and "(demo)" in page.locator("#run-names").inner_text()
        real = served.json("api/tasks?judge=mqm-faulty")["rows"][0]
        page = tab.open(served.url + f"#/transcript?run=1&task={real['task_id']}", "section.attempt")
        assert banner(page) == ""
        page.keyboard.press("Escape")  # to the real run's item
        page.wait_for_selector(".task-card")
        assert banner(page) == ""
        fake = served.json("api/tasks?judge=mqm-mini")["rows"][0]
        page = tab.open(served.url + f"#/transcript?run=0&task={fake['task_id']}", "section.attempt")
        assert banner(page) == named
        page = tab.open(served.url + "#/tasks?size=200", "table.tasks tbody tr")
        assert banner(page) == named and page.locator("table.tasks .demo-badge").count() == 20
        assert tab.errors == []


def test_headers_say_each_thing_once_and_nothing_empty(tab: Watched, demo_runs: dict[str, Path]) -> None:
    """TTCT's reversed question says so once; a jury's header names its jurors and aggregate
    (it has no model, protocol, temperatures or repeats of its own to show empty)."""
    with ServedViewer([demo_runs["ttct"], demo_runs["custom_rubric"]]) as served:
        served.ready()
        page = tab.open(served.url, ".judge h2")
        about = page.locator('.judge[data-judge="panel"] p.about').inner_text()
        assert about == "jury: median of helpful-json, helpful-regex, helpful-marker · scale 1..5"
        judge = page.locator('.judge[data-judge="helpful-json"] p.about').inner_text()
        assert judge == "openai/gpt-4o-mini · custom v1 · T 0 · 1 repeat · scale 1..5"
        item = served.json("api/tasks?judge=ttct-mini&status=scored")["rows"][0]["item_id"]
        page = tab.open(served.url + f"#/item?id={item}", ".task-card table.questions")
        reversed_row = page.locator(".task-card table.questions tr", has_text="famous").first.inner_text()
        assert reversed_row.count("(reverse-scored)") == 1
        assert tab.errors == []


def test_a_failed_run_names_each_stopped_judge_once(tab: Watched, demo_runs: dict[str, Path], served: Any,
                                                     tmp_path: Path) -> None:
    """The recorded failure already names its judge ("mqm-mini (model) stopped: ..."): the
    overview shows it as it is, not under the judge's name again."""
    import json
    import shutil

    run = tmp_path / "failed"
    shutil.copytree(demo_runs["literary_mt"], run)
    why = "mqm-mini (openai/gpt-4o-mini) stopped: cannot reach http://127.0.0.1:9/v1"
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    (run / "run.json").write_text(json.dumps({**manifest, "status": "failed", "failures": {"mqm-mini": why}}),
                                  encoding="utf-8")
    page = tab.open(served([run]).ready().url, ".run p.error")
    assert page.locator(".run p.error").all_inner_texts() == [why]
    assert tab.errors == []


MARK_OFFSETS = """(box) => [...box.querySelectorAll('mark')].map((mark) => {
    const range = document.createRange();
    range.setStart(box, 0);
    range.setEndBefore(mark);
    return {start: range.toString().length, text: mark.textContent, title: mark.title};
})"""


@pytest.fixture(scope="module")
def rubric(demo_runs: dict[str, Path]) -> Iterator[ServedViewer]:
    """The custom_rubric example's demo run: three custom judges and their jury."""
    with ServedViewer([demo_runs["custom_rubric"]]) as served:
        yield served.ready()


def _quoted(run: Path) -> Any:
    """An outcome of helpful-json that quotes the response."""
    return next(o for o in latest_outcome_records(run).values()
                if o.judge == "helpful-json" and (o.verdict or {}).get("contradicted"))


def test_a_custom_judges_card_shows_its_fields_and_highlights_its_quotes(tab: Watched, rubric: ServedViewer,
                                                                         demo_runs: dict[str, Path]) -> None:
    outcome = _quoted(demo_runs["custom_rubric"])
    page = tab.open(rubric.url + f"#/item?id={outcome.item_id}", ".task-card .custom")
    card = page.locator(".task-card", has=page.locator(".custom .quoted"))
    assert card.locator("header strong").inner_text() == "helpful-json"
    response = rubric.json(f"api/item?id={outcome.item_id}")["fields"]["response"]
    box = card.locator(".quoted .marked")
    assert box.inner_text() == response
    marks = box.evaluate(MARK_OFFSETS)
    for quote in (outcome.verdict or {})["contradicted"]:
        start, end = locate(quote["text"], response)  # type: ignore[misc]
        assert {"start": start, "text": response[start:end], "title": f"contradicted: {quote['text']}"} in marks
    score = card.locator('tr[data-field="score"]')
    assert score.locator("td").inner_text() == f"{outcome.score:g} on 1..5" and "headline" in str(score.get_attribute("class"))
    assert card.locator('tr[data-field="score"] meter').get_attribute("max") == "5"
    quotes = card.locator('tr[data-field="contradicted"] ol.quotes li').all_inner_texts()
    assert quotes == [f"{q['text']} found exactly in the response" for q in (outcome.verdict or {})["contradicted"]]
    assert card.locator('.field-text[data-field="reasoning"] pre').inner_text() == (outcome.verdict or {})["reasoning"]
    assert card.locator(".transcript-link").count() == 1
    assert tab.errors == []


def test_a_jurys_card_shows_the_votes_and_links_each_jurors_transcript(tab: Watched, rubric: ServedViewer,
                                                                       demo_runs: dict[str, Path]) -> None:
    records = latest_outcome_records(demo_runs["custom_rubric"]).values()
    jury = next(o for o in records if o.judge == "panel")
    jurors = {o.judge: o for o in records if o.item_id == jury.item_id and o.judge != "panel"}
    page = tab.open(rubric.url + f"#/item?id={jury.item_id}", ".task-card .jury")
    card = page.locator(".task-card", has=page.locator(".jury"))
    assert card.locator(".transcript-link").count() == 0  # a jury sent no request: no transcript of its own
    assert "attempts" not in card.locator("p.small").inner_text()
    rows = card.locator("table.votes tbody tr")
    assert rows.count() == 3
    for index, name in enumerate(["helpful-json", "helpful-regex", "helpful-marker"]):
        cells = rows.nth(index).locator("td").all_inner_texts()
        score = f"{jurors[name].score:g}"
        assert cells == [name, score, score, "scored", "transcript ›"]
    assert card.locator(".decision strong").inner_text() == f"{jury.score:g}"
    card.click()  # the jury chosen, Enter opens nothing
    page.keyboard.press("Enter")
    page.wait_for_timeout(200)
    assert "#/item" in page.url

    rows.nth(1).locator("a.juror-transcript").click()
    page.wait_for_selector("section.attempt")
    assert jurors["helpful-regex"].task_id in page.locator("h1").inner_text()
    assert page.locator("section.attempt").count() == jurors["helpful-regex"].attempts >= 1
    assert page.locator("main > p").first.inner_text().startswith("helpful-regex · run ")
    page.go_back()
    page.wait_for_selector(".jury")

    page = tab.open(rubric.url + f"#/transcript?run=0&task={jury.task_id}", "p.parts")  # an old link to the jury's
    assert page.locator("p.parts a").all_inner_texts() == ["helpful-json", "helpful-regex", "helpful-marker"]
    assert "attempt(s)" not in page.locator("main").inner_text()
    page.locator("p.parts a").first.click()
    page.wait_for_selector("section.attempt")
    assert jurors["helpful-json"].task_id in page.locator("h1").inner_text()
    assert tab.errors == []


def test_a_histogram_spans_the_declared_scale_with_a_count_axis(tab: Watched, rich_custom_run: Path) -> None:
    """A 1-10 judge's histogram runs from 1 to 10 whatever its scores, each bar above its score's
    tick, under a labelled count axis whose top is at or above the tallest bar."""
    with ServedViewer([rich_custom_run]) as served:
        served.ready()
        bars = next(j for j in served.json("api/overview")["judges"] if j["label"] == "rich")["histogram"]["bars"]
        page = tab.open(served.url, '.judge[data-judge="rich"] .histogram rect.bar')
        figure = page.locator('.judge[data-judge="rich"] .histogram')
        assert figure.locator(".score-tick").all_text_contents() == [str(v) for v in range(1, 11)]
        counts = [float(t) for t in figure.locator(".count-tick text").all_text_contents()]
        assert counts[0] == 0 and counts == sorted(counts) and len(counts) >= 2 and counts[-1] >= max(b["n"] for b in bars)
        assert figure.locator(".axis.title").text_content() == "tasks"
        placed = figure.evaluate("""(f) => {
            const ticks = Object.fromEntries([...f.querySelectorAll('.score-tick')].map((t) => [t.textContent, +t.getAttribute('x')]));
            return [...f.querySelectorAll('rect.bar')].map((r) => ({
                centre: +r.getAttribute('x') + +r.getAttribute('width') / 2, tick: ticks[r.querySelector('title').textContent.split(':')[0]],
                height: +r.getAttribute('height')}));
        }""")
        assert len(placed) == len(bars)
        tallest = max(p["height"] for p in placed)
        for bar, shown in zip(bars, placed, strict=True):
            assert abs(shown["centre"] - shown["tick"]) < 0.5, (bar, shown)
            assert abs(shown["height"] / tallest - bar["n"] / max(b["n"] for b in bars)) < 0.02
        assert "on the judge's scale 1..10" in figure.locator("figcaption").inner_text()
        assert tab.errors == []


def test_the_overview_shows_each_systems_human_scale_estimate_beside_the_judge_mean(
        tab: Watched, demo_runs: dict[str, Path], examples: Path) -> None:
    from judge_engine.trust.estimate_rows import HumanTable

    human = HumanTable(examples / "literary_systems" / "humans.csv", "id", "mqm", by="system")
    with ServedViewer([demo_runs["literary_systems"]], human=human) as served:
        page = tab.open(served.url, ".judge .estimate table")
        block = page.locator(".judge .estimate")
        assert "Human-scale estimate (95%, ppi++)" in block.locator("h3").inner_text()
        shown = [r.split("\t") for r in block.locator("tbody tr").all_inner_texts()]
        found = served.json("api/overview")["judges"][0]["estimate"]
        # in the order the dataset first names them (issue 34: never the order tasks finished in)
        assert [r[0] for r in shown] == [g["group"] for g in found["groups"]] == ["human", "gpt4o", "nllb", "m2m"]
        for row, group in zip(shown, found["groups"], strict=True):
            assert row[1] == "25/50"
            assert float(row[3]) == pytest.approx(group["estimate"], rel=1e-3)
            assert float(row[4].strip("[]").split(", ")[0]) == pytest.approx(group["ci"][0], rel=1e-3)
        assert tab.errors == []
