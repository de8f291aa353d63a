"""Every protocol whose answer has a fixed set of parts rejects an answer that lacks one (issue 13,
item 1), and says why in a reason code: ``incomplete`` for a missing part, ``out_of_range`` for a
value off the scale, ``unreadable`` for an answer not in the format, ``refused`` for a refusal.

The last test takes every example's well-formed fake answers and stops each one early at every
boundary the fake server's ``stop_early`` fault can pick: none of them may parse."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_engine.errors import ReasonCode, VerdictError
from judge_engine.fake.answers import AnswerBook, stopped_early
from judge_engine.fake.writers import get_writer
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import iter_items
from judge_engine.planning.plan import build_protocol
from judge_engine.protocols import Protocol, get_protocol
from tests.protocols.fake_judges import JUDGES

REPO = Path(__file__).resolve().parents[2]
TTCT_ITEM = {"id": "t1", "text": "The moon folded its light.", "topic": "longing"}
BWS_ITEM = {
    "id": "b1", "source": "Der Schnee.", "source_lang": "German", "target_lang": "English",
    "candidates": ["Snow.", "The snow.", "Snows.", "A snow."],
}  # fmt: skip
ABSOLUTE_ITEM = {"id": "a1", "instruction": "Say hi.", "response": "Hi!"}
RELATIVE_ITEM = {
    "id": "r1", "instruction": "Name a colour.", "response_a": "Blue.", "response_b": "A colour.",
    "criteria": "Is the answer specific?",
}  # fmt: skip
PASSAGE_ITEM = {"id": "c1", "passage": "The keeper counted gulls instead of ships."}
HELPFUL = {"rubric": "helpfulness"}
ALL_TWELVE = "".join(f"Q{n}: 3\n" for n in range(1, 13))

CASES: list[tuple[str, dict[str, Any], dict[str, Any], str, ReasonCode]] = [
    # protocol, options, item, answer, expected code
    ("ttct", {}, TTCT_ITEM, ALL_TWELVE.replace("Q12: 3\n", ""), ReasonCode.INCOMPLETE),
    ("ttct", {}, TTCT_ITEM, ALL_TWELVE.replace("Q3: 3", "Q3: 7"), ReasonCode.OUT_OF_RANGE),
    ("ttct", {}, TTCT_ITEM, "A lovely, creative sentence.", ReasonCode.UNREADABLE),
    ("ttct", {"output": "json"}, TTCT_ITEM, '{"q1": 3, "q2": 3}', ReasonCode.INCOMPLETE),
    ("ttct", {"output": "json"}, TTCT_ITEM, '{"q1": 3, "q2": 3, "q3"', ReasonCode.INCOMPLETE),
    ("bws", {}, BWS_ITEM, "Best: B", ReasonCode.INCOMPLETE),
    ("bws", {}, BWS_ITEM, "Worst: C\n", ReasonCode.INCOMPLETE),
    ("bws", {}, BWS_ITEM, "Best: B\nWorst: Q", ReasonCode.OUT_OF_RANGE),
    ("bws", {}, BWS_ITEM, "I like the second one.", ReasonCode.UNREADABLE),
    ("bws", {"output": "json"}, BWS_ITEM, '{"best": "B", "worst":', ReasonCode.INCOMPLETE),
    ("prometheus-absolute", HELPFUL, ABSOLUTE_ITEM, "[RESULT] 4", ReasonCode.INCOMPLETE),
    ("prometheus-absolute", HELPFUL, ABSOLUTE_ITEM, "Feedback: clear and kind. [RESULT]", ReasonCode.INCOMPLETE),
    ("prometheus-absolute", HELPFUL, ABSOLUTE_ITEM, "Clear and kind. [RESULT] 9", ReasonCode.OUT_OF_RANGE),
    ("prometheus-absolute", HELPFUL, ABSOLUTE_ITEM, "A fine answer overall.", ReasonCode.UNREADABLE),
    ("prometheus-absolute", {**HELPFUL, "output": "json"}, ABSOLUTE_ITEM, '{"feedback": " ", "score": 3}', ReasonCode.INCOMPLETE),
    ("prometheus-absolute", {**HELPFUL, "output": "json"}, ABSOLUTE_ITEM, '{"score": 3}', ReasonCode.INCOMPLETE),
    ("prometheus-relative", {}, RELATIVE_ITEM, "[RESULT] A", ReasonCode.INCOMPLETE),
    ("prometheus-relative", {}, RELATIVE_ITEM, "Feedback: A is precise. [RESULT]", ReasonCode.INCOMPLETE),
    ("prometheus-relative", {"output": "json"}, RELATIVE_ITEM, '{"feedback": "", "winner": "A"}', ReasonCode.INCOMPLETE),
    ("novel-spans", {}, PASSAGE_ITEM,
     '[{"expression": "counted gulls", "justification": "odd"}, {"expression": "instead of', ReasonCode.INCOMPLETE),
    ("novel-spans", {}, PASSAGE_ITEM,
     '[{"expression": "counted gulls", "justification": "odd"}, ', ReasonCode.INCOMPLETE),
    ("novel-spans", {}, PASSAGE_ITEM, '[{"error": "I cannot help with that."}]', ReasonCode.REFUSED),
]  # fmt: skip


@pytest.mark.parametrize(("name", "options", "item", "answer", "code"), CASES)
def test_a_missing_or_wrong_part_is_rejected_with_its_code(
    name: str, options: dict[str, Any], item: dict[str, Any], answer: str, code: ReasonCode
) -> None:
    protocol = get_protocol(name).from_options(options)
    with pytest.raises(VerdictError) as caught:
        protocol.parse(answer, item)
    assert caught.value.code == code, caught.value.problems


def _fake_answers() -> list[tuple[str, Any, Any, str, str]]:
    """(example/judge, protocol, item, variant, well-formed answer) for every example task of a
    judging protocol. Generation protocols (CDAT, DAT) are not here: they read an answer as it
    comes, a list cut short included, as the method does (``tests/protocols/cdat/test_engine.py``)."""
    book = AnswerBook()
    found = []
    for config_path in sorted((REPO / "examples").glob("*/config.yaml")):
        config = load_config(config_path)
        for judge in config.judges:
            if judge.protocol in ("cdat", "dat"):
                continue
            protocol = build_protocol(judge)
            for item in iter_items(config.dataset, protocol.required_fields):
                for variant in protocol.variants(item):
                    for temperature in (0.0, 1.0):
                        answer, _ = book.answer(protocol.render(item, variant), model=judge.model, temperature=temperature,
                                                json_mode=protocol.json_mode)  # fmt: skip
                        found.append((f"{config_path.parent.name}/{judge.name}", protocol, item, variant, answer))
    return found


def test_every_example_answer_stopped_early_is_rejected() -> None:
    answers = _fake_answers()
    assert len({a[0] for a in answers}) >= 10  # every example judge, text and JSON modes
    slipped = []
    for where, protocol, item, variant, answer in answers:
        protocol.parse(answer, item, variant)  # the whole answer is fine
        for draw in (0.0, 0.3, 0.6, 0.99):
            stopped = stopped_early(answer, draw)
            try:
                protocol.parse(stopped, item, variant)
            except VerdictError:
                continue
            slipped.append((where, answer, stopped))
    assert slipped == []


JSON_JUDGES = [judge for judge in JUDGES if judge[1].json_mode]


@pytest.mark.parametrize(("where", "protocol", "items"), JSON_JUDGES, ids=[j[0] for j in JSON_JUDGES])
def test_the_json_schema_sent_and_the_parser_agree_on_every_part(
    where: str, protocol: Protocol, items: list[dict[str, Any]]
) -> None:
    """Each key of the fake server's JSON answers is dropped in turn: an answer without a key the
    schema sent marks required is ``incomplete``, one without an optional key is read, and ``{}``
    is never scored. (GEMBA-MQM's ``errors`` used to default to ``[]``: ``{}`` scored 0, the
    best score; a close-reading object without its expression was dropped from the count.)"""
    response_format = protocol.response_format()
    assert response_format is not None
    schema = response_format["json_schema"]["schema"]
    write = get_writer(protocol.name)
    for item in items:
        for variant in protocol.variants(item):
            with pytest.raises(VerdictError):
                protocol.parse("{}", item, variant)
            for seed in range(6):
                answer = write(protocol.render(item, variant), seed=seed, temperature=0.0, json_mode=True)
                assert answer is not None
                value = json.loads(answer)
                for path, required in _keys(value, schema, schema.get("$defs", {})):
                    shorter = json.dumps(_without(value, path))
                    if not required:
                        protocol.parse(shorter, item, variant)
                        continue
                    with pytest.raises(VerdictError) as caught:
                        protocol.parse(shorter, item, variant)
                    assert caught.value.code == ReasonCode.INCOMPLETE, (path, caught.value.problems)


Path_ = tuple[Any, ...]
"""Where a key is in a JSON value: the keys and list indexes leading to it."""


def _keys(value: Any, schema: dict[str, Any], defs: dict[str, Any], at: Path_ = ()) -> Iterator[tuple[Path_, bool]]:
    """(path, required by the schema) of every key in a JSON value, depth first."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*at, key), key in schema.get("required", ())
            yield from _keys(inner, schema.get("properties", {}).get(key, {}), defs, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _keys(inner, schema.get("items", {}), defs, (*at, index))


def _without(value: Any, path: Path_) -> Any:
    copy = json.loads(json.dumps(value))
    node = copy
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return copy
