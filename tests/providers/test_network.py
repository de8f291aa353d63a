"""Which proxy a request leaves through and which certificates it trusts
(``judge_engine/providers/network.py``), read as curl, requests and httpx read the same variables."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from judge_engine.errors import ConfigError
from judge_engine.providers.network import Network, bypassed, env_proxy_for, network_problem

P = "http://proxy.corp:3128"


@pytest.mark.parametrize(("env", "url", "expected"), [
    ({"HTTPS_PROXY": P}, "https://api.openai.com/v1", P),
    ({"https_proxy": P, "HTTPS_PROXY": "http://other:1"}, "https://api.openai.com/v1", P),  # lower case first
    ({"HTTP_PROXY": P}, "https://api.openai.com/v1", None),  # an http proxy variable is for http URLs
    ({"HTTP_PROXY": P}, "http://127.0.0.1:8000/v1", P),  # loopback too: nothing goes direct on its own
    ({"ALL_PROXY": P}, "https://api.anthropic.com", P),
    ({"all_proxy": P, "HTTPS_PROXY": "http://https-one:1"}, "https://x.example", "http://https-one:1"),
    ({"HTTPS_PROXY": "proxy.corp:3128"}, "https://x.example", P),  # no scheme: an http proxy
    ({"HTTPS_PROXY": "  "}, "https://x.example", None),  # blank: not set
    ({"HTTP_PROXY": P, "REQUEST_METHOD": "GET"}, "http://x.example", None),  # httpoxy: not under CGI
    ({"http_proxy": P, "REQUEST_METHOD": "GET"}, "http://x.example", P),
    ({}, "https://x.example", None),
])
def test_the_environments_proxy(env: dict[str, str], url: str, expected: str | None) -> None:
    assert env_proxy_for(url, env) == expected


@pytest.mark.parametrize(("host", "port", "no_proxy", "direct"), [
    ("api.openai.com", 443, "*", True),
    ("api.openai.com", 443, "openai.com", True),  # a domain covers its subdomains
    ("api.openai.com", 443, ".openai.com", True),
    ("api.openai.com", 443, "*.openai.com", True),
    ("openai.com", 443, ".openai.com", True),
    ("notopenai.com", 443, "openai.com", False),  # a suffix that is not a domain boundary
    ("API.OpenAI.com", 443, "api.openai.com", True),  # names compare without case
    ("api.openai.com", 443, "example.org, api.openai.com", True),  # spaces and commas
    ("api.openai.com", 443, "example.org api.openai.com", True),
    ("10.1.2.3", 80, "10.0.0.0/8", True),  # networks in CIDR
    ("10.1.2.3", 80, "192.168.0.0/16", False),
    ("127.0.0.1", 8000, "127.0.0.1", True),
    ("127.0.0.1", 8000, "127.0.0.1:8000", True),  # with a port: only that port
    ("127.0.0.1", 9000, "127.0.0.1:8000", False),
    ("::1", 8000, "::1", True),
    ("::1", 8000, "[::1]:8000", True),
    ("fd00::5", 443, "fd00::/8", True),
    ("localhost", 80, "", False),
    ("localhost", 80, "127.0.0.1", False),  # a name is not its address
])
def test_no_proxy(host: str, port: int, no_proxy: str, direct: bool) -> None:
    assert bypassed(host, port, no_proxy) is direct


def test_no_proxy_in_either_case_and_a_judges_own_proxy_and_direct() -> None:
    env = {"HTTPS_PROXY": P, "no_proxy": "internal.corp"}
    assert env_proxy_for("https://llm.internal.corp/v1", env) is None
    assert env_proxy_for("https://llm.internal.corp/v1", {"HTTPS_PROXY": P, "NO_PROXY": "internal.corp"}) is None
    assert Network(environ=env).proxy_for("https://api.openai.com/v1") == P
    own = Network(proxy="http://user:pw@judges-proxy:8080", environ=env)
    assert own.proxy_for("https://llm.internal.corp/v1") == "http://user:pw@judges-proxy:8080"  # its own: always
    assert own.proxy_label("https://x.example") == "http://[REDACTED]@judges-proxy:8080"
    assert Network(proxy="direct", environ=env).proxy_for("https://api.openai.com/v1") is None


def test_certificates_read_from_the_environment_and_the_judge(tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    system = Network(environ={}).ssl_context()
    extra = Network(environ={"REQUESTS_CA_BUNDLE": str(bundle)}).ssl_context()
    own = Network(ca_bundle=bundle, environ={}).ssl_context()
    assert extra.cert_store_stats()["x509_ca"] == system.cert_store_stats()["x509_ca"] + 1  # beside the system's
    assert own.cert_store_stats()["x509_ca"] == system.cert_store_stats()["x509_ca"] + 1
    only = Network(environ={"SSL_CERT_FILE": str(bundle)}).ssl_context()
    assert only.cert_store_stats()["x509_ca"] == 1  # in place of the system's store, as OpenSSL reads it
    off = Network(verify=False, environ={}).ssl_context()
    assert off.verify_mode == ssl.CERT_NONE and not off.check_hostname
    assert system.verify_mode == ssl.CERT_REQUIRED and system.check_hostname


@pytest.mark.parametrize(("network", "names"), [
    (Network(ca_bundle=Path("/nonexistent/ca.pem"), environ={}), "ca_bundle /nonexistent/ca.pem"),
    (Network(environ={"REQUESTS_CA_BUNDLE": "/nonexistent/bundle.pem"}), "REQUESTS_CA_BUNDLE /nonexistent/bundle.pem"),
    (Network(environ={"SSL_CERT_FILE": "/nonexistent/cert.pem"}), "SSL_CERT_FILE /nonexistent/cert.pem"),
])
def test_certificates_that_cannot_be_read_are_bad_input_naming_where(network: Network, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        network.ssl_context()


def _verify_error(code: int, message: str) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    error.verify_code, error.verify_message = code, message
    return error


@pytest.mark.parametrize(("error", "said"), [
    (_verify_error(20, "unable to get local issuer certificate"), "signed by an authority this machine does not trust"),
    (_verify_error(62, "Hostname mismatch"), "not for this host name"),
    (_verify_error(10, "certificate has expired"), "has expired"),
    (RuntimeError("litellm.APIConnectionError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                  "certificate has expired (_ssl.c:1006)"), "has expired"),  # only its words left
    (ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), "TLS handshake"),
    (RuntimeError("httpx.ProxyError: 407 Proxy Authentication Required"), "refused our credentials"),
])
def test_what_no_retry_mends_is_said_plainly(error: BaseException, said: str) -> None:
    wrapped = ConnectionError("the client's own wrapper")
    wrapped.__cause__ = error
    for raised in (error, wrapped):
        problem = network_problem(raised, endpoint="https://llm.corp/v1", proxy="http://[REDACTED]@proxy:3128")
        assert problem is not None and said in problem


def test_transient_failures_are_no_problem_of_the_network() -> None:
    for error in (TimeoutError(), ConnectionResetError(104, "reset"), ConnectionRefusedError(111, "refused"),
                  ssl.SSLEOFError(8, "EOF occurred in violation of protocol")):
        assert network_problem(error, endpoint="https://x", proxy=None) is None
