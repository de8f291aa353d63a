"""The benchmark workload: deterministic items, job configs, and the scores the fake implies.

Items are pseudo-literary text of 50-400 words drawn from a fixed vocabulary with a seeded RNG,
so every run of the benchmark sends byte-identical requests. One JSONL row carries the fields of
both protocols used here (``gemba-mqm``: src/tgt/src_lang/tgt_lang; ``novel-spans``: passage).
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KEY_ENV = "JUDGE_ENGINE_BENCH_KEY"
KEY = "bench-key-0000"
MODEL = "openai/gpt-4o-mini"

_EN = (
    "the lamp had burned low and room smelled of wax she walked to window as if evening might "
    "answer nobody remembered when bell last rung his silence was heavier than any reproach river "
    "ran under stone bridge where letters waited for morning light across quiet garden distance "
    "grew between them though neither spoke of winter old house kept its secrets patiently"
).split()
_DE = (
    "die Lampe war heruntergebrannt und das Zimmer roch nach Wachs sie ging zum Fenster als "
    "könnte der Abend antworten niemand erinnerte sich wann Glocke zuletzt geläutet hatte sein "
    "Schweigen schwerer jeder Vorwurf Fluss lief unter steinernen Brücke wo Briefe auf Morgen "
    "warteten über stillen Garten wuchs Entfernung zwischen ihnen obwohl keiner vom Winter sprach"
).split()

FIELDS: dict[str, dict[str, str]] = {
    "gemba-mqm": {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang"},
    "novel-spans": {"id": "id", "passage": "passage"},
}


def _words(rng: random.Random, vocab: list[str], count: int) -> str:
    words = [rng.choice(vocab) for _ in range(count)]
    # Sentences of 8-20 words, so the text looks like prose to the protocols' parsers.
    out, since = [], 0
    for word in words:
        since += 1
        if since >= rng.randint(8, 20):
            out.append(word + ".")
            since = 0
        else:
            out.append(word)
    out[0] = out[0].capitalize()
    return " ".join(out)


def iter_rows(count: int, *, seed: int = 5, min_words: int = 50, max_words: int = 400) -> Iterator[dict[str, Any]]:
    """``count`` item rows; row ``i`` is the same for every ``count`` (a prefix is a smaller run)."""
    for index in range(count):
        rng = random.Random(f"{seed}:{index}")
        words = rng.randint(min_words, max_words)
        yield {
            "id": f"item-{index:06d}",
            "src": _words(rng, _EN, words),
            "tgt": _words(rng, _DE, words),
            "src_lang": "en",
            "tgt_lang": "de",
            "passage": _words(rng, _EN, words),
        }


@dataclass(frozen=True)
class Workload:
    """How long the items are, and which protocol judges them when a profile does not insist."""

    name: str
    min_words: int
    max_words: int
    protocol: str | None = None
    """Every profile's protocol under this workload (None: each profile's own)."""
    about: str = ""

    def rows(self, count: int) -> Iterator[dict[str, Any]]:
        return iter_rows(count, min_words=self.min_words, max_words=self.max_words)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("default", 50, 400, None, "50-400 words a side; gemba-mqm (novel-spans in tpm)"),
        # GEMBA-MQM's real prompt: the system turn and three shots (4,945 characters, 1,271 fake
        # tokens) around a paragraph of ~165 words a side: ~7 KB, ~1,800 fake tokens a request.
        Workload("fewshot", 145, 185, "gemba-mqm",
                 "gemba-mqm few-shot on paragraphs of 145-185 words a side (~7 KB, ~1,800 tokens a request)"),
    ]
}


def write_items(path: Path, count: int, workload: Workload = WORKLOADS["default"]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for row in workload.rows(count):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


@dataclass(frozen=True)
class JobSpec:
    """What one engine job looks like (everything else is the engine's default)."""

    protocol: str = "gemba-mqm"
    rpm: float | None = None
    tpm: float | None = None
    concurrency: int = 64
    timeout_s: float = 30.0
    max_tokens: int = 300
    transport_retries: int = 6
    backoff_max_s: float = 30.0
    transport: str = "auto"
    """The judge's ``transport`` (auto: direct HTTP for the fake server; litellm: litellm.acompletion)."""


def write_job(folder: Path, items: Path, api_base: str, spec: JobSpec, *, cache: bool = True) -> Path:
    """A fresh job folder's ``config.yaml`` (runs/ and cache/ beside it); returns the config path.

    An existing folder is emptied first: a rerun with the same ``--workdir`` must measure a new
    run, not resume (or read the cache of) the last one.
    """
    limits: dict[str, Any] = {"concurrency": spec.concurrency}
    if spec.rpm:
        limits["rpm"] = spec.rpm
    if spec.tpm:
        limits["tpm"] = spec.tpm
    judge = {
        "name": "bench",
        "model": MODEL,
        "api_base": api_base,
        "api_key_env": KEY_ENV,
        "protocol": spec.protocol,
        "temperatures": [0.0],
        "max_tokens": spec.max_tokens,
        "timeout_s": spec.timeout_s,
        "limits": limits,
        "retries": {"transport": spec.transport_retries, "backoff_max_s": spec.backoff_max_s},
        "transport": spec.transport,
    }
    config = {
        "dataset": {"path": str(items), "fields": FIELDS[spec.protocol]},
        "judges": [judge],
        "output": {"dir": "runs"},
        "cache": {"dir": "cache", "enabled": cache},
    }
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


class Oracle:
    """What the fake server's well-formed answer implies for each item (the score a correct
    client must report, whatever faults and re-asks happened on the way), for the judge's
    ``model`` (the fake answers each model as it reads the item)."""

    def __init__(self, protocol_name: str, model: str = MODEL) -> None:
        from judge_engine.fake.answers import AnswerBook, completion_tokens, prompt_tokens
        from judge_engine.protocols import get_protocol

        self.protocol = get_protocol(protocol_name)()
        self.fields = FIELDS[protocol_name]
        self.model = model
        self._book = AnswerBook()
        self._prompt_tokens = prompt_tokens
        self._completion_tokens = completion_tokens

    def item(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from judge_engine.inputs.dataset import to_item

        return to_item(row, self.fields, self.protocol.required_fields, "bench")

    def messages(self, row: Mapping[str, Any]) -> list[dict[str, str]]:
        return [dict(m) for m in self.protocol.render(self.item(row))]

    def expected(self, row: Mapping[str, Any], temperature: float = 0.0) -> tuple[float | None, int]:
        """(expected score, fake prompt+completion tokens of the well-formed answer)."""
        item = self.item(row)
        messages = self.protocol.render(item)
        answer, _ = self._book.answer(messages, model=self.model, temperature=temperature, json_mode=False)
        score = self.protocol.score(self.protocol.parse(answer, item), item).score
        tokens = self._prompt_tokens(messages) + self._completion_tokens(answer)
        return score, tokens

    def strictly_readable(self, row: Mapping[str, Any], content: str | None) -> bool:
        """Whether the protocol's strict parser accepts ``content`` (the baseline's check)."""
        from judge_engine.errors import VerdictError

        if not content or not content.strip():
            return False
        try:
            self.protocol.parse(content, self.item(row))
        except VerdictError:
            return False
        return True
