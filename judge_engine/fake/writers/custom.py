"""Fake answers to custom judges (``protocol: custom``), written from the answer format the
protocol puts in every prompt (``prompts/custom/answer_format.j2``): its layout (a JSON object,
``<text> [RESULT] <value>``, or ``name: value`` lines for a regex judge) and each field's kind
("an integer from 1 to 5", ``one of: "pass", "fail"``...). A prompt without that block (a
template with ``answer_format: none`` that does not place ``{{ answer_format }}``) is not
recognised, and gets the server's generic answer.

Values are deterministic. The item's quality is a hash of the longest line of the prompt (the
text under judgement, in most templates), so two custom judges of one item mostly agree, as
real ones do, and each judge's own seed moves a value now and then (more at higher
temperature). Quotes are 2-4 words of the text that follows a line naming the quoted field
(``Response:`` for ``of: response``), or none when no such line is found; a candidate's quality
is a hash of its text (found after ``Candidate A:``-style lines), so the same candidate wins in
every order, apart from a mild primacy bias. A model reads all of that through its persona
(:mod:`judge_engine.fake.persona`): its lean and noise move numbers and labels, it picks another
candidate now and then, and quotes other words or none.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any

from judge_engine.fake.persona import TRUTH, persona
from judge_engine.fake.writers import last_turn
from judge_engine.protocols.base import Message, stable_seed

_HEADER = re.compile(r"^Answer format: (?P<intro>.+)$", re.MULTILINE)
_LAYOUTS = {"reply with one JSON object": "json", "write these parts, in this order": "marker",
            "write each of these on a line of its own": "lines"}
_FIELD = re.compile(r'^- "(?P<name>[A-Za-z_]\w*)" \((?P<kind>.*?)\)(?:: .*)?$')
_MARKER = re.compile(r'^End your answer with "(?P<marker>.+) <\w+>"\.$', re.MULTILINE)
_RANGE = re.compile(r"^an? (?P<what>integer|number)(?: from (?P<low>-?[\d.]+) to (?P<high>-?[\d.]+)"
                    r"| of at least (?P<least>-?[\d.]+)| of at most (?P<most>-?[\d.]+))?$")
_QUOTED = re.compile(r'"([^"]*)"')
_SENTENCES = (
    "The response answers the question directly and stays accurate throughout",
    "The answer is mostly right but leaves out a detail the rubric asks for",
    "Clear and careful, though one claim would need a source",
    "It addresses the request only in part and the wording is loose",
)


def write_custom(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool,
                 model: str = TRUTH) -> str | None:
    """An answer in the layout the prompt's answer format asks for, or None."""
    prompt = last_turn(messages)
    header = _HEADER.search(prompt)
    if header is None:
        return None
    layout = next((v for k, v in _LAYOUTS.items() if header.group("intro").startswith(k)), None)
    block = prompt[header.end():]
    fields = [(m.group("name"), m.group("kind")) for line in block.splitlines() if (m := _FIELD.match(line))]
    if layout is None or not fields:
        return None
    # The rest of the prompt, wherever the template put the block: the item's text is in it.
    body = "\n".join(line for line in prompt.splitlines()
                     if not (_HEADER.match(line) or _FIELD.match(line) or _MARKER.match(line)))
    draw = _Draw(body, seed, temperature, model)
    values = {name: draw.value(kind) for name, kind in fields}
    if layout == "json":
        return json.dumps(values)
    if layout == "lines":
        return "\n".join(f"{name}: {_as_text(value)}" for name, value in values.items())
    marker = _MARKER.search(block)
    texts = [name for name, kind in fields if kind.startswith("text")]
    value = next((v for name, v in values.items() if name not in texts), "")
    text = values[texts[0]] if texts else draw.sentence()
    return f"{text} {marker.group('marker') if marker else '[RESULT]'} {_as_text(value)}"


