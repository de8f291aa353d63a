"""A cascaded run in the viewer, in headless Chromium: the cascade's card says which stage
answered (or that it abstained) and shows every stage asked with its confidence against its
threshold; each stage's item line shows its confidence. On the README's cascade demo (issue 34,
point 5): the overview's cascade card shows its stages, thresholds, coverage and cost (the
figures ``stats`` gives), a ``<judge>:item`` card says whose decisions it holds, a stage not
asked says why it has no task, the task list names the stage that answered, the last stage's
unsure item is abstained, not sent on; and money is written as the command line writes it."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.rundir.records import DEMO_TOKENS_NOTE
from judge_engine.util.money import dollars
from tests.harness import TEST_KEY, TEST_KEY_ENV
from tests.trust.cascade.conftest import cascade_job, latest
from tests.util.test_money import AMOUNTS
from tests.viewer.browser import Watched, launch, watched
from tests.viewer.conftest import REPO, ServedViewer, run_demo

pytestmark = pytest.mark.slow  # see tests/conftest.py: python -m pytest --all runs it

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
def example_cascade(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's cascade demo (the example's shipped thresholds: cheap answers nothing, mid
    at 0.7 and strong answer, one item abstained), with ``stats --json`` of it beside."""
    folder = tmp_path_factory.mktemp("example-cascade") / "cascade"
    shutil.copytree(REPO / "examples" / "cascade", folder, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    run = run_demo(folder.parent, "cascade")
    assert main(["stats", str(run), "--quiet", "--json", str(folder / "stats.json")]) == 0
    return run


@pytest.fixture(scope="module")
def browser(cascaded: Path, example_cascade: Path) -> Iterator[Any]:
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
        assert thens[0] == "escalated" and thens[-1] == ("answered" if verdict["stage"] else "abstained")
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


# --- the README's cascade demo (issue 34) ---------------------------------------------------------------


def _stats_rows(run: Path) -> dict[str, dict[str, Any]]:
    rows = json.loads((run.parents[1] / "stats.json").read_text())["sections"]["cascade"]["rows"]
    return {row["stage"]: row for row in rows}


def test_money_is_written_as_the_command_line_writes_it(tab: Watched, example_cascade: Path) -> None:
    """The viewer's money() against util/money.py's dollars() (the viewer wrote $0.0043 where
    the command line wrote $0.00429), and a judge's cost on the overview as the summary shows it."""
    with ServedViewer([example_cascade]) as served:
        _derived(served)
        page = tab.open(served.url, ".panel.judge")
        written = page.evaluate("async (xs) => { const dom = await import('/static/dom.js'); return xs.map(dom.money); }",
                                list(AMOUNTS))
        assert written == [dollars(a) for a in AMOUNTS]
        spend = served.json("api/overview")["judges"]
        strong = next(j for j in spend if j["label"] == "strong")
        panel = page.locator('.panel.judge[data-judge="strong"]')
        assert f"cost{dollars(strong['spend']['cost'])}" in panel.inner_text().replace("\n", "")
        assert DEMO_TOKENS_NOTE in page.locator(".panel.run").inner_text()
        assert tab.errors == []


def test_the_overview_shows_the_cascade_its_stages_and_why_a_stage_has_no_task(
        tab: Watched, example_cascade: Path) -> None:
    stats = _stats_rows(example_cascade)
    with ServedViewer([example_cascade]) as served:
        _derived(served)
        page = tab.open(served.url, '.panel.judge[data-judge="cascade"] table.stages')
        text = page.locator("main").inner_text()
        assert "not in the run's manifest" not in text
        card = page.locator('.panel.judge[data-judge="cascade"]')
        assert "agreement with humans >= 85%" in card.inner_text()
        assert "(stage guarantee: each stage tested at delta / 3, Bonferroni)" in " ".join(card.inner_text().split())
        heads = card.locator("table.stages thead th").all_inner_texts()
        rows = {r.locator("td").first.inner_text(): dict(zip(heads, r.locator("td").all_inner_texts(), strict=True))
                for r in card.locator("table.stages tbody tr").all()}
        assert list(rows) == ["cheap", "mid", "strong"]
        assert rows["cheap"]["threshold"] == "not asked"
        for stage in ("mid", "strong"):  # the figures stats gives, stage by stage
            for column in ("reached", "answered", "escalated", "abstained", "held"):
                assert rows[stage][column] == str(stats[stage][column]), (stage, column)
            assert float(rows[stage]["threshold"]) == pytest.approx(stats[stage]["threshold"], abs=5e-4)
            assert rows[stage]["cost"] == dollars(stats[stage]["cost"])
        total = stats["cascade"]
        said = " ".join(card.inner_text().split())
        assert f"coverage {100 * total['share']:.1f}%: {total['answered']} of 20 items answered" in said
        assert f"cost {dollars(total['cost'])}" in said
        cheap = page.locator('.panel.judge[data-judge="cheap"]').inner_text()
        assert "not asked" in cheap and "no threshold" in cheap  # why it has 0 tasks
        strong = " ".join(page.locator('.panel.judge[data-judge="strong"]').inner_text().split())
        assert f"a stage of cascade (3 of 3): asked about {stats['strong']['reached']} of 20 items" in strong
        item = page.locator('.panel.judge[data-judge="mid:item"] .about').inner_text()
        assert item.startswith("item decisions of mid: one per item from its 6 requests")
        assert tab.errors == []


def test_the_task_list_names_the_stage_that_answered(tab: Watched, example_cascade: Path) -> None:
    lines = latest(example_cascade, "cascade")
    with ServedViewer([example_cascade]) as served:
        _derived(served)
        page = tab.open(served.url + "#/tasks?judge=cascade&size=50", "table.tasks tbody tr")
        heads = page.locator("table.tasks thead th").all_inner_texts()
        assert "stage" in heads
        shown = {r.locator("td").first.inner_text(): dict(zip(heads, r.locator("td").all_inner_texts(), strict=False))
                 for r in page.locator("table.tasks tbody tr").all()}
        assert len(shown) == 20
        for item, record in lines.items():
            stage = (record.verdict or {}).get("stage")
            assert shown[item]["stage"] == (stage if stage else record.reason_code), item
            assert shown[item]["T"] == "–"  # the cascade has no temperature of its own
        assert tab.errors == []


def test_the_last_stage_abstains_on_an_item_it_is_not_sure_of(tab: Watched, example_cascade: Path) -> None:
    item, record = next((i, r) for i, r in latest(example_cascade, "cascade").items() if r.reason_code == "abstained")
    with ServedViewer([example_cascade]) as served:
        _derived(served)
        page = tab.open(served.url + f"#/item?id={item}", ".task-card .cascade")
        thens = page.locator(".task-card .cascade table.stages tbody tr td:last-child").all_inner_texts()
        asked = (record.verdict or {})["asked"]
        assert thens == ["escalated"] * (len(asked) - 1) + ["abstained"]
        heads = page.locator("table.grid thead th").all_inner_texts()
        assert "T – · r0" in heads and "T 0 · r0" in heads  # the cascade's own column, strong's at T 0
        assert tab.errors == []
