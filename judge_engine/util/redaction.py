"""Secrets out of everything judge-engine records or shows: the one home of redaction.

A secret can enter by five doors: an API key (``api_key`` or the variable ``api_key_env``
names), credentials written into ``api_base`` (``https://user:password@proxy/v1``), a provider
or proxy that echoes them back in response headers, or in its error bodies. Every writer and
display goes through this module:

* :func:`redact_url`: a URL as recorded or shown (``run.json``, ``blocks.jsonl``, transcripts,
  messages, ``plan``): its user-info and credential-like query parameters replaced;
* :func:`redact`: any text (error messages, viewer pages): known secret values, key-shaped text
  (``sk-...``, ``Bearer``/``Basic`` tokens, ``AIza...``, ``api-key: ...``) and URL credentials;
* :func:`kept_headers`: the response headers worth keeping, by an allow-list, values redacted
  (kept apart from the answer's content on purpose: headers say how the provider paces us,
  never what it answered);
* :func:`url_credentials`: what a transport sends for a URL's user-info (basic auth), and the
  URL without it.

Redaction is deliberately greedy: a query parameter named like ``*key*``, ``*token*``,
``*sig*``, ``*secret*``, ``*pass*``, ``*auth*`` or ``*credential*`` loses its value even when it
was harmless; a secret in a file is never harmless.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

MARK = "[REDACTED]"
"""What a secret is replaced with."""

_CREDENTIAL_NAME = r"[A-Za-z0-9_.\-]*(?:key|token|sig|secret|pass|pwd|auth|credential|session)[A-Za-z0-9_.\-]*"
_CREDENTIAL_PARAM = re.compile(rf"^{_CREDENTIAL_NAME}$", re.IGNORECASE)
_KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}|sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*"
)
"""API keys by their look (OpenAI, Anthropic, Google) and a bearer token."""
_BASIC = re.compile(r"\b(?i:basic)\s+([A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])")
"""A basic-auth token (redacted when it decodes to ``user:password``: "basic" is also a word)."""
_NAMED_VALUES = re.compile(r"(?i)(\b(?:x-)?api[-_]?key\b[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED\])[^\s\"',;&}\]]{4,}")
"""``api-key: VALUE``, ``"api_key": "VALUE"``, ``x-api-key=VALUE``: whatever the value looks like."""
_URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#@\"'<>]+@")
_URL_PARAM = re.compile(rf"([?&#;]{_CREDENTIAL_NAME}=)[^&#\s\"'<>]+", re.IGNORECASE)
_SUSPECT = re.compile(r"sk-|AIza|(?i:bearer|basic|api.?key)|://|=")
"""Something every pattern above needs: a text without it has nothing to redact."""
_SECRET_NAMES = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without the known ``secrets``, anything shaped like an API key or an
    Authorization token, and the credentials of any URL in it."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, MARK)
    if _SUSPECT.search(text) is None:  # the common case (a header's number), at a tenth of the cost
        return text
    text = _KEY_SHAPES.sub(MARK, text)
    text = _BASIC.sub(_basic_token, text)
    text = _NAMED_VALUES.sub(rf"\1{MARK}", text)
    text = _URL_USERINFO.sub(rf"\1{MARK}@", text)
    return _URL_PARAM.sub(rf"\1{MARK}", text)


def _basic_token(match: re.Match[str]) -> str:
    try:
        decoded = base64.b64decode(match.group(1), validate=True)
    except ValueError:  # binascii.Error: not base64, so a word
        return match.group(0)
    return f"Basic {MARK}" if b":" in decoded else match.group(0)


@lru_cache(maxsize=256)  # a run has a handful of URLs, asked for at every attempt
def redact_url(url: str | None) -> str | None:
    """``url`` as it may be recorded or shown: user-info and the values of credential-like
    query (and fragment) parameters replaced by :data:`MARK`; anything else unchanged, so a URL
    without credentials is returned as it is (run ids and cache keys built from it stay put)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL this parser reads: redact it as text
        return redact(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MARK}@{netloc.rpartition('@')[2]}"
    cleaned = urlunsplit((parts.scheme, netloc, parts.path, _redact_params(parts.query), _redact_params(parts.fragment)))
    return cleaned if cleaned != urlunsplit(parts) else url


