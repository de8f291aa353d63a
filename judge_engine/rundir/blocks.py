"""Content-addressed message blocks: each request's repeated text stored once per run.

A GEMBA-MQM request is ~6 KB, and ~86% of it is text every request repeats: the system prompt,
the few-shot turns, and the instruction around the item in the final turn. Version 3 transcript
lines (:mod:`judge_engine.rundir.records`) therefore store a request as references into the run's
``blocks.jsonl``, and only what is new inline (the item's own text, the answer):

``blocks.jsonl``: one block per line, each written once per run, before any line refers to it::

    {"id": "<16 hex>", "frame": {...}}      the request without its messages (model, temperature,
                                            max_tokens, response_format, params, api_base)
    {"id": "<16 hex>", "message": {...}}    a whole message {"role", "content"}
    {"id": "<16 hex>", "text": "..."}       a literal part of a message (the template around fields)
    {"id": "<16 hex>", "seq": ["<id>", ...]}  a run of whole-message blocks (a shared prefix)

An encoded request (the ``request`` of a version 3 attempt line)::

    {"frame": "<id>", "messages": [entry, ...]}
    entry: {"seq": "<id>"} | {"m": "<id>"} | {"role": r, "content": "..."}
           | {"role": r, "parts": ["inline text" | {"t": "<id>"}, ...]}

A message that quotes the item's fields (the final turn, usually) is split at those values: the
text between them is a block (shared by every item), the values stay inline. The split is
generic (any protocol, any template): it needs only the item's field values, and a message whose
values cannot be found whole is simply stored whole. :func:`decode_request` rebuilds the request
exactly as :meth:`ProviderRequest.as_sent <judge_engine.providers.base.ProviderRequest.as_sent>`
recorded it, byte for byte.

Block ids are 64-bit BLAKE2b hashes of the block's canonical JSON (sorted keys): within one run a
collision is out of reach (~10^-7 at ten million distinct blocks), and ids repeat in every line,
so they are kept short.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from judge_engine.errors import RunDirError
from judge_engine.util import jsonio

BLOCKS = "blocks.jsonl"
MIN_BLOCK = 48
"""Characters below which a message or a literal part stays inline (a reference costs ~25 bytes)."""
MIN_VALUE = 8
"""Characters below which an item value is not split out (a language name stays in the literal)."""
_MEMO_LIMIT = 4096
_HEAD = 32


def block_id(kind: str, body: Any) -> str:
    """The id of a block: BLAKE2b-64 of the canonical JSON of ``{kind: body}``, 16 hex characters."""
    return hashlib.blake2b(jsonio.canonical({kind: body}), digest_size=8).hexdigest()


class BlockSink(Protocol):
    """Where an encoder puts blocks (the run store writes new ones before the line that refers to them)."""

    def add(self, kind: str, body: Any) -> str:
        """Record a block of ``kind`` (``frame``, ``message``, ``text`` or ``seq``) if new; its id."""
        ...


class Encoder:
    """Encodes requests against one run's blocks, remembering the ids of text it has seen (the
    protocols hand the same prompt strings over and over, so most lookups are one dict hit)."""

    def __init__(self, sink: BlockSink) -> None:
        self._sink = sink
        self._memo: dict[tuple[str, str, str], str] = {}
        # The last request's leading run of whole messages, with its encoding: a protocol sends
        # the same system prompt and shots (the very same objects) before every item, so one
        # comparison replaces encoding them again.
        self._last_lead: tuple[list[Any], dict[str, str]] | None = None

    def _block(self, kind: str, key: str, role: str, body: Any) -> str:
        memo_key = (kind, role, key)
        found = self._memo.get(memo_key)
        if found is None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()  # the long-lived prefixes come straight back
            found = self._memo[memo_key] = self._sink.add(kind, body)
        return found

    def encode(self, request: Mapping[str, Any], split_at: Iterable[str] = ()) -> dict[str, Any]:
        """The encoded form of ``request`` (an ``as_sent`` dict), splitting messages at the
        values in ``split_at`` (the item's field values)."""
        frame = {k: v for k, v in request.items() if k != "messages"}
        frame_id = self._block("frame", jsonio.canonical(frame).decode(), "", frame)
        values = sorted({v for v in split_at if len(v) >= MIN_VALUE}, key=len, reverse=True)
        messages = request.get("messages", [])
        if self._last_lead is not None:
            lead_messages, lead_entry = self._last_lead
            n = len(lead_messages)
            if len(messages) > n and messages[:n] == lead_messages:
                rest = [self._message(m, values) for m in messages[n:]]
                if not (len(rest[0]) == 1 and "m" in rest[0]):  # else the run of whole messages grew
                    return {"frame": frame_id, "messages": [lead_entry, *rest]}
        entries = [self._message(m, values) for m in messages]
        lead = 0
        while lead < len(entries) and len(entries[lead]) == 1 and "m" in entries[lead]:  # {"m": id} alone
            lead += 1
        if lead >= 2:
            ids = [e["m"] for e in entries[:lead]]
            seq = {"seq": self._block("seq", ",".join(ids), "", ids)}
            self._last_lead = (list(messages[:lead]), seq)
            entries = [seq, *entries[lead:]]
        return {"frame": frame_id, "messages": entries}

    def _message(self, message: Mapping[str, str], values: Sequence[str]) -> dict[str, Any]:
        role, content = str(message.get("role", "")), str(message.get("content") or "")
        if len(content) >= MIN_BLOCK and (known := self._memo.get(("message", role, content))) is not None:
            # Stored whole before (the system prompt, the shots): no search for the item's values
            # through 5 KB of text the item did not write. Any encoding decodes to the same text.
            return {"m": known}
        if values:
            parts = self._parts(content, values)
            if parts is not None:
                return {"role": role, "parts": parts}
        if len(content) >= MIN_BLOCK:
            return {"m": self._block("message", content, role, {"role": role, "content": content})}
        return {"role": role, "content": content}

    def _parts(self, content: str, values: Sequence[str]) -> list[Any] | None:
        spans = _occurrences(content, values)
        if not spans:
            return None  # no value in this message: store it whole
        parts: list[Any] = []
        position = 0
        for start, end in spans:
            self._literal(parts, content[position:start])
            parts.append(content[start:end])
            position = end
        self._literal(parts, content[position:])
        return parts

    def _literal(self, parts: list[Any], text: str) -> None:
        if not text:
            return
        if len(text) >= MIN_BLOCK:
            parts.append({"t": self._block("text", text, "", text)})
        else:
            parts.append(text)


def _occurrences(content: str, values: Sequence[str]) -> list[tuple[int, int]]:
    """Non-overlapping ``(start, end)`` of the values in ``content``, left to right; where two
    overlap, the one that starts first (then the longer) wins."""
    found: list[tuple[int, int]] = []
    for value in values:
        # Found by its first characters, then checked whole: str.find prepares a long needle
        # (a paragraph) before scanning, which cost more than the scan itself.
        head = value[:_HEAD]
        start = content.find(head)
        while start != -1:
            if content.startswith(value, start):
                found.append((start, start + len(value)))
                start = content.find(head, start + len(value))
            else:
                start = content.find(head, start + 1)
    found.sort(key=lambda span: (span[0], -span[1]))
    kept: list[tuple[int, int]] = []
    for span in found:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


def item_values(item: Mapping[str, Any]) -> list[str]:
    """The text values of an item (strings, and strings inside lists), to split messages at."""
    found: list[str] = []
    for value in item.values():
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list | tuple):
            found.extend(v for v in value if isinstance(v, str))
    return found


