"""A cascaded run's item in the viewer, in headless Chromium: the cascade's card says which stage
answered (or that it abstained) and shows every stage asked with its confidence against its
threshold; each stage's item line shows its confidence."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from tests.harness import TEST_KEY, TEST_KEY_ENV
from tests.trust.cascade.conftest import cascade_job, latest
from tests.viewer.browser import Watched, launch, watched
from tests.viewer.conftest import ServedViewer

pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")


@pytest.fixture(scope="module")
def cascaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cascaded run (made before the browser starts: playwright's loop owns the thread after)."""
    folder = tmp_path_factory.mktemp("cascade")
    with pytest.MonkeyPatch.context() as patch, FakeServer(FakeConfig()) as server:
        patch.setenv(TEST_KEY_ENV, TEST_KEY)
        job = cascade_job(folder, server, thresholds={"cheap": 0.95, "mid": 0.9, "strong": 0.8}, items=12)
        assert main(["run", str(job.config), "--no-live"]) == 0
    return job.only_run()


@pytest.fixture(scope="module")
def browser(cascaded: Path) -> Iterator[Any]:
    yield from launch()


@pytest.fixture
def tab(browser: Any) -> Iterator[Watched]:
    yield from watched(browser)


def _derived(served: ServedViewer, timeout_s: float = 60) -> None:
    """Wait for the run's derived tables (a stage asked about no item has no consistency to wait
    for, so not ``ServedViewer.ready``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(run["derived"]["items"] and run["derived"]["attempts"] >= 1 for run in served.json("api/overview")["runs"]):
            return
        time.sleep(0.05)
    raise AssertionError("the viewer did not finish deriving")


def test_a_cascade_card_shows_the_answering_stage_and_every_stage_asked(tab: Watched, cascaded: Path) -> None:
    run = cascaded
    lines = latest(run, "cascade")
    item, record = next((i, r) for i, r in sorted(lines.items()) if len((r.verdict or {})["asked"]) >= 2)
    verdict = record.verdict or {}
    with ServedViewer([run]) as served:
        _derived(served)
        page = tab.open(served.url + f"#/item?id={item}", ".task-card .cascade")
        card = page.locator(".task-card .cascade")
        head = card.locator("p strong").inner_text()
        if verdict["stage"] is not None:
            assert head.startswith(f"Answered by {verdict['stage']}: {verdict['prediction']} (confidence ")
        else:
            assert head == "Abstained: no stage was sure enough"
        stages = card.locator("table.stages tbody tr td:first-child").all_inner_texts()
        assert stages == [a["stage"] for a in verdict["asked"]]
        thens = card.locator("table.stages tbody tr td:last-child").all_inner_texts()
        assert thens[0] == "escalated" and thens[-1] in ("answered", "escalated")  # the words stats and show use
        cheap = page.locator(".task-card", has=page.locator("header strong", has_text="cheap:item"))
        assert "confidence" in cheap.locator("p.small").first.inner_text()
        assert tab.errors == []


def test_an_items_decision_card_shows_each_requests_vote_and_links_its_transcript(tab: Watched, cascaded: Path) -> None:
    """A stage's item line sent no request of its own: its card shows the decision and each
    request's vote, and links the requests' transcripts instead of one of its own."""
    item, record = next(iter(sorted(latest(cascaded, "cheap:item").items())))
    verdict = record.verdict or {}
    with ServedViewer([cascaded]) as served:
        _derived(served)
        page = tab.open(served.url + f"#/item?id={item}", ".task-card .decision-card")
        card = page.locator(".task-card", has=page.locator(".decision-card"))
        assert card.locator(".transcript-link").count() == 0
        head = card.locator(".decision strong").inner_text()
        assert head == (str(verdict["prediction"]) if record.scored else f"no decision ({record.reason_code})")
        links = card.locator("a.request-transcript")
        assert links.count() == len(verdict["parts"]) >= 1
        links.first.click()
        page.wait_for_selector("section.attempt")  # the request's own transcript opens
        assert tab.errors == []
