"""A synthetic GEMBA-MQM run directory of N tasks, written without the engine (for
``benchmarks/viewer.py``).

Items are sentence pairs (100-200 characters a side, ``scale.sentence``); every item is judged
by two judges, twice each (repeats) at T=0.7, so an item has four tasks and its disagreement is
real. Transcript lines go through :class:`judge_engine.rundir.store.RunStore` (so ``blocks.jsonl``,
the compact request encoding and ``index.sqlite`` are the engine's own), outcome lines are
:class:`judge_engine.rundir.records.OutcomeRecord`. Per task: 3% answer a 429 first, 2% a 500 first,
4% are re-asked once after an unreadable answer, 3% end unscored (unreadable after two re-asks,
or a content filter); error spans are words of the target, a few quoted wrongly (not found).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from benchmarks.scale import _WORDS, _WORT, sentence

JUDGES = ("mqm-a", "mqm-b")
REPEATS = 2
TEMPERATURE = 0.7
TASKS_PER_ITEM = len(JUDGES) * REPEATS
CATEGORIES = ("accuracy/mistranslation", "accuracy/omission", "fluency/grammar", "fluency/punctuation",
              "style/awkward", "terminology/inappropriate for context")
WEIGHTS = {"critical": 25, "major": 5, "minor": 1}
FIELDS = {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang"}


def write_dataset(path: Path, items: int, *, seed: int = 11) -> None:
    from judge_engine.util.jsonio import dumps_line

    with path.open("wb") as handle:
        for index in range(items):
            rng = random.Random(f"{seed}:{index}")
            handle.write(dumps_line({"id": f"seg-{index:07d}", "src": sentence(rng, _WORDS),
                                     "tgt": sentence(rng, _WORT), "src_lang": "en", "tgt_lang": "de"}))


def _answer(rng: random.Random, target: str) -> tuple[str, list[dict[str, Any]]]:
    """A GEMBA text answer and its verdict's errors."""
    words = target.rstrip(".").split()
    errors = []
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3, 4))):
        start = rng.randrange(len(words))
        span = " ".join(words[start:start + rng.randint(1, 3)])
        found = "target"
        if rng.random() < 0.03:
            span, found = span + " quoted wrongly", "none"
        errors.append({"severity": rng.choices(("critical", "major", "minor"), (1, 4, 10))[0],
                       "category": rng.choice(CATEGORIES), "span": span, "span_found": found})
    lines = []
    for severity in ("critical", "major", "minor"):
        lines.append(f"{severity.capitalize()}:")
        mine = [e for e in errors if e["severity"] == severity]
        lines += [f'{e["category"]} - "{e["span"]}"' for e in mine] or ["no-error"]
    return "\n".join(lines) + "\n", errors


def build_run(root: Path, tasks: int, *, seed: int = 7) -> Path:
    """The run directory ``root/runs/viewer-<tasks>`` (with its dataset ``root/items.jsonl``)."""
    from judge_engine.inputs.dataset import to_item
    from judge_engine.protocols.gemba_mqm import GembaMQM, gemba_score
    from judge_engine.rundir.blocks import item_values
    from judge_engine.rundir.records import AttemptRecord, JudgeEntry, Manifest, OutcomeRecord
    from judge_engine.rundir.store import RunStore

    items = tasks // TASKS_PER_ITEM
    root.mkdir(parents=True, exist_ok=True)
    dataset = root / "items.jsonl"
    write_dataset(dataset, items)
    run = root / "runs" / f"viewer-{tasks}"
    manifest = Manifest(
        run_id=run.name, status="completed", created_at="2026-11-25T09:00:00+00:00",
        updated_at="2026-11-25T10:00:00+00:00", package_version="bench", versions={}, demo=False,
        config_path="", config_path_from_run="",
        config={"dataset": {"path": str(dataset), "format": "auto", "fields": FIELDS}}, overrides={},
        dataset={"path": str(dataset), "items": items},
        judges=[JudgeEntry(name, "openai/gpt-4o-mini", "gemba-mqm", "1", {}, {}, [TEMPERATURE], REPEATS,
                           [-25.0, 0.0], REPEATS) for name in JUDGES],
        counts={}, spend={},
    )  # fmt: skip
    store = RunStore.create(run, manifest)
    protocol = GembaMQM()
    rng = random.Random(seed)
    try:
        import json

        with dataset.open("rb") as handle:
            for row, line in enumerate(handle):
                raw = json.loads(line)
                item = to_item(raw, FIELDS, (), str(dataset))
                messages = protocol.render(item)
                split = tuple(item_values(item))
                for judge in JUDGES:
                    for repeat in range(REPEATS):
                        _task(store, rng, row, item, messages, split, judge, repeat,
                              AttemptRecord, OutcomeRecord, gemba_score)
        manifest.counts = store.counts()
        manifest.spend = store.spend_record()
        store.write_manifest(manifest)
    finally:
        store.close()
    return run


