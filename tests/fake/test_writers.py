"""The answer writers' registry: every built-in protocol has a writer, a third-party protocol
plugs its own in, and a broken writer is reported, never hidden."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

import judge_engine.fake.writers as writers_module
import judge_engine.protocols as protocols_module
from judge_engine.errors import VerdictError
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.answers import AnswerBook
from judge_engine.fake.writers import get_writer, register_writer, writers
from judge_engine.protocols import Item, Message, Protocol, Score, available, get_protocol, register


class Stars(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    stars: int


class StarRating(Protocol):
    """A third-party protocol: one to three stars for a text."""

    name: ClassVar[str] = "stars-test"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "stars for a text (test only)"
    required_fields: ClassVar[tuple[str, ...]] = ("text",)
    output_model: ClassVar[type[BaseModel]] = Stars

    def render(self, item: Item, variant: str = "") -> list[Message]:
        return [{"role": "user", "content": f"Give this text 1-3 stars, as 'Stars: <n>'.\n\n{item['text']}"}]

    def parse(self, answer: str, item: Item, variant: str = "") -> Stars:
        if not answer.startswith("Stars: "):
            raise VerdictError("no 'Stars:' line", raw=answer)
        return Stars(stars=int(answer.removeprefix("Stars: ")))

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, Stars)
        return Score(float(verdict.stars))


def write_stars(
    messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool
) -> str | None:
    last = messages[-1]["content"] if messages else ""
    if not last.startswith("Give this text 1-3 stars"):
        return None
    return f"Stars: {1 + seed % 3}"


@pytest.fixture
def clean_registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Registrations made by a test are undone after it."""
    monkeypatch.setattr(protocols_module, "_REGISTERED", dict(protocols_module._REGISTERED))
    monkeypatch.setattr(writers_module, "_REGISTERED", dict(writers_module._REGISTERED))
    monkeypatch.setattr(writers_module, "_ordered", None)
    yield


def _post(url: str, messages: list[Message]) -> tuple[int, Any]:
    body = json.dumps({"model": "fake-judge", "messages": messages, "temperature": 0}).encode()
    request = urllib.request.Request(url + "/chat/completions", data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_every_built_in_protocol_has_a_writer() -> None:
    assert set(available()) <= set(writers())
    assert list(writers()) == sorted(writers())  # the order the answer book asks them in


def test_an_unknown_writer_is_a_key_error_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="gemba-mqm"):
        get_writer("no-such-protocol")


@pytest.mark.usefixtures("clean_registries")
def test_a_third_party_protocol_plugs_in_its_fake_answers() -> None:
    register(StarRating)
    item = {"text": "The sea was calm."}
    messages = StarRating().render(item)
    assert AnswerBook().answer(messages, model="fake-judge", temperature=0.0, json_mode=False)[1] is None  # generic

    assert register_writer("stars-test", write_stars) is write_stars
    answer, name = AnswerBook().answer(messages, model="fake-judge", temperature=0.0, json_mode=False)
    assert name == "stars-test"
    protocol = get_protocol("stars-test")()
    assert protocol.score(protocol.parse(answer, item), item).score in (1.0, 2.0, 3.0)

    with FakeServer(FakeConfig()) as server:
        status, reply = _post(server.base_url, messages)
        assert status == 200
        assert reply["choices"][0]["message"]["content"] == answer
        assert server.stats()["by_protocol"] == {"stars-test": 1}


@pytest.mark.usefixtures("clean_registries")
def test_a_broken_writer_is_a_500_that_says_so() -> None:
    def broken(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool) -> str | None:
        raise RuntimeError("oops")

    register_writer("aaa-broken", broken)  # asked first: writers go in name order
    with FakeServer(FakeConfig()) as server:
        status, reply = _post(server.base_url, [{"role": "user", "content": "hello"}])
    assert status == 500
    assert reply["error"] == {
        "message": "the fake answer writer raised RuntimeError: oops",
        "type": "fake_server_bug",
        "param": None,
        "code": None,
    }