def decode_request(encoded: Mapping[str, Any], blocks: Mapping[str, Any], *, where: str = BLOCKS) -> dict[str, Any]:
    """The request as sent, rebuilt from its encoded form and the run's blocks.

    Raises:
        RunDirError: a reference to a block the run does not have.
    """
    frame = dict(_get(blocks, encoded["frame"], where))
    messages: list[dict[str, str]] = []
    for entry in encoded.get("messages", []):
        if "seq" in entry:
            messages.extend(dict(_get(blocks, ref, where)) for ref in _get(blocks, entry["seq"], where))
        elif "m" in entry:
            messages.append(dict(_get(blocks, entry["m"], where)))
        elif "parts" in entry:
            text = "".join(p if isinstance(p, str) else _get(blocks, p["t"], where) for p in entry["parts"])
            messages.append({"role": entry["role"], "content": text})
        else:
            messages.append({"role": entry["role"], "content": entry["content"]})
    request: dict[str, Any] = {"model": frame.pop("model")} if "model" in frame else {}
    request["messages"] = messages
    request.update(frame)
    return request


def _get(blocks: Mapping[str, Any], ref: str, where: str) -> Any:
    try:
        return blocks[ref]
    except KeyError:
        raise RunDirError(f"{where}: no block {ref!r} (the run directory is incomplete)") from None


def block_line(kind: str, body: Any, ident: str) -> dict[str, Any]:
    """The ``blocks.jsonl`` line of a block."""
    return {"id": ident, kind: body}


def read_block_line(raw: Mapping[str, Any], *, where: str = BLOCKS) -> tuple[str, Any]:
    """(id, body) of a ``blocks.jsonl`` line.

    Raises:
        RunDirError: a line that is not a block.
    """
    kinds = [k for k in ("frame", "message", "text", "seq") if k in raw]
    if "id" not in raw or len(kinds) != 1:
        raise RunDirError(f"{where}: not a block line")
    return str(raw["id"]), raw[kinds[0]]


def known_kinds() -> Sequence[str]:
    return ("frame", "message", "text", "seq")
