"""The one home of diskcache: answers stored by the content hash of everything that can change them.

The key covers the model, the rendered messages, the sampling parameters, the response format,
the protocol name and version, the template hashes and the repeat index (three repeats are three
draws, not one cached answer). Timeouts, limits and retries cannot change an answer and are not in
it. Eviction is off: a cached answer is money already spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import diskcache

from judge_engine.jsonio import content_hash


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
) -> str:
    """The content-hash key of one provider request."""
    return content_hash(
        {
            "model": model,
            "messages": list(messages),
            "sampling": dict(sampling),
            "response_format": response_format,
            "protocol": protocol,
            "protocol_version": protocol_version,
            "templates": list(template_hashes),
            "repeat": repeat,
        },
        size=20,
    )


class AnswerCache:
    """A persistent mapping from :func:`cache_key` to a provider answer (a JSON-able dict)."""

    def __init__(self, directory: Path, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._cache: diskcache.Cache | None = None
        if enabled:
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
            )

    def get(self, key: str) -> dict[str, Any] | None:
        if self._cache is None:
            return None
        value = self._cache.get(key)
        return value if isinstance(value, dict) else None

    def set(self, key: str, value: Mapping[str, Any]) -> None:
        if self._cache is not None:
            self._cache.set(key, dict(value))

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else 0
