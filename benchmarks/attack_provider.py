"""A hostile provider for ``attack.py``: a proxy in front of the project's fake server that
answers as a broken or malicious gateway would.

    python benchmarks/attack_provider.py --upstream http://127.0.0.1:PORT/v1

prints ``attack provider listening on http://127.0.0.1:PORT`` and serves until SIGTERM. A job
picks its behaviour by its ``api_base``: ``http://127.0.0.1:PORT/<mode>/v1``. Every request is
passed on to the fake server (so a well-formed answer, when one is given, is the fake's, and
the fake's oracle says what its score must be), and in every mode the credentials the request
carried are echoed back, in the response headers (``Authorization``, ``x-request-id``) and in
the answer's text, as a gateway that leaks would.

Modes (:data:`MODES`): what a chat completion, or a batch's output file, becomes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

READY = "attack provider listening on "
HUGE_BYTES = 48 * 1024 * 1024
"""The size of a ``huge`` body."""

Transform = Callable[[web.Request, int, dict[str, str], bytes], Awaitable[web.StreamResponse]]


def _echo(request: web.Request) -> str:
    return "; ".join(f"{k}: {request.headers[k]}" for k in ("Authorization", "x-api-key") if k in request.headers)


def _respond(request: web.Request, status: int, body: bytes, content_type: str = "application/json",
             headers: dict[str, str] | None = None) -> web.Response:
    echo = _echo(request)
    extra = {"x-request-id": f"req {echo}", "Authorization": echo or "none", "x-debug-auth": echo or "none"}
    return web.Response(status=status, body=body, headers={**extra, **(headers or {}), "Content-Type": content_type})


def _completion(body: bytes) -> dict[str, Any] | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if isinstance(document, dict) and "choices" in document else None


def _with_echoed_content(request: web.Request, document: dict[str, Any]) -> dict[str, Any]:
    """The answer's text with the request's credentials after it (a gateway that "debugs")."""
    echo = _echo(request)
    for choice in document.get("choices") or []:
        message = choice.get("message") or {}
        if echo and isinstance(message.get("content"), str):
            message["content"] += f"\n\n(debug: {echo})"
    return document


def _usage(values: dict[str, Any]) -> Transform:
    async def transform(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> web.StreamResponse:
        document = _completion(body)
        if document is None:
            return _respond(request, status, body)
        document["usage"] = {**(document.get("usage") or {}), **values}
        return _respond(request, status, json.dumps(document, allow_nan=True).encode())

    return transform


def _constant(status: int, body: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> Transform:
    async def transform(request: web.Request, _status: int, _headers: dict[str, str], _body: bytes) -> web.Response:
        return _respond(request, status, body, content_type, headers)

    return transform


def _storm(retry_after: dict[str, str]) -> Transform:
    error = json.dumps({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})
    return _constant(429, error.encode(), headers=retry_after)


async def _passthrough(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> web.StreamResponse:
    return _respond(request, status, body, headers.get("Content-Type", "application/json"))


async def _echo_content(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> web.StreamResponse:
    document = _completion(body)
    if document is not None:
        body = json.dumps(_with_echoed_content(request, document)).encode()
    return _respond(request, status, body)


async def _wrong_type(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> web.StreamResponse:
    return _respond(request, status, body, "text/html; charset=utf-8")


async def _huge(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> web.StreamResponse:
    document = _completion(body)
    if document is None:
        return _respond(request, status, body)
    document["padding"] = "x" * HUGE_BYTES
    return _respond(request, status, json.dumps(document).encode())


async def _huge_content(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> web.StreamResponse:
    document = _completion(body)
    if document is None:
        return _respond(request, status, body)
    document["choices"][0]["message"]["content"] = "Critical:\nno-error\n" + "word " * (HUGE_BYTES // 5)
    return _respond(request, status, json.dumps(document).encode())


async def _slowloris(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> web.StreamResponse:
    response = web.StreamResponse(status=status, headers={"Content-Type": "application/json",
                                                          "Content-Length": str(len(body))})
    await response.prepare(request)
    try:
        for index in range(len(body)):
            await response.write(body[index:index + 1])
            await asyncio.sleep(0.5)
    except (ConnectionError, RuntimeError):
        pass
    return response


def _logprobs(kind: str) -> Transform:
    async def transform(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> web.StreamResponse:
        document = _completion(body)
        if document is None:
            return _respond(request, status, body)
        for choice in document.get("choices") or []:
            content = (choice.get("logprobs") or {}).get("content") or []
            for token in content:
                if kind == "nan":
                    token["logprob"] = math.nan
                    for top in token.get("top_logprobs") or []:
                        top["logprob"] = math.nan
                elif kind == "positive":
                    token["logprob"] = 5.0
                    for top in token.get("top_logprobs") or []:
                        top["logprob"] = 3.0
                elif kind == "types":
                    token["logprob"] = "high"
                    token["bytes"] = "not a list"
                    token["top_logprobs"] = {"a": 1}
                elif kind == "tokens":
                    token["token"] = token.get("token", "") + "\u0000zz"
                    token["bytes"] = [999, -1]
            if kind == "missing" and choice.get("logprobs") is not None:
                choice["logprobs"] = {"content": None}
        return _respond(request, status, json.dumps(document, allow_nan=True).encode())

    return transform


def _garbage(request: web.Request, status: int, headers: dict[str, str], body: bytes) -> Awaitable[web.Response]:
    rng = random.Random(body)
    choices = [
        rng.randbytes(200),
        b"<html><body>502 Bad Gateway</body></html>",
        b'{"choices": []}',
        b'{"choices": [{"message": null}]}',
        b'{"choices": [{"message": {"role": "assistant", "content": null}, "finish_reason": "stop"}]}',
        b'{"choices": [{"message": {"content": 42}, "finish_reason": 7}], "usage": "lots"}',
        b'{"id": 1}',
        b"[]",
        b"null",
        b'{"choices": [{"message": {"content": "' + b"[" * 100_000 + b'"}}]}',
        b"[" * 200_000,
        b'{"choices": [{"message": {"content": "\\ud800"}, "finish_reason": "stop"}]}',
    ]

    async def answer() -> web.Response:
        return _respond(request, status if status >= 400 else 200, rng.choice(choices))

    return answer()


def _batch_output(kind: str) -> Callable[[bytes], bytes]:
    """What a batch's output file becomes: its lines duplicated, some missing, foreign ones."""
    def rewrite(body: bytes) -> bytes:
        lines = [line for line in body.split(b"\n") if line.strip()]
        rng = random.Random(len(body))
        if kind == "duplicated":
            lines = [copy for line in lines for copy in (line, line)]
        elif kind == "missing":
            lines = [line for index, line in enumerate(lines) if index % 3]
        elif kind == "foreign":
            foreign = []
            for line in lines[:3]:
                document = json.loads(line)
                document["custom_id"] = f"foreign-{rng.randrange(10**9)}"
                foreign.append(json.dumps(document).encode())
            lines = foreign + lines + [b'{"custom_id": null}', b"not json at all"]
        elif kind == "shuffled":
            rng.shuffle(lines)
            lines = [lines[-1], *lines]  # and the last one twice
        return b"\n".join(lines) + b"\n"

    return rewrite


