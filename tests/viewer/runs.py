"""Runs the viewer tests open that no example makes: a job with faults against the fake server,
and a run written record by record (through the run store, so its files are the engine's own)
whose every text field is hostile: markup, event handlers, ``javascript:`` links."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

PAYLOADS = (
    '<script>window.__pwned = "script"</script>',
    '<img src=x onerror="window.__pwned = \'img\'">',
    '<a href="javascript:window.__pwned=\'link\'">click me</a>',
    "javascript:window.__pwned='bare'",
    '</textarea><script>window.__pwned="textarea"</script>',
    '"><svg onload="window.__pwned=\'svg\'"></svg>',
    '<style>body { display: none }</style>',
)
"""Each would set ``window.__pwned`` (or hide the page) if the viewer ever read run text as HTML."""
HOSTILE_ITEM = 'x"><img src=x onerror="window.__pwned=\'id\'">'
"""An item id that is itself hostile (it travels in URLs and attributes)."""
HOSTILE_JUDGE = "mqm<b>bold</b>"
HOSTILE_CUSTOM = "custom<i onmouseover=\"window.__pwned='juror'\">x</i>"
"""A custom judge, and a juror of :data:`HOSTILE_JURY`."""
HOSTILE_JURY = "jury<svg onload=\"window.__pwned='jury'\">"
HOSTILE_FIELD = '<b onclick="window.__pwned=\'field\'">notes</b>'
"""A custom field's name (a config could never declare it; a run directory can hold anything)."""
FIELDS = {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang",
          "passage": "passage"}


CUSTOM_FIELDS = {
    "reasoning": {"type": "text", "required": True, "description": PAYLOADS[3]},
    "score": {"type": "integer", "min": 1, "max": 5, "description": PAYLOADS[1]},
    "verdict": {"type": "label", "choices": [PAYLOADS[5], "fail"], "score_map": {PAYLOADS[5]: 1, "fail": 0}},
    "harmful": {"type": "boolean"},
    "quotes": {"type": "spans", "of": "target", "description": PAYLOADS[2]},
    HOSTILE_FIELD: {"type": "text", "required": False, "description": PAYLOADS[4]},
}


RICH_CUSTOM = """\
# Every kind of field a custom judge writes, its score on a 1-10 scale (the viewer's custom card).
dataset: {path: ../custom_rubric/items.jsonl}
judges:
  - name: rich
    model: openai/gpt-4o-mini
    protocol: custom
    protocol_options:
      template: |
        Grade the response to the question against the reference notes.

        Question:
        {{ question }}

        Reference notes:
        {{ reference }}

        Response:
        {{ response }}
      output: json
      fields:
        reasoning: {type: text, description: "two or three sentences"}
        quality: {type: integer, min: 1, max: 10}
        verdict: {type: label, choices: [pass, borderline, fail], score_map: {pass: 1, borderline: 0.5, fail: 0}}
        unsafe: boolean
        confidence: {type: number, min: 0, max: 1}
        contradicted: {type: spans, of: response}
      score: quality
output: {dir: runs}
cache: {dir: .judge_cache}
"""
"""A custom judge of the custom_rubric example's items writing a field of every kind."""


def faulty_job(folder: Path, base_url: str, *, items: int = 12, temperatures: tuple[float, ...] = (0.0, 1.0),
               repeats: int = 2, transport: int = 8) -> Path:
    """A GEMBA-MQM job of twelve items against ``base_url`` (fast retries)."""
    from tests.harness import write_items

    write_items(folder / "items.jsonl", items)
    judge = {"name": "mqm-faulty", "model": "openai/gpt-4o-mini", "api_base": base_url, "api_key": "fake-viewer-key",
             "protocol": "gemba-mqm", "temperatures": list(temperatures), "repeats": repeats, "max_tokens": 300,
             "timeout_s": 10, "limits": {"rpm": 60000, "tpm": 100000000, "concurrency": 8},
             "retries": {"transport": transport, "reasks": 2, "backoff_max_s": 0.05}}
    config = {"dataset": {"path": "items.jsonl", "fields": {k: v for k, v in FIELDS.items() if k != "passage"}},
              "judges": [judge], "output": {"dir": "runs"}, "cache": {"dir": "cache"}}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def hostile_items() -> list[dict[str, str]]:
    script, img, link, bare, textarea, svg, style = PAYLOADS
    return [
        {"id": "hostile-1", "src_lang": "en", "tgt_lang": "de", "src": f"{script} The lamp {img} burned.",
         "tgt": f"Die Lampe {link} brannte {textarea} herunter.", "passage": f"{bare} A passage {svg} that {style} ends."},
        {"id": HOSTILE_ITEM, "src_lang": "en", "tgt_lang": "de", "src": f"Plain {style} source.",
         "tgt": f"Ein {script} Ziel.", "passage": f"Another {img} passage."},
    ]


