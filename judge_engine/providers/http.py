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
encoding not asked for is unread, booked as billed), no cookies, and three things a gateway, a
proxy or a server does to a run (issue 35):

- **Redirects** are never left to aiohttp (it would send the key wherever a ``Location`` points):
  a ``307``/``308`` to the same origin (scheme, host and port) is followed with the POST and its
  body, at most :data:`MAX_REDIRECTS` hops; any other 3xx comes back as the answer, for the
  provider to stop the judge with its ``Location`` (:func:`redirect_message`).
- **A proxy not yet known to let requests through** gets one request at a time (:class:`_Scout`),
  so a proxy that wants credentials, refuses connections or drops them meets one request, not
  every one in flight; a connection to it that times out says so (``ConnectionTimeoutError``).
- **A kept connection the server has closed** is not reused: one on which anything arrived while
  idle (its close, or bytes nobody asked for) is dropped before the request is written; and a
  request whose reused connection ends before any byte of an answer (the server closed it as the
  request left) is sent once more on a new connection, without costing the task a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import select
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from yarl import URL

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
CONNECT_S = 10.0
"""Longest wait for a connection (to the endpoint, or to its proxy), within the request's timeout:
a TCP connection is made in milliseconds or not at all (httpx under the OpenAI SDK waits 5 s)."""
MAX_REDIRECTS = 3
"""Same-origin 307/308 hops followed for one request."""
SCOUT_GRACE_S = 1.0
"""How long the first request through a proxy holds the others back when its answer is slow to
come (a slow model behind a proxy that does let requests through)."""
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


@dataclass(slots=True)
class _Attempt:
    """What the pool did for one request (read by :class:`_Connector`, through :data:`_ATTEMPT`)."""

    fresh: bool = False
    """Take no kept connection: make a new one."""
    reused: bool = False
    connecting: bool = False
    connected: bool = False


_ATTEMPT: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar("judge_engine_http_attempt", default=None)
"""The request the calling task is sending (aiohttp's pool runs in that task)."""


class _Connector(aiohttp.TCPConnector):
    """aiohttp's pool, but a kept connection on which anything arrived while it was idle is
    dropped, never reused: the server's close not yet read by the event loop (a server that closes
    every connection right after its answer), or an answer nobody asked for (a server out of step,
    a stale ``408``), which would be read as the next request's answer. aiohttp reuses any
    connection its event loop has not yet seen closed."""

    async def _get(self, *args: Any, **kwargs: Any) -> Any:  # aiohttp's hook for a kept connection
        attempt = _ATTEMPT.get()
        if attempt is not None and attempt.fresh:
            return None
        while (connection := await super()._get(*args, **kwargs)) is not None:
            protocol = connection.protocol
            if protocol is None or not (protocol.should_close or _readable(protocol.transport)):
                if attempt is not None:
                    attempt.reused = True
                return connection
            connection.close()
        return None

    async def _create_connection(self, *args: Any, **kwargs: Any) -> Any:  # aiohttp's hook for a new one
        attempt = _ATTEMPT.get()
        if attempt is not None:
            attempt.connecting = True
        protocol = await super()._create_connection(*args, **kwargs)
        if attempt is not None:
            attempt.connected = True
        return protocol


def _readable(transport: asyncio.BaseTransport | None) -> bool:
    """Whether the socket under an idle ``transport`` has anything to read (its close included),
    asked of the kernel without reading it (httpcore asks the same before reusing a connection)."""
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock.fileno()], [], [], 0)[0])
    except (OSError, ValueError):  # closed under us: not reusable either
        return True


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
        self._scouts: dict[str, _Scout] = {}
        self._moved: dict[str, str] = {}
        """Where a 308 (a permanent move, same origin) sent a URL: asked there from then on."""

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Answer:
        """POST ``body`` to ``url``; the whole answer, whatever its status (a same-origin
        307/308 followed, any other 3xx returned as it came).

        Raises:
            NotSentError: the client refused to send it (nothing left).
            TimeoutError: no answer within ``timeout_s`` (connecting, sending, waiting for its head);
                ``aiohttp.ConnectionTimeoutError`` when no connection was made.
            aiohttp.ClientError, OSError: the connection failed (through the proxy, too).
            UnreadAnswerError: the answer's head came but its body could not be read (too large,
                not decoding, cut, or the timeout fell while reading it).
        """
        deadline = asyncio.get_running_loop().time() + timeout_s
        asked = url
        url = self._moved.get(url, url)
        for _ in range(MAX_REDIRECTS):
            answer = await self._through_proxy(url, body, headers, deadline)
            if (target := same_origin_move(url, answer)) is None:
                return answer
            if answer.status == 308:
                self._moved[asked] = target
            url = target
        return await self._through_proxy(url, body, headers, deadline)  # a 3xx still: the provider stops

    async def _through_proxy(self, url: str, body: bytes, headers: Mapping[str, str], deadline: float) -> Answer:
        proxy = self._proxies[url] if url in self._proxies else self._proxies.setdefault(url, self.network.proxy_for(url))
        if proxy is None:
            return await self._send(url, body, headers, proxy, deadline)
        scout = self._scouts.setdefault(proxy, _Scout())
        async with scout.turn():
            if isinstance(scout.refused, BaseException):  # it refused what we still hold: it would again
                raise scout.refused
            if scout.refused is not None:
                return scout.refused
            try:
                answer = await self._send(url, body, headers, proxy, deadline)
            except aiohttp.ClientHttpProxyError as exc:  # its answer to CONNECT (an https endpoint)
                if exc.status == 407:
                    scout.refused = exc
                raise
        if answer.status == 407:
            scout.refused = answer
        else:
            scout.passed = True
        return answer

    async def _send(self, url: str, body: bytes, headers: Mapping[str, str], proxy: str | None,
                    deadline: float) -> Answer:
        session = self._session
        if session is None or session.closed:
            session = self._session = open_session(self.network, decompress=False)
        loop = asyncio.get_running_loop()
        token = _ATTEMPT.set(None)
        try:
            for fresh in (False, True):
                attempt = _Attempt(fresh=fresh)
                _ATTEMPT.set(attempt)
                if (left := deadline - loop.time()) <= 0:
                    raise TimeoutError("no answer within the request's timeout")
                answered = False
                try:
                    async with session.post(url, data=body, headers=headers, proxy=proxy, allow_redirects=False,
                                            timeout=aiohttp.ClientTimeout(total=left, sock_connect=min(CONNECT_S, left))
                                            ) as response:
                        answered = True
                        try:
                            raw = await read_body(response)
                        except (TimeoutError, OSError, aiohttp.ClientError) as exc:  # BadHTTPAnswerError too
                            raise UnreadAnswerError(response.status, exc) from exc
                        return Answer(response.status, {k.lower(): v for k, v in response.headers.items()}, raw)
                except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                    # A kept connection the server closed as the request left (no byte of an answer
                    # came): the request never reached it; once more, on a new connection.
                    if answered or fresh or not attempt.reused:
                        raise
                except TimeoutError as exc:
                    if answered or not attempt.connecting or attempt.connected or isinstance(exc, aiohttp.ConnectionTimeoutError):
                        raise
                    where = "the proxy" if proxy else "the host"
                    raise aiohttp.ConnectionTimeoutError(f"no connection to {where} within the request's timeout") from exc
                except _NOT_SENT as exc:
                    # A failed connection (a certificate: an ssl.CertificateError is a ValueError too) left
                    # the client: it is the network's answer, not a refusal to send.
                    if answered or isinstance(exc, _REDIRECTED) or isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
                        raise
                    raise NotSentError(f"the HTTP client refused to send the request: {type(exc).__name__}: {exc}") from exc
            raise AssertionError("unreachable: the second send returns or raises")
        finally:
            _ATTEMPT.reset(token)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


