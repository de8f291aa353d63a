"""OpenAI's Batch API (files + batches), and any OpenAI-compatible server that implements it.

```
POST /v1/files (multipart, purpose=batch)      the chunk's request file -> file id
POST /v1/batches {input_file_id, endpoint, completion_window, metadata}   -> batch
GET  /v1/batches/{id}                          status, request_counts, output/error file ids
GET  /v1/batches?limit=100&after=...           newest first: how a resumed run finds a batch
                                               by its metadata (run directory, chunk id)
GET  /v1/files/{id}/content                    the results (output file, then error file)
POST /v1/batches/{id}/cancel
```

A request line is ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}``
with the body the online path sends. A result line is ``{"custom_id", "response": {"status_code",
"body"}, "error"}``: a 200 is an answer; an ``error`` of ``batch_expired`` or ``batch_cancelled``
was never processed; any other status is classified as the direct transport classifies one. The
enqueued-token quota shows as a batch that ``failed`` validation with ``token_limit_exceeded``:
nothing in it was processed, so it is sent again later (:attr:`BatchInfo.refused`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from judge_engine.errors import MalformedResponseError, ReasonCode
from judge_engine.providers.base import (
    ITEM_MARKERS,
    ErrorClass,
    ProviderRequest,
    ProviderResponse,
    item_code,
)
from judge_engine.providers.batch import BatchInfo, BatchResult, ResultKind
from judge_engine.providers.catalog import BatchRoute, batch_body, batch_cost_per_token
from judge_engine.providers.http import BatchHTTP
from judge_engine.providers.network import Network
from judge_engine.providers.openai_http import choice_logprobs
from judge_engine.rundir.disk import writing
from judge_engine.util import jsonio
from judge_engine.util.logprobs import token_logprobs

ENDPOINT = "/v1/chat/completions"
_ENDED = frozenset({"completed", "expired", "cancelled"})
_QUOTA_CODES = frozenset({"token_limit_exceeded", "request_limit_exceeded", "batch_limit_exceeded"})
_NOT_PROCESSED = {"batch_expired": ResultKind.EXPIRED, "batch_cancelled": ResultKind.CANCELLED}
_RETRY_STATUSES = frozenset({408, 409, 425, 429})
_LIST_PAGES = 50
"""Pages of 100 batches a resumed run looks through for one it created but never recorded."""


class OpenAIBatchAPI:
    """:class:`~judge_engine.providers.batch.BatchAPI` for OpenAI's files + batches.

    Args:
        route: where the API is (:func:`~judge_engine.providers.catalog.batch_route`).
        model: the judge's model string (litellm's form), for the bodies and the batch prices.
        api_key: None: ``OPENAI_API_KEY``.
    """

    name = "openai"
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, route: BatchRoute, *, model: str, api_base: str | None, api_key: str | None,
                 network: Network | None = None) -> None:
        self._route, self._model, self._api_base = route, model, api_base
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        if organization := os.environ.get("OPENAI_ORGANIZATION"):
            headers["OpenAI-Organization"] = organization
        self._http = BatchHTTP(headers, secret=key, network=network)
        self._prices = batch_cost_per_token(model)

    def request_line(self, custom_id: str, request: ProviderRequest) -> bytes:
        body = batch_body(self._route, self._model, self._api_base, messages=request.messages,
                          temperature=request.temperature, max_tokens=request.max_tokens,
                          response_format=request.response_format, params=request.params)
        return jsonio.dumps_line({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body})

    async def upload(self, path: Path, name: str) -> str | None:
        answer = await self._http.post_file(f"{self._route.base_url}/files", path, name=name,
                                            fields={"purpose": "batch"})
        return str(answer["id"])

    async def create(self, path: Path, file_id: str | None, *, metadata: Mapping[str, str],
                     window: str) -> BatchInfo:
        assert file_id is not None, "OpenAI batches are made from an uploaded file"
        answer = await self._http.post_json(f"{self._route.base_url}/batches", {
            "input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": window, "metadata": dict(metadata)})
        return _info(answer)

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return _info(await self._http.get_json(f"{self._route.base_url}/batches/{batch_id}"))

    async def find(self, metadata: Mapping[str, str], *, since: float, requests: int,
                   known: frozenset[str]) -> tuple[BatchInfo, bool] | None:
        """The newest batch whose metadata holds ``metadata`` and that was not refused."""
        after: str | None = None
        for _ in range(_LIST_PAGES):
            params = {"limit": "100", **({"after": after} if after else {})}
            page = await self._http.get_json(f"{self._route.base_url}/batches", params)
            batches = page.get("data") or []
            for raw in batches:
                info = _info(raw)
                if info.created_at is not None and info.created_at < since:
                    return None  # newest first: everything after this is older still
                if info.batch_id in known or info.refused is not None:
                    continue
                if all(info.metadata.get(k) == v for k, v in metadata.items()):
                    return info, False
            if not page.get("has_more") or not batches:
                return None
            after = str(batches[-1]["id"])
        return None

    async def download(self, info: BatchInfo, dest: Path) -> None:
        with writing(dest):
            dest.write_bytes(b"")
        for file_id in info.outputs:
            await self._http.download(f"{self._route.base_url}/files/{file_id}/content", dest, append=True)

    def read_result(self, line: bytes) -> BatchResult:
        raw = jsonio.loads(line)
        custom_id = str(raw.get("custom_id") or "")
        error = raw.get("error")
        response = raw.get("response")
        if isinstance(error, dict) and not response:
            code = str(error.get("code") or "")
            return BatchResult(custom_id, _NOT_PROCESSED.get(code, ResultKind.FAILED),
                               message=f"{error.get('message') or code} ({code})")
        if not isinstance(response, dict):
            return BatchResult(custom_id, ResultKind.FAILED, message="a result line with neither response nor error")
        status = int(response.get("status_code") or 0)
        body = response.get("body")
        if status == 200:
            try:
                answer = self._answer(body)
            except (MalformedResponseError, ValueError, TypeError, OverflowError) as exc:  # usage or log-probs that lie
                return BatchResult(custom_id, ResultKind.FAILED, status=status, message=f"a result that is not an answer ({exc})")
            if answer is None:
                return BatchResult(custom_id, ResultKind.FAILED, status=status,
                                   message="a 200 result whose body is not a chat completion")
            return BatchResult(custom_id, ResultKind.ANSWER, answer, status)
        message = _body_error(body)
        if status in _RETRY_STATUSES or status >= 500:
            return BatchResult(custom_id, ResultKind.FAILED, status=status, message=message)
        lowered = message.lower()
        code = item_code(lowered) if any(m in lowered for m in ITEM_MARKERS) else ReasonCode.PROVIDER_REJECTED
        return BatchResult(custom_id, ResultKind.REJECTED, status=status, message=message, code=code)

    async def cancel(self, batch_id: str) -> BatchInfo:
        return _info(await self._http.post_json(f"{self._route.base_url}/batches/{batch_id}/cancel"))

    def classify(self, error: BaseException) -> ErrorClass:
        return self._http.classify(error)

    async def aclose(self) -> None:
        await self._http.aclose()

    def _answer(self, body: Any) -> ProviderResponse | None:
        try:
            choice = body["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            return None
        usage = body.get("usage") or {}
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        prices = self._prices
        content = message.get("content")
        content = None if content is None else str(content)
        return ProviderResponse(
            content=content, finish_reason=choice.get("finish_reason"),
            prompt_tokens=prompt, completion_tokens=completion,
            cost=prompt * prices[0] + completion * prices[1] if prices else 0.0, priced=prices is not None,
            model=str(body.get("model") or ""), logprobs=token_logprobs(content, choice_logprobs(choice)))


def _info(raw: Mapping[str, Any]) -> BatchInfo:
    status = str(raw.get("status") or "")
    counts = raw.get("request_counts") or {}
    refused = error = None
    if status == "failed":
        errors = ((raw.get("errors") or {}).get("data")) or [{}]
        first = errors[0] if isinstance(errors[0], dict) else {}
        text = f"{first.get('message') or 'the batch failed'} ({first.get('code') or 'failed'})"
        if first.get("code") in _QUOTA_CODES:
            refused = text
        else:
            error = text
    ended_at = raw.get("completed_at") or raw.get("expired_at") or raw.get("cancelled_at") or raw.get("failed_at")
    return BatchInfo(
        batch_id=str(raw["id"]), status=status, ended=status in _ENDED, total=int(counts.get("total") or 0),
        completed=int(counts.get("completed") or 0), failed=int(counts.get("failed") or 0),
        created_at=None if raw.get("created_at") is None else float(raw["created_at"]),
        ended_at=None if ended_at is None else float(ended_at),
        metadata={str(k): str(v) for k, v in (raw.get("metadata") or {}).items()}, refused=refused, error=error,
        outputs=tuple(str(f) for f in (raw.get("output_file_id"), raw.get("error_file_id")) if f),
    )


def _body_error(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        return f"{error.get('message') or ''}" + (f" ({code})" if code else "")
    return str(body)[:300]
