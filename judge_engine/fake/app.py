"""The fake OpenAI-compatible HTTP surface (aiohttp.web), with its rate limits and faults.

Routes::

    POST /v1/chat/completions   (also /chat/completions)   a chat.completion, or a fault
    GET  /v1/models             (also /models)             a one-model list
    POST /v1/files, GET /v1/files/{id}/content                   OpenAI files (purpose=batch)
    POST /v1/batches, GET /v1/batches[/{id}], POST .../{id}/cancel OpenAI's Batch API
    POST /v1/messages/batches, GET /v1/messages/batches[/{id}[/results]],
         POST /v1/messages/batches/{id}/cancel                   Anthropic's Message Batches
    GET  /_fake/stats           counters (see :class:`~judge_engine.fake.state.Stats`; with the
                                batch submissions per task and the chat requests per prompt)
    GET  /_fake/config          the live config (API key redacted)
    POST /_fake/config          JSON Merge Patch into the live config; answers the new config
    POST /_fake/reset           clear counters, seen bodies and rate windows

With ``echo_credentials`` every answer and error body echoes the request's credentials back (a
hostile gateway, for the secret-redaction tests).

A completion request goes through: auth (401) -> body checks (400) -> storm (429) -> rate limits
(429, no quota used) -> faults -> latency -> answer. The batch routes answer from
:class:`~judge_engine.fake.batches.FakeBatches` (processing delay, failures, expiry, quota).
"""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
import time
from email.utils import formatdate
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from judge_engine.errors import FakeRequestError
from judge_engine.fake.answers import (
    Answer,
    AnswerBook,
    as_judged,
    body_digest,
    finish,
    is_json_mode,
    logprobs_field,
    prompt_key,
    read_messages,
    requested_top,
    with_logprobs,
)
from judge_engine.fake.batch_state import BatchStore
from judge_engine.fake.batches import FakeBatches
from judge_engine.fake.config import SAMPLE_HEADER, FakeConfig, RetryAfterMode
from judge_engine.fake.state import Draw, SlidingWindow, Stats
from judge_engine.protocols.base import Message
from judge_engine.util import jsonio

FAKE_MODEL = "fake-judge"
_ERROR_FAULTS = ("reset", "error_500", "error_503", "truncate")
_JSON = "application/json"
_ECHOED = ("Authorization", "x-api-key")
"""The request headers :attr:`FakeConfig.echo_credentials` sends back."""
_DROPPED = web.RequestKey("dropped", bool)
"""Set on a request whose connection was reset: it has no status to count."""


def error_body(message: str, type_: str, code: str | None = None) -> bytes:
    """An OpenAI-style error body."""
    return jsonio.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


