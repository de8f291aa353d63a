"""The answer cache: batched writes, readable at once, all written by close; a disk that refuses it
leaves it read, never written, and said once."""

from __future__ import annotations

from pathlib import Path

from judge_engine.running.cache import FLUSH_AFTER_S, FLUSH_EVERY, AnswerCache


def test_answers_are_batched_readable_at_once_and_written_by_close(tmp_path: Path) -> None:
    now = [0.0]

    def on_disk() -> int:
        reader = AnswerCache(tmp_path)  # a second connection sees only committed answers
        try:
            return sum(1 for n in range(200) if reader.get(f"k{n}") is not None)
        finally:
            reader.close()

    cache = AnswerCache(tmp_path, clock=lambda: now[0])
    cache.set("k0", {"content": "zero"})
    assert cache.get("k0") == {"content": "zero"}  # pending, yet readable
    assert on_disk() == 0
    for n in range(1, FLUSH_EVERY):
        cache.set(f"k{n}", {"content": str(n)})
    assert on_disk() == FLUSH_EVERY  # a full batch is committed
    cache.set(f"k{FLUSH_EVERY}", {"content": "late"})
    now[0] += FLUSH_AFTER_S
    cache.set(f"k{FLUSH_EVERY + 1}", {"content": "later"})
    assert on_disk() == FLUSH_EVERY + 2  # an old batch is committed at the next answer
    cache.set("k199", {"content": "last"})
    cache.close()
    assert on_disk() == FLUSH_EVERY + 3
    reopened = AnswerCache(tmp_path)
    assert reopened.get("k199") == {"content": "last"} and reopened.get("k0") == {"content": "zero"}
    reopened.close()


def _full_sqlite(cache: AnswerCache) -> None:
    """Let the cache's database grow by no page more (SQLite then says the disk is full)."""
    db = cache._cache._con  # type: ignore[union-attr]
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")


def test_a_cache_that_cannot_be_written_is_read_and_said_once(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "cache")
    cache.set("kept", {"content": "before"})
    cache.flush()
    _full_sqlite(cache)
    for number in range(200):
        cache.set(f"key-{number}", {"content": "x" * 500})
    cache.flush()
    assert cache.problem is not None and "the disk is full" in cache.problem and str(tmp_path / "cache") in cache.problem
    assert cache.get("kept") == {"content": "before"}  # still read
    cache.set("later", {"content": "y"})
    assert cache.get("later") is None  # not written any more, not even pending
    cache.close()
