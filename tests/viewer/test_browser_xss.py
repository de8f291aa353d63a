"""Run text is hostile input: in headless Chromium, a run whose items, answers, spans, feedback,
reasons, error bodies, headers, judge name and item id, a custom judge's fields (their names,
descriptions, values, label choices and quotes) and a jury's votes (juror names, votes, reason
codes, a juror's task id) carry ``<script>``, ``<img onerror>``, ``javascript:`` links,
``</textarea>`` and ``<style>`` shows all of it literally on every page, and none of it runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.viewer.browser import Watched, launch, watched
from tests.viewer.conftest import ServedViewer
from tests.viewer.runs import (
    HOSTILE_CUSTOM,
    HOSTILE_FIELD,
    HOSTILE_ITEM,
    HOSTILE_JUDGE,
    HOSTILE_JURY,
    PAYLOADS,
)

pytestmark = pytest.mark.slow  # see tests/conftest.py: python -m pytest --all runs it

pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")

INJECTED = """() => ({
    pwned: window.__pwned ?? null,
    scripts: [...document.scripts].map((s) => s.src),
    images: document.images.length,
    frames: document.querySelectorAll('iframe, object, embed').length,
    styles: document.querySelectorAll('style').length,
    handlers: [...document.querySelectorAll('*')].filter((n) => [...n.attributes].some((a) => a.name.startsWith('on'))).length,
    links: [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')).filter((h) => !h.startsWith('#/')),
    svgs: [...document.querySelectorAll('svg')].filter((s) => !s.closest('.histogram')).length,
    hidden: getComputedStyle(document.body).display === 'none',
})"""


@pytest.fixture(scope="module")
def viewer(hostile_run: Path) -> Iterator[ServedViewer]:
    with ServedViewer([hostile_run]) as served:
        yield served.ready()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture
def tab(browser: Any) -> Iterator[Watched]:
    yield from watched(browser)


def harmless(tab: Watched) -> str:
    """Nothing of the run's text ran or became markup; the page's text, for literal checks."""
    page = tab.page
    page.wait_for_timeout(150)  # an onerror or a deferred script would have fired by now
    found = page.evaluate(INJECTED)
    assert found["pwned"] is None, found
    assert found["scripts"] == [tab.page.url.split("#")[0] + "static/app.js"], found
    assert (found["images"], found["frames"], found["styles"], found["handlers"], found["svgs"]) == (0, 0, 0, 0, 0), found
    assert found["links"] == [] and not found["hidden"], found
    assert tab.dialogs == []
    assert not [e for e in tab.errors if "Content Security Policy" in e], tab.errors  # nothing even tried
    return str(page.locator("main").inner_text())


def test_the_list_and_overview_show_hostile_text_literally(tab: Watched, viewer: ServedViewer) -> None:
    tab.open(viewer.url, ".judge h2")
    text = harmless(tab)
    assert HOSTILE_JUDGE in text and PAYLOADS[0] in text  # the judge name, the run's created_at
    assert HOSTILE_CUSTOM in text and HOSTILE_JURY in text
    tab.open(viewer.url + "#/tasks", "table.tasks tbody tr")
    text = harmless(tab)
    assert HOSTILE_ITEM in text and HOSTILE_JUDGE in text
    tab.page.locator("table.tasks tbody tr", has_text=HOSTILE_ITEM).first.click()  # its id travels in the URL
    tab.page.wait_for_selector(".task-card")
    assert tab.page.locator("h1 .mono").inner_text() == HOSTILE_ITEM
    harmless(tab)


@pytest.mark.parametrize("item", ["hostile-1", HOSTILE_ITEM])
def test_item_view_shows_hostile_text_literally(tab: Watched, viewer: ServedViewer, item: str) -> None:
    tab.open(viewer.url + f"#/item?id={quote(item)}", ".task-card")
    tab.page.locator("details.fields").evaluate("(d) => { d.open = true; }")
    text = harmless(tab)
    fields = viewer.json(f"api/item?id={quote(item)}")["fields"]
    for value in (fields["source"], fields["target"], fields["passage"]):
        assert value in text
    if item == "hostile-1":
        for payload in PAYLOADS:
            assert payload in text, payload
        marks = tab.page.locator(".task-card .target mark").all_inner_texts()
        assert PAYLOADS[2] in marks and PAYLOADS[4] in marks  # spans found in the target, highlighted as text
        assert f"{PAYLOADS[1]} not quoted right" in tab.page.locator(".mqm .not-found").inner_text()
    else:
        assert f"unusable answer {PAYLOADS[1]}" in text  # the reason of an unscored task


def test_custom_and_jury_cards_show_hostile_fields_and_votes_literally(tab: Watched, viewer: ServedViewer) -> None:
    tab.open(viewer.url + "#/item?id=hostile-1", ".task-card .custom")
    text = harmless(tab)
    custom = tab.page.locator(".task-card", has=tab.page.locator(".custom")).text_content()  # as written (h4 is upper case)
    for shown in (f"Because {PAYLOADS[0]}", PAYLOADS[5], HOSTILE_FIELD, f"{PAYLOADS[3]} {PAYLOADS[4]}",
                  PAYLOADS[1], f"{PAYLOADS[1]} missing"):  # text, label, a field's name, its value, a description...
        assert shown in custom, shown
    assert PAYLOADS[2] in tab.page.locator(".task-card .custom .quoted mark").all_inner_texts()  # a quote, found
    jury = tab.page.locator(".task-card", has=tab.page.locator(".jury")).text_content()
    for shown in (HOSTILE_JURY, HOSTILE_CUSTOM, f"unscored ({PAYLOADS[1]})", f"tie settled by: {PAYLOADS[0]}"):
        assert shown in jury, shown
    assert text.count(PAYLOADS[5]) >= 3  # the vote, the decision, the label
    links = tab.page.locator(".jury a.juror-transcript")
    assert links.count() == 2
    links.nth(1).click()  # the juror whose task id is a payload: a link of the viewer's, to no such task
    tab.page.wait_for_selector("p.error")
    harmless(tab)
    tab.page.go_back()
    tab.page.wait_for_selector(".jury")
    tab.page.locator(".jury a.juror-transcript").first.click()
    tab.page.wait_for_selector("section.attempt")
    assert HOSTILE_CUSTOM in harmless(tab)


def test_transcripts_show_hostile_answers_errors_and_headers_literally(tab: Watched, viewer: ServedViewer) -> None:
    for row in viewer.json("api/tasks?size=50")["rows"]:
        if row["judge"] == HOSTILE_JURY:  # no transcript of its own: its page links its jurors'
            tab.open(viewer.url + f"#/transcript?run={row['run']}&task={quote(row['task_id'])}", "p.parts")
            assert HOSTILE_CUSTOM in harmless(tab)
            continue
        tab.open(viewer.url + f"#/transcript?run={row['run']}&task={quote(row['task_id'])}", "section.attempt")
        for details in tab.page.locator("details").all():
            details.evaluate("(d) => { d.open = true; }")
        text = harmless(tab)
        for shown in (f"slow down {PAYLOADS[1]}", f"First answer {PAYLOADS[0]}", PAYLOADS[2], PAYLOADS[5],
                      f"Final answer {PAYLOADS[3]} {PAYLOADS[4]}", f"System prompt {PAYLOADS[4]}"):
            assert shown in text, shown
