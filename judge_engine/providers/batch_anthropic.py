"""Anthropic's Message Batches API.

```
POST /v1/messages/batches {"requests": [{"custom_id", "params"}, ...]}   -> message_batch
GET  /v1/messages/batches/{id}                 processing_status, request_counts, results_url
GET  /v1/messages/batches?limit=100&after_id=  newest first
GET  {results_url}                             JSONL: {"custom_id", "result": {"type": ...}}
POST /v1/messages/batches/{id}/cancel
```

There is no file step: the create call carries the requests, streamed here from the chunk's
request file (up to 256 MB). ``params`` is the body ``litellm.acompletion`` sends Anthropic for
the same request (system prompt apart, content blocks, JSON mode as litellm's forced
``json_tool_call`` tool), built by litellm's own chat config
(:func:`~judge_engine.providers.catalog.batch_body`); a tool answer in JSON mode is turned back
into the JSON text as litellm does. Batches carry no metadata, so a resumed run finds a batch it
created but never recorded by its time and size, and confirms it by its results' custom ids
(:meth:`AnthropicBatchAPI.find`). A queue that is full answers the create call with 429: the
chunk is sent again later. Custom ids must match ``^[A-Za-z0-9_-]{1,64}$``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from judge_engine.errors import HTTPStatusError, MalformedResponseError
from judge_engine.providers.base import (
    ErrorClass,
    ErrorKind,
    ProviderRequest,
    ProviderResponse,
    item_code,
)
from judge_engine.providers.batch import BatchInfo, BatchResult, ResultKind
from judge_engine.providers.catalog import BatchRoute, batch_body, batch_cost_per_token
from judge_engine.providers.http import BatchHTTP
from judge_engine.providers.network import Network
from judge_engine.rundir.disk import writing
from judge_engine.util import jsonio

API_VERSION = "2023-06-01"
JSON_TOOL = "json_tool_call"
"""The tool litellm turns ``response_format`` into for Anthropic models."""
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "pause_turn": "stop",
                 "max_tokens": "length", "refusal": "content_filter"}
_RETRY_ERRORS = frozenset({"api_error", "overloaded_error", "rate_limit_error", "timeout_error"})
_LIST_PAGES = 50


class AnthropicBatchAPI:
    """:class:`~judge_engine.providers.batch.BatchAPI` for Anthropic's Message Batches.

    Args:
        route: where the API is (the host, without ``/v1``).
        model: the judge's model string, for the bodies and the batch prices.
        api_key: None: ``ANTHROPIC_API_KEY``.
    """

    name = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    def __init__(self, route: BatchRoute, *, model: str, api_base: str | None, api_key: str | None,
                 network: Network | None = None) -> None:
        self._route, self._model, self._api_base = route, model, api_base
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        headers = {"Accept": "application/json", "anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        self._http = BatchHTTP(headers, secret=key, network=network)
        self._url = f"{route.base_url}/v1/messages/batches"
        self._prices = batch_cost_per_token(model)

    def request_line(self, custom_id: str, request: ProviderRequest) -> bytes:
        params = batch_body(self._route, self._model, self._api_base, messages=request.messages,
                            temperature=request.temperature, max_tokens=request.max_tokens,
                            response_format=request.response_format, params=request.params)
        return jsonio.dumps_line({"custom_id": custom_id, "params": params})

    async def upload(self, path: Path, name: str) -> str | None:
        return None  # the create call carries the requests

    async def create(self, path: Path, file_id: str | None, *, metadata: Mapping[str, str],
                     window: str) -> BatchInfo:
        return _info(await self._http.post_stream(self._url, _requests_body(path)))

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return _info(await self._http.get_json(f"{self._url}/{batch_id}"))

    async def find(self, metadata: Mapping[str, str], *, since: float, requests: int,
                   known: frozenset[str]) -> tuple[BatchInfo, bool] | None:
        """The oldest batch created since ``since`` with ``requests`` requests that the run does
        not know: tentative, since only its results' custom ids can show it is the chunk's."""
        after: str | None = None
        found: BatchInfo | None = None
        for _ in range(_LIST_PAGES):
            params = {"limit": "100", **({"after_id": after} if after else {})}
            page = await self._http.get_json(self._url, params)
            batches = page.get("data") or []
            for raw in batches:
                info = _info(raw)
                if info.created_at is not None and info.created_at < since:
                    return None if found is None else (found, True)
                if info.batch_id not in known and info.total == requests:
                    found = info  # keep going: the oldest match is the first created after the intent
            if not page.get("has_more") or not batches:
                break
            after = str(page.get("last_id") or batches[-1]["id"])
        return None if found is None else (found, True)

    async def download(self, info: BatchInfo, dest: Path) -> None:
        if not info.outputs:
            with writing(dest):
                dest.write_bytes(b"")
            return
        await self._http.download(info.outputs[0], dest)

    def read_result(self, line: bytes) -> BatchResult:
        raw = jsonio.loads(line)
        custom_id = str(raw.get("custom_id") or "")
        result = raw.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            try:
                answer = self._answer(result.get("message"))
            except (MalformedResponseError, ValueError, TypeError, OverflowError) as exc:  # usage or log-probs that lie
                return BatchResult(custom_id, ResultKind.FAILED, message=f"a result that is not an answer ({exc})")
            if answer is None:
                return BatchResult(custom_id, ResultKind.FAILED, message="a succeeded result without a message")
            return BatchResult(custom_id, ResultKind.ANSWER, answer, 200)
        if kind == "expired":
            return BatchResult(custom_id, ResultKind.EXPIRED, message="the batch expired before this request ran")
        if kind == "canceled":
            return BatchResult(custom_id, ResultKind.CANCELLED, message="the batch was cancelled before this request ran")
        error = ((result.get("error") or {}).get("error")) or {}
        error_type, message = str(error.get("type") or "error"), f"{error.get('message') or ''} ({error.get('type')})"
        if error_type == "invalid_request_error":
            return BatchResult(custom_id, ResultKind.REJECTED, status=400, message=message,
                               code=item_code(message.lower()))
        return BatchResult(custom_id, ResultKind.FAILED, message=message,
                           status=500 if error_type in _RETRY_ERRORS else None)

    async def cancel(self, batch_id: str) -> BatchInfo:
        return _info(await self._http.post_json(f"{self._url}/{batch_id}/cancel"))

    def classify(self, error: BaseException) -> ErrorClass:
        classified = self._http.classify(error)
        if isinstance(error, HTTPStatusError) and error.status_code == 529:  # Anthropic's "overloaded"
            return ErrorClass(ErrorKind.RETRY, classified.message, 529)
        return classified

    async def aclose(self) -> None:
        await self._http.aclose()

    def _answer(self, message: Any) -> ProviderResponse | None:
        if not isinstance(message, dict):
            return None
        texts: list[str] = []
        for block in message.get("content") or []:
            if block.get("type") == "text":
                texts.append(str(block.get("text") or ""))
            elif block.get("type") == "tool_use" and block.get("name") == JSON_TOOL:
                arguments = block.get("input")
                values = arguments.get("values") if isinstance(arguments, dict) else None
                texts.append(jsonio.dumps(values if values is not None else arguments).decode())
        usage = message.get("usage") or {}
        prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        prices = self._prices
        return ProviderResponse(
            content="".join(texts), finish_reason=_STOP_REASONS.get(str(message.get("stop_reason")), "stop"),
            prompt_tokens=prompt, completion_tokens=completion,
            cost=prompt * prices[0] + completion * prices[1] if prices else 0.0, priced=prices is not None, model=str(message.get("model") or ""))


async def _requests_body(path: Path) -> AsyncIterator[bytes]:
    """``{"requests": [line, line, ...]}`` from the chunk's request file, a piece at a time."""
    yield b'{"requests":['
    with path.open("rb") as handle:
        first = True
        piece: list[bytes] = []
        size = 0
        for line in handle:
            line = line.rstrip(b"\n")
            if not line:
                continue
            piece.append(line if first else b"," + line)
            first = False
            size += len(line)
            if size >= 1 << 20:
                yield b"".join(piece)
                piece, size = [], 0
        if piece:
            yield b"".join(piece)
    yield b"]}"


def _timestamp(value: Any) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _info(raw: Mapping[str, Any]) -> BatchInfo:
    status = str(raw.get("processing_status") or "")
    counts = raw.get("request_counts") or {}
    processing, succeeded = int(counts.get("processing") or 0), int(counts.get("succeeded") or 0)
    errored, cancelled, expired = (int(counts.get(k) or 0) for k in ("errored", "canceled", "expired"))
    return BatchInfo(
        batch_id=str(raw["id"]), status=status, ended=status == "ended",
        total=processing + succeeded + errored + cancelled + expired, completed=succeeded, failed=errored,
        expired=expired, cancelled=cancelled, created_at=_timestamp(raw.get("created_at")),
        ended_at=_timestamp(raw.get("ended_at")), outputs=(str(raw["results_url"]),) if raw.get("results_url") else (),
    )
