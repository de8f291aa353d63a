"""What the fake server answers: a deterministic function of the request.

Re-ask turns are stripped, a seed is drawn from what is left, and every answer writer
(:mod:`judge_engine.fake.writers`, one per protocol) is asked in turn; the first that recognises
its protocol's prompt writes the answer, as the requested model reads the item
(:mod:`judge_engine.fake.persona`: its strength and lean), so that two models disagree and each
one repeats itself. A request no writer recognises gets a generic answer.
A third-party protocol plugs its answers in with
:func:`~judge_engine.fake.writers.register_writer`, without touching the server.

Token counts are a cheap deterministic stand-in for a tokenizer, chosen so that a test can
predict them exactly and a client must reconcile its own estimates with ``usage`` (``c`` is
:attr:`FakeConfig.chars_per_token`, 4 by default; other values model a provider whose tokenizer
counts differently from the client's estimate):

* ``prompt_tokens = sum over messages of (ceil(len(content) / c) + 4)``
* ``completion_tokens = ceil(len(answer) / c)``
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from judge_engine.errors import FakeRequestError
from judge_engine.fake.logprobs import Belief, gives_logprobs, judge, logprobs_content
from judge_engine.fake.persona import TRUTH
from judge_engine.fake.writers import Writer, writers
from judge_engine.fake.writers.annotators import item_key
from judge_engine.protocols.base import REASK_MARKER, Message, stable_seed
from judge_engine.util import jsonio

MALFORMED_ANSWERS = (
    "I think this is quite good overall, with a few small issues.",
    "Overall the translation reads well, although some phrasing could be smoother.",
    "This is a solid piece of work; I would not change much.",
    "Hard to say. Parts of it are fine and parts of it are not.",
)
"""Prose no protocol can read, served when the ``malformed`` fault fires."""


SAMPLED_ANEW = frozenset({"cdat", "dat"})
"""Protocols whose repeated request is always a fresh sample at temperature > 0. The DAT sends
one prompt many times (samples are its data), and a model asked again for ten words writes another
list; a judge asked again about the same item mostly agrees with itself (min(1, t/3) above)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The content of a reply and its accounting."""

    content: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    protocol: str | None
    """The protocol that wrote the answer (None: the generic answer)."""
    logprobs: list[dict[str, Any]] | None = None
    """``choices[0].logprobs.content``, when the request asked for log-probs and the model
    gives them (:mod:`judge_engine.fake.logprobs`)."""
    asked: bool = False
    """The request asked for log-probs (the reply then says ``"logprobs": null`` if it has none)."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def prompt_tokens(messages: Sequence[Message], chars_per_token: float = 4.0) -> int:
    """The fake tokenizer's prompt count (see the module docstring)."""
    return sum(math.ceil(len(m["content"]) / chars_per_token) + 4 for m in messages)


def completion_tokens(answer: str, chars_per_token: float = 4.0) -> int:
    """The fake tokenizer's completion count (see the module docstring)."""
    return math.ceil(len(answer) / chars_per_token)


def read_messages(raw: Any) -> list[Message]:
    """Chat messages with string content (OpenAI content-part lists are joined)."""
    if not isinstance(raw, list) or not raw:
        raise FakeRequestError("'messages' must be a non-empty array")
    messages: list[Message] = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise FakeRequestError(f"messages[{index}] must be an object with a string 'role'")
        content = message.get("content")
        if content is None:
            content = ""
        elif isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        elif not isinstance(content, str):
            raise FakeRequestError(f"messages[{index}].content must be a string or an array of parts")
        messages.append({"role": message["role"], "content": content})
    return messages


def strip_reasks(messages: Sequence[Message]) -> list[Message]:
    """Drop trailing (assistant answer, re-ask) pairs, so a re-ask gets the original's answer."""
    stripped = list(messages)
    while (
        len(stripped) >= 2
        and stripped[-1]["role"] == "user"
        and stripped[-1]["content"].startswith(REASK_MARKER)
        and stripped[-2]["role"] == "assistant"
    ):
        del stripped[-2:]
    return stripped


def is_json_mode(response_format: Any) -> bool:
    return response_format is not None and response_format != {"type": "text"}


class AnswerBook:
    """Writes answers by asking every answer writer, in protocol-name order."""

    @property
    def writers(self) -> Mapping[str, Writer]:
        """The writers by protocol name (the built-in ones are imported on first use)."""
        return writers()

    def answer(
        self, messages: Sequence[Message], *, model: str, temperature: float, json_mode: bool, draw: int = 0,
        logprobs: bool = False,
    ) -> tuple[str, str | None]:
        """``(content, protocol name)`` for the conversation, re-ask turns stripped first.

        ``model`` is the model asked (``openai/gpt-4o-mini`` or ``gpt-4o-mini``; ``""``, the
        truth): the answer is the item's truth as that model reads it. A request that asks for
        log-probs (``logprobs``), and every :data:`JUDGED` protocol's, gets the truth: the judge
        of the model's strength (:func:`as_judged`) then writes its verdict.

        ``draw`` is the sample the request names (:data:`~judge_engine.fake.config.SAMPLE_HEADER`:
        a demo's repeat, and its item for a generation protocol) or, when it names none, how many
        times this exact request arrived before. At temperature 0 it is ignored (identical
        requests, identical answers). At temperature t > 0 a repeated request
        is a fresh sample with probability min(1, t/3), so repeats disagree more as t rises, as a
        real model's do, while every answer stays a deterministic function of (request, draw).
        A generation prompt (:data:`SAMPLED_ANEW`) is a fresh sample every time.
        """
        stripped = strip_reasks(messages)
        seed = stable_seed(jsonio.canonical(stripped).decode())
        fresh = stable_seed(seed, draw) if temperature > 0 and draw > 0 else seed
        resample = random.Random(f"{seed}:{draw}:{temperature}").random() < min(1.0, temperature / 3)
        reader = TRUTH if logprobs else model
        for name, write in self.writers.items():
            who = TRUTH if name in JUDGED else reader
            text = write(stripped, seed=seed, temperature=temperature, json_mode=json_mode, model=who)
            if text is not None:
                if fresh != seed and (resample or name in SAMPLED_ANEW):
                    text = write(stripped, seed=fresh, temperature=temperature, json_mode=json_mode, model=who) or text
                return text, name
        seed = fresh if resample else seed
        generic = (
            f"This is a generic answer from the judge-engine fake server ({seed % 10_000:04d})."
        )
        if json_mode:
            return jsonio.dumps({"answer": generic}).decode(), None
        return generic, None


