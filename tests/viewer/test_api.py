"""The viewer's JSON pages, over HTTP: paging, sorting, filtering, search, the item and
transcript views, the demo label, secrets, read-only, headers."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from judge_engine.rundir.records import DEMO_NOTE
from judge_engine.rundir.store import iter_outcomes, iter_transcript, latest_outcome_records
from judge_engine.util.text import locate
from tests.viewer.conftest import ServedViewer


@pytest.fixture(scope="module")
def mqm(demo_runs: dict[str, Path]) -> Any:
    with ServedViewer([demo_runs["literary_mt"]]) as viewer:
        yield viewer.ready()


def rows(viewer: ServedViewer, query: str) -> list[dict[str, Any]]:
    return list(viewer.json(f"api/tasks?{query}")["rows"])


@pytest.mark.slow
def test_overview_has_judges_counts_spend_histogram(mqm: ServedViewer, demo_runs: dict[str, Path]) -> None:
    overview = mqm.json("api/overview")
    assert overview["demo"] is True and overview["synthetic"] == DEMO_NOTE
    (run,) = overview["runs"]
    assert run["status"] == "completed" and run["live"] is False
    (judge,) = overview["judges"]
    outcomes = list(iter_outcomes(demo_runs["literary_mt"]))
    assert judge["label"] == "mqm-mini" and judge["protocol"] == "gemba-mqm" and judge["model"] == "openai/gpt-4o-mini"
    assert judge["counts"]["tasks"] == len(outcomes) == 20
    assert judge["counts"]["scored"] == sum(o.scored for o in outcomes)
    assert judge["spend"]["calls"] == 20 and judge["attempts"]["calls"] == 20
    bars = judge["histogram"]["bars"]
    assert sum(b["n"] for b in bars) == judge["counts"]["scored"]
    assert {b["low"] for b in bars} == {o.score for o in outcomes if o.scored}  # exact: one bar per score


def test_pages_are_disjoint_and_cover_the_run(mqm: ServedViewer) -> None:
    first = mqm.json("api/tasks?size=7")
    assert (first["total"], first["pages"], len(first["rows"])) == (20, 3, 7)
    seen = [r["task_id"] for page in (1, 2, 3) for r in rows(mqm, f"size=7&page={page}")]
    assert len(seen) == len(set(seen)) == 20
    assert rows(mqm, "size=7&page=4") == []
    assert [r["item_id"] for r in rows(mqm, "size=20")] == sorted(r["item_id"] for r in rows(mqm, "size=20"))


def test_sorts(mqm: ServedViewer) -> None:
    scores = [r["score"] for r in rows(mqm, "sort=score&size=50")]
    assert scores == sorted(scores)
    scores = [r["score"] for r in rows(mqm, "sort=score-desc&size=50")]
    assert scores == sorted(scores, reverse=True)


def test_filters(mqm: ServedViewer, demo_runs: dict[str, Path]) -> None:
    outcomes = list(iter_outcomes(demo_runs["literary_mt"]))
    low = [o for o in outcomes if o.score is not None and -6 <= o.score <= -1]
    found = rows(mqm, "min=-6&max=-1&size=50")
    assert sorted(r["task_id"] for r in found) == sorted(o.task_id for o in low)
    assert rows(mqm, "judge=mqm-mini&status=unscored") == [r for r in rows(mqm, "size=50") if r["status"] == "unscored"]
    assert rows(mqm, "temperature=1.0") == []
    assert len(rows(mqm, "temperature=0&repeat=0&size=50")) == 20
    assert [r["item_id"] for r in rows(mqm, "item=lit-003")] == ["lit-003"]
    assert mqm.json("api/tasks?judge=no-such-judge")["total"] == 20  # an unknown judge is no filter (an old link)


def test_search_finds_items_by_their_text(mqm: ServedViewer) -> None:
    assert [r["item_id"] for r in rows(mqm, "q=Lampe")] == ["lit-001"]
    assert [r["item_id"] for r in rows(mqm, "q=lamp%20burn")] == ["lit-001"]  # every word, the last a prefix
    assert {r["item_id"] for r in rows(mqm, "q=lit-00")} >= {"lit-001", "lit-009"}
    for odd in ('"', "AND OR NOT", "*", "(", "lamp\"*", "NEAR(a b)"):  # query syntax is never the user's
        status, _, _ = mqm.get(f"api/tasks?q={quote(odd)}")
        assert status == 200


def test_mqm_item_highlights_each_span_where_it_is(mqm: ServedViewer, demo_runs: dict[str, Path]) -> None:
    outcomes = {o.item_id: o for o in latest_outcome_records(demo_runs["literary_mt"]).values()}
    checked = 0
    for item_id, outcome in outcomes.items():
        page = mqm.json(f"api/item?id={item_id}")
        (task,) = page["tasks"]
        card = task["card"]
        target = page["fields"]["target"]
        assert "".join(piece["text"] for piece in card["target"]) == target
        position = 0
        for piece in card["target"]:
            for mark in piece["marks"]:
                span = card["errors"][mark]["span"]
                start, end = locate(span, target)  # type: ignore[misc]
                assert start <= position and position + len(piece["text"]) <= end
                checked += 1
            position += len(piece["text"])
        assert [e["span"] for e in card["errors"]] == [e["span"] for e in (outcome.verdict or {}).get("errors", [])]
    assert checked > 5


def test_transcript_is_the_request_as_sent_and_the_answer(mqm: ServedViewer, demo_runs: dict[str, Path]) -> None:
    record = next(iter(iter_transcript(demo_runs["literary_mt"])))
    page = mqm.json(f"api/transcript?run=0&task={record.task_id}")
    (attempt,) = page["attempts"]
    assert [{"role": m["role"], "content": m["content"]} for m in attempt["messages"]] == record.request["messages"]
    assert [m["shared"] for m in attempt["messages"]] == [True] * 7 + [False]  # system + three few-shot pairs
    assert attempt["answer"] == record.response["content"]  # type: ignore[index]
    assert attempt["parameters"]["temperature"] == 0.0 and "messages" not in attempt["parameters"]
    assert page["outcome"]["status"] in ("scored", "unscored")


def test_transcript_shows_429s_retries_and_the_problems_of_each_reask(served: Any, faulty_run: Path) -> None:
    viewer = served([faulty_run]).ready()
    (judge,) = viewer.json("api/overview")["judges"]
    assert judge["attempts"]["rate_limited"] > 0 and judge["attempts"]["retries"] > 0
    assert judge["attempts"]["reasks"] > 0
    reasked = next(o for o in latest_outcome_records(faulty_run).values() if o.reasks)
    page = viewer.json(f"api/transcript?run=0&task={reasked.task_id}")
    sent_back = [a for a in page["attempts"] if a["reasked"]]
    assert len(sent_back) == reasked.reasks
    for attempt in sent_back:
        assert attempt["reasked"]["problems"] and attempt["reasked"]["message"].startswith("Your previous answer")
    later = [a for a in page["attempts"] if a["reask"] > 0]
    assert later and all(any(m["repeated"] for m in a["messages"]) for a in later)
    consistency = judge["consistency"]
    assert {r["temperature"] for r in consistency["repeats"]} == {0.0, 1.0}
    assert consistency["temperatures"][0]["against"] == 0.0


def test_attempt_figures_are_the_summarys(served: Any, faulty: Any) -> None:
    """429s, retries, re-asks and calls as the command line summarised the run (a 500 that is
    tried again is a retry; a 429 is not; a re-ask is counted once, however many tries it took)."""
    (judge,) = served([faulty.run_dir]).ready().json("api/overview")["judges"]
    (totals,) = faulty.judges
    figures = judge["attempts"]
    assert (figures.get("rate_limited", 0), figures.get("retries", 0), figures.get("reasks", 0)) == (
        totals.rate_limited, totals.retries, totals.reasks)
    assert judge["spend"]["calls"] == faulty.manifest.spend["total"]["calls"] and judge["spend"]["counted"]


def test_retries_over_sessions_are_the_sessions_retries(served: Any, tmp_path: Path) -> None:
    """Every request fails with a 500, one transport retry each: the command line says "6 calls,
    3 retries" per session; after a resume that judges them again, 12 calls and 6 retries (not
    12: the last failure of each task in each session was not tried again)."""
    import judge_engine
    from judge_engine.fake import FakeConfig, FakeServer
    from tests.viewer.runs import faulty_job

    config = faulty_job(tmp_path, "http://placeholder", items=3, temperatures=(0.0,), repeats=1, transport=1)
    with FakeServer(FakeConfig(error_500_rate=1.0)) as server:
        config.write_text(config.read_text(encoding="utf-8").replace("http://placeholder", server.base_url),
                          encoding="utf-8")
        first = judge_engine.run(config)
        second = judge_engine.resume(first.run_dir, retry="transport_exhausted")
    sessions = [first.judges[0].retries, second.judges[0].retries]
    assert sessions == [3, 3] and second.manifest.spend["total"]["calls"] == 12
    (judge,) = served([first.run_dir]).ready().json("api/overview")["judges"]
    assert judge["spend"]["calls"] == 12 and judge["attempts"]["retries"] == sum(sessions)
    assert judge["attempts"]["transport_errors"] == 12 and judge["counts"]["unscored"] == 3


def test_only_pages_about_a_demo_run_say_it_is_synthetic(served: Any, demo_runs: dict[str, Path],
                                                        faulty_run: Path) -> None:
    """A demo run beside a real one: the overview names the demo run; the real run's list, item
    and transcript say nothing; the demo run's always do."""
    viewer = served([demo_runs["literary_mt"], faulty_run]).ready()
    demo_id = viewer.json("api/overview")["runs"][0]["run_id"]
    named = viewer.json("api/overview")["synthetic"]
    assert named.startswith(f"DEMO RUN {demo_id}:") and "not demo runs" in named
    real = rows(viewer, "judge=mqm-faulty")[0]
    assert viewer.json("api/tasks?judge=mqm-faulty")["synthetic"] is None
    assert viewer.json(f"api/item?id={quote(real['item_id'])}")["synthetic"] is None
    assert viewer.json(f"api/transcript?run=1&task={quote(real['task_id'])}")["synthetic"] is None
    fake = rows(viewer, "judge=mqm-mini")[0]
    assert viewer.json("api/tasks?judge=mqm-mini")["synthetic"] == named
    assert viewer.json(f"api/item?id={fake['item_id']}")["synthetic"] == named
    assert viewer.json(f"api/transcript?run=0&task={quote(fake['task_id'])}")["synthetic"] == named


