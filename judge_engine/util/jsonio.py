"""The one home of orjson: fast, canonical JSON for hashing, storage and the wire."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(obj: Any) -> bytes:
    """Serialise to compact JSON bytes (keys in insertion order)."""
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def dumps_line(obj: Any) -> bytes:
    """Serialise to one JSONL line, newline included."""
    return orjson.dumps(
        obj, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    )


def canonical(obj: Any) -> bytes:
    """Canonical JSON (sorted keys, compact): the input of every content hash."""
    return orjson.dumps(obj, option=_CANONICAL)


def pretty(obj: Any) -> str:
    """Indented JSON text with sorted keys, for manifests and schemas people read."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | _CANONICAL).decode() + "\n"


def indented(obj: Any) -> str:
    """Indented JSON text, keys in insertion order, for data files people read and diff."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n"


def loads(data: bytes | str) -> Any:
    """Parse JSON text or bytes."""
    return orjson.loads(data)


JSONDecodeError = orjson.JSONDecodeError


def content_hash(obj: Any, *, size: int = 16) -> str:
    """A tagged BLAKE2b hash of the canonical JSON of ``obj``, e.g. ``b2:1f0c...``."""
    return "b2:" + hashlib.blake2b(canonical(obj), digest_size=size).hexdigest()


def text_hash(text: str | bytes, *, size: int = 16) -> str:
    """A tagged BLAKE2b hash of raw text (templates, files)."""
    data = text.encode() if isinstance(text, str) else text
    return "b2:" + hashlib.blake2b(data, digest_size=size).hexdigest()
