"""Compact transcripts (issue 15, item 1): every request is stored as references to blocks plus
the item's own text, and rebuilt exactly as it was sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings, strategies as st

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import iter_items
from judge_engine.planning.plan import build_protocol
from judge_engine.protocols.base import REASK_MARKER
from judge_engine.rundir.blocks import Encoder, block_id, decode_request, item_values
from judge_engine.rundir.records import AttemptRecord
from judge_engine.rundir.store import iter_transcript, read_blocks
from tests.harness import make_job, read_lines

REPO = Path(__file__).resolve().parents[2]


class MemorySink:
    def __init__(self) -> None:
        self.blocks: dict[str, Any] = {}
        self.added: list[str] = []

    def add(self, kind: str, body: Any) -> str:
        ident = block_id(kind, body)
        if ident not in self.blocks:
            self.blocks[ident] = body
            self.added.append(ident)
        return ident


def _request(messages: list[dict[str, str]], **frame: Any) -> dict[str, Any]:
    return {"model": "openai/gpt-4o-mini", "messages": messages, "temperature": 0.0, "max_tokens": 500, **frame}


def test_a_gemba_request_round_trips_and_shares_everything_but_the_item() -> None:
    config = load_config(REPO / "examples" / "literary_mt" / "config.yaml")
    protocol = build_protocol(config.judges[0])
    sink = MemorySink()
    encoder = Encoder(sink)
    items = list(iter_items(config.dataset, protocol.required_fields))
    sizes = []
    for index, item in enumerate(items):
        request = _request(protocol.render(item))
        encoded = encoder.encode(request, item_values(item))
        assert decode_request(encoded, sink.blocks) == request
        text = json.dumps(request, ensure_ascii=False)
        assert json.dumps(decode_request(encoded, sink.blocks), ensure_ascii=False) == text  # byte for byte
        sizes.append(len(json.dumps(encoded, ensure_ascii=False)))
        if index == 0:
            first_blocks = len(sink.blocks)
        assert item["source"] in json.dumps(encoded, ensure_ascii=False)  # the item's own text stays inline
    assert len(sink.blocks) == first_blocks  # every later item reused the first one's blocks
    assert max(sizes) < 800 and sum(sizes) / len(sizes) < 500


def test_reask_turns_json_mode_and_candidate_lists_round_trip() -> None:
    sink = MemorySink()
    encoder = Encoder(sink)
    item = {"id": "b1", "source": "Der Schnee behielt seinen Rat.", "candidates": ["The snow kept its counsel.",
                                                                                 "Snow kept counsel."]}
    user = ("Rank these:\nA: The snow kept its counsel.\nB: Snow kept counsel.\nSource: Der Schnee behielt seinen "
            "Rat.\n" + "Answer with Best and Worst. " * 5)
    messages = [{"role": "system", "content": "You are a careful judge of literary translation quality." * 2},
                {"role": "user", "content": user},
                {"role": "assistant", "content": "I like them both."},
                {"role": "user", "content": f"{REASK_MARKER}:\n- no best translation given\nPlease answer again."}]
    request = _request(messages, response_format={"type": "json_schema", "json_schema": {"name": "bws"}},
                       api_base="http://127.0.0.1:9/v1", seed=7)
    encoded = encoder.encode(request, item_values(item))
    assert decode_request(encoded, sink.blocks) == request
    parts = encoded["messages"][1]["parts"]
    assert "The snow kept its counsel." in parts and "Der Schnee behielt seinen Rat." in parts
    assert set(sink.blocks[encoded["frame"]]) == {"model", "temperature", "max_tokens", "response_format",
                                                  "api_base", "seed"}


def test_a_message_stored_whole_is_referred_to_whole_afterwards() -> None:
    """The system prompt and the shots repeat in every request: once stored whole, they are
    referred to without searching their ~5 KB for each new item's values (the encoding is a
    storage choice: either way the request decodes to the same text)."""
    sink = MemorySink()
    encoder = Encoder(sink)
    system = {"role": "system", "content": "You are an annotator for the quality of machine translation. " * 2}
    first = encoder.encode(_request([system, {"role": "user", "content": "Rate: Der Schnee behielt seinen Rat."}]),
                           ["Der Schnee behielt seinen Rat."])
    quoting = ["an annotator for the quality", "Der Wind behielt seinen Rat."]  # an item quoting the prompt
    later = _request([system, {"role": "user", "content": "Rate: Der Wind behielt seinen Rat."}])
    encoded = encoder.encode(later, quoting)
    assert encoded["messages"][0] == first["messages"][0] == {"m": block_id("message", system)}
    assert decode_request(encoded, sink.blocks) == later


@settings(max_examples=200, deadline=None)
@given(
    contents=st.lists(st.text(max_size=120), min_size=1, max_size=5),
    values=st.lists(st.text(min_size=0, max_size=30), max_size=4),
)
def test_any_request_round_trips(contents: list[str], values: list[str]) -> None:
    sink = MemorySink()
    messages = [{"role": ("user", "assistant")[i % 2], "content": c} for i, c in enumerate(contents)]
    request = _request(messages)
    for _ in range(2):  # the second time, everything comes from blocks already known
        encoded = Encoder(sink).encode(request, values)
        assert decode_request(encoded, sink.blocks) == request


class _EncoderWithoutShortcut(Encoder):
    """The encoder as it was before it reused the last request's run of whole messages."""

    def encode(self, request: Any, split_at: Any = ()) -> dict[str, Any]:
        self._last_lead = None
        return super().encode(request, split_at)


