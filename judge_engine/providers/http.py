"""The engine's HTTP client: aiohttp's one home on the calling side (the fake server and the viewer
serve with it elsewhere), for the direct chat transport (:class:`ChatClient`) and the batch APIs
(:class:`BatchHTTP`).

Both leave through the endpoint's :class:`~judge_engine.providers.network.Network`: its proxy
(the environment's ``HTTPS_PROXY`` and the like, or the judge's own; ``CONNECT`` for an https
endpoint), its TLS context (the system's store, ``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``, the
judge's ``ca_bundle``). aiohttp's own reading of the environment (``trust_env``) is left off:
it knows no ``ALL_PROXY``, no CIDR in ``NO_PROXY`` and no per-judge proxy, and the engine must
say which proxy a failure was about.

Why aiohttp and not a client of the engine's own (``wire.py`` until 0.2): a lean client saved
about 0.3 ms of CPU a paced request, which no user feels (one core drives more requests a minute
than any provider allows a key), while proxies, TLS quirks, servers that close kept connections
at the wrong moment and compression nobody asked for are what a well-kept client has already met.
What the engine adds: answers read whole but never past :data:`MAX_ANSWER_BYTES` (a compressed
body decoded by :func:`~judge_engine.providers.content_encoding.decode`, bounded too; one in an
encoding not asked for is unread, booked as billed), no cookies, no redirects followed on a POST
(a 3xx is an answer like another).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from judge_engine.errors import HTTPStatusError, MalformedResponseError
from judge_engine.providers.base import (
    ErrorClass,
    ErrorKind,
    is_unreachable,
    parse_retry_after,
    rate_limited,
)
from judge_engine.providers.content_encoding import UndecodableError, decode
from judge_engine.providers.network import Network, network_problem
from judge_engine.rundir.disk import writing
from judge_engine.util import jsonio
from judge_engine.util.redaction import (
    kept_headers,
    redact,
    redact_url,
    url_credentials,
    url_secrets,
)

MAX_ANSWER_BYTES = 64 * 2**20
"""Largest answer body read, before and after decoding (64 MiB: a chat completion is kilobytes)."""
KEEP_IDLE_S = 15.0
"""How long an idle connection is kept for reuse (servers close theirs after 5-75 s)."""
_PIECE = 1 << 20


class BadHTTPAnswerError(ConnectionError):
    """What came back cannot be read as an answer (larger than the limit, or a body that does not
    decode): transient, like a body cut short."""


class UnreadAnswerError(BadHTTPAnswerError):
    """The answer's status and headers came, but not a body that could be read (it did not
    decode, was cut, or the timeout fell while reading it): the provider may have billed it."""

    def __init__(self, status: int, error: BaseException) -> None:
        why = (str(error) if isinstance(error, BadHTTPAnswerError) else "timed out while reading it"
               if isinstance(error, TimeoutError) else f"{type(error).__name__}: {error}")
        super().__init__(f"the HTTP {status} answer's body could not be read ({why})")
        self.status = status


class NotSentError(ValueError):
    """The HTTP client refused the request before anything left (a URL it cannot send to, a header
    with a line break): our side's failure, never the provider's."""


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer: its status, headers (lower-case names) and whole body."""

    status: int
    headers: dict[str, str]
    body: bytes


CLIENT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError,)
"""The client's own failures on the wire (a connection closed early, a payload cut): transient."""
_NOT_SENT = (ValueError, TypeError, OverflowError, aiohttp.InvalidURL,
             *(getattr(aiohttp, name) for name in ("NonHttpUrlClientError",) if hasattr(aiohttp, name)))
"""What aiohttp raises when it refuses a request before sending it: a setting it cannot use, a
line break in a header, a URL it cannot send to."""
_REDIRECTED = tuple(getattr(aiohttp, name) for name in ("InvalidUrlRedirectClientError", "NonHttpUrlRedirectClientError")
                    if hasattr(aiohttp, name))