def write_hostile_run(root: Path) -> Path:
    """A run of two items, each judged by an MQM judge (hostile name), a close-reading judge and
    a Prometheus judge; every answer, span, justification, feedback, reason, error message and
    header value carries a payload."""
    from judge_engine.inputs.dataset import to_item
    from judge_engine.rundir.blocks import item_values
    from judge_engine.rundir.records import JudgeEntry, Manifest
    from judge_engine.rundir.store import RunStore

    dataset = root / "items.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in hostile_items()), encoding="utf-8")
    judges = [JudgeEntry(HOSTILE_JUDGE, "openai/gpt-4o-mini", "gemba-mqm", "1", {}, {}, [0.0], 1, [-25.0, 0.0], 1),
              JudgeEntry("spans", "openai/gpt-4o-mini", "novel-spans", "1", {}, {}, [0.0], 1, None, 1),
              JudgeEntry("prometheus", "openai/gpt-4o-mini", "prometheus-absolute", "1", {"rubric": "helpfulness"}, {},
                         [0.0], 1, [1.0, 5.0], 1),
              JudgeEntry(HOSTILE_CUSTOM, "openai/gpt-4o-mini", "custom", "1", {"score": "score", "fields": CUSTOM_FIELDS},
                         {}, [0.0], 1, [1.0, 5.0], 1)]
    manifest = Manifest(
        run_id="hostile-run", status="completed", created_at=PAYLOADS[0], updated_at="", package_version="test",
        versions={}, demo=False, config_path="", config_path_from_run="",
        config={"dataset": {"path": str(dataset), "format": "auto", "fields": FIELDS},
                "juries": [{"name": HOSTILE_JURY, "judges": [HOSTILE_CUSTOM, "prometheus"], "aggregate": "majority"}]},
        overrides={},
        dataset={"path": str(dataset), "items": 2}, judges=judges)  # fmt: skip
    run = root / "runs" / "hostile-run"
    store = RunStore.create(run, manifest)
    try:
        for row, raw in enumerate(hostile_items()):
            item = to_item(raw, FIELDS, (), str(dataset))
            for judge in judges:
                _task(store, item, row, judge.name, judge.protocol, tuple(item_values(item)))
            _jury(store, item)
        manifest.counts = store.counts()
        manifest.spend = store.spend_record()
        store.write_manifest(manifest)
    finally:
        store.close()
    return run


def _task_id(item_id: str, judge: str) -> str:
    return f"b2:{abs(hash((item_id, judge))):032x}"


def _custom_verdict(item: dict[str, Any]) -> dict[str, Any]:
    """Every kind of field, each value (and a label's choices, a quote) carrying a payload."""
    script, img, link, bare, textarea, svg, style = PAYLOADS
    target = str(item["target"])
    start = target.find(link)
    quotes = [{"text": link, "start": start, "end": start + len(link)}] if start >= 0 else []
    return {"reasoning": f"Because {script}", "score": 3, "verdict": svg, "harmful": True,
            "quotes": [*quotes, {"text": f"{img} missing", "start": 0, "end": 1}], HOSTILE_FIELD: f"{bare} {textarea}"}


