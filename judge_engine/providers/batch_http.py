"""HTTP for the batch APIs: the aiohttp client of :mod:`.batch_openai` and :mod:`.batch_anthropic`.

A second home of the aiohttp client beside the direct transport (:mod:`.openai_http`), kept
apart because its calls are of another kind: a few per batch, with bodies of up to 256 MB that
are streamed from disk (uploads, Anthropic's create) and to disk (results), never held whole in
memory; the chat transport's pool is tuned for thousands of small calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
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
from judge_engine.providers.openai_http import error_message
from judge_engine.rundir.disk import writing
from judge_engine.util import jsonio
from judge_engine.util.redaction import kept_headers, redact, url_credentials, url_secrets

_PIECE = 1 << 20
_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=300)


class BatchHTTP:
    """JSON calls, file uploads and downloads against one batch API, with its headers.

    Args:
        headers: sent with every call (auth, versions).
        secret: the API key, redacted from every error message.
    """

    def __init__(self, headers: Mapping[str, str], *, secret: str | None) -> None:
        self._headers = dict(headers)
        self._secrets = [secret or ""]
        self._session: aiohttp.ClientSession | None = None

    def _target(self, url: str, headers: Mapping[str, str]) -> tuple[str, dict[str, str]]:
        """``url`` without its user-info, and ``headers`` with the basic auth it means (in place
        of a bearer token: the config refuses a key and URL credentials at once)."""
        plain, basic = url_credentials(url)
        if basic is None:
            return url, dict(headers)
        if (found := url_secrets(url)) and found[0] not in self._secrets:
            self._secrets.extend(found)
        return plain, {**headers, "Authorization": basic}

    async def get_json(self, url: str, params: Mapping[str, str] | None = None) -> Any:
        url, headers = self._target(url, self._headers)
        async with self._open().get(url, params=params, headers=headers) as response:
            return await self._json(response)

    async def post_json(self, url: str, body: Any = None) -> Any:
        data = jsonio.dumps(body if body is not None else {})
        url, headers = self._target(url, {**self._headers, "Content-Type": "application/json"})
        async with self._open().post(url, data=data, headers=headers) as response:
            return await self._json(response)

    async def post_stream(self, url: str, pieces: AsyncIterator[bytes]) -> Any:
        """POST a JSON body produced piece by piece (sent chunked, never whole in memory)."""
        url, headers = self._target(url, {**self._headers, "Content-Type": "application/json"})
        async with self._open().post(url, data=pieces, headers=headers) as response:
            return await self._json(response)

    async def post_file(self, url: str, path: Path, *, name: str, fields: Mapping[str, str]) -> Any:
        """A multipart upload of ``path`` as ``name``, streamed from disk."""
        url, headers = self._target(url, self._headers)
        with path.open("rb") as handle:
            form = aiohttp.FormData()
            for key, value in fields.items():
                form.add_field(key, value)
            form.add_field("file", handle, filename=name, content_type="application/jsonl")
            async with self._open().post(url, data=form, headers=headers) as response:
                return await self._json(response)

    async def download(self, url: str, dest: Path, *, append: bool = False) -> int:
        """Stream ``url``'s body into ``dest``; the bytes written.

        Raises:
            DiskError: ``dest``'s disk refused (only the file's own calls are read so: a
                socket's errors stay the transport's).
        """
        written = 0
        url, headers = self._target(url, self._headers)
        async with self._open().get(url, headers=headers) as response:
            if response.status != 200:
                raise self._error(response.status, await response.read(), response.headers)
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
        failures retried, any other status fatal (a wrong key, a wrong URL, an invalid file)."""
        message = redact(str(error) if isinstance(error, HTTPStatusError) else f"{type(error).__name__}: {error}",
                         self._secrets)
        if isinstance(error, HTTPStatusError):
            status = error.status_code
            if status == 429:
                return rate_limited(message, parse_retry_after(error.headers))
            if status >= 500 or status in (408, 409, 425):
                return ErrorClass(ErrorKind.RETRY, message, status)
            return ErrorClass(ErrorKind.FATAL, message, status)
        if isinstance(error, (MalformedResponseError, aiohttp.ClientError, TimeoutError, ConnectionError, OSError)):
            return ErrorClass(ErrorKind.RETRY, message, unreachable=is_unreachable(error))
        return ErrorClass(ErrorKind.FATAL, message)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=_TIMEOUT, raise_for_status=False)
        return self._session

    async def _json(self, response: aiohttp.ClientResponse) -> Any:
        raw = await response.read()
        if response.status != 200:
            raise self._error(response.status, raw, response.headers)
        try:
            return jsonio.loads(raw)
        except jsonio.JSONDecodeError as exc:
            raise MalformedResponseError(f"the batch API's 200 answer is not JSON ({len(raw)} bytes)") from exc

    def _error(self, status: int, raw: bytes, headers: Mapping[str, str]) -> HTTPStatusError:
        return HTTPStatusError(status, redact(error_message(raw), self._secrets), kept_headers(headers, self._secrets))
