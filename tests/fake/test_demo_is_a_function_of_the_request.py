"""A demo's answers are a function of the request (issue 34, point 8a): two ``--demo`` runs of the
CDAT example with fresh caches give every task the same words, whatever order the requests
arrived in (one at a time in the file's order, or many at once with the items the other way
round). The DAT sends one prompt for every item, so before, which item got which list depended
on the order the identical requests reached the fake server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.protocols.lexicon import LexiconUnavailable, PackagedLexicon

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cdat"


def _answers(tmp_path: Path, name: str, concurrency: int, *, reverse: bool = False) -> dict[tuple[Any, ...], str]:
    """The CDAT example run with --demo in a folder of its own (a fresh cache), its judges at
    ``concurrency``, without embeddings (the words are what is compared), its items the other
    way round when ``reverse``: each task's answer, by judge, item, temperature and repeat."""
    folder = tmp_path / name
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    if reverse:
        items = folder / "items.jsonl"
        items.write_text("".join(reversed(items.read_text(encoding="utf-8").splitlines(keepends=True))),
                         encoding="utf-8")
    config = folder / "config.yaml"
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    for judge in data["judges"]:
        judge["protocol_options"] = {**judge.get("protocol_options", {}), "embedder": "none"}
        judge["limits"]["concurrency"] = concurrency
    data["judges"][2]["repeats"] = 2  # the DAT's samples of one prompt
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    assert main(["run", str(config), "--demo", "--no-live", "--allow-unscored"]) == 0
    answers = {}
    for line in (folder / "runs" / "latest" / "outcomes.jsonl").read_text(encoding="utf-8").splitlines():
        outcome = json.loads(line)
        key = (outcome["judge"], outcome["item_id"], outcome["temperature"], outcome["repeat"])
        answers[key] = json.dumps(outcome["verdict"]) if outcome["verdict"] else outcome["reason"]
    return answers


@pytest.mark.slow
def test_two_demo_runs_with_fresh_caches_give_every_task_the_same_answer(tmp_path: Path) -> None:
    try:
        PackagedLexicon()
    except LexiconUnavailable as exc:
        pytest.skip(str(exc))
    one_at_a_time = _answers(tmp_path, "first", concurrency=1)
    all_at_once = _answers(tmp_path, "second", concurrency=16, reverse=True)
    assert len(one_at_a_time) == 12 * 2 * 2 + 12 * 2 * 2  # two CDAT judges, the DAT twice: x 2 temperatures
    differ = sorted(key for key in one_at_a_time if one_at_a_time[key] != all_at_once.get(key))
    assert differ == []
    dat = [text for (judge, *_), text in one_at_a_time.items() if judge == "gpt-4o-mini-dat"]
    assert len(set(dat)) > len(dat) // 2  # the DAT's items are still samples of their own, not one list


def test_a_request_that_names_its_sample_is_answered_by_it_in_any_order() -> None:
    from judge_engine.fake import FakeConfig, FakeServer
    from judge_engine.fake.config import SAMPLE_HEADER
    from judge_engine.protocols.cdat import DAT
    from tests.fake.test_server import post

    body = {"model": "gpt-4o-mini", "messages": DAT().render({"id": "x"}), "temperature": 1.5}

    def answers(order: list[int], **config: Any) -> dict[int, bytes]:
        with FakeServer(FakeConfig(**config)) as server:
            replies = {n: post(server.base_url, body, headers={SAMPLE_HEADER: str(n)}) for n in order}
        return {n: reply.content.encode() if reply.status == 200 else b"%d" % reply.status
                for n, reply in replies.items()}

    forwards, backwards = answers([0, 1, 2, 3]), answers([3, 2, 1, 0])
    assert forwards == backwards and len(set(forwards.values())) == 4  # four samples of one prompt
    # a fault is drawn per (request, sample, how many times that sample came before): a retry redraws
    faults = answers(list(range(40)), error_500_rate=0.5)
    assert faults == answers(list(reversed(range(40))), error_500_rate=0.5)
    assert 5 < list(faults.values()).count(b"500") < 35


def test_the_engine_and_the_fake_name_the_sample_in_the_same_header() -> None:
    from judge_engine.fake.config import SAMPLE_HEADER as READ
    from judge_engine.providers.base import SAMPLE_HEADER as SENT

    assert READ == SENT