@pytest.mark.slow
def test_every_protocol_has_its_card(served: Any, demo_runs: dict[str, Path]) -> None:
    names = ("literary_mt_lit", "close_reading", "prometheus_absolute", "prometheus_relative", "ttct", "bws")
    viewer = served([demo_runs[n] for n in names]).ready()
    kinds: dict[str, dict[str, Any]] = {}
    for run, name in enumerate(names):
        first = latest_outcome_records(demo_runs[name])
        item_id = next(o.item_id for o in first.values() if o.scored)
        for task in viewer.json(f"api/item?id={item_id}")["tasks"]:
            if task["run"] == run and task["status"] == "scored":
                kinds.setdefault(task["card"]["kind"], task["card"])
    assert set(kinds) == {"mqm", "spans", "rubric", "pair", "ttct", "bws"}
    assert {a["aspect"] for a in kinds["mqm"]["literary"]["aspects"]} == {"accuracy", "fluency", "style", "terminology",
                                                                           "other"}
    assert kinds["mqm"]["literary"]["sentences"] >= 1
    passage = "".join(p["text"] for p in kinds["spans"]["passage"])
    assert all(e["match"] in ("exact", "normalised", "none") for e in kinds["spans"]["expressions"])
    assert passage
    rubric = kinds["rubric"]
    assert rubric["low"] == 0 and rubric["high"] == 6 and [d["score"] for d in rubric["descriptions"]] == [0, 2, 4, 6]
    assert kinds["pair"]["winner"] in ("A", "B") and kinds["pair"]["order"] in ("AB", "BA")
    ttct = kinds["ttct"]
    assert [d["name"] for d in ttct["dimensions"]] == ["originality", "fluency", "flexibility", "elaboration"]
    questions = [q for d in ttct["dimensions"] for q in d["questions"]]
    assert len(questions) == 12 and questions[1]["reversed"] and "famous" in questions[1]["text"]
    assert "reverse-scored" not in questions[1]["text"]  # the card says it once, from "reversed"
    shown = kinds["bws"]["shown"]
    assert [c["label"] for c in shown] == list("ABCDE"[: len(shown)]) and all(c["text"] for c in shown)
    assert sum(c["best"] for c in shown) == sum(c["worst"] for c in shown) == 1


