"""Run text is hostile input: in headless Chromium, a run whose items, answers, spans, feedback,
reasons, error bodies, headers, judge name and item id carry ``<script>``, ``<img onerror>``,
``javascript:`` links, ``</textarea>`` and ``<style>`` shows all of it literally on every page,
and none of it runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.viewer.browser import Watched, launch, watched
from tests.viewer.conftest import ServedViewer
from tests.viewer.runs import HOSTILE_ITEM, HOSTILE_JUDGE, PAYLOADS

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
        assert f"{PAYLOADS[1]} not quoted right" in tab.page.locator(".not-found").inner_text()
    else:
        assert f"unusable answer {PAYLOADS[1]}" in text  # the reason of an unscored task


def test_transcripts_show_hostile_answers_errors_and_headers_literally(tab: Watched, viewer: ServedViewer) -> None:
    for row in viewer.json("api/tasks?size=50")["rows"]:
        tab.open(viewer.url + f"#/transcript?run={row['run']}&task={quote(row['task_id'])}", "section.attempt")
        for details in tab.page.locator("details").all():
            details.evaluate("(d) => { d.open = true; }")
        text = harmless(tab)
        for shown in (f"slow down {PAYLOADS[1]}", f"First answer {PAYLOADS[0]}", PAYLOADS[2], PAYLOADS[5],
                      f"Final answer {PAYLOADS[3]} {PAYLOADS[4]}", f"System prompt {PAYLOADS[4]}"):
            assert shown in text, shown
