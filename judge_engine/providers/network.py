"""How a judge's connections leave this machine: through which proxy, trusting which certificates,
and what to say when either refuses.

**Proxies**, the way curl, requests, httpx and the provider SDKs read them: ``https_proxy`` /
``HTTPS_PROXY`` for an ``https://`` endpoint, ``http_proxy`` / ``HTTP_PROXY`` for an ``http://``
one, ``all_proxy`` / ``ALL_PROXY`` for either (the lower-case name first; ``HTTP_PROXY`` is
ignored when ``REQUEST_METHOD`` is set, as in a CGI script, where a request's ``Proxy:`` header
could set it). ``no_proxy`` / ``NO_PROXY`` lists what goes direct: ``*``; host names (a name
matches itself and its subdomains, a leading dot or ``*.`` changes nothing); IP addresses;
networks in CIDR form (``10.0.0.0/8``, ``fd00::/8``); each with an optional ``:port``. Nothing
goes direct on its own: a server on 127.0.0.1 is reached through the proxy too unless
``NO_PROXY`` names it, as curl and httpx do. A proxy URL may carry ``user:password@`` (sent as
``Proxy-Authorization``, never recorded). A judge's (or a deployment's) ``proxy:`` replaces the
environment's for its endpoint; ``proxy: direct`` sends it direct.

**Certificates.** The system's store, which OpenSSL reads from ``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` when they are set; plus ``REQUESTS_CA_BUNDLE`` (what users of requests-based
tools have already set) and a judge's ``ca_bundle:``, each a file or a folder of certificates,
trusted in addition. ``verify: false`` checks nothing (a warning at the start of every run
that uses it).

**Failures that are not transient.** A certificate that cannot be verified (an unknown
authority, a host name it does not cover, expired), a TLS handshake the server refuses, a proxy
that cannot be reached or refuses our credentials: every request would fail the same way, so
the judge stops at once with one message that names the endpoint (or the proxy, its
credentials redacted), what failed and what to set (:func:`network_problem`).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from judge_engine.errors import ConfigError
from judge_engine.util.redaction import redact_url

DIRECT = "direct"
"""``proxy: direct``: this judge's requests go straight to its endpoint, whatever the environment says."""
CA_VARIABLE = "REQUESTS_CA_BUNDLE"


@dataclass(frozen=True, slots=True)
class Network:
    """How one endpoint's connections leave: its own proxy (None: the environment's), the
    certificates trusted beside the system's, and whether certificates are checked at all.

    ``environ`` is read when a proxy or a context is asked for (the environment of the
    session's process; tests pass their own)."""

    proxy: str | None = None
    ca_bundle: Path | None = None
    verify: bool = True
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, compare=False, hash=False, repr=False)

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL (credentials included: never print it, see :meth:`proxy_label`) a
        request to ``url`` goes through, or None to go direct."""
        if self.proxy == DIRECT:
            return None
        if self.proxy is not None:
            return _with_scheme(self.proxy)
        return env_proxy_for(url, self.environ)

    def proxy_label(self, url: str) -> str | None:
        """The proxy a request to ``url`` goes through, for messages (credentials redacted)."""
        proxy = self.proxy_for(url)
        return None if proxy is None else redact_url(proxy)

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of this endpoint's connections (made once per setting).

        Raises:
            ConfigError: a CA file or folder that cannot be read (the key or variable named).
        """
        env = self.environ
        return _context(self.ca_bundle, self.verify, env.get(CA_VARIABLE) or None,
                        env.get("SSL_CERT_FILE") or None, env.get("SSL_CERT_DIR") or None)

    @property
    def insecure(self) -> bool:
        return not self.verify


