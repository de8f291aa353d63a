"""An answer cut short is never scored: every strict prefix of the fake server's well-formed
answers, cut at a line break, a word break or just after a ``,``, ``}`` or ``]``, for every
protocol and output mode the fake server answers (the examples' judges, each built-in protocol
in text and JSON mode, close reading zero- and few-shot), is re-asked, never scored.

Some cuts leave an answer that no parser can tell from a whole one; they are listed in
:data:`UNDETECTABLE`, each with why, and only they may be read (the provider's finish reason is
the only sign of those; a stop at ``max_tokens`` is ``incomplete`` before any parsing). The
``legacy-gemba`` parser is left out: it reproduces the reference's rules, which read anything,
garbage included, and is opt-in for that reason.

This is an adversarial tester's fuzzer kept as a test. Before the fixes it came with, it found
cuts scored for gemba-mqm in text mode (48 of 312 cuts not listed here), gemba-mqm-literary in
text mode (66 of 334) and both close-reading protocols in JSON mode (56 of 372 each).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from judge_engine.errors import VerdictError
from judge_engine.fake.writers import get_writer
from judge_engine.protocols import Protocol
from tests.protocols.fake_judges import DRAWS, JUDGES, mode


def _gemba_between_last_section_lines(protocol: Protocol, kept: str, rest: str) -> bool:
    """A GEMBA text answer stopped at the line break after a whole error line of its last
    section (``Minor:``), before the next one: every section is there and every line whole."""
    if not protocol.name.startswith("gemba-mqm") or protocol.json_mode or not rest.startswith("\n"):
        return False
    following = rest.strip().splitlines()[0]
    return "Minor:" in kept and not kept.rstrip().endswith(":") and not following.endswith(":")


def _novelty_objects_between(protocol: Protocol, kept: str, rest: str) -> bool:
    """The zero-shot novelty prompt shows one bare ``{...}`` object as its example, so its answers
    are objects separated by blank lines: a stop after a whole object is a shorter whole answer."""
    if protocol.name != "novel-spans" or protocol.json_mode or getattr(protocol.options, "shots", "") != "zero":
        return False
    return kept.rstrip().endswith("}") and rest.lstrip().startswith("{")


def _inside_trailing_free_text(protocol: Protocol, kept: str, rest: str) -> bool:
    """A custom judge whose format ends with a free-text field (``reason: <text>``, read by the
    config's own regular expression): a stop inside that text leaves a shorter text, and the
    field has no closing mark to miss. The score is read before it and cannot change."""
    if protocol.name != "custom" or protocol.json_mode:
        return False
    last = kept.rsplit("\n", 1)[-1]
    in_last_line = "\n" not in rest.rstrip()
    return in_last_line and re.match(r"^\W*reason\W*:\s*\S", last, re.IGNORECASE) is not None


UNDETECTABLE: list[Callable[[Protocol, str, str], bool]] = [
    _gemba_between_last_section_lines,
    _novelty_objects_between,
    _inside_trailing_free_text,
]


def cuts(answer: str) -> Iterator[int]:
    """Where the fuzzer cuts: before each line break and space, and after each ``,``, ``}``, ``]``
    (strict prefixes only, not the whole answer less its trailing blanks)."""
    points = {m.start() for m in re.finditer(r"[\n ]", answer)}
    points |= {m.end() for m in re.finditer(r"[,}\]]", answer)}
    yield from sorted(c for c in points if 0 < c < len(answer.rstrip()))


def test_every_protocol_and_mode_is_here() -> None:
    found = {(protocol.name, mode(protocol)) for _, protocol, _ in JUDGES}
    both = ("gemba-mqm", "gemba-mqm-literary", "bws", "prometheus-absolute", "prometheus-relative", "ttct")
    for name in both:
        assert {(name, "text"), (name, "json")} <= found
    for name in ("novel-spans", "nonpragmatic-spans"):
        assert {(name, f"{o}-{s}-shot") for o in ("text", "json") for s in ("zero", "few")} <= found
    assert {mode for name, mode in found if name == "custom"} == {"text", "json"}


@pytest.mark.parametrize(("where", "protocol", "items"), JUDGES, ids=[j[0] for j in JUDGES])
def test_no_strict_prefix_of_a_well_formed_answer_is_scored(
    where: str, protocol: Protocol, items: list[dict[str, Any]]
) -> None:
    write = get_writer(protocol.name)
    checked, slipped, overlisted = 0, [], []
    for item in items:
        for variant in protocol.variants(item):
            messages = protocol.render(item, variant)
            for seed, temperature in DRAWS:
                answer = write(messages, seed=seed, temperature=temperature, json_mode=protocol.json_mode)
                assert answer is not None, f"the fake server does not answer {where}"
                protocol.score(protocol.parse(answer, item, variant), item, variant)  # the whole one scores
                for cut in cuts(answer):
                    kept, rest = answer[:cut], answer[cut:]
                    listed = any(undetectable(protocol, kept, rest) for undetectable in UNDETECTABLE)
                    checked += not listed
                    try:
                        protocol.parse(kept, item, variant)
                    except VerdictError:
                        if listed:
                            overlisted.append((kept[-80:], rest[:40]))
                        continue
                    if not listed:
                        slipped.append((kept[-80:], rest[:40]))
    assert checked > 20
    assert slipped == []
    assert overlisted == []  # UNDETECTABLE holds only cuts that are read: none a parser rejects
