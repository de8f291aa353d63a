"""The fake server's batch APIs: OpenAI's files + batches and Anthropic's Message Batches.

State and behaviour only (no HTTP): :mod:`judge_engine.fake.app` maps the routes onto
:class:`FakeBatches` and sends what it returns. Answers come from the same
:class:`~judge_engine.fake.answers.AnswerBook` as the chat route, with the same content faults
(malformed, cut off, stopped early) and token counts, so a batch answer and an online answer to
the same request are the same answer.

A batch is ``validating`` for :attr:`FakeBatchConfig.validating_s`, then its requests are
processed evenly over :attr:`FakeBatchConfig.processing_s` (the counts grow); each request draws,
from its custom id, whether it fails (an error result), is never processed (the batch then ends
``expired`` with the others' results) or answers empty (a 200 with no content). Its answers are computed in the background, a slice at a
time, so the server keeps answering meanwhile. A create call is counted at once (submissions per
task: the custom id's part before its last ``-``), then answered after
:attr:`FakeBatchConfig.create_delay_s`; a batch beyond the enqueued-token quota is refused and
not counted (OpenAI: ``failed`` with ``token_limit_exceeded``; Anthropic: 429). With a
:class:`~judge_engine.fake.batch_state.BatchStore`, every file and batch is written to disk as it
is accepted (and again when cancelled or ended), and :meth:`FakeBatches.load` serves them again
in a later server.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import time
from collections import Counter
from typing import Any

from judge_engine.errors import FakeRequestError
from judge_engine.fake import batch_wire as wire
from judge_engine.fake.answers import (
    AnswerBook,
    as_judged,
    body_digest,
    finish,
    logprobs_field,
    requested_top,
    with_logprobs,
)
from judge_engine.fake.batch_state import BatchStore, FakeBatch, FakeFile
from judge_engine.fake.config import FakeConfig
from judge_engine.fake.state import Draw
from judge_engine.util import jsonio

_SLICE = 200
"""Answers computed between two yields to the server's event loop."""
_UNIT = float(1 << 64)
Reply = tuple[int, bytes]
"""An HTTP status and a JSON body."""