def env_proxy_for(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy the environment names for ``url`` (see the module docstring), or None when
    none is set or ``NO_PROXY`` matches the host."""
    env = os.environ if environ is None else environ
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    names = [f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY"]
    if scheme == "http" and env.get("REQUEST_METHOD"):
        names.remove("HTTP_PROXY")  # httpoxy: under CGI, a request's Proxy: header sets HTTP_PROXY
    proxy = next((value.strip() for name in names if (value := env.get(name, "")).strip()), None)
    if proxy is None or parts.hostname is None:
        return None
    no_proxy = env.get("no_proxy", env.get("NO_PROXY", ""))
    port = parts.port or (443 if scheme == "https" else 80)
    return None if bypassed(parts.hostname, port, no_proxy) else _with_scheme(proxy)


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``NO_PROXY``'s list sends ``host:port`` direct."""
    host = host.strip("[]").lower().rstrip(".")
    address = _address(host)
    for raw in no_proxy.replace(" ", ",").split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        entry, wanted_port = _split_port(entry)
        if wanted_port is not None and wanted_port != port:
            continue
        if address is not None:
            if _address_matches(address, entry):
                return True
            continue
        name = entry.removeprefix("*").lstrip(".").rstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [::1]:8080
        closing = entry.find("]")
        rest = entry[closing + 1:]
        return entry[1:closing], int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        if port.isdigit():
            return name, int(port)
    return entry, None


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _address_matches(address: ipaddress.IPv4Address | ipaddress.IPv6Address, entry: str) -> bool:
    try:
        return address in ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False


def _with_scheme(proxy: str) -> str:
    """A proxy written without a scheme (``proxy.corp:3128``) is an HTTP proxy, as curl reads it."""
    return proxy if "://" in proxy else f"http://{proxy}"


@functools.lru_cache(maxsize=32)
def _context(ca_bundle: Path | None, verify: bool, env_bundle: str | None, cert_file: str | None,
             cert_dir: str | None) -> ssl.SSLContext:
    if cert_file or cert_dir:  # in place of the system's store, as OpenSSL reads the two variables
        try:
            context = ssl.create_default_context(cafile=cert_file, capath=cert_dir)
        except (OSError, ssl.SSLError) as exc:
            variable = "SSL_CERT_FILE" if cert_file else "SSL_CERT_DIR"
            raise ConfigError(f"{variable} {cert_file or cert_dir}: cannot read certificates from it "
                              f"({getattr(exc, 'strerror', None) or exc})") from None
    else:
        context = ssl.create_default_context()  # the system's store
    for where, source in ((env_bundle, CA_VARIABLE), (ca_bundle, "ca_bundle")):
        if where is None:
            continue
        path = Path(where)
        try:
            if path.is_dir():
                context.load_verify_locations(capath=str(path))
            else:
                context.load_verify_locations(cafile=str(path))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{source} {path}: cannot read certificates from it "
                              f"({getattr(exc, 'strerror', None) or exc})") from None
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


# --- what to say when the network refuses ---------------------------------------------------------

_VERIFY_CODES = {
    9: "the certificate is not valid yet",
    10: "the certificate has expired",
    18: "the certificate is self-signed and not trusted here",
    19: "the certificate chain ends in a self-signed certificate that is not trusted here",
    20: "the certificate is signed by an authority this machine does not trust",
    21: "the certificate is signed by an authority this machine does not trust",
    23: "the certificate has been revoked",
    62: "the certificate is not for this host name",
}
_TRUST_HINT = ("set SSL_CERT_FILE (or REQUESTS_CA_BUNDLE) to the certificate of the authority that signed "
               "it, or the judge's ca_bundle:")