MODES: dict[str, Transform] = {
    "ok": _passthrough,
    "echo_content": _echo_content,
    "wrong_content_type": _wrong_type,
    "garbage": _garbage,  # type: ignore[dict-item]
    "huge_body": _huge,
    "huge_content": _huge_content,
    "slowloris": _slowloris,
    "html_200": _constant(200, b"<!doctype html><title>Login</title><form>sign in</form>", "text/html"),
    "empty_200": _constant(200, b""),
    "status_600": _constant(600, b"{}"),
    "error_echo": _constant(400, b'{"error": {"message": "bad request"}}'),
    "storm_zero": _storm({"Retry-After": "0"}),
    "storm_negative": _storm({"Retry-After": "-3600"}),
    "storm_nan": _storm({"Retry-After": "NaN"}),
    "storm_inf": _storm({"Retry-After": "inf"}),
    "storm_huge": _storm({"Retry-After": "1e308"}),
    "storm_year_9999": _storm({"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}),
    "storm_ms_huge": _storm({"retry-after-ms": "99999999999999999999"}),
    "usage_negative": _usage({"prompt_tokens": -1_000_000_000, "completion_tokens": -5, "total_tokens": -1_000_000_005}),
    "usage_nan": _usage({"prompt_tokens": math.nan, "completion_tokens": math.inf}),
    "usage_huge": _usage({"prompt_tokens": 10**30, "completion_tokens": 10**30}),
    "usage_strings": _usage({"prompt_tokens": "12", "completion_tokens": {"n": 1}}),
    "logprobs_nan": _logprobs("nan"),
    "logprobs_positive": _logprobs("positive"),
    "logprobs_types": _logprobs("types"),
    "logprobs_tokens": _logprobs("tokens"),
    "logprobs_missing": _logprobs("missing"),
}
BATCH_MODES = {"batch_duplicated": "duplicated", "batch_missing": "missing", "batch_foreign": "foreign",
               "batch_shuffled": "shuffled"}


class Proxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.session: ClientSession | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        mode, tail = request.match_info["mode"], request.match_info["tail"]
        assert self.session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self.session.request(request.method, f"{self.upstream}/v1/{tail}", data=body, headers=headers,
                                        params=request.query) as answer:
            status, answer_headers, answer_body = answer.status, dict(answer.headers), await answer.read()
        if tail.endswith("chat/completions") and mode in MODES:
            return await MODES[mode](request, status, answer_headers, answer_body)
        if mode in BATCH_MODES and tail.startswith("files/") and tail.endswith("/content") and status == 200:
            if b'"response"' in answer_body:  # an output file, not the request file
                answer_body = _batch_output(BATCH_MODES[mode])(answer_body)
        return _respond(request, status, answer_body, answer_headers.get("Content-Type", "application/json"))


async def serve(upstream: str) -> None:
    proxy = Proxy(upstream)
    proxy.session = ClientSession(timeout=ClientTimeout(total=600))
    app = web.Application(client_max_size=300 * 1024 * 1024)
    app.router.add_route("*", "/{mode}/v1/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"{READY}http://127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    parent = os.getppid()
    while not stop.is_set() and os.getppid() == parent:
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass
    await proxy.session.close()
    await runner.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--upstream", required=True)
    asyncio.run(serve(parser.parse_args().upstream))
    return 0


if __name__ == "__main__":
    sys.exit(main())