class _Scout:
    """Requests through a proxy that has not yet let one through go one at a time (each holds the
    others back until its answer comes): a proxy that wants credentials or refuses connections
    meets one request, and the judge stops on its answer, instead of meeting every request in
    flight. A first request still in flight after :data:`SCOUT_GRACE_S` lets the others go (a slow
    model behind a proxy that passes requests; or a proxy that drops them, whose timeout stops the
    judge all the same)."""

    def __init__(self) -> None:
        self.passed = False
        self.refused: Answer | aiohttp.ClientHttpProxyError | None = None
        """Its 407 (an answer, or its refusal of a ``CONNECT``), given to every request after it
        without sending: the credentials do not change."""
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        if self.passed:
            yield
            return
        await self._lock.acquire()
        if self.passed:  # proven while this one waited
            self._lock.release()
            yield
            return
        held = [True]

        def release() -> None:
            if held.pop() if held else False:
                self._lock.release()

        def slow() -> None:  # no refusal within the grace: a proxy refuses at once, a model takes its time
            self.passed = self.refused is None
            release()

        timer = asyncio.get_running_loop().call_later(SCOUT_GRACE_S, slow)
        try:
            yield
        finally:
            timer.cancel()
            release()


def same_origin_move(url: str, answer: Answer) -> str | None:
    """Where a ``307``/``308`` answer to ``url`` moves the request, when that is the same origin
    (scheme, host and port): the POST is sent there again, with its body and headers. None for
    any other answer (another origin, a 301/302/303, no Location)."""
    if answer.status not in (307, 308) or not (location := answer.headers.get("location")):
        return None
    try:
        here = URL(url)
        there = here.join(URL(location))
        return str(there) if there.origin() == here.origin() else None
    except ValueError:
        return None


def redirect_message(url: str, answer: Answer) -> str:
    """What to tell the user about a 3xx that is not followed: where it points, and to update
    ``api_base`` (a redirect to another origin would take the key there; a 301/302/303 turns
    the POST into a GET)."""
    location = answer.headers.get("location", "").strip()
    if not location:
        return (f"{redact_url(url)} answered HTTP {answer.status} (a redirect) without a Location: check api_base")
    try:
        there = URL(url).join(URL(location))
        other = there.origin() != URL(url).origin()
        where = redact_url(str(there)) or str(there)
    except ValueError:
        other, where = True, location[:200]
    if other:
        why = "another origin: the API key is never sent there"
    elif answer.status in (307, 308):
        why = f"more than {MAX_REDIRECTS} redirects"
    else:
        why = f"a POST is not sent again after a {answer.status}: it would arrive as a GET, without its body"
    suggestion = where.removesuffix("/chat/completions") if where.endswith("/chat/completions") else where
    return f"{redact_url(url)} answered HTTP {answer.status}, moved to {where} ({why}): update api_base to {suggestion}"


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
    what = "refused our credentials" if url_secrets(network.proxy_for(url) or "") else "asks for credentials, none given"
    return ErrorClass(ErrorKind.FATAL, redact(f"the proxy {proxy} {what} (407 Proxy Authentication Required, "
                                              "authentication failed): put user:password in the proxy URL "
                                              "(HTTPS_PROXY, or the judge's proxy:)", secrets), 407)


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
