"""batches.jsonl: its one definition (records.py), read back, and folded into a ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_engine.errors import RunDirError
from judge_engine.rundir.records import BATCHES, BatchCarry, BatchEvent, Manifest, batch_line
from judge_engine.running.batch.board import BatchBoard, ChunkView, provider_ids
from judge_engine.running.batch.ledger import Ledger, custom_id, read_ledgers, task_of
from judge_engine.running.resumption import Resumption
from judge_engine.util.jsonio import dumps_line

AT = "2026-01-01T00:00:00.000+00:00"


def _carry(task: str, round_: int, chunk: str, to: str = "batch") -> BatchCarry:
    return BatchCarry(judge="j", chunk=chunk, at=AT, task_id=f"b2:{task}", item={"id": "x", "source": "s"},
                      variant="", temperature=0.0, repeat=0, row=3, row_tasks=1, round=round_, to=to,  # type: ignore[arg-type]
                      why="expired", turns=({"role": "assistant", "content": "a"},), log={"attempts": 1, "cost": 0.5})


def test_every_line_reads_back_as_written() -> None:
    lines = [
        BatchEvent("intent", "j", "j-r1-00001", AT, round=1, api="openai", tasks=("aa", "bb"), rows=(0, 1), requests=2,
                   bytes=100, tokens=50),
        BatchEvent("uploaded", "j", "j-r1-00001", AT, file_id="file-1"),
        BatchEvent("submitted", "j", "j-r1-00001", AT, batch_id="batch-1", file_id="file-1", found=True, tentative=True),
        BatchEvent("state", "j", "j-r1-00001", AT, batch_id="batch-1", status="in_progress", counts={"total": 2}),
        BatchEvent("refused", "j", "j-r1-00001", AT, batch_id="batch-1", reason="quota"),
        BatchEvent("collected", "j", "j-r1-00001", AT, batch_id="batch-2", status="expired", counts={"completed": 1}),
        _carry("aa", 2, "j-r1-00001"),
    ]
    for line in lines:
        assert batch_line(line.to_dict()) == line


def test_a_newer_or_malformed_line_is_refused_not_misread() -> None:
    newer = {**BatchEvent("uploaded", "j", "c", AT, file_id="f").to_dict(), "v": 99}
    with pytest.raises(RunDirError, match="newer judge-engine"):
        batch_line(newer)
    with pytest.raises(RunDirError, match="without 'chunk'"):
        batch_line({"v": 1, "event": "uploaded", "judge": "j"})
    with pytest.raises(RunDirError, match="malformed"):
        batch_line({"v": 1, "event": "exploded", "judge": "j", "chunk": "c"})


def test_custom_ids_are_anthropic_safe_and_name_their_task_and_round() -> None:
    task = "b2:" + "0123456789abcdef" * 2
    custom = custom_id(task, 2)
    assert custom == "0123456789abcdef0123456789abcdef-2" and len(custom) <= 64
    assert task_of(custom) == task and custom != custom_id(task, 1)


def test_the_ledger_folds_chunks_and_carries(tmp_path: Path) -> None:
    lines = [
        BatchEvent("intent", "j", "j-r1-00001", AT, round=1, api="openai", tasks=("aa", "bb"), rows=(0, 1), requests=2),
        BatchEvent("submitted", "j", "j-r1-00001", AT, batch_id="batch-1"),
        BatchEvent("state", "j", "j-r1-00001", AT, batch_id="batch-1", status="expired", counts={"total": 2}),
        _carry("bb", 2, "j-r1-00001"),
        _carry("cc", 2, "j-r1-00001", to="online"),
        BatchEvent("collected", "j", "j-r1-00001", AT, batch_id="batch-1", status="expired"),
        BatchEvent("intent", "j", "j-r2-00002", AT, round=2, api="openai", tasks=("bb",), requests=1),
        BatchEvent("submitted", "j", "j-r2-00002", AT, batch_id="batch-2"),
        BatchEvent("refused", "j", "j-r2-00002", AT, batch_id="batch-2", reason="quota"),
        BatchEvent("intent", "k", "k-r1-00001", AT, round=1, api="anthropic", tasks=("dd",), requests=1),
    ]
    (tmp_path / BATCHES).write_bytes(b"".join(dumps_line(line.to_dict()) for line in lines) + b'{"v": 1, "ev')
    ledgers = read_ledgers(tmp_path)  # the torn last line is skipped
    ledger = ledgers["j"]
    first, second = ledger.chunks["j-r1-00001"], ledger.chunks["j-r2-00002"]
    assert first.collected and first.tasks == () and not first.sent
    # the round-2 chunk took bb's carry; cc went online and stays pending until it has an outcome
    assert set(ledger.pending) == {"b2:cc"} and set(ledger.carried_into["j-r2-00002"]) == {"b2:bb"}
    assert second.batch_id is None and second.status == "refused" and second.refusals == 1
    assert second.known == {"batch-2"} and ledger.known_batches() == {"batch-1", "batch-2"}
    assert ledger.in_flight() == {"b2:bb", "b2:cc"} and ledger.next_sequence() == 3
    assert list(ledgers["k"].chunks) == ["k-r1-00001"]
    assert Ledger().in_flight() == set()


def test_the_manifest_names_each_chunks_provider_batch_and_reads_without_them() -> None:
    """``run.json``'s ``batches`` (judge -> chunk -> the provider's batch id), added within
    manifest version 1: a manifest written before it reads with none."""
    base = {"format": "judge-engine-run", "version": 1, "run_id": "run"}
    assert Manifest.from_dict(base).batches == {}
    manifest = Manifest.from_dict({**base, "batches": {"j": {"j-r1-00001": "batch_abc", "j-r2-00002": "batch_def"}}})
    assert manifest.batches == {"j": {"j-r1-00001": "batch_abc", "j-r2-00002": "batch_def"}}
    assert Manifest.from_dict(manifest.to_dict()).batches == manifest.batches
    assert "batches" not in Manifest.from_dict(base).to_dict()  # an online run's manifest is as it was


def test_a_resumed_session_counts_the_leading_rows_it_skips_as_finished() -> None:
    """What the batch driver asks before it records or sends anything of an earlier session's
    chunk or carry: a task of the leading items skipped unread is finished, like the others."""
    resumption = Resumption(skip_rows=5, skip_tasks=5, done=frozenset({"b2:late"}), again=frozenset({"b2:retried"}))
    assert resumption.finished("b2:early", 4) and resumption.finished("b2:late", 9)
    assert not resumption.finished("b2:open", 5) and not resumption.finished("b2:retried", 7)
    assert not resumption.finished("b2:unknown-row", -1)


def test_provider_ids_come_from_the_boards_once_read_else_from_the_manifest() -> None:
    board = BatchBoard(chunks=[ChunkView("j-r1-00001", 1, 10, "in_progress", "batch_new"),
                               ChunkView("j-r1-00002", 1, 10, "refused", None)])
    recorded = {"j": {"j-r1-00001": "batch_old"}, "k": {"k-r1-00001": "msgbatch_k"}}
    assert provider_ids({"j": board, "k": BatchBoard()}, recorded) == {"j": {"j-r1-00001": "batch_new"},
                                                                       "k": {"k-r1-00001": "msgbatch_k"}}
