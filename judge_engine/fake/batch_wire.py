"""What the fake server's two batch APIs look like on the wire: their request lines read, their
result lines and error bodies written (OpenAI's files + batches, Anthropic's Message Batches).
The state and the schedule behind them are :mod:`judge_engine.fake.batches`."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from judge_engine.errors import FakeRequestError
from judge_engine.fake.answers import is_json_mode, read_messages
from judge_engine.util import jsonio


def openai_requests(content: bytes) -> tuple[list[tuple[str, bytes]], str]:
    requests: list[tuple[str, bytes]] = []
    model = ""
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            request = jsonio.loads(line)
            custom_id, body = str(request["custom_id"]), request["body"]
            model = model or str(body["model"])
        except (jsonio.JSONDecodeError, KeyError, TypeError) as exc:
            raise FakeRequestError(f"line {number} of the input file is not a batch request ({exc!r})") from None
        if request.get("url") != "/v1/chat/completions":
            raise FakeRequestError(f"line {number}: url must be /v1/chat/completions")
        requests.append((custom_id, line))
    if not requests:
        raise FakeRequestError("the input file holds no requests")
    return requests, model


def anthropic_requests(payload: Any) -> tuple[list[tuple[str, bytes]], str]:
    if not isinstance(payload, dict) or not isinstance(payload.get("requests"), list) or not payload["requests"]:
        raise FakeRequestError("requests: a non-empty list is required")
    requests = []
    model = ""
    for index, request in enumerate(payload["requests"]):
        if not isinstance(request, dict) or not isinstance(request.get("params"), dict):
            raise FakeRequestError(f"requests.{index}: custom_id and params are required")
        custom_id = str(request.get("custom_id") or "")
        if not custom_id or len(custom_id) > 64 or not all(c.isalnum() or c in "-_" for c in custom_id):
            raise FakeRequestError(f"requests.{index}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$")
        model = model or str(request["params"].get("model") or "")
        requests.append((custom_id, jsonio.dumps(request)))
    return requests, model


def conversation(api: str, body: dict[str, Any]) -> tuple[list[Any], bool]:
    """The chat messages of a request body, and whether it asks for JSON."""
    if api == "openai":
        return read_messages(body.get("messages")), is_json_mode(body.get("response_format"))
    system = body.get("system")
    if isinstance(system, list):
        system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
    raw = ([{"role": "system", "content": system}] if system else []) + list(body.get("messages") or [])
    tools = body.get("tools") or []
    return read_messages(raw), any(t.get("name") == "json_tool_call" for t in tools if isinstance(t, dict))


def answer_line(api: str, model: str, custom_id: str, content: str, finish_reason: str, prompt: int,
                completion: int, json_mode: bool, *, logprobs: dict[str, Any] | None = None) -> bytes:
    """A result line with an answer: OpenAI's 200 chat completion (with the choice's
    ``logprobs`` when asked), or Anthropic's ``succeeded`` message (JSON mode: a
    ``json_tool_call`` tool use, as litellm asks Anthropic for JSON)."""
    if api == "openai":
        body = {"id": f"chatcmpl-fake-{custom_id}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                                   "finish_reason": finish_reason, **(logprobs or {})}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
        return jsonio.dumps_line({"id": f"batch_req_{custom_id}", "custom_id": custom_id,
                                  "response": {"status_code": 200, "request_id": f"req_{custom_id}", "body": body},
                                  "error": None})
    block: dict[str, Any] = {"type": "text", "text": content}
    if json_mode:
        try:
            block = {"type": "tool_use", "id": f"toolu_{custom_id}", "name": "json_tool_call",
                     "input": jsonio.loads(content)}
        except jsonio.JSONDecodeError:
            pass
    message = {"id": f"msg_{custom_id}", "type": "message", "role": "assistant", "model": model,
               "content": [block], "stop_reason": "max_tokens" if finish_reason == "length" else "end_turn",
               "stop_sequence": None, "usage": {"input_tokens": prompt, "output_tokens": completion}}
    return jsonio.dumps_line({"custom_id": custom_id, "result": {"type": "succeeded", "message": message}})


def error_line(api: str, custom_id: str, status: int, message: str) -> bytes:
    if api == "openai":
        body = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
        return jsonio.dumps_line({"id": f"batch_req_{custom_id}", "custom_id": custom_id,
                                  "response": {"status_code": status, "request_id": f"req_{custom_id}", "body": body},
                                  "error": None})
    return jsonio.dumps_line({"custom_id": custom_id, "result": {
        "type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": message}}}})


def not_processed(api: str, custom_id: str, kind: str) -> bytes:
    if api == "openai":
        code = "batch_expired" if kind == "expired" else "batch_cancelled"
        message = ("This request could not be executed before the completion window expired." if kind == "expired"
                   else "This request was not executed because the batch was cancelled.")
        return jsonio.dumps_line({"id": f"batch_req_{custom_id}", "custom_id": custom_id, "response": None,
                                  "error": {"code": code, "message": message}})
    return jsonio.dumps_line({"custom_id": custom_id, "result": {"type": "expired" if kind == "expired" else "canceled"}})


def file_object(file_id: str, size: int, created_at: int, filename: str, purpose: str) -> dict[str, Any]:
    return {"id": file_id, "object": "file", "bytes": size, "created_at": created_at, "filename": filename,
            "purpose": purpose}


def iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat().replace("+00:00", "Z")


def openai_error(message: str, kind: str) -> bytes:
    return jsonio.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}})


def anthropic_error(message: str, kind: str) -> bytes:
    return jsonio.dumps({"type": "error", "error": {"type": kind, "message": message}})