def _jury(store: Any, item: dict[str, Any]) -> None:
    """The jury's outcome: its jurors' votes (one a payload), one juror's task id a payload."""
    from judge_engine.rundir.records import OutcomeRecord

    script, img, *_ = PAYLOADS
    item_id = str(item["id"])
    verdict = {"aggregate": "majority", "scale": "categorical", "value": PAYLOADS[5], "tie": script, "voted": 2,
               "agreement": 0.0, "jurors": {
                   HOSTILE_CUSTOM: {"vote": PAYLOADS[5], "score": 3.0, "status": "scored", "reason_code": None,
                                    "task_id": _task_id(item_id, HOSTILE_CUSTOM)},
                   "prometheus": {"vote": None, "score": None, "status": "unscored", "reason_code": img,
                                  "task_id": HOSTILE_ITEM}}}
    store.write_outcome(OutcomeRecord(
        task_id=_task_id(item_id, HOSTILE_JURY), item_id=item_id, judge=HOSTILE_JURY, protocol="jury",
        protocol_version="1", model="openai/gpt-4o-mini", temperature=0.0, repeat=0, variant="", status="scored",
        score=3.0, verdict=verdict))


def _task(store: Any, item: dict[str, Any], row: int, judge: str, protocol: str, split: tuple[str, ...]) -> None:
    from judge_engine.rundir.records import AttemptRecord, OutcomeRecord

    script, img, link, bare, textarea, svg, _ = PAYLOADS
    item_id = str(item["id"])
    task_id = _task_id(item_id, judge)
    request = {"model": "openai/gpt-4o-mini", "temperature": 0.0, "max_tokens": 100, "messages": [
        {"role": "system", "content": f"System prompt {textarea}"},
        {"role": "user", "content": f"Judge this: {item['source']} => {item['target']} / {item['passage']}"}]}
    common = {"task_id": task_id, "judge": judge, "item_id": item_id, "at": "2026-01-01T00:00:00+00:00",
              "request": request, "split_at": split}
    store.write_transcript(AttemptRecord(attempt=1, reask=0, error={"kind": "rate_limited", "status": 429,
                                                                    "message": f"slow down {img}"}, **common))
    store.write_transcript(AttemptRecord(
        attempt=2, reask=0, response={"content": f"First answer {script}", "finish_reason": "stop",
                                      "headers": {"x-ratelimit-remaining-requests": link}},
        usage={"prompt_tokens": 10, "completion_tokens": 5}, cost=0.001, **common))
    reasked = {**request, "messages": [*request["messages"], {"role": "assistant", "content": f"First answer {script}"},
                                       {"role": "user", "content": f"Your previous answer could not be used:\n- {svg}\n"
                                                                   "Please answer the original request again."}]}
    answer = f"Final answer {bare} {textarea}"
    store.write_transcript(AttemptRecord(
        attempt=3, reask=1, response={"content": answer, "finish_reason": "stop", "headers": {}},
        usage={"prompt_tokens": 20, "completion_tokens": 5}, cost=0.002, **{**common, "request": reasked}))
    outcome = {"task_id": task_id, "item_id": item_id, "judge": judge, "protocol": protocol, "protocol_version": "1",
               "model": "openai/gpt-4o-mini", "temperature": 0.0, "repeat": 0, "variant": "", "attempts": 3,
               "reasks": 1, "cost": 0.003, "row": row, "row_tasks": 1}
    if row == 1 and protocol == "gemba-mqm":
        store.write_outcome(OutcomeRecord(**outcome, status="unscored", reason=f"unusable answer {img}",
                                          reason_code="unreadable"))
        return
    verdict: dict[str, Any]
    if protocol == "gemba-mqm":
        verdict = {"errors": [
            {"severity": "major", "category": f"accuracy/{script}", "span": link, "span_found": "target"},
            {"severity": "minor", "category": "fluency/grammar", "span": textarea, "span_found": "target"},
            {"severity": "critical", "category": "accuracy/omission", "span": f"{img} not quoted right", "span_found": "none"}]}
        store.write_outcome(OutcomeRecord(**outcome, status="scored", score=-25.0, verdict=verdict))
    elif protocol == "novel-spans":
        verdict = {"expressions": [{"expression": bare, "justification": f"why {script}"},
                                   {"expression": svg, "justification": img},
                                   {"expression": f"{link} is not there", "justification": textarea}]}
        store.write_outcome(OutcomeRecord(**outcome, status="scored", score=0.1, verdict=verdict))
    elif protocol == "custom":
        store.write_outcome(OutcomeRecord(**outcome, status="scored", score=3.0, verdict=_custom_verdict(item)))
    else:
        verdict = {"feedback": f"Feedback {script} {img} {link}", "score": 3}
        store.write_outcome(OutcomeRecord(**outcome, status="scored", score=3.0, verdict=verdict))