class FakeBatches:
    """Both batch APIs' state, driven by the server's event loop."""

    def __init__(self, config: Any, answers: AnswerBook, store: BatchStore | None = None) -> None:
        self._config = config
        """Returns the live :class:`FakeConfig` (it can be patched while batches run)."""
        self._answers = answers
        self._store = store
        """Where files and batches are kept for a later server (None: in memory only)."""
        self.files: dict[str, FakeFile] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.submissions: Counter[str] = Counter()
        """Requests accepted into a batch, per task (the custom id before its last ``-``)."""
        self.refused = 0
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def load(self) -> None:
        """Serve again what the store holds (called from the server's event loop at start): a
        batch without its result files has its answers computed again from its requests."""
        if self._store is None:
            return
        loaded = self._store.load()
        self._ids = itertools.count(max(loaded.last_id + 1, next(self._ids)))
        self.files.update((f.file_id, f) for f in loaded.files)
        for batch, requests in loaded.batches:
            self.batches[batch.batch_id] = batch
            if batch.refused is not None:
                continue
            for custom_id in batch.custom_ids:
                self.submissions[custom_id.rpartition("-")[0] or custom_id] += 1
            if batch.output_file_id is not None:
                batch.results, batch.computed = [], batch.size
            else:
                batch.requests = requests
                self._start_computing(batch)

    def clear(self) -> None:
        self.files.clear()
        self.batches.clear()
        self.submissions.clear()
        self.refused = 0

    def stats(self) -> dict[str, Any]:
        return {"batches": len(self.batches), "batch_requests": sum(self.submissions.values()),
                "batches_refused": self.refused, "batch_submissions": dict(self.submissions)}

    # --- files --------------------------------------------------------------------------------

    def upload(self, filename: str, purpose: str, content: bytes) -> Reply:
        if purpose != "batch":
            return 400, wire.openai_error(f"purpose {purpose!r} is not supported by the fake server", "invalid_request_error")
        file = FakeFile(f"file-fake{next(self._ids):06d}", filename, purpose, int(time.time()), content)
        self.files[file.file_id] = file
        if self._store is not None:
            self._store.save_file(file)
        return 200, jsonio.dumps(wire.file_object(file.file_id, len(file.content), file.created_at, file.filename,
                                                    file.purpose))

    def file_content(self, file_id: str) -> Reply:
        file = self.files.get(file_id)
        if file is None:
            return 404, wire.openai_error(f"No such File object: {file_id}", "invalid_request_error")
        return 200, file.content

    # --- OpenAI batches -----------------------------------------------------------------------

    def create_openai(self, payload: Any) -> Reply:
        if not isinstance(payload, dict) or payload.get("endpoint") != "/v1/chat/completions":
            return 400, wire.openai_error("endpoint must be /v1/chat/completions", "invalid_request_error")
        file = self.files.get(str(payload.get("input_file_id")))
        if file is None:
            return 404, wire.openai_error(f"No such File object: {payload.get('input_file_id')}", "invalid_request_error")
        try:
            requests, model = wire.openai_requests(file.content)
        except FakeRequestError as exc:
            return 400, wire.openai_error(str(exc), "invalid_request_error")
        batch = self._batch("openai", requests, model, len(file.content), metadata=payload.get("metadata") or {},
                            input_file_id=file.file_id, window=str(payload.get("completion_window") or "24h"))
        if batch.refused is not None:
            self._save(batch, [])  # listed (failed) by a later server too
        return 200, jsonio.dumps(self.openai_object(batch))

    def get_openai(self, batch_id: str) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.api != "openai":
            return 404, wire.openai_error(f"No such Batch object: {batch_id}", "invalid_request_error")
        return 200, jsonio.dumps(self.openai_object(batch))

    def list_openai(self, limit: int, after: str | None) -> Reply:
        data = self._page("openai", limit, after)
        objects = [self.openai_object(b) for b in data[0]]
        return 200, jsonio.dumps({"object": "list", "data": objects, "has_more": data[1],
                                  "first_id": objects[0]["id"] if objects else None,
                                  "last_id": objects[-1]["id"] if objects else None})

    def cancel_openai(self, batch_id: str) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.api != "openai":
            return 404, wire.openai_error(f"No such Batch object: {batch_id}", "invalid_request_error")
        self._cancel(batch)
        return 200, jsonio.dumps(self.openai_object(batch))

    def openai_object(self, batch: FakeBatch) -> dict[str, Any]:
        now = time.time()
        created = int(batch.created_at)
        document: dict[str, Any] = {
            "id": batch.batch_id, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
            "input_file_id": batch.input_file_id, "completion_window": batch.window, "created_at": created,
            "expires_at": created + 86400, "output_file_id": None, "error_file_id": None, "metadata": batch.metadata,
        }
        if batch.refused is not None:
            document.update(status="failed", failed_at=created, request_counts={"total": 0, "completed": 0, "failed": 0},
                            errors={"object": "list", "data": [{"code": "token_limit_exceeded", "message": batch.refused,
                                                                "param": None, "line": None}]})
            return document
        answered, failed, expired = batch.counts(now)
        if self._end(batch, now):
            at = int(now)
            status = ("cancelled" if batch.cancelled_at is not None else
                      "expired" if any(batch.expires) else "completed")
            document.update({"status": status, f"{status}_at": at, "output_file_id": batch.output_file_id,
                             "error_file_id": batch.error_file_id})
        elif batch.cancelled_at is not None:
            document.update(status="cancelling", cancelling_at=int(batch.cancelled_at))
        else:
            started = now >= batch.created_at + batch.validating_s
            document["status"] = "in_progress" if started else "validating"
        document["request_counts"] = {"total": batch.size, "completed": answered, "failed": failed + expired}
        return document

    # --- Anthropic message batches ------------------------------------------------------------

    def create_anthropic(self, body: bytes) -> Reply:
        try:
            payload = jsonio.loads(body)
            requests, model = wire.anthropic_requests(payload)
        except (jsonio.JSONDecodeError, FakeRequestError) as exc:
            return 400, wire.anthropic_error(str(exc), "invalid_request_error")
        batch = self._batch("anthropic", requests, model, len(body))
        if batch.refused is not None:
            del self.batches[batch.batch_id]
            return 429, wire.anthropic_error(batch.refused, "rate_limit_error")
        return 200, jsonio.dumps(self.anthropic_object(batch))

    def get_anthropic(self, batch_id: str, base: str) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.api != "anthropic":
            return 404, wire.anthropic_error(f"no message batch {batch_id}", "not_found_error")
        return 200, jsonio.dumps(self.anthropic_object(batch, base))

    def list_anthropic(self, limit: int, after: str | None, base: str) -> Reply:
        batches, more = self._page("anthropic", limit, after)
        objects = [self.anthropic_object(b, base) for b in batches]
        return 200, jsonio.dumps({"data": objects, "has_more": more, "first_id": objects[0]["id"] if objects else None,
                                  "last_id": objects[-1]["id"] if objects else None})

    def results_anthropic(self, batch_id: str) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.api != "anthropic":
            return 404, wire.anthropic_error(f"no message batch {batch_id}", "not_found_error")
        if not self._end(batch, time.time()):
            return 400, wire.anthropic_error("the batch is still processing: no results yet", "invalid_request_error")
        assert batch.output_file_id is not None
        return 200, self.files[batch.output_file_id].content

    def cancel_anthropic(self, batch_id: str, base: str) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.api != "anthropic":
            return 404, wire.anthropic_error(f"no message batch {batch_id}", "not_found_error")
        self._cancel(batch)
        return 200, jsonio.dumps(self.anthropic_object(batch, base))

    def anthropic_object(self, batch: FakeBatch, base: str = "") -> dict[str, Any]:
        now = time.time()
        answered, failed, expired = batch.counts(now)
        ended = self._end(batch, now)
        if ended:
            processing, cancelled = 0, batch.size - answered - failed - expired
        else:
            processing, cancelled, expired = batch.size - answered - failed, 0, 0
        return {
            "id": batch.batch_id, "type": "message_batch",
            "processing_status": "ended" if ended else ("canceling" if batch.cancelled_at is not None else "in_progress"),
            "request_counts": {"processing": processing, "succeeded": answered, "errored": failed,
                               "canceled": cancelled, "expired": expired},
            "created_at": wire.iso(batch.created_at), "expires_at": wire.iso(batch.created_at + 86400),
            "ended_at": wire.iso(now) if ended else None,
            "cancel_initiated_at": None if batch.cancelled_at is None else wire.iso(batch.cancelled_at),
            "archived_at": None,
            "results_url": f"{base}/v1/messages/batches/{batch.batch_id}/results" if ended else None,
        }

    # --- shared -------------------------------------------------------------------------------

    def _batch(self, api: str, requests: list[tuple[str, bytes]], model: str, size: int, *,
               metadata: dict[str, Any] | None = None, input_file_id: str = "", window: str = "24h") -> FakeBatch:
        config: FakeConfig = self._config()
        knobs = config.batch
        tokens = math.ceil(size / config.chars_per_token)
        draws = [request_draws(custom_id, config.seed) for custom_id, _line in requests]
        prefix = "batch_fake" if api == "openai" else "msgbatch_fake"
        batch = FakeBatch(
            batch_id=f"{prefix}{next(self._ids):06d}", api=api, created_at=time.time(), model=model, tokens=tokens,
            custom_ids=[custom_id for custom_id, _line in requests], requests=[line for _id, line in requests],
            fails=[d[0] < knobs.failure_rate for d in draws], expires=[d[1] < knobs.expire_rate for d in draws],
            empties=[d[2] < knobs.empty_rate for d in draws], validating_s=knobs.validating_s,
            processing_s=knobs.processing_s, metadata={str(k): str(v) for k, v in (metadata or {}).items()},
            input_file_id=input_file_id, window=window, results=[None] * len(requests))
        limit = knobs.max_enqueued_tokens
        enqueued = self._enqueued(model) if limit is not None else 0
        self.batches[batch.batch_id] = batch
        if limit is not None and enqueued + tokens > limit:
            batch.refused = (f"Enqueued token limit reached for {model} in organization org-fake. Limit: {limit:,} "
                             "enqueued tokens. Please try again once some in_progress batches have been completed.")
            batch.requests = []
            self.refused += 1
            return batch
        for custom_id in batch.custom_ids:
            self.submissions[custom_id.rpartition("-")[0] or custom_id] += 1
        self._save(batch, batch.requests)
        self._start_computing(batch)
        return batch

    def _start_computing(self, batch: FakeBatch) -> None:
        task = asyncio.get_running_loop().create_task(self._compute(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _save(self, batch: FakeBatch, requests: list[bytes] | None = None) -> None:
        if self._store is not None:
            self._store.save_batch(batch, requests)

    def _enqueued(self, model: str) -> int:
        now = time.time()
        return sum(b.tokens for b in self.batches.values()
                   if b.model == model and b.refused is None and not b.ended(now))

    def _page(self, api: str, limit: int, after: str | None) -> tuple[list[FakeBatch], bool]:
        newest_first = [b for b in reversed(self.batches.values()) if b.api == api]
        if after is not None:
            ids = [b.batch_id for b in newest_first]
            newest_first = newest_first[ids.index(after) + 1:] if after in ids else []
        limit = max(1, min(limit, 100))
        return newest_first[:limit], len(newest_first) > limit

    def _cancel(self, batch: FakeBatch) -> None:
        if batch.cancelled_at is None and not batch.ended(time.time()):
            batch.cancelled_at = time.time()
            self._save(batch)

    def _end(self, batch: FakeBatch, now: float) -> bool:
        """Whether ``batch`` has ended; its result files are made the first time it has."""
        if not batch.ended(now):
            return False
        if batch.output_file_id is None:
            self._files_of(batch)
        return True

    def _files_of(self, batch: FakeBatch) -> None:
        done = batch.processed(batch.cancelled_at if batch.cancelled_at is not None else time.time())
        answers: list[bytes] = []
        errors: list[bytes] = []
        for index, custom_id in enumerate(batch.custom_ids):
            result = batch.results[index]
            if index < done and result is not None:
                (errors if batch.fails[index] else answers).append(result)
            else:
                kind = "cancelled" if index >= done else "expired"
                errors.append(wire.not_processed(batch.api, custom_id, kind))
        if batch.api == "anthropic":  # one results file, every request in it
            answers, errors = answers + errors, []
        for kind, lines in (("output", answers), ("error", errors)):
            if kind == "error" and not lines:
                continue
            file = FakeFile(f"file-fake{next(self._ids):06d}", f"{batch.batch_id}_{kind}.jsonl", "batch_output",
                            int(time.time()), b"".join(lines))
            self.files[file.file_id] = file
            if self._store is not None:
                self._store.save_file(file)
            if kind == "output":
                batch.output_file_id = file.file_id
            else:
                batch.error_file_id = file.file_id
        batch.results = []
        self._save(batch)

    async def _compute(self, batch: FakeBatch) -> None:
        """Every request's result line, a slice at a time (the server answers in between); a
        request drawn to expire gets none."""
        for start in range(0, batch.size, _SLICE):
            config: FakeConfig = self._config()
            for index in range(start, min(start + _SLICE, batch.size)):
                custom_id = batch.custom_ids[index]
                if not batch.expires[index]:
                    try:
                        batch.results[index] = self._result(batch, index, custom_id, batch.requests[index], config)
                    except Exception as exc:  # the fake must say what broke, not hang the batch
                        batch.results[index] = wire.error_line(batch.api, custom_id, 500, f"fake server bug: {exc!r}")
                batch.computed = index + 1
            await asyncio.sleep(0)
        batch.requests = []

    def _result(self, batch: FakeBatch, index: int, custom_id: str, line: bytes, config: FakeConfig) -> bytes:
        if batch.fails[index]:
            return wire.error_line(batch.api, custom_id, 500, "The server had an error while processing your request.")
        request = jsonio.loads(line)
        body = request["body"] if batch.api == "openai" else request["params"]
        messages, json_mode = wire.conversation(batch.api, body)
        digest = body_digest(jsonio.canonical(body))
        faults = Draw.of(digest, 0, config.seed).fired(config)
        temperature = float(body.get("temperature", 1.0))
        top = requested_top(body) if batch.api == "openai" else None
        model = str(body.get("model") or batch.model)
        content, protocol = self._answers.answer(messages, model=model, temperature=temperature, json_mode=json_mode,
                                                 logprobs=top is not None)
        if batch.empties[index]:  # a 200 with nothing in it: it must never be judged as an answer
            return wire.answer_line(batch.api, batch.model, custom_id, "", "stop", 0, 0, False)
        content, belief = as_judged(messages, content, protocol, model=model, temperature=temperature,
                                    asked=top is not None)
        answer = finish(messages, content, protocol, malformed=faults.get("malformed"), cut_off="cut_off" in faults,
                        stop_early=faults.get("stop_early"),
                        max_tokens=body.get("max_completion_tokens", body.get("max_tokens")),
                        chars_per_token=config.chars_per_token)
        answer = with_logprobs(answer, content, belief, model=model, top=top, seed=0)
        return wire.answer_line(batch.api, batch.model, custom_id, answer.content, answer.finish_reason, answer.prompt_tokens,
                            answer.completion_tokens, json_mode, logprobs=logprobs_field(answer))


def request_draws(custom_id: str, seed: int = 0) -> tuple[float, float, float]:
    """A batch request's uniforms in [0, 1): whether it fails, expires, or answers empty (under
    :class:`~judge_engine.fake.config.FakeBatchConfig`'s rates): tests predict with it how many
    rounds each task needs."""
    raw = hashlib.blake2b(f"{custom_id}:{seed}".encode(), digest_size=24, person=b"fake-batch").digest()
    return tuple(int.from_bytes(raw[i:i + 8], "big") / _UNIT for i in (0, 8, 16))  # type: ignore[return-value]