class _Connector(aiohttp.TCPConnector):
    """aiohttp's pool, but a kept connection on which bytes arrived while it was idle (an answer
    nobody asked for: a server out of step, a stale ``408``) is dropped, never reused: those bytes
    would be read as the next request's answer. aiohttp reuses any connection still open."""

    async def _get(self, *args: Any, **kwargs: Any) -> Any:  # aiohttp's hook for a kept connection
        while (connection := await super()._get(*args, **kwargs)) is not None:
            protocol = connection.protocol
            if protocol is None or not protocol.should_close:
                return connection
            connection.close()
        return None


def open_session(network: Network, *, timeout: aiohttp.ClientTimeout | None = None,
                 decompress: bool = True) -> aiohttp.ClientSession:
    """An aiohttp session for ``network``'s endpoint: its TLS context, no connection cap (the
    engine's lanes bound what is in flight), no cookies; ``decompress=False`` leaves a compressed
    body to :func:`read_body`, which bounds what it decodes to."""
    connector = _Connector(limit=0, ttl_dns_cache=300, keepalive_timeout=KEEP_IDLE_S, ssl=network.ssl_context())
    return aiohttp.ClientSession(connector=connector, timeout=timeout or aiohttp.ClientTimeout(total=None),
                                 raise_for_status=False, trust_env=False, auto_decompress=decompress,
                                 cookie_jar=aiohttp.DummyCookieJar())