class _Draw:
    """The values of one answer: the item's quality (from the prompt), this judge's noise, the
    model's reading."""

    def __init__(self, body: str, seed: int, temperature: float, model: str = TRUTH) -> None:
        self.body = body
        # A leading "Response:" label is the template's, not the item's: left out of the key.
        lines = [re.sub(r"^\W*\w+\s*:\s*", "", line) for line in body.splitlines()]
        longest = max(lines or [""], key=len)
        self.quality = random.Random(stable_seed("fake-custom-quality", longest)).random()
        self.rng = random.Random(seed)
        self.judge = persona(model)
        self.reading = self.judge.rng(seed, "custom")
        self.noise = self.judge.sampling(seed, temperature)
        self.temperature = temperature

    def _moved(self) -> int:
        """-1, 0 or +1: this judge's own reading of the item (and sampling at temperature > 0)."""
        step = 0
        if self.rng.random() < 0.25:
            step = self.rng.choice((-1, 1))
        if self.temperature > 0 and self.noise.random() < self.temperature / 2:
            step += self.noise.choice((-1, 1))
        return step

    def sentence(self) -> str:
        """A rationale that says what the numbers mostly say: by the item's quality, best first as
        ``_SENTENCES`` lists them (before, any of them, so a 1 of 5 could read "accurate throughout")."""
        self.rng.choice(_SENTENCES)  # drawn as before, so the values after it stay as they were
        index = int((1 - self.quality) * len(_SENTENCES))
        return _SENTENCES[min(len(_SENTENCES) - 1, max(0, index))] + "."

    def value(self, kind: str) -> Any:
        if kind.startswith("text"):
            return self.sentence()
        if kind == "true or false":
            return self.quality + 0.1 * (self._moved() + self.judge.shift(self.reading)) < 0.2
        if kind.startswith("one of: "):
            choices = _QUOTED.findall(kind)  # the best first, as rubrics list them: a lenient judge moves up
            index = int((1 - self.quality) * len(choices)) + self._moved() - self.judge.steps(self.reading)
            return choices[min(len(choices) - 1, max(0, index))]
        if kind.startswith("the label of one candidate: "):
            return self.candidate(_QUOTED.findall(kind))
        if "exact quotes copied from the " in kind:
            of = kind.split("exact quotes copied from the ", 1)[1].split(",")[0]
            return self.quotes(of)
        match = _RANGE.match(kind)
        if match is None:
            return self.sentence()
        return self.number(match)

    def number(self, match: re.Match[str]) -> int | float:
        low = float(match.group("low") or match.group("least") or (float(match.group("most")) - 4 if match.group("most") else 1))
        high = float(match.group("high") or match.group("most") or low + 4)
        # Judges favour the upper middle of a scale, as real ones do.
        middle = low + (0.3 + 0.7 * self.quality) * (high - low)
        if match.group("what") == "integer":
            return int(min(high, max(low, round(middle) + self._moved() + self.judge.steps(self.reading))))
        moved = 0.05 * self._moved() + 0.1 * self.judge.shift(self.reading)  # a model's step: a tenth of the range
        return round(min(high, max(low, middle + moved * (high - low))), 2)

    def quotes(self, of: str) -> list[str]:
        """2-4 words of the text under a line naming the field ``of``; none without one."""
        name = re.escape(of).replace(r"\ ", r"[\s_]")
        header = re.search(rf"^\W*{name}[*_\s]*(?::[ \t]*(?P<rest>.*))?$", self.body, re.IGNORECASE | re.MULTILINE)
        if header is None:
            return []
        text = (header.group("rest") or "").strip() or next(
            (line.strip() for line in self.body[header.end():].splitlines() if line.strip()), "")
        words = text.split()
        if len(words) < 3:
            return []
        size = min(len(words) - 1, self.rng.choice((2, 3, 4)))
        start = self.rng.randrange(0, len(words) - size + 1)
        quoted = self.rng.random() < 0.7
        if self.reading.random() < self.judge.chance(0.3):  # the model quotes other words
            start = self.reading.randrange(0, len(words) - size + 1)
        if self.reading.random() < self.judge.chance(0.2, lenient=0.6 if quoted else -0.6):
            quoted = not quoted  # or misses the quote, or finds one where there is none
        quote = " ".join(words[start:start + size]).strip(".,;:!?'")
        return [quote] if quoted and quote and '"' not in quote else []

    def candidate(self, labels: list[str]) -> str:
        shown = {label: self._candidate_text(label) for label in labels}
        if all(shown.values()):
            best = max(labels, key=lambda label: stable_seed("fake-custom-candidate", shown[label]))
        else:
            best = self.rng.choice(labels)
        if labels and self.reading.random() < self.judge.chance(0.1):
            best = self.reading.choice(labels)
        if labels and self.noise.random() < 0.1:
            best = labels[0]
        return best

    def _candidate_text(self, label: str) -> str:
        found = re.search(rf"^\W*(?:candidate|response|answer|option|translation)\s+{label}\b\W*(?P<rest>.*)$",
                          self.body, re.IGNORECASE | re.MULTILINE)
        if found is None:
            return ""
        return found.group("rest").strip() or next(
            (line.strip() for line in self.body[found.end():].splitlines() if line.strip()), "")


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(f'"{quote}"' for quote in value) if value else "none"
    return str(value)