def test_relative_pairs_show_both_orders_of_an_item(served: Any, demo_runs: dict[str, Path]) -> None:
    viewer = served([demo_runs["prometheus_relative"]]).ready()
    tasks = viewer.json("api/item?id=pair-001")["tasks"]
    assert {(t["temperature"], t["variant"]) for t in tasks} == {(0.0, "AB"), (0.0, "BA"), (0.7, "AB"), (0.7, "BA")}
    assert {t["card"]["order"] for t in tasks} == {"AB", "BA"}


@pytest.mark.slow
def test_two_runs_on_one_dataset_are_one_list(served: Any, examples: Path, demo_runs: dict[str, Path]) -> None:
    """Two judges' runs of the same items: one list, an item shows both, the spread is across them."""
    import yaml

    from tests.viewer.conftest import run_demo

    second = examples / "literary_mt_second"
    second.mkdir(exist_ok=True)
    config = yaml.safe_load((examples / "literary_mt" / "config.yaml").read_text(encoding="utf-8"))
    config["judges"][0]["name"] = "mqm-second"
    config["judges"][0]["temperatures"] = [1.0]
    config["dataset"]["path"] = "../literary_mt/items.jsonl"
    (second / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    other = run_demo(examples, "literary_mt_second")
    viewer = served([demo_runs["literary_mt"], other]).ready()
    assert viewer.json("api/tasks")["total"] == 40
    assert {r["judge"] for r in rows(viewer, "size=50&sort=score")} == {"mqm-mini", "mqm-second"}
    assert {r["run"] for r in rows(viewer, "judge=mqm-second&size=50")} == {1}
    item = viewer.json("api/item?id=lit-002")
    scores = [t["score"] for t in item["tasks"]]
    assert {t["run"] for t in item["tasks"]} == {0, 1}
    assert item["spread"] == max(scores) - min(scores)
    spreads = [r["spread"] if r["spread"] is not None else -1 for r in rows(viewer, "sort=disagreement&size=50")]
    assert spreads == sorted(spreads, reverse=True)


def _item_scores(viewer: ServedViewer) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for row in rows(viewer, "size=200"):
        if row["score"] is not None:
            found.setdefault(row["item_id"], []).append(row["score"])
    return found


def test_a_jury_is_on_its_jurors_scale(served: Any, demo_runs: dict[str, Path]) -> None:
    """Three 1-5 judges and their jury (which records no range of its own): the spread is in
    score units, max - min of every score, 0 where all agree (the jury's raw score was once
    subtracted from the jurors' shares of the range: all fives showed a spread of 4)."""
    viewer = served([demo_runs["custom_rubric"]]).ready()
    page = viewer.json("api/tasks?sort=disagreement&size=200")
    scores = _item_scores(viewer)
    assert {r["judge"] for r in page["rows"]} == {"helpful-json", "helpful-regex", "helpful-marker", "panel"}
    for row in page["rows"]:
        assert row["spread"] == max(scores[row["item_id"]]) - min(scores[row["item_id"]]), row
    assert page["spread_unit"] == "score"
    panel = next(j for j in viewer.json("api/overview")["judges"] if j["label"] == "panel")
    assert panel["score_range"] == [1.0, 5.0] and panel["jury"]["jurors"] == ["helpful-json", "helpful-regex",
                                                                              "helpful-marker"]
    assert panel["counts"]["tasks"] == 12 and panel["counts"]["undone"] == 0
    assert any(row["spread"] == 0 for row in page["rows"])
    spreads = [r["spread"] for r in page["rows"]]
    assert spreads == sorted(spreads, reverse=True)
    item = viewer.json(f"api/item?id={page['rows'][-1]['item_id']}")
    assert (item["spread"], item["spread_unit"]) == (0, "score")


def test_scales_that_differ_make_the_spread_a_share_of_each_range(served: Any, demo_runs: dict[str, Path]) -> None:
    """A 1-5 run beside a -25..0 run: each spread is a share of its judges' range, and says so."""
    viewer = served([demo_runs["custom_rubric"], demo_runs["literary_mt"]]).ready()
    page = viewer.json("api/tasks?sort=disagreement&size=200")
    assert page["spread_unit"] == "share"
    scores = _item_scores(viewer)
    rubric = [r for r in page["rows"] if r["run"] == 0]
    assert rubric and all(math.isclose(r["spread"], (max(scores[r["item_id"]]) - min(scores[r["item_id"]])) / 4)
                          for r in rubric)
    assert viewer.json("api/item?id=help-01")["spread_unit"] == "share"


@pytest.mark.slow
def test_the_dataset_gone_the_prompt_stands_in(served: Any, examples: Path, tmp_path: Path) -> None:
    folder = tmp_path / "moved"
    shutil.copytree(examples / "literary_mt", folder, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    import judge_engine

    run = judge_engine.run(folder / "config.yaml", demo=True).run_dir
    (folder / "items.jsonl").unlink()
    viewer = served([run]).ready()
    page = viewer.json("api/item?id=lit-002")
    assert page["origin"] == "request" and "Sie ging zum Fenster" in page["fields"]["prompt"]
    card = page["tasks"][0]["card"]
    assert any(piece["marks"] for piece in card["target"])  # the spans are found in the prompt as sent
    assert [r["item_id"] for r in rows(viewer, "q=Fenster")] == ["lit-002"]


def test_a_live_run_is_read_never_written(served: Any, demo_runs: dict[str, Path], tmp_path: Path) -> None:
    """While another process holds a run, the viewer derives into a file of its own, and new
    outcomes appear once the writer has flushed them."""
    from dataclasses import replace

    from judge_engine.rundir.store import RunStore

    run = tmp_path / "live"
    shutil.copytree(demo_runs["literary_mt"], run)
    store = RunStore.open(run)
    try:
        before = _files(run)
        viewer = served([run]).ready()
        overview = viewer.json("api/overview")
        assert overview["live"] is True and overview["runs"][0]["live"] is True
        assert viewer.json("api/tasks")["total"] == 20
        record = next(iter(latest_outcome_records(run).values()))
        store.write_outcome(replace(record, task_id="b2:" + "f" * 32, item_id="lit-new"))
        assert store.index.count() == 21  # flushed, as the store does every couple of seconds
        assert viewer.json("api/tasks")["total"] == 21
        assert viewer.json("api/item?id=lit-new")["tasks"][0]["status"] == record.status
        _browse(viewer)
        after = _files(run)
        assert {k: v for k, v in after.items() if k != "outcomes.jsonl"} == {
            k: v for k, v in before.items() if k != "outcomes.jsonl"}  # what the store wrote, and nothing else
    finally:
        store.close()


def _partial_copy(run: Path, target: Path, *, begun: int, finished: int) -> Path:
    """A copy of ``run`` as it was while being written: the transcript lines of its first
    ``begun`` tasks, the outcomes of the first ``finished`` of them, no index; the manifest as
    the run left it (its checkpoints lag the files)."""
    shutil.copytree(run, target, ignore=shutil.ignore_patterns("index.sqlite*"))
    lines = (target / "transcripts.jsonl").read_bytes().splitlines(keepends=True)
    order = list(dict.fromkeys(json.loads(line)["task_id"] for line in lines))[:begun]
    (target / "transcripts.jsonl").write_bytes(b"".join(x for x in lines if json.loads(x)["task_id"] in order))
    kept = set(order[:finished])
    outcomes = (target / "outcomes.jsonl").read_bytes().splitlines(keepends=True)
    (target / "outcomes.jsonl").write_bytes(b"".join(x for x in outcomes if json.loads(x)["task_id"] in kept))
    return target


def test_a_run_being_written_counts_against_its_plan(served: Any, demo_runs: dict[str, Path], tmp_path: Path) -> None:
    """Twenty tasks planned, six begun, five finished: 20 tasks, 15 undone (one begun), not the
    6 tasks and 1 undone the index alone knows; the calls are the six the transcript holds so
    far, not the manifest's last checkpoint."""
    from judge_engine.rundir.store import RunStore

    run = _partial_copy(demo_runs["literary_mt"], tmp_path / "partial", begun=6, finished=5)
    store = RunStore.open(run)  # the writer holds the run
    try:
        (judge,) = served([run]).ready().json("api/overview")["judges"]
    finally:
        store.close()
    counts = judge["counts"]
    assert (counts["tasks"], counts["scored"] + counts["unscored"], counts["undone"], counts.get("started")) == (
        20, 5, 15, 1)
    assert judge["spend"]["calls"] == 6


def _files(run: Path) -> dict[str, str]:
    """Each file of a run directory but the index, by content."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()
            if p.is_file() and not p.name.startswith("index.sqlite")}


def _browse(viewer: ServedViewer) -> list[bytes]:
    """Everything a person can look at: overview, list pages in every order and filter, every
    item, every transcript."""
    bodies = [viewer.get("")[2], viewer.get("api/overview")[2]]
    for query in ("", "sort=score", "sort=score-desc", "sort=disagreement", "status=unscored", "q=a", "size=200"):
        bodies.append(viewer.get(f"api/tasks?{query}")[2])
    for row in json.loads(bodies[-1])["rows"]:
        bodies.append(viewer.get(f"api/item?id={quote(row['item_id'])}")[2])
        bodies.append(viewer.get(f"api/transcript?run={row['run']}&task={quote(row['task_id'])}")[2])
    return bodies


def test_browsing_writes_nothing_but_the_index(served: Any, demo_runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "copy"
    shutil.copytree(demo_runs["close_reading"], run)
    (run / "index.sqlite").unlink()
    before = _files(run)
    _browse(served([run]).ready())
    assert _files(run) == before
    assert {p.name for p in run.iterdir()} - set(before) <= {"index.sqlite", "index.sqlite-wal", "index.sqlite-shm"}


def test_no_secret_reaches_a_page(served: Any, hostile_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-proj-viewerTEST0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789-abcdef")
    run = hostile_run.parent / "with-secret"
    shutil.copytree(hostile_run, run, dirs_exist_ok=True)
    dataset = hostile_run.parents[1] / "items.jsonl"
    planted = dataset.read_text(encoding="utf-8").replace("Plain", f"Plain {secret} tok-0123456789-abcdef")
    dataset.write_text(planted, encoding="utf-8")
    viewer = served([run]).ready()
    for body in _browse(viewer):
        assert secret.encode() not in body and b"tok-0123456789-abcdef" not in body
    found = viewer.json("api/tasks?q=Plain")["rows"][0]["item_id"]
    assert b"[REDACTED]" in viewer.get(f"api/item?id={quote(found)}")[2]


def test_headers_forbid_inline_script_and_sniffing(mqm: ServedViewer) -> None:
    for path in ("", "static/app.js", "static/style.css", "api/overview", "api/item?id=nope"):
        status, headers, _ = mqm.get(path)
        assert "default-src 'self'" in headers["Content-Security-Policy"] and "unsafe-inline" not in headers[
            "Content-Security-Policy"], path
        assert headers["X-Content-Type-Options"] == "nosniff"
    assert mqm.get("static/app.js")[1]["Content-Type"].startswith("text/javascript")
    assert mqm.get("api/item?id=nope")[0] == 404
    assert mqm.get("static/../catalog.py")[0] == 404
    status, _, _ = mqm.get("api/overview", headers={"Host": "evil.example"})
    assert status == 403  # another site's page, rebound to 127.0.0.1, cannot read the runs


def test_the_page_needs_nothing_from_the_network() -> None:
    from judge_engine.viewer.server import STATIC

    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text, path.name
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text and "document.write" not in text, path.name
        assert "eval(" not in text and "new Function" not in text, path.name


def test_unknown_runs_and_tasks_are_errors_not_crashes(mqm: ServedViewer) -> None:
    assert mqm.get("api/transcript?run=0&task=nope")[0] == 404
    assert mqm.get("api/transcript?run=7&task=nope")[0] == 404
    assert mqm.get("api/transcript?run=x&task=nope")[0] == 400
    assert mqm.get("api/tasks?page=abc")[0] == 400
    assert math.isfinite(mqm.json("api/tasks?min=-1e308")["total"])


def test_a_run_written_before_records_existed_opens(served: Any, tmp_path: Path) -> None:
    """Format 1 (``tests/fixtures/run_v1``): outcome and transcript lines without versions, the
    whole request in every line, no blocks, no index."""
    run = tmp_path / "run_v1"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "run_v1", run)
    viewer = served([run]).ready()
    page = viewer.json("api/tasks?size=50")
    assert page["total"] == len(latest_outcome_records(run))
    row = page["rows"][0]
    item = viewer.json(f"api/item?id={quote(row['item_id'])}")
    assert item["tasks"] and all(t["card"]["kind"] != "none" for t in item["tasks"] if t["status"] == "scored")
    transcript = viewer.json(f"api/transcript?run=0&task={quote(row['task_id'])}")
    assert transcript["attempts"] and transcript["attempts"][0]["messages"]
    assert not any(m["shared"] for m in transcript["attempts"][0]["messages"])  # no blocks: nothing known shared


def _quote_marks(card: dict[str, Any], field: str) -> list[tuple[int, int, str]]:
    """``(start, end, quote)`` of each marked piece of ``field``'s text in a custom card."""
    (text,) = [t for t in card["texts"] if t["field"] == field]
    found, at = [], 0
    for piece in text["segments"]:
        found += [(at, at + len(piece["text"]), card["spans"][i]["text"]) for i in piece["marks"]]
        at += len(piece["text"])
    return found


def test_a_custom_judges_card_has_its_fields_and_quotes_in_place(served: Any, demo_runs: dict[str, Path],
                                                                 rich_custom_run: Path) -> None:
    """Each declared field in the config's order with its type, range, choices and number; each
    quote highlighted where text.locate finds it in the field it quotes (the 1-5 example and a
    1-10 judge writing a field of every kind)."""
    viewer = served([demo_runs["custom_rubric"], rich_custom_run]).ready()
    quoted = 0
    outcomes = [*latest_outcome_records(demo_runs["custom_rubric"]).values(), *latest_outcome_records(rich_custom_run).values()]
    for outcome in (o for o in outcomes if o.judge in ("helpful-json", "rich") and o.scored):
        item = viewer.json(f"api/item?id={outcome.item_id}")
        (task,) = [t for t in item["tasks"] if t["task_id"] == outcome.task_id]
        card = task["card"]
        assert card["kind"] == "custom"
        fields = {f["name"]: f for f in card["fields"]}
        assert list(fields) == [k for k in (outcome.verdict or {})]  # the declared order
        assert [f["name"] for f in card["fields"] if f["headline"]] == ["score" if outcome.judge == "helpful-json" else "quality"]
        response = item["fields"]["response"]
        assert "".join(p["text"] for p in card["texts"][0]["segments"]) == response and card["texts"][0]["field"] == "response"
        quotes = (outcome.verdict or {})["contradicted"]
        assert [card["spans"][i]["text"] for i in fields["contradicted"]["spans"]] == [q["text"] for q in quotes]
        for written in quotes:
            start, end = locate(written["text"], response)  # type: ignore[misc]
            assert (start, end) == (written["start"], written["end"])  # where the protocol found it
            assert [m for m in _quote_marks(card, "response") if m[2] == written["text"]] == [(start, end, written["text"])]
            quoted += 1
        assert all(s["where"] == "response" and s["match"] == "exact" for s in card["spans"])
        if outcome.judge == "helpful-json":
            assert (fields["score"]["type"], fields["score"]["low"], fields["score"]["high"]) == ("integer", 1, 5)
            assert fields["reasoning"]["type"] == "text" and fields["reasoning"]["description"] == "two or three sentences"
            continue
        verdict = outcome.verdict or {}
        assert [f["type"] for f in card["fields"]] == ["text", "integer", "label", "boolean", "number", "spans"]
        assert (fields["quality"]["value"], fields["quality"]["low"], fields["quality"]["high"]) == (verdict["quality"], 1, 10)
        assert fields["verdict"]["choices"] == ["pass", "borderline", "fail"]
        assert fields["verdict"]["number"] == {"pass": 1, "borderline": 0.5, "fail": 0}[verdict["verdict"]]
        assert fields["unsafe"]["value"] is verdict["unsafe"] and (fields["confidence"]["low"], fields["confidence"]["high"]) == (0, 1)
    assert quoted >= 3


def test_a_jurys_card_shows_each_vote_and_links_its_jurors(served: Any, demo_runs: dict[str, Path]) -> None:
    """Each juror's vote, score and status with its task, whose transcript has its attempts; the
    jury's own transcript has none, and names its jurors' instead."""
    viewer = served([demo_runs["custom_rubric"]]).ready()
    outcomes = latest_outcome_records(demo_runs["custom_rubric"]).values()
    juries = [o for o in outcomes if o.judge == "panel"]
    assert len(juries) == 12
    for jury in juries[:4]:
        jurors = {o.judge: o for o in outcomes if o.item_id == jury.item_id and o.judge != "panel"}
        (task,) = [t for t in viewer.json(f"api/item?id={jury.item_id}")["tasks"] if t["judge"] == "panel"]
        card = task["card"]
        assert card["kind"] == "jury" and card["aggregate"] == "median" and card["voted"] == 3
        assert card["value"] == jury.score == sorted(o.score for o in jurors.values())[1]  # type: ignore[type-var]
        assert [j["judge"] for j in card["jurors"]] == ["helpful-json", "helpful-regex", "helpful-marker"]
        for row in card["jurors"]:
            juror = jurors[row["judge"]]
            assert (row["vote"], row["score"], row["status"], row["reason_code"], row["task_id"]) == (
                juror.score, juror.score, "scored", None, juror.task_id)
            transcript = viewer.json(f"api/transcript?run=0&task={quote(row['task_id'])}")
            assert transcript["judge"] == row["judge"] and len(transcript["attempts"]) == juror.attempts >= 1
        assert card["parts"] == [{"judge": j["judge"], "task_id": j["task_id"]} for j in card["jurors"]]
        own = viewer.json(f"api/transcript?run=0&task={quote(jury.task_id)}")
        assert own["attempts"] == [] and own["outcome"]["parts"] == card["parts"]
    helpful = next(t for t in viewer.json(f"api/item?id={juries[0].item_id}")["tasks"] if t["judge"] == "helpful-json")
    assert "parts" not in helpful["card"]  # a judge's card has its own transcript
    judge_transcript = viewer.json(f"api/transcript?run=0&task={quote(helpful['task_id'])}")
    assert judge_transcript["outcome"]["parts"] is None


def test_histograms_span_the_declared_scale(served: Any, demo_runs: dict[str, Path], rich_custom_run: Path) -> None:
    """A 1-10 custom score is drawn on 1..10 and a jury on its jurors' 1..5, whatever the scores'
    own extremes; a judge without a scale on its scores'."""
    viewer = served([demo_runs["custom_rubric"], rich_custom_run]).ready()
    judges = {j["label"]: j for j in viewer.json("api/overview")["judges"]}
    rich = judges["rich"]["histogram"]
    assert (rich["low"], rich["high"], rich["exact"]) == (1, 10, True)
    assert sum(b["n"] for b in rich["bars"]) == judges["rich"]["counts"]["scored"]
    for label in ("panel", "helpful-json"):
        assert (judges[label]["histogram"]["low"], judges[label]["histogram"]["high"]) == (1, 5)
    assert judges["panel"]["score_range"] == [1, 5]


def test_a_request_it_cannot_parse_is_refused_without_a_traceback(mqm: ServedViewer,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    import socket

    port = int(mqm.url.rsplit(":", 1)[1].split("/")[0])
    for raw in (b"GET /api/overview HTTP/1.1\r\n\r\n", b"GET /api/overview HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(raw)
            answer = connection.recv(200)
        assert answer.split(b" ")[1] == b"400", answer  # no Host (or two): refused...
    time.sleep(0.2)
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]  # ...quietly