def retry_after_headers(seconds: float, mode: RetryAfterMode) -> dict[str, str]:
    """The 429 header for ``mode``; rounded up, so a client that obeys it is never early."""
    match mode:
        case "seconds":
            return {"Retry-After": f"{-(-seconds * 1000 // 1) / 1000:.3f}"}
        case "ms":
            return {"retry-after-ms": str(int(-(-seconds * 1000 // 1)))}
        case "date":
            return {"Retry-After": formatdate(time.time() + seconds + 1, usegmt=True)}
        case "none":
            return {}


class FakeApp:
    """The server's state and handlers; one instance per server, used from its event loop only."""

    def __init__(self, config: FakeConfig | None = None, *, store: BatchStore | None = None) -> None:
        self.config = config if config is not None else FakeConfig()
        self.stats = Stats()
        self.window = SlidingWindow()
        self.answers = AnswerBook()
        self.batches = FakeBatches(lambda: self.config, self.answers, store)
        self.started = time.monotonic()
        self._runner: web.AppRunner | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(client_max_size=300 * 1024 * 1024,  # a batch file: up to 256 MB
                              middlewares=[self._echo])
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_post("/chat/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/models", self.models)
        self._batch_routes(app)
        app.router.add_get("/_fake/stats", self.stats_view)
        app.router.add_get("/_fake/config", self.config_view)
        app.router.add_post("/_fake/config", self.config_patch)
        app.router.add_post("/_fake/reset", self.reset_view)
        return app

    async def start(self, port: int = 0) -> int:
        """Bind to 127.0.0.1:``port`` (0: a free port) and return the port."""
        _ = self.answers.writers  # import the writers (and their protocols) before the first request
        self.batches.load()  # a store's batches, from an earlier server (batch_state)
        self._runner = web.AppRunner(
            self.application(), access_log=None, handle_signals=False, shutdown_timeout=0.2
        )
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            raise
        # Own the socket so the bound port is known without aiohttp internals.
        await web.SockSite(self._runner, sock, backlog=2048).start()
        self.started = time.monotonic()
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def now(self) -> float:
        """Seconds since the server started."""
        return time.monotonic() - self.started

    def patch(self, patch: dict[str, Any]) -> FakeConfig:
        self.config = self.config.patched(patch)
        return self.config

    def reset(self) -> None:
        self.stats.clear()
        self.window.clear()
        self.batches.submissions.clear()
        self.batches.refused = 0

    @web.middleware
    async def _echo(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """:attr:`FakeConfig.echo_credentials`: the request's credentials, back in the answer."""
        response: web.StreamResponse = await handler(request)
        sent = {name: request.headers[name] for name in _ECHOED if name in request.headers}
        if not self.config.echo_credentials or not sent or response.prepared:
            return response
        echo = "; ".join(f"{name}: {value}" for name, value in sent.items())
        response.headers.update(sent)
        response.headers["x-request-id"] = f"req-echo {echo}"
        if response.status >= 400 and isinstance(response, web.Response) and isinstance(response.body, bytes):
            try:
                body = jsonio.loads(response.body)
                body["error"]["message"] = f"{body['error']['message']} (the request carried {echo})"
            except (jsonio.JSONDecodeError, KeyError, TypeError):
                return response
            response.body = jsonio.dumps(body)
        return response

    # --- control routes -----------------------------------------------------------------------

    async def models(self, request: web.Request) -> web.Response:
        data = [{"id": FAKE_MODEL, "object": "model", "created": 0, "owned_by": "judge-engine"}]
        return _json(200, jsonio.dumps({"object": "list", "data": data}))

    def snapshot(self) -> dict[str, Any]:
        """Every counter: the chat route's and the batch APIs'."""
        return {**self.stats.snapshot(self.now()), **self.batches.stats()}

    async def stats_view(self, request: web.Request) -> web.Response:
        return _json(200, jsonio.dumps(self.snapshot()))

    async def config_view(self, request: web.Request) -> web.Response:
        return _json(200, jsonio.dumps(self.config.public()))

    async def config_patch(self, request: web.Request) -> web.Response:
        try:
            patch = jsonio.loads(await request.read())
            if not isinstance(patch, dict):
                raise ValueError("the patch must be a JSON object")
            config = self.patch(patch)
        except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
            return _json(400, error_body(str(exc), "invalid_request_error"))
        return _json(200, jsonio.dumps(config.public()))

    async def reset_view(self, request: web.Request) -> web.Response:
        self.reset()
        return _json(200, b'{"reset": true}')

    # --- the batch APIs (state and answers: fake/batches.py) ----------------------------------

    def _batch_routes(self, app: web.Application) -> None:
        batches = self.batches
        openai = {
            ("POST", "/v1/files"): self._upload,
            ("GET", "/v1/files/{id}/content"): lambda r: batches.file_content(r.match_info["id"]),
            ("POST", "/v1/batches"): self._create_openai,
            ("GET", "/v1/batches"): lambda r: batches.list_openai(_limit(r), r.query.get("after")),
            ("GET", "/v1/batches/{id}"): lambda r: batches.get_openai(r.match_info["id"]),
            ("POST", "/v1/batches/{id}/cancel"): lambda r: batches.cancel_openai(r.match_info["id"]),
        }
        anthropic = {
            ("POST", "/v1/messages/batches"): self._create_anthropic,
            ("GET", "/v1/messages/batches"): lambda r: batches.list_anthropic(_limit(r), r.query.get("after_id"),
                                                                              _host(r)),
            ("GET", "/v1/messages/batches/{id}"): lambda r: batches.get_anthropic(r.match_info["id"], _host(r)),
            ("GET", "/v1/messages/batches/{id}/results"): lambda r: batches.results_anthropic(r.match_info["id"]),
            ("POST", "/v1/messages/batches/{id}/cancel"): lambda r: batches.cancel_anthropic(r.match_info["id"],
                                                                                             _host(r)),
        }
        for routes, header in ((openai, "Authorization"), (anthropic, "x-api-key")):
            for (method, path), handler in routes.items():
                app.router.add_route(method, path, self._batch_handler(handler, header))

    def _batch_handler(self, handler: Any, header: str) -> Any:
        async def handle(request: web.Request) -> web.Response:
            key = self.config.require_api_key
            sent = request.headers.get(header, "")
            if key is not None and sent not in (key, f"Bearer {key}") and not _basic_auth(request, key):
                return _json(401, error_body("Incorrect API key provided.", "authentication_error", "invalid_api_key"))
            reply = handler(request)
            status, body = await reply if asyncio.iscoroutine(reply) else reply
            content_type = "application/jsonl" if request.path.endswith(("/content", "/results")) and status == 200 else _JSON
            return web.Response(status=status, body=body, content_type=content_type)

        return handle

    async def _upload(self, request: web.Request) -> tuple[int, bytes]:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return 400, error_body("a multipart 'file' field is required", "invalid_request_error")
        return self.batches.upload(upload.filename, str(form.get("purpose") or ""), upload.file.read())

    async def _create_openai(self, request: web.Request) -> tuple[int, bytes]:
        try:
            payload = jsonio.loads(await request.read())
        except jsonio.JSONDecodeError:
            return 400, error_body("the request body is not JSON", "invalid_request_error")
        reply = self.batches.create_openai(payload)
        await self._create_delay(reply[0])
        return reply

    async def _create_anthropic(self, request: web.Request) -> tuple[int, bytes]:
        reply = self.batches.create_anthropic(await request.read())
        await self._create_delay(reply[0])
        return reply

    async def _create_delay(self, status: int) -> None:
        """A created batch exists and is counted already: a client killed now never learns its id."""
        delay = self.config.batch.create_delay_s
        if status == 200 and delay > 0:
            await asyncio.sleep(delay)


    # --- the completions route ----------------------------------------------------------------

    async def completions(self, request: web.Request) -> web.StreamResponse:
        stats = self.stats
        stats.requests_total += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            response = await self._complete(request)
        finally:
            stats.in_flight -= 1
        if not request.get(_DROPPED):
            stats.by_status[response.status] += 1
        return response

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        config = self.config
        key = config.require_api_key
        if key is not None and request.headers.get("Authorization") != f"Bearer {key}" and not _basic_auth(request, key):
            # Never echo the key that was sent: error bodies end up in logs and transcripts.
            message = "Incorrect API key provided. Pass the fake server's key as a Bearer token."
            return _json(401, error_body(message, "invalid_request_error", "invalid_api_key"))
        body = await request.read()
        try:
            payload = _read_payload(body)
            messages = read_messages(payload.get("messages"))
        except FakeRequestError as exc:
            return _json(400, error_body(str(exc), "invalid_request_error"))
        model = payload["model"]
        self.stats.by_model[model] += 1
        self.stats.by_prompt[prompt_key(messages)] += 1
        digest = body_digest(body)
        sample = _named_sample(request)
        # A request that names its sample (a demo's) is that sample: its answer is a function of
        # the body and the sample, whatever order identical bodies arrive in; its faults draw
        # afresh for each time that sample is sent again (a retry).
        seen_before = self.stats.arrived(digest if sample is None else body_digest(body + b"\x1f%d" % sample))
        now = self.now()

        storm = config.storm
        if storm is not None and storm.start_s <= now < storm.start_s + storm.duration_s:
            self.stats.by_fault["storm"] += 1
            return self._rate_limited(storm.retry_after_s, "requests", "storm", config)

        fired = Draw.of(digest if sample is None else digest + b"%d" % sample, seen_before, config.seed)
        faults = fired.fired(config)
        try:
            answer = self._answer(payload, messages, faults, draw=seen_before if sample is None else sample,
                                  config=config)
        except Exception as exc:  # an answer writer is broken: say so, do not hide it
            self.stats.by_fault["protocol_error"] += 1
            message = f"the fake answer writer raised {type(exc).__name__}: {exc}"
            return _json(500, error_body(message, "fake_server_bug"))

        refusal = self.window.admit(now, answer.total_tokens, config)
        if refusal is not None:
            return self._rate_limited(*refusal, None, config, answer.total_tokens)
        self.stats.accepted(now, answer.total_tokens)
        if answer.protocol is not None:
            self.stats.by_protocol[answer.protocol] += 1

        fault = next((f for f in _ERROR_FAULTS if f in faults), None)
        delay = max(0.0, config.latency_s + config.latency_jitter_s * fired.jitter)
        if "hang" in faults:
            self.stats.by_fault["hang"] += 1
            delay += config.hang_s
        if delay > 0:
            await asyncio.sleep(delay)
        if fault is not None:
            self.stats.by_fault[fault] += 1
        if fault in (None, "truncate"):
            for content_fault in ("malformed", "cut_off", "stop_early"):
                if content_fault in faults:
                    self.stats.by_fault[content_fault] += 1
                    break
        return await self._reply(request, fault, model, answer, digest, seen_before, config)

    def _answer(
        self,
        payload: dict[str, Any],
        messages: list[Message],
        faults: dict[str, float],
        *,
        draw: int,
        config: FakeConfig,
    ) -> Answer:
        top = requested_top(payload)
        model = str(payload["model"])
        content, protocol = self.answers.answer(
            messages,
            model=model,
            temperature=payload["temperature"],
            json_mode=is_json_mode(payload.get("response_format")),
            draw=draw,
            logprobs=top is not None,
        )
        content, belief = as_judged(messages, content, protocol, model=model, temperature=payload["temperature"],
                                    draw=draw, asked=top is not None)
        answer = finish(
            messages,
            content,
            protocol,
            malformed=faults.get("malformed"),
            cut_off="cut_off" in faults,
            stop_early=faults.get("stop_early"),
            max_tokens=payload["max_tokens"],
            chars_per_token=config.chars_per_token,
        )
        return with_logprobs(answer, content, belief, model=model, top=top, seed=draw)

    async def _reply(
        self,
        request: web.Request,
        fault: str | None,
        model: str,
        answer: Answer,
        digest: bytes,
        seen_before: int,
        config: FakeConfig,
    ) -> web.StreamResponse:
        match fault:
            case "reset":
                return _reset(request)
            case "error_500":
                message = "The server had an error while processing your request. Sorry about that!"
                return _json(500, error_body(message, "server_error"))
            case "error_503":
                message = "The engine is currently overloaded, please try again later."
                return _json(503, error_body(message, "server_error"))
        body = jsonio.dumps(
            {
                "id": f"chatcmpl-fake-{digest.hex()}-{seen_before}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fp_judge_engine_fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer.content},
                        "finish_reason": answer.finish_reason,
                        **logprobs_field(answer),
                    }
                ],
                "usage": {
                    "prompt_tokens": answer.prompt_tokens,
                    "completion_tokens": answer.completion_tokens,
                    "total_tokens": answer.total_tokens,
                },
            }
        )
        headers = self._limit_headers(config)
        if fault == "truncate":
            return await _truncated(request, body, headers)
        return _json(200, body, headers)

    def _limit_headers(self, config: FakeConfig) -> dict[str, str] | None:
        if config.rpm is None and config.tpm is None:
            return None
        headers: dict[str, str] = {}
        requests, tokens = self.window.remaining(config)
        if config.rpm is not None:
            headers["x-ratelimit-limit-requests"] = str(int(config.rpm))
            headers["x-ratelimit-remaining-requests"] = str(requests)
        if config.tpm is not None:
            headers["x-ratelimit-limit-tokens"] = str(int(config.tpm))
            headers["x-ratelimit-remaining-tokens"] = str(tokens)
        return headers

    def _rate_limited(
        self, wait: float, kind: str, why: str | None, config: FakeConfig, tokens: int = 0
    ) -> web.Response:
        if wait == float("inf"):
            capacity = int((config.tpm or 0) * config.window_s / 60)
            message = (
                f"Request too large for {FAKE_MODEL} on tokens per window: "
                f"limit {capacity}, requested {tokens}. Send a smaller request."
            )
            self.stats.by_fault["too_large"] += 1
            return _json(429, error_body(message, "tokens", "rate_limit_exceeded"))
        message = f"Rate limit reached ({why or kind}). Please try again in {wait:.3f}s."
        headers = retry_after_headers(wait, config.retry_after)
        return _json(429, error_body(message, kind, "rate_limit_exceeded"), headers)


def _read_payload(body: bytes) -> dict[str, Any]:
    """The request JSON with ``model``, ``temperature`` and ``max_tokens`` checked and defaulted."""
    try:
        payload = jsonio.loads(body)
    except jsonio.JSONDecodeError as exc:
        raise FakeRequestError(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise FakeRequestError("the request body must be a JSON object")
    if payload.get("stream"):
        raise FakeRequestError("streaming is not supported by the fake server")
    if not isinstance(payload.get("model"), str):
        raise FakeRequestError("'model' must be a string")
    temperature = payload.get("temperature")
    if temperature is None:
        temperature = 1.0
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise FakeRequestError("'temperature' must be a number")
    payload["temperature"] = float(temperature)
    max_tokens = payload.get("max_completion_tokens", payload.get("max_tokens"))
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise FakeRequestError("'max_tokens' must be an integer")
    payload["max_tokens"] = max_tokens
    return payload


def _named_sample(request: web.Request) -> int | None:
    """The sample a request names (:data:`~judge_engine.providers.base.SAMPLE_HEADER`, a whole
    number below 2**64), or None: a request that names none is told apart by arrival."""
    value = request.headers.get(SAMPLE_HEADER, "")
    return int(value) if value.isdigit() and len(value) <= 20 and int(value) < 2**64 else None


def _basic_auth(request: web.Request, key: str) -> bool:
    """Whether the request carries HTTP basic auth whose password is ``key`` (a client that sends
    an ``api_base``'s ``user:password@``)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        return base64.b64decode(token, validate=True).decode("utf-8").partition(":")[2] == key
    except ValueError:  # not base64, or not UTF-8
        return False


def _limit(request: web.Request) -> int:
    try:
        return int(request.query.get("limit", "20"))
    except ValueError:
        return 20


def _host(request: web.Request) -> str:
    """The server's own base (Anthropic's ``results_url`` is absolute)."""
    return f"{request.scheme}://{request.host}"


def _json(status: int, body: bytes, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=body, content_type=_JSON, headers=headers)


def _reset(request: web.Request) -> web.Response:
    """Drop the connection with a TCP RST and no response at all."""
    transport = request.transport
    if transport is not None:
        request[_DROPPED] = True
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return web.Response()  # never sent: the transport is gone


async def _truncated(
    request: web.Request, body: bytes, headers: dict[str, str] | None
) -> web.StreamResponse:
    """200 headers announcing the whole body, half the body, then close."""
    response = web.StreamResponse(status=200, headers=headers)
    response.content_type = _JSON
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    if request.transport is not None:
        request.transport.close()
    return response