def recorded_url(url: str | None) -> str | None:
    """A URL as :func:`redact_url` recorded it, made usable again: redacted user-info and
    parameters are dropped (the secret is not in the record; a re-ask online needs it given again,
    through ``api_key_env``). A URL with nothing redacted is returned as it is."""
    if not url or MARK not in url:
        return url
    parts = urlsplit(url.replace(f"{MARK}@", ""))
    kept = "&".join(p for p in parts.query.split("&") if p and not p.endswith(f"={MARK}"))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, kept, ""))


def _redact_params(query: str) -> str:
    if not query:
        return query
    pieces = []
    for piece in query.split("&"):
        name, equals, _value = piece.partition("=")
        pieces.append(f"{name}={MARK}" if equals and _CREDENTIAL_PARAM.match(unquote(name)) else piece)
    return "&".join(pieces)


def url_credentials(url: str) -> tuple[str, str | None]:
    """``(url without its user-info, the Authorization header value it means)``: a URL's
    ``user:password@`` is sent as HTTP basic auth (as curl, requests and browsers do); without
    user-info, ``(url, None)``. Percent-escapes in the user and password are decoded."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


@lru_cache(maxsize=256)
def url_secrets(url: str | None) -> tuple[str, ...]:
    """The secret values a URL carries (its user-info, raw and decoded, the basic-auth token it
    means, and the values of credential-like parameters), for :func:`redact`'s ``secrets``."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        _, header = url_credentials(url)
        found += [userinfo, unquote(userinfo), *(p for p in userinfo.split(":") if len(p) >= 4)]
        found += [header.split(" ", 1)[1]] if header else []
    for params in (parts.query, parts.fragment):
        for piece in params.split("&") if params else []:
            name, _, value = piece.partition("=")
            if value and _CREDENTIAL_PARAM.match(unquote(name)):
                found += [value, unquote(value)]
    return tuple(sorted(set(found), key=len, reverse=True))  # the longest first: none half-replaced


def redact_known(text: str, secrets: Iterable[str]) -> str:
    """``text`` without the known ``secrets`` (those of 8 characters or more), and nothing else
    changed: for an answer's own text, which a gateway may have written a key into but whose
    words must stay as the model wrote them."""
    for secret in secrets:
        if len(secret) >= 8 and secret in text:
            text = text.replace(secret, MARK)
    return text


_HEADER_PARAMS = ("extra_headers", "headers")
_CREDENTIAL_HEADER = re.compile(rf"^(?:{_CREDENTIAL_NAME}|cookie|proxy-authorization)$", re.IGNORECASE)


def redact_params(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """Sampling ``params`` as they may be recorded: the values of the headers in
    ``extra_headers`` (or ``headers``) named like credentials (``Authorization``,
    ``X-Gateway-Key``, ``api-key``, ``Cookie``...) replaced by :data:`MARK`. ``params`` itself
    is returned when there is nothing to redact."""
    if not any(isinstance(params.get(name), Mapping) for name in _HEADER_PARAMS):
        return params
    cleaned = dict(params)
    for name in _HEADER_PARAMS:
        if isinstance(headers := params.get(name), Mapping):
            cleaned[name] = {key: MARK if _CREDENTIAL_HEADER.match(str(key)) else value
                             for key, value in headers.items()}
    return cleaned


_KEPT_HEADERS = frozenset({"retry-after", "retry-after-ms", "x-request-id", "request-id"})
_KEPT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def kept_headers(headers: Mapping[str, Any] | None, secrets: Iterable[str] = ()) -> dict[str, str]:
    """The response headers worth keeping, with lower-case names: Retry-After (``retry-after``,
    ``retry-after-ms``), the declared rate limits the lanes adopt (``x-ratelimit-*``,
    ``anthropic-ratelimit-*``) and the request id (``x-request-id``, ``request-id``). Nothing
    else is kept (an echoed ``Authorization`` or ``x-api-key`` never is, nor litellm's
    ``llm_provider-`` copies), and a kept value is redacted (a gateway may put anything there)."""
    if not headers:
        return {}
    secrets = list(secrets)
    kept = {}
    for key, value in headers.items():
        lower = str(key).lower()
        if lower in _KEPT_HEADERS or lower.startswith(_KEPT_PREFIXES):
            kept[lower] = redact(str(value), secrets)
    return kept


def secrets_in_environment() -> list[str]:
    """Values of environment variables named like secrets (``*_KEY``, ``*_TOKEN``,
    ``*_SECRET``, ``*_PASSWORD``...), long enough to be one."""
    return [value for name, value in os.environ.items() if _SECRET_NAMES.search(name) and len(value) >= 8]