@settings(max_examples=150, deadline=None)
@given(
    prefix=st.lists(st.text(min_size=40, max_size=90), min_size=0, max_size=4),
    tails=st.lists(st.lists(st.text(max_size=90), min_size=0, max_size=3), min_size=1, max_size=6),
    values=st.lists(st.text(min_size=0, max_size=30), max_size=4),
)
@example(prefix=["p" * 50, "q" * 50], tails=[[], ["r" * 60]], values=[])  # the run of whole messages grows
@example(prefix=["p" * 50, "q" * 50], tails=[["item one " * 6], ["item two " * 6]], values=["item two"])
def test_one_encoder_over_requests_sharing_a_prefix_encodes_as_without_its_shortcut(
    prefix: list[str], tails: list[list[str]], values: list[str]
) -> None:
    """The encoder reuses the last request's leading run of whole messages when the next one
    starts with the same messages (a protocol's system prompt and shots, the same objects each
    time): every line must still decode to its request, and be the very line it wrote before."""
    shared = [{"role": ("system", "user", "assistant")[i % 3], "content": c} for i, c in enumerate(prefix)]
    fast, slow = Encoder(MemorySink()), _EncoderWithoutShortcut(MemorySink())
    for tail in tails:
        request = _request([*shared, *({"role": "user", "content": c} for c in tail)])
        encoded = fast.encode(request, values)
        assert decode_request(encoded, fast._sink.blocks) == request  # type: ignore[attr-defined]
        assert encoded == slow.encode(request, values)


def _occurrences_by_find(content: str, values: list[str]) -> list[tuple[int, int]]:
    """The item's values in a message, found by whole-value ``str.find`` (what the encoder did
    before it searched for a value's first characters)."""
    found = []
    for value in values:
        start = content.find(value)
        while start != -1:
            found.append((start, start + len(value)))
            start = content.find(value, start + len(value))
    found.sort(key=lambda span: (span[0], -span[1]))
    kept: list[tuple[int, int]] = []
    for span in found:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


@settings(max_examples=300, deadline=None)
@given(content=st.text(alphabet="ab ", max_size=200),
       values=st.lists(st.text(alphabet="ab ", min_size=1, max_size=60), max_size=4))
def test_values_are_found_where_a_whole_value_search_finds_them(content: str, values: list[str]) -> None:
    from judge_engine.rundir.blocks import _occurrences

    values = sorted(set(values), key=len, reverse=True)
    assert _occurrences(content, values) == _occurrences_by_find(content, values)


def test_a_run_with_reasks_writes_compact_lines_that_rebuild_every_request(
        tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(malformed_rate=0.3, seed=3)
    job = make_job(tmp_path, fake_server, items=40)
    assert main(["run", str(job.config), "--no-live", "--allow-unscored"]) == 0
    run = job.only_run()
    config = load_config(job.config)
    protocol = build_protocol(config.judges[0])
    items = {str(item["id"]): item for item in iter_items(config.dataset, protocol.required_fields)}
    raw = read_lines(run / "transcripts.jsonl")
    assert {line["v"] for line in raw} == {3}
    attempts = [a for a in iter_transcript(run) if isinstance(a, AttemptRecord)]
    assert len(attempts) == len(raw) and any(a.reask for a in attempts)
    for attempt in attempts:
        messages = list(attempt.request["messages"])
        original = protocol.render(items[attempt.item_id])
        assert messages[: len(original)] == original
        assert len(messages) == len(original) + 2 * attempt.reask  # (answer, re-ask) per re-ask
        assert attempt.request["model"] == "openai/gpt-4o-mini" and attempt.request["temperature"] == 0.0
    transcript_bytes = (run / "transcripts.jsonl").stat().st_size + (run / "blocks.jsonl").stat().st_size
    assert transcript_bytes / len(raw) < 1500  # vs ~6 KB per attempt written whole
    assert len(read_blocks(run)) < 20 + sum(a.reask for a in attempts) * 2  # shared, plus each re-ask's turns
