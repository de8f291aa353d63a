"""The one home of diskcache: answers stored by the content hash of everything that can change them.

The key covers the model, the rendered messages, the sampling parameters, the response format,
the protocol name and version, the template hashes and the repeat index (three repeats are three
draws, not one cached answer), and for generation protocols the item's id (DAT's prompt is the
same for every item: each item is a draw of its own, never another item's answer). Timeouts, limits and retries cannot change an answer and are not in
it. Eviction is off: a cached answer is money already spent.

Writes are batched: SQLite commits one transaction per ``set``, and committing 64 answers at
once costs a third of the CPU (0.03 against 0.08 ms per answer). Pending answers are readable at
once and written with the 64th answer, with the first answer after a second, and at ``close``.
A kill -9 can lose the last batch from the cache, never from the run: outcomes and transcripts are written separately, and
resume reads those; only a later ``--new-run`` would ask those few prompts again.

A cache that cannot be written (its disk full, read-only or over quota) does not stop a run: the
run's own files are the record, and a cache is often on another disk (a shared or read-only one).
The first such failure is kept in :attr:`AnswerCache.problem` (the run says it once, at its end)
and the cache is read, never written, from then on; the answers not cached are still in the run
directory, and only a later ``--new-run`` would ask for them again. When the cache shares the
run's disk, the run's next write stops the run anyway (:mod:`judge_engine.rundir.disk`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import diskcache

from judge_engine.rundir.disk import disk_error
from judge_engine.util.jsonio import content_hash


def cache_key(
    *,
    model: str,
    messages: Sequence[Mapping[str, str]],
    sampling: Mapping[str, Any],
    response_format: Mapping[str, Any] | None,
    protocol: str,
    protocol_version: str,
    template_hashes: Sequence[str],
    repeat: int,
    item: str | None = None,
) -> str:
    """The content-hash key of one provider request (``item``: the item's id, for protocols
    whose items are independent draws of the same prompt; left out of the key otherwise, so
    every judge's existing keys stay as they were)."""
    fields: dict[str, Any] = {
        "model": model,
        "messages": list(messages),
        "sampling": dict(sampling),
        "response_format": response_format,
        "protocol": protocol,
        "protocol_version": protocol_version,
        "templates": list(template_hashes),
        "repeat": repeat,
    }
    if item is not None:
        fields["item"] = item
    return content_hash(fields, size=20)


FLUSH_EVERY = 64
"""Answers written per SQLite transaction."""
FLUSH_AFTER_S = 1.0
"""Longest time an answer waits for its batch (checked at the next ``set``)."""


class AnswerCache:
    """A persistent mapping from :func:`cache_key` to a provider answer (a JSON-able dict)."""

    def __init__(self, directory: Path, *, enabled: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self.directory = directory
        self._cache: diskcache.Cache | None = None
        self._pending: dict[str, dict[str, Any]] = {}
        self._clock = clock
        self._last_flush = clock()
        self.problem: str | None = None
        """Why answers are not written any more (the cache's disk refused), or None."""
        if enabled:
            try:
                directory.mkdir(parents=True, exist_ok=True)
                # SQLite's page cache (32 MB) and memory map (64 MB) by default fill as the cache file
                # grows: RSS then grows with the job. Lookups are by key, so a small cache suffices.
                self._cache = diskcache.Cache(
                    str(directory),
                    eviction_policy="none",
                    size_limit=2**62,
                    statistics=False,
                    sqlite_mmap_size=0,
                    sqlite_cache_size=1024,
                    cull_limit=0,  # nothing expires or is evicted: no culling query on every set
                )
            except Exception as exc:
                self._give_up(exc, "could not be opened: this run does not use it")

    def get(self, key: str) -> dict[str, Any] | None:
        if self._cache is None:
            return None
        pending = self._pending.get(key)
        if pending is not None:
            return pending
        value = self._cache.get(key)
        return value if isinstance(value, dict) else None

    def set(self, key: str, value: Mapping[str, Any]) -> None:
        if self._cache is None or self.problem is not None:
            return
        self._pending[key] = dict(value)
        if len(self._pending) >= FLUSH_EVERY or self._clock() - self._last_flush >= FLUSH_AFTER_S:
            self.flush()

    def flush(self) -> None:
        """Write the pending answers in one transaction."""
        self._last_flush = self._clock()
        if self._cache is None or not self._pending:
            return
        try:
            with self._cache.transact():
                for key, value in self._pending.items():
                    self._cache.set(key, value)
        except Exception as exc:
            self._give_up(exc, "could not be written: answers from then on are not cached (the run directory "
                               "has them)")
        self._pending.clear()

    def _give_up(self, exc: Exception, what: str) -> None:
        """Stop writing the cache for a failure of its disk (kept in :attr:`problem`); anything
        else is raised."""
        error = disk_error(exc, self.directory)
        if error is None:
            raise exc
        self.problem = f"the answer cache {what}; {error}"

    def close(self) -> None:
        """Write the pending answers and close the database (closed even if the write fails)."""
        if self._cache is not None:
            try:
                self.flush()
            finally:
                self._cache.close()