def _task(store: Any, rng: random.Random, row: int, item: dict[str, Any], messages: list[Any],
          split: tuple[str, ...], judge: str, repeat: int, attempt_record: Any, outcome_record: Any,
          gemba_score: Any) -> None:
    from judge_engine.protocols.gemba_mqm import MQMError

    item_id = str(item["id"])
    task_id = f"b2:{hash((item_id, judge, repeat)) & (1 << 128) - 1:032x}"
    request = {"model": "openai/gpt-4o-mini", "messages": list(messages), "temperature": TEMPERATURE,
               "max_tokens": 500}
    at = f"2026-11-25T09:{row // 3600 % 60:02d}:{row // 60 % 60:02d}.{row % 1000:03d}+00:00"
    number = 0

    def attempt(**fields: Any) -> None:
        nonlocal number
        number += 1
        store.write_transcript(attempt_record(task_id=task_id, judge=judge, item_id=item_id, attempt=number,
                                              at=at, request=request, split_at=split,
                                              latency_s=round(rng.uniform(0.3, 2.0), 3), **fields))

    def answered(content: str, reask: int) -> None:
        usage = {"prompt_tokens": 1300 + len(content) // 4, "completion_tokens": len(content) // 4}
        headers = {"x-ratelimit-remaining-requests": str(rng.randint(0, 3000))}
        attempt(reask=reask, response={"content": content, "finish_reason": "stop", "headers": headers},
                usage=usage, cost=round(usage["prompt_tokens"] * 1.5e-7 + usage["completion_tokens"] * 6e-7, 8))

    draw = rng.random()
    if draw < 0.03:
        attempt(reask=0, error={"kind": "rate_limited", "status": 429, "message": "Rate limit reached"})
    elif draw < 0.05:
        attempt(reask=0, error={"kind": "retry", "status": 500, "message": "Internal server error"})
    fate = rng.random()
    reasks = 0
    if fate < 0.07:
        answered("Here is my assessment of the translation.", 0)
        request = {**request, "messages": [*request["messages"], {"role": "assistant", "content": "Here is my assessment of the translation."},
                                           {"role": "user", "content": "Your previous answer could not be used:\n- no 'Critical:', "
                                            "'Major:' or 'Minor:' section found\nPlease answer the original request again, "
                                            "following the requested format exactly."}]}
        reasks = 1
    common = dict(task_id=task_id, item_id=item_id, judge=judge, protocol="gemba-mqm", protocol_version="1",
                  model="openai/gpt-4o-mini", temperature=TEMPERATURE, repeat=repeat, variant="", at=at,
                  cost=0.0002, latency_s=1.0, row=row, row_tasks=TASKS_PER_ITEM)
    if fate < 0.03:
        if fate < 0.015:
            answered("I cannot evaluate this.", 1)
            store.write_outcome(outcome_record(**common, status="unscored", attempts=number, reasks=2,
                                               reason="unusable answer after 2 re-asks: no section found",
                                               reason_code="unreadable"))
        else:
            attempt(reask=reasks, error={"kind": "item", "status": 400, "message": "content filter"})
            store.write_outcome(outcome_record(**common, status="unscored", attempts=number, reasks=reasks,
                                               reason="the provider's content filter", reason_code="content_filter"))
        return
    content, errors = _answer(rng, str(item["target"]))
    answered(content, reasks)
    score = gemba_score([MQMError(**e) for e in errors])
    store.write_outcome(outcome_record(**common, status="scored", score=score, verdict={"errors": errors},
                                       attempts=number, reasks=reasks))
