"""The README's screenshots of ``judge-engine view``, taken in headless Chromium (Debian's
``chromium`` package, driven by the dev extra's playwright):

* ``overview.png``, ``item-mqm.png``: a demo run of the literary MT example judged at two
  temperatures, twice each (so the histogram and the consistency figures have something to say);
* ``item-close-reading.png``: the close-reading example's demo run;
* ``transcript.png``: a task of a run against the fake server with a 429 storm, 500s and
  malformed answers (a transcript with a rate limit, a retry and a re-ask);
* ``item-custom.png``, ``item-jury.png``: the custom_rubric example's demo run (three custom
  judges and their jury): an item whose JSON judge quoted the response, then its jury's card.

    python docs/screenshots/take.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def runs(work: Path) -> dict[str, Path]:
    import judge_engine
    from judge_engine.fake import FakeConfig, FakeServer
    from judge_engine.fake.config import Storm
    from tests.viewer.runs import faulty_job

    examples = work / "examples"
    shutil.copytree(REPO / "examples", examples, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    config = (examples / "literary_mt" / "config.yaml").read_text(encoding="utf-8")
    config = config.replace("temperatures: [0.0]", "temperatures: [0.0, 1.0]").replace("repeats: 1", "repeats: 2")
    (examples / "literary_mt" / "repeats.yaml").write_text(config, encoding="utf-8")
    found = {"mqm": judge_engine.run(examples / "literary_mt" / "repeats.yaml", demo=True).run_dir,
             "close": judge_engine.run(examples / "close_reading" / "config.yaml", demo=True).run_dir,
             "custom": judge_engine.run(examples / "custom_rubric" / "config.yaml", demo=True).run_dir}
    (work / "faulty").mkdir()
    fake = FakeConfig(malformed_rate=0.3, error_500_rate=0.15, storm=Storm(duration_s=0.3, retry_after_s=0.2), seed=3)
    with FakeServer(fake) as server:
        found["faulty"] = judge_engine.run(faulty_job(work / "faulty", server.base_url)).run_dir
    return found


class Served:
    """A viewer of ``run_dirs`` on an event loop of its own."""

    def __init__(self, run_dirs: list[Path]) -> None:
        from judge_engine.viewer.server import Viewer

        self.viewer = Viewer(run_dirs)
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.url = asyncio.run_coroutine_threadsafe(self.viewer.start(), self.loop).result(60)

    def ready(self) -> None:
        """Wait until the viewer has derived everything (the overview's figures included)."""
        assert self.viewer.builder is not None
        states = self.viewer.builder.states
        deadline = time.monotonic() + 60
        while not all(s.items and s.attempts_share >= 1 and s.consistency for s in states):
            assert time.monotonic() < deadline, "the viewer did not finish deriving"
            time.sleep(0.05)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.viewer.stop(), self.loop).result(60)


def shoot(page: Any, url: str, ready: str, path: Path, *, height: int | None = None) -> None:
    page.goto(url)
    page.wait_for_selector(ready)
    page.wait_for_timeout(300)
    tall = int(page.evaluate("document.documentElement.scrollHeight"))
    if height is None or tall <= height:
        page.screenshot(path=str(path), full_page=True)
    else:
        page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": 1280, "height": height}, full_page=True)
    print(path)


def quoted_item(run: Path) -> str:
    """The item of the custom_rubric run whose jurors disagree most, among those the JSON judge
    quoted the response of."""
    from judge_engine.rundir.store import latest_outcome_records

    outcomes = list(latest_outcome_records(run).values())
    quoted = {o.item_id for o in outcomes if o.judge == "helpful-json" and (o.verdict or {}).get("contradicted")}
    spread = {o.item_id: (o.verdict or {}).get("spread") or 0 for o in outcomes if o.judge == "panel"}
    return max(sorted(quoted), key=lambda item: spread.get(item, 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from judge_engine.rundir.store import latest_outcome_records

    with tempfile.TemporaryDirectory(prefix="viewer-shots-") as folder:
        found = runs(Path(folder))
        served = {name: Served([run]) for name, run in found.items()}
        for one in served.values():
            one.ready()
        reasked = next(o for o in latest_outcome_records(found["faulty"]).values() if o.reasks)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            shoot(page, served["mqm"].url, ".judge .histogram rect", args.out / "overview.png")
            page.goto(served["mqm"].url + "#/tasks?sort=disagreement")
            page.wait_for_selector("table.tasks tbody tr")
            disputed = page.locator("table.tasks tbody tr").first.get_attribute("data-item")
            shoot(page, served["mqm"].url + f"#/item?id={disputed}", ".task-card .target mark", args.out / "item-mqm.png",
                  height=1250)
            shoot(page, served["close"].url + "#/item?id=cr-001", ".task-card .spans mark",
                  args.out / "item-close-reading.png", height=1100)
            shoot(page, served["faulty"].url + f"#/transcript?run=0&task={reasked.task_id}", "section.attempt",
                  args.out / "transcript.png", height=1500)
            shoot(page, served["custom"].url + f"#/item?id={quoted_item(found['custom'])}", ".task-card .custom mark",
                  args.out / "item-custom.png", height=1000)
            page.locator(".task-card", has=page.locator(".jury")).screenshot(path=str(args.out / "item-jury.png"))
            print(args.out / "item-jury.png")
            browser.close()
        for one in served.values():
            one.close()


if __name__ == "__main__":
    main()