class ChatClient:
    """POSTs of small JSON bodies, thousands of them, over one kept-alive pool (the direct transport)."""

    def __init__(self, network: Network) -> None:
        self.network = network
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[str, str | None] = {}

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Answer:
        """POST ``body`` to ``url``; the whole answer, whatever its status.

        Raises:
            NotSentError: the client refused to send it (nothing left).
            TimeoutError: no answer within ``timeout_s`` (connecting, sending, waiting for its head).
            aiohttp.ClientError, OSError: the connection failed (through the proxy, too).
            UnreadAnswerError: the answer's head came but its body could not be read (too large,
                not decoding, cut, or the timeout fell while reading it).
        """
        session = self._session
        if session is None or session.closed:
            session = self._session = open_session(self.network, decompress=False)
        proxy = self._proxies[url] if url in self._proxies else self._proxies.setdefault(url, self.network.proxy_for(url))
        answered = False
        try:
            async with session.post(url, data=body, headers=headers, proxy=proxy, allow_redirects=False,
                                    timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                answered = True
                try:
                    raw = await read_body(response)
                except (TimeoutError, OSError, aiohttp.ClientError) as exc:  # BadHTTPAnswerError too
                    raise UnreadAnswerError(response.status, exc) from exc
                return Answer(response.status, {k.lower(): v for k, v in response.headers.items()}, raw)
        except _NOT_SENT as exc:
            # A failed connection (a certificate: an ssl.CertificateError is a ValueError too) left
            # the client: it is the network's answer, not a refusal to send.
            if answered or isinstance(exc, _REDIRECTED) or isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
                raise
            raise NotSentError(f"the HTTP client refused to send the request: {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


async def read_body(response: aiohttp.ClientResponse) -> bytes:
    """The answer's whole body, decoded if the server sent it encoded
    (:mod:`~judge_engine.providers.content_encoding`), never past :data:`MAX_ANSWER_BYTES`.

    Raises:
        BadHTTPAnswerError: larger than the limit, or it does not decode.
    """
    length = response.content_length
    if length is not None and length > MAX_ANSWER_BYTES:
        raise BadHTTPAnswerError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
    if length is not None:  # framed by its length: read at once, known to be small enough
        raw = await response.read()
    else:  # chunks, or until the connection closes: read piece by piece, never past the limit
        pieces: list[bytes] = []
        size = 0
        while size <= MAX_ANSWER_BYTES and (piece := await response.content.read(MAX_ANSWER_BYTES + 1 - size)):
            pieces.append(piece)
            size += len(piece)
        if size > MAX_ANSWER_BYTES:
            raise BadHTTPAnswerError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
        raw = b"".join(pieces)
    try:
        body = decode(raw, response.headers.get("Content-Encoding", ""), MAX_ANSWER_BYTES)
    except UndecodableError as exc:
        raise BadHTTPAnswerError(str(exc)) from None
    if len(body) > MAX_ANSWER_BYTES:  # a few kilobytes of gzip can hold gigabytes
        raise BadHTTPAnswerError(f"the answer decodes to more than {MAX_ANSWER_BYTES} bytes")
    return body


async def probe(url: str, network: Network, headers: Mapping[str, str], *, timeout_s: float = 15.0) -> str:
    """GET ``url`` through ``network`` (its proxy, its certificates) and say what came back: the
    HTTP status (any status shows the endpoint is reached and its certificate verified).

    Raises:
        the client's failure (a certificate, a proxy, a refused connection), for
        :func:`~judge_engine.providers.network.network_problem` to read.
    """
    async with open_session(network) as session, session.get(
            url, headers=headers, proxy=network.proxy_for(url), allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
        return f"HTTP {response.status}"


def failed_connection(error: BaseException, *, network: Network, url: str, secrets: list[str]) -> ErrorClass | None:
    """The class of a connection that failed for a reason no retry mends (a certificate, a TLS
    handshake, the proxy: :func:`~judge_engine.providers.network.network_problem`): fatal, the
    message naming the endpoint and the proxy without their credentials. None otherwise."""
    problem = network_problem(error, endpoint=redact_url(url) or url, proxy=network.proxy_label(url))
    return None if problem is None else ErrorClass(ErrorKind.FATAL, redact(problem, secrets))


def proxy_refused(network: Network, url: str, secrets: list[str]) -> ErrorClass:
    """A 407 answer: the proxy wants credentials it was not given (or refused those it was): fatal."""
    proxy = network.proxy_label(url) or "(from the environment)"
    return ErrorClass(ErrorKind.FATAL, redact(f"the proxy {proxy} refused our credentials (407 Proxy Authentication "
                                              "Required): put user:password in the proxy URL (HTTPS_PROXY, or the "
                                              "judge's proxy:)", secrets), 407)


class BatchHTTP:
    """JSON calls, file uploads and downloads against one batch API, with its headers: a few calls
    per batch, with bodies of up to 256 MB streamed from disk (uploads, Anthropic's create) and to
    disk (results), never held whole in memory.

    Args:
        headers: sent with every call (auth, versions).
        secret: the API key, redacted from every error message.
        network: how the calls leave (proxy, TLS).
    """

    _TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=300)

    def __init__(self, headers: Mapping[str, str], *, secret: str | None, network: Network | None = None) -> None:
        self._headers = dict(headers)
        self._secrets = [secret or ""]
        self._network = network or Network()
        self._session: aiohttp.ClientSession | None = None
        self._last_url = ""

    def _target(self, url: str, headers: Mapping[str, str]) -> tuple[str, dict[str, str], str | None]:
        """``url`` without its user-info, ``headers`` with the basic auth it means (in place of a
        bearer token: the config refuses a key and URL credentials at once), and its proxy."""
        self._last_url = url
        plain, basic = url_credentials(url)
        proxy = self._network.proxy_for(plain)
        if basic is None:
            return url, dict(headers), proxy
        if (found := url_secrets(url)) and found[0] not in self._secrets:
            self._secrets.extend(found)
        return plain, {**headers, "Authorization": basic}, proxy

    async def get_json(self, url: str, params: Mapping[str, str] | None = None) -> Any:
        url, headers, proxy = self._target(url, self._headers)
        async with self._open().get(url, params=params, headers=headers, proxy=proxy) as response:
            return await self._json(response)

    async def post_json(self, url: str, body: Any = None) -> Any:
        data = jsonio.dumps(body if body is not None else {})
        url, headers, proxy = self._target(url, {**self._headers, "Content-Type": "application/json"})
        async with self._open().post(url, data=data, headers=headers, proxy=proxy, allow_redirects=False) as response:
            return await self._json(response)

    async def post_stream(self, url: str, pieces: AsyncIterator[bytes]) -> Any:
        """POST a JSON body produced piece by piece (sent chunked, never whole in memory)."""
        url, headers, proxy = self._target(url, {**self._headers, "Content-Type": "application/json"})
        async with self._open().post(url, data=pieces, headers=headers, proxy=proxy, allow_redirects=False) as response:
            return await self._json(response)

    async def post_file(self, url: str, path: Path, *, name: str, fields: Mapping[str, str]) -> Any:
        """A multipart upload of ``path`` as ``name``, streamed from disk."""
        url, headers, proxy = self._target(url, self._headers)
        with path.open("rb") as handle:
            form = aiohttp.FormData()
            for key, value in fields.items():
                form.add_field(key, value)
            form.add_field("file", handle, filename=name, content_type="application/jsonl")
            async with self._open().post(url, data=form, headers=headers, proxy=proxy,
                                         allow_redirects=False) as response:
                return await self._json(response)

    async def download(self, url: str, dest: Path, *, append: bool = False) -> int:
        """Stream ``url``'s body into ``dest``; the bytes written.

        Raises:
            DiskError: ``dest``'s disk refused (only the file's own calls are read so: a
                socket's errors stay the transport's).
        """
        written = 0
        url, headers, proxy = self._target(url, self._headers)
        async with self._open().get(url, headers=headers, proxy=proxy) as response:
            if response.status != 200:
                raise self._error(response.status, await read_body(response), response.headers)
            with writing(dest):
                handle = dest.open("ab" if append else "wb")
            try:
                async for piece in response.content.iter_chunked(_PIECE):
                    with writing(dest):
                        handle.write(piece)
                    written += len(piece)
                with writing(dest):
                    handle.flush()
            finally:
                with contextlib.suppress(OSError):  # (a flush that failed above fails here again)
                    handle.close()
        return written

    def classify(self, error: BaseException) -> ErrorClass:
        """What a failed call means: 429 rate-limited (with Retry-After), 5xx and connection
        failures retried, a certificate or proxy that refuses us fatal (named), any other status
        fatal (a wrong key, a wrong URL, an invalid file)."""
        message = redact(str(error) if isinstance(error, HTTPStatusError) else f"{type(error).__name__}: {error}",
                         self._secrets)
        if isinstance(error, HTTPStatusError):
            status = error.status_code
            if status == 429:
                return rate_limited(message, parse_retry_after(error.headers))
            if status == 407:
                return proxy_refused(self._network, self._last_url, self._secrets)
            if status >= 500 or status in (408, 409, 425):
                return ErrorClass(ErrorKind.RETRY, message, status)
            return ErrorClass(ErrorKind.FATAL, message, status)
        if (fatal := failed_connection(error, network=self._network, url=self._last_url, secrets=self._secrets)):
            return fatal
        if isinstance(error, (MalformedResponseError, aiohttp.ClientError, TimeoutError, ConnectionError, OSError)):
            return ErrorClass(ErrorKind.RETRY, message, unreachable=is_unreachable(error))
        return ErrorClass(ErrorKind.FATAL, message)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = open_session(self._network, timeout=self._TIMEOUT)
        return self._session

    async def _json(self, response: aiohttp.ClientResponse) -> Any:
        raw = await read_body(response)
        if response.status != 200:
            raise self._error(response.status, raw, response.headers)
        try:
            return jsonio.loads(raw)
        except jsonio.JSONDecodeError as exc:
            raise MalformedResponseError(f"the batch API's 200 answer is not JSON ({len(raw)} bytes)") from exc

    def _error(self, status: int, raw: bytes, headers: Mapping[str, str]) -> HTTPStatusError:
        return HTTPStatusError(status, redact(error_message(raw), self._secrets), kept_headers(headers, self._secrets))


def error_message(raw: bytes) -> str:
    """The provider's error text: ``error.message`` (+ code or type) of an OpenAI
    (``{"error": {"message"}}``) or Anthropic (``{"type": "error", "error": {"type", "message"}}``)
    error body, a bare ``error`` string, else the start of the body."""
    try:
        error = jsonio.loads(raw).get("error")
    except (jsonio.JSONDecodeError, AttributeError):
        error = None
    if isinstance(error, dict) and error.get("message"):
        code = error.get("code") or error.get("type")
        return f"{error['message']}" + (f" ({code})" if code else "")
    if isinstance(error, str):
        return error
    return raw[:500].decode("utf-8", "replace") or "(empty body)"