JUDGED = frozenset({"pairwise-annotators"})
"""Protocols whose every answer comes from the judge of the model's strength (its log-probs
are the method); any other answers that way only when log-probs are asked."""


def as_judged(messages: Sequence[Message], content: str, protocol: str | None, *, model: str, temperature: float,
              draw: int = 0, asked: bool = False) -> tuple[str, Belief | None]:
    """The writer's answer as the model's judge writes it (:func:`judge_engine.fake.logprobs.judge`),
    for a ``pairwise-annotators`` request or one that asks for log-probs; else as it is."""
    if protocol not in JUDGED and not asked:
        return content, None

    stripped = strip_reasks(messages)
    seed = stable_seed(jsonio.canonical(stripped).decode(), draw if temperature > 0 else 0)
    key = item_key(stripped) or (stripped[-1]["content"] if stripped else "")
    return judge(content, stripped, model=model, seed=seed, temperature=temperature, item_key=key)


def with_logprobs(answer: Answer, judged: str, belief: Belief | None, *, model: str, top: int | None,
                  seed: int) -> Answer:
    """``answer`` with its tokens' log-probs (``top`` alternatives each) when the model gives
    them; a fault that changed the text (malformed, cut off) leaves the verdict unknown."""
    if top is None:
        return answer
    if not gives_logprobs(model):
        return replace(answer, asked=True)
    known = belief if answer.content == judged else None
    return replace(answer, asked=True, logprobs=logprobs_content(answer.content, model, top, known, seed))


def requested_top(body: Mapping[str, Any]) -> int | None:
    """How many alternatives a request asks for per token (OpenAI's ``logprobs: true`` and
    ``top_logprobs``), or None when it asks for no log-probs."""
    if body.get("logprobs") is not True:
        return None
    top = body.get("top_logprobs")
    return int(top) if isinstance(top, int) and not isinstance(top, bool) else 0


def logprobs_field(answer: Answer) -> dict[str, Any]:
    """The ``logprobs`` of a reply's choice: present when asked for, null when the model gives none."""
    if not answer.asked:
        return {}
    return {"logprobs": None if answer.logprobs is None else {"content": answer.logprobs, "refusal": None}}


def finish(
    messages: Sequence[Message],
    content: str,
    protocol: str | None,
    *,
    malformed: float | None = None,
    cut_off: bool = False,
    stop_early: float | None = None,
    max_tokens: int | None = None,
    chars_per_token: float = 4.0,
) -> Answer:
    """Apply the content faults and ``max_tokens`` to an answer and count its tokens.

    ``malformed`` is the uniform draw that picks the prose (None: no malformed fault);
    ``stop_early`` the one that picks where the answer stops (see :func:`stopped_early`).
    """
    finish_reason = "stop"
    if malformed is not None:
        content = MALFORMED_ANSWERS[int(malformed * len(MALFORMED_ANSWERS))]
    elif cut_off:
        content = content[: len(content) // 2]
        finish_reason = "length"
    elif stop_early is not None:
        content = stopped_early(content, stop_early)
    if max_tokens is not None and completion_tokens(content, chars_per_token) > max_tokens:
        content = content[: int(max(0, max_tokens) * chars_per_token)]
        finish_reason = "length"
    return Answer(
        content=content,
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens(messages, chars_per_token),
        completion_tokens=completion_tokens(content, chars_per_token),
        protocol=protocol,
    )


_PART_START = re.compile(r"^\W*[A-Za-z][A-Za-z0-9 ]{0,20}\W*:", re.MULTILINE)


def stopped_early(content: str, draw: float) -> str:
    """The answer as if the judge had stopped before one of its later parts, cleanly.

    A part starts at a ``Label:`` line after the first line (``Major:``, ``Q7: 3``,
    ``Worst: B``); ``draw`` in [0, 1) picks which. An answer with no such line loses its last
    word instead (``... [RESULT] 4`` -> ``... [RESULT]``; a one-line JSON answer loses its end).
    """
    text = content.rstrip()
    starts = [m.start() for m in _PART_START.finditer(text) if m.start() > 0]
    if starts:
        return text[: starts[int(draw * len(starts))]]
    head, _, _ = text.rpartition(" ")
    return head


def body_digest(body: bytes) -> bytes:
    """8-byte identity of a request body (distinct-body tracking and fault draws)."""
    return hashlib.blake2b(body, digest_size=8).digest()


def prompt_key(messages: Sequence[Message]) -> str:
    """A conversation's identity through its re-asks and retries: its messages before the first
    re-ask, hashed (16 hex digits). The chat route counts requests per prompt key, so a test can
    count what each task (one item, one temperature, one repeat) sent online."""
    digest = hashlib.blake2b(digest_size=8)
    for message in strip_reasks(messages):
        digest.update(f"{message['role']}\x00{message['content']}\x00".encode())
    return digest.hexdigest()