def network_problem(error: BaseException, *, endpoint: str, proxy: str | None) -> str | None:
    """What failed, when ``error`` (or an exception it was raised from) is the network refusing
    for a reason no retry mends: a certificate that cannot be verified, a TLS handshake the
    server refuses, a proxy that cannot be reached or wants other credentials. None for anything
    else (a timeout, a reset, a 5xx: transient). ``endpoint`` and ``proxy`` are labels for the
    message, their credentials already redacted."""
    chain = _chain(error)
    for current in chain:
        # (aiohttp's ClientConnectorCertificateError is one too, without the codes: its cause has them)
        if isinstance(current, ssl.SSLCertVerificationError) and hasattr(current, "verify_code"):
            code = current.verify_code or 0
            what = _VERIFY_CODES.get(code) or (current.verify_message or "it cannot be verified")
            hint = {62: "use the host name the certificate names in api_base (or ask for a certificate that "
                        "covers this one)",
                    10: "the server needs a new certificate; verify: false would skip every check"}.get(code, _TRUST_HINT)
            return f"the TLS certificate of {endpoint} cannot be verified: {what}; {hint}"
    for current in chain:
        status = getattr(current, "status", None)
        if type(current).__name__ == "ClientHttpProxyError" and status == 407:
            return (f"the proxy {proxy or '(from the environment)'} refused our credentials (407 Proxy Authentication "
                    f"Required): put user:password in the proxy URL (HTTPS_PROXY, or the judge's proxy:)")
        if type(current).__name__ == "ClientHttpProxyError":
            return f"the proxy {proxy or '(from the environment)'} refused to connect to {endpoint} (HTTP {status})"
        if type(current).__name__ == "ClientProxyConnectionError":
            return (f"the proxy {proxy or '(from the environment)'} cannot be reached "
                    f"({_reason(current)}): check HTTPS_PROXY / HTTP_PROXY, or NO_PROXY for {endpoint}")
        if proxy is not None and type(current).__name__ in ("ConnectionTimeoutError", "ConnectTimeout"):
            return (f"the proxy {proxy} cannot be reached (timed out: no connection through it, it drops what it "
                    f"is sent): check HTTPS_PROXY / HTTP_PROXY, or NO_PROXY for {endpoint}")
    for current in chain:
        if isinstance(current, ssl.SSLError) and not isinstance(current, ssl.SSLZeroReturnError | ssl.SSLEOFError):
            detail = getattr(current, "reason", None) or current.strerror or current
            return (f"the TLS handshake with {endpoint} failed ({detail}): "
                    "is it an https server, and one this Python's TLS can speak to?")
    return _text_problem(" ".join(str(current) for current in chain), endpoint=endpoint, proxy=proxy)


_TEXT_VERIFY = {"has expired": 10, "not yet valid": 9, "hostname mismatch": 62, "ip address mismatch": 62,
                "self-signed certificate in certificate chain": 19, "self-signed certificate": 18,
                "self signed certificate": 18, "unable to get local issuer": 20, "unable to verify the first": 21,
                "revoked": 23}


def _text_problem(text: str, *, endpoint: str, proxy: str | None) -> str | None:
    """The same reading from an error's text, for clients that wrap the failure in an exception of
    their own and keep only its words (litellm: ``APIConnectionError: ... [SSL:
    CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate``;
    httpx: ``407 Proxy Authentication Required``)."""
    lowered = text.lower()
    if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered:
        code = next((code for marker, code in _TEXT_VERIFY.items() if marker in lowered), 0)
        fake = ssl.SSLCertVerificationError()
        fake.verify_code, fake.verify_message = code, "it cannot be verified"
        return network_problem(fake, endpoint=endpoint, proxy=proxy)
    if "407" in lowered and "proxy authentication required" in lowered:
        return (f"the proxy {proxy or '(from the environment)'} refused our credentials (407 Proxy Authentication "
                f"Required): put user:password in the proxy URL (HTTPS_PROXY)")
    return None


def _chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        for attribute in ("certificate_error", "os_error"):  # aiohttp keeps the cause here
            inner = getattr(current, attribute, None)
            if isinstance(inner, BaseException) and all(inner is not seen for seen in chain):
                chain.append(inner)
        current = current.__cause__ or current.__context__
    return chain


def _reason(error: BaseException) -> str:
    import errno

    inner = getattr(error, "os_error", None) or error.__cause__ or error
    if isinstance(inner, ConnectionRefusedError) or getattr(inner, "errno", None) == errno.ECONNREFUSED:
        return "connection refused"
    return getattr(inner, "strerror", None) or type(inner).__name__
