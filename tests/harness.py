"""The test harness: a fake OpenAI-compatible server on 127.0.0.1 and job folders in tmp_path
(its two fixtures are every test's, through ``tests/conftest.py``).

Every engine test goes through a real HTTP path to the fake server: the direct transport (the
default for these OpenAI-compatible endpoints) or litellm's (``TRANSPORTS``); nothing inside
litellm is patched.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.fake import FakeConfig, FakeServer

TEST_KEY_ENV = "JUDGE_ENGINE_TEST_KEY"
TRANSPORTS = ["auto", "litellm"]
"""Fault tests run on both transports: ``auto`` (direct HTTP for these OpenAI-compatible
endpoints) and ``litellm.acompletion``."""
TEST_KEY = "fake-test-key-0000"

SENTENCES = [
    ("The lamp had burned low, and the room smelled of wax.", "Die Lampe war heruntergebrannt, und das Zimmer roch nach Wachs."),
    ("She walked to the window as if the evening might answer.", "Sie ging zum Fenster, als könnte der Abend antworten."),
    ("Nobody remembered when the bell had last rung.", "Niemand erinnerte sich, wann die Glocke zuletzt geläutet hatte."),
    ("His silence was heavier than any reproach.", "Sein Schweigen war schwerer als jeder Vorwurf."),
]


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    with FakeServer(FakeConfig()) as server:
        yield server


@pytest.fixture(autouse=True)
def _test_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example_copy(root: Path, name: str, change: Callable[[dict[str, Any]], Any] | None = None) -> Path:
    """A copy of ``examples/<name>`` under ``root`` (without its runs and cache), its config
    edited by ``change`` when given; returns the copy's config path."""
    folder = root / name
    shutil.copytree(EXAMPLES / name, folder, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    config = folder / "config.yaml"
    if change is not None:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        change(data)
        config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return config


def write_items(path: Path, count: int) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            source, target = SENTENCES[index % len(SENTENCES)]
            row = {"id": f"item-{index:05d}", "src": f"{source} ({index})", "tgt": f"{target} ({index})",
                   "src_lang": "en", "tgt_lang": "de"}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


@dataclass
class Job:
    """A job folder: config.yaml, items.jsonl, runs/ and cache/ inside tmp_path."""

    dir: Path
    config: Path

    @property
    def runs(self) -> Path:
        return self.dir / "runs"

    def run_dirs(self) -> list[Path]:
        return sorted(p for p in self.runs.iterdir() if p.is_dir() and not p.is_symlink()) if self.runs.exists() else []

    def only_run(self) -> Path:
        dirs = self.run_dirs()
        assert len(dirs) == 1, dirs
        return dirs[0]


def make_job(tmp_path: Path, server: FakeServer | None, *, items: int = 20, judge: dict[str, Any] | None = None,
             judges: list[dict[str, Any]] | None = None) -> Job:
    """Write a GEMBA-MQM job against ``server`` (fast retries, small limits unless overridden)."""
    write_items(tmp_path / "items.jsonl", items)
    base: dict[str, Any] = {
        "name": "mqm",
        "model": "openai/gpt-4o-mini",
        "api_base": server.base_url if server else None,
        "api_key_env": TEST_KEY_ENV,
        "protocol": "gemba-mqm",
        "temperatures": [0.0],
        "repeats": 1,
        "max_tokens": 300,
        "timeout_s": 10,
        "limits": {"rpm": 60000, "tpm": 100000000, "concurrency": 16},
        "retries": {"transport": 6, "reasks": 2, "backoff_max_s": 0.05},
    }
    config = {
        "dataset": {"path": "items.jsonl",
                    "fields": {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang"}},
        "judges": judges if judges is not None else [_merge(base, judge or {})],
        "output": {"dir": "runs"},
        "cache": {"dir": "cache"},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return Job(tmp_path, path)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_transcripts(run: Path) -> list[dict[str, Any]]:
    """Every transcript line of a run, requests rebuilt (the expanded form of each record)."""
    from judge_engine.rundir.store import iter_transcript

    return [record.to_dict() for record in iter_transcript(run)]


def expected_gemba_score(item: dict[str, Any], temperature: float, model: str = "openai/gpt-4o-mini") -> float:
    """The score the fake server's well-formed answer implies for an item: what the engine must
    report, whatever faults and re-asks happened on the way (``model``: the judge's, by default
    :func:`make_job`'s; the fake answers each model as it reads the item)."""
    from judge_engine.fake.answers import AnswerBook
    from judge_engine.inputs.dataset import to_item
    from judge_engine.protocols.gemba_mqm import GembaMQM

    protocol = GembaMQM()
    fields = {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang"}
    mapped = to_item(item, fields, protocol.required_fields, "test")
    answer, name = AnswerBook().answer(protocol.render(mapped), model=model, temperature=temperature, json_mode=False)
    assert name == "gemba-mqm"
    score = protocol.score(protocol.parse(answer, mapped), mapped).score
    assert score is not None
    return score
