"""Real networks (issue 32): 20-item runs through a forward proxy and a TLS front on 127.0.0.1, on
both transports and the batch API client; nothing mocked. Each case failed on 0.1's engine,
whose own HTTP client read no proxy and whose certificate failures were retried as outages."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from tests.harness import TEST_KEY, TEST_KEY_ENV, make_job, read_lines
from tests.netfronts import ForwardProxy, tls_front

trustme = pytest.importorskip("trustme", reason="trustme is not installed (the dev extra)")

TRANSPORTS = ["auto", "litellm"]
pytestmark = pytest.mark.usefixtures("clean_network")  # tests/providers/conftest.py


@pytest.fixture(scope="module")
def ca() -> Any:
    return trustme.CA()


def _server_context(ca: Any, *names: str, **when: dt.datetime) -> Any:
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names, **when).configure_cert(context)
    return context


def _ca_file(ca: Any, tmp_path: Path) -> Path:
    path = tmp_path / "company-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


def _job(tmp_path: Path, server: FakeServer, **kwargs: Any) -> Any:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return make_job(tmp_path, server, **kwargs)


def _outcomes(job: Any) -> list[dict[str, Any]]:
    return read_lines(job.only_run() / "outcomes.jsonl")


def _run(job: Any) -> int:
    return main(["run", str(job.config), "--no-live"])


def _every_file_text(run: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in run.rglob("*") if p.is_file()
                     and p.suffix in (".json", ".jsonl", ".sqlite", ""))


# --- proxies -----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_request_goes_through_the_environments_proxy(tmp_path: Path, server: FakeServer, transport: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        job = make_job(tmp_path, server, judge={"transport": transport})
        assert _run(job) == 0
        outcomes = _outcomes(job)
        assert len(outcomes) == 20 and all(o["status"] == "scored" for o in outcomes)
        chats = [e for e in proxy.log if e.method == "POST" and e.target.endswith("/chat/completions")]
        assert len(chats) == server.stats()["requests_total"] >= 20


@pytest.mark.parametrize(("transport", "no_proxy"), [
    ("auto", "example.org,127.0.0.0/8"),  # a network (CIDR): judge-engine's own client reads it
    ("auto", "example.org, 127.0.0.1"),
    ("litellm", "example.org,127.0.0.1"),  # httpx (under litellm) reads hosts and addresses, no CIDR
])
def test_no_proxy_sends_a_matching_endpoint_direct(tmp_path: Path, server: FakeServer, transport: str, no_proxy: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        job = make_job(tmp_path, server, judge={"transport": transport})
        assert _run(job) == 0
        assert len(_outcomes(job)) == 20
        assert proxy.log == []


def test_all_proxy_and_a_judges_own_proxy_are_taken(tmp_path: Path, server: FakeServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as everyones, ForwardProxy() as its_own:
        monkeypatch.setenv("ALL_PROXY", everyones.url)
        job = _job(tmp_path / "all", server)
        assert _run(job) == 0
        assert len([e for e in everyones.log if e.method == "POST"]) >= 20
        job = _job(tmp_path / "own", server, judge={"proxy": its_own.url})
        before = len(everyones.log)
        assert _run(job) == 0
        assert len([e for e in its_own.log if e.method == "POST"]) >= 20 and len(everyones.log) == before
        direct = _job(tmp_path / "direct", server, judge={"proxy": "direct"})
        assert _run(direct) == 0 and len(everyones.log) == before


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_proxy_that_wants_credentials_gets_them_and_the_password_is_in_no_file(
        tmp_path: Path, server: FakeServer, transport: str, monkeypatch: pytest.MonkeyPatch) -> None:
    password = "pr0xy-s3cret-4421"
    with ForwardProxy(credentials=f"judge:{password}") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        job = make_job(tmp_path, server, judge={"transport": transport})
        assert _run(job) == 0
        assert len(_outcomes(job)) == 20
        posts = [e for e in proxy.log if e.method == "POST"]
        assert len(posts) >= 20 and all(e.authorization for e in posts)  # every request, with the credentials
        assert password not in _every_file_text(job.only_run())
        cache = tmp_path / "cache"
        assert not cache.exists() or password.encode() not in b"".join(p.read_bytes() for p in cache.rglob("*") if p.is_file())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_proxy_that_refuses_our_credentials_stops_the_judge_at_once_and_names_it(
        tmp_path: Path, server: FakeServer, transport: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with ForwardProxy(credentials="judge:right") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("judge:right", "judge:wrong"))
        job = make_job(tmp_path, server, judge={"transport": transport})
        assert _run(job) == 1
        said = " ".join(capsys.readouterr().err.split())
        assert "proxy" in said and "407" in said and "wrong" not in said
        assert "Traceback" not in said
        assert len(proxy.log) <= 16  # the requests in flight when the first answer came, not a retry storm
        assert [o for o in read_lines(job.only_run() / "outcomes.jsonl") if o["status"] == "scored"] == [] \
            if (job.only_run() / "outcomes.jsonl").exists() else True


# --- TLS -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_endpoint_behind_a_private_ca_named_by_ssl_cert_file(tmp_path: Path, server: FakeServer, ca: Any,
                                                               transport: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with tls_front(server.base_url, _server_context(ca, "localhost", "127.0.0.1")) as front:
        monkeypatch.setenv("SSL_CERT_FILE", str(_ca_file(ca, tmp_path)))
        job = make_job(tmp_path, server, judge={"transport": transport,
                                                "api_base": f"https://localhost:{front.port}/v1"})
        assert _run(job) == 0
        assert len(_outcomes(job)) == 20 and front.handshakes >= 1


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_requests_ca_bundle_is_trusted_as_requests_users_expect(tmp_path: Path, server: FakeServer, ca: Any,
                                                                transport: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with tls_front(server.base_url, _server_context(ca, "localhost")) as front:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(_ca_file(ca, tmp_path)))
        job = make_job(tmp_path, server, judge={"transport": transport, "api_base": f"https://localhost:{front.port}/v1"})
        # A process of its own, as a user's: litellm's clients take their certificates once, when it loads.
        done = subprocess.run([sys.executable, "-m", "judge_engine", "run", str(job.config), "--no-live"],
                              capture_output=True, text=True, timeout=120, env={**os.environ, TEST_KEY_ENV: TEST_KEY})
        assert done.returncode == 0, done.stderr[-2000:]
        assert len(_outcomes(job)) == 20


def test_requests_ca_bundle_and_a_judges_ca_bundle_are_trusted_beside_the_system_store(
        tmp_path: Path, server: FakeServer, ca: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with tls_front(server.base_url, _server_context(ca, "localhost")) as front:
        api_base = f"https://localhost:{front.port}/v1"
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(_ca_file(ca, tmp_path)))
        assert _run(_job(tmp_path / "env", server, judge={"api_base": api_base})) == 0
        monkeypatch.delenv("REQUESTS_CA_BUNDLE")
        (tmp_path / "own").mkdir(exist_ok=True)
        ca.cert_pem.write_to_path(str(tmp_path / "own" / "ca.pem"))
        job = _job(tmp_path / "own", server, judge={"api_base": api_base, "ca_bundle": "ca.pem"})  # beside the config
        assert _run(job) == 0 and len(_outcomes(job)) == 20


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_https_through_the_proxy_uses_connect(tmp_path: Path, server: FakeServer, ca: Any, transport: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with tls_front(server.base_url, _server_context(ca, "localhost")) as front, ForwardProxy() as proxy:
        monkeypatch.setenv("SSL_CERT_FILE", str(_ca_file(ca, tmp_path)))
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        job = make_job(tmp_path, server, judge={"transport": transport,
                                                "api_base": f"https://localhost:{front.port}/v1"})
        assert _run(job) == 0
        assert len(_outcomes(job)) == 20
        assert [e.target for e in proxy.log if e.method == "CONNECT"] and \
            all(e.method == "CONNECT" and e.target == f"localhost:{front.port}" for e in proxy.log)


@pytest.mark.parametrize(("names", "when", "said"), [
    (("localhost",), {}, "signed by an authority this machine does not trust"),
    (("example.test",), {}, "not for this host name"),
    (("localhost",), {"not_before": dt.datetime(2020, 1, 1), "not_after": dt.datetime(2020, 6, 1)}, "has expired"),
], ids=["unknown-ca", "wrong-host", "expired"])
def test_a_certificate_that_cannot_be_verified_stops_the_judge_at_once_and_says_why(
        tmp_path: Path, server: FakeServer, ca: Any, names: tuple[str, ...], when: dict[str, dt.datetime], said: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with tls_front(server.base_url, _server_context(ca, *names, **when)) as front:
        if said != "signed by an authority this machine does not trust":
            monkeypatch.setenv("SSL_CERT_FILE", str(_ca_file(ca, tmp_path)))
        job = make_job(tmp_path, server, judge={"api_base": f"https://localhost:{front.port}/v1"})
        started = time.monotonic()
        assert _run(job) == 1
        took = time.monotonic() - started
        out = " ".join(capsys.readouterr().err.split())  # as said, whatever the terminal's width wrapped
        assert "certificate" in out and said in out and f"localhost:{front.port}" in out
        assert "cannot be verified" in out and "Traceback" not in out
        assert took < 20  # no retries: 0.1 spent ~26 s retrying it as an outage
        assert front.connections <= 16  # the first requests in flight, none tried again (0.1: every task's retries)
        outcomes = job.only_run() / "outcomes.jsonl"
        assert not outcomes.exists() or not [o for o in read_lines(outcomes) if o["status"] == "scored"]


def test_the_litellm_transport_stops_on_an_unverifiable_certificate_too(
        tmp_path: Path, server: FakeServer, ca: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with tls_front(server.base_url, _server_context(ca, "localhost")) as front:
        job = make_job(tmp_path, server, judge={"transport": "litellm", "api_base": f"https://localhost:{front.port}/v1"})
        assert _run(job) == 1
        out = " ".join(capsys.readouterr().err.split())
        assert "certificate" in out and "SSL_CERT_FILE" in out and "Traceback" not in out


def test_verify_false_is_taken_and_warned_at_the_start_of_every_run(
        tmp_path: Path, server: FakeServer, ca: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with tls_front(server.base_url, _server_context(ca, "localhost")) as front:
        job = make_job(tmp_path, server, judge={"api_base": f"https://localhost:{front.port}/v1", "verify": False})
        assert _run(job) == 0
        assert "verify: false" in capsys.readouterr().err
        assert main(["run", str(job.config), "--no-live"]) == 0  # resumed (nothing left): said again
        assert "verify: false" in capsys.readouterr().err


def test_a_judges_own_network_keys_are_refused_where_litellm_sends(tmp_path: Path, server: FakeServer,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, server, judge={"transport": "litellm", "proxy": "http://127.0.0.1:9"})
    assert _run(job) == 2
    out = " ".join(capsys.readouterr().err.split())
    assert "judges[mqm].proxy" in out and "HTTPS_PROXY" in out


def test_an_unreadable_ca_bundle_is_bad_input(tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    assert _run(make_job(tmp_path, server)) == 2
    assert "REQUESTS_CA_BUNDLE" in capsys.readouterr().err


# --- the batch API client --------------------------------------------------------------------------


def test_batch_calls_go_through_the_proxy_and_over_tls(tmp_path: Path, ca: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=0.2))) as server, \
            tls_front(server.base_url, _server_context(ca, "localhost")) as front, ForwardProxy() as proxy:
        monkeypatch.setenv("SSL_CERT_FILE", str(_ca_file(ca, tmp_path)))
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        job = make_job(tmp_path, server, items=8, judge={"api_base": f"https://localhost:{front.port}/v1",
                                                         "mode": "batch", "batch": {"poll_interval_s": 0.2}})
        assert _run(job) == 0
        assert len(_outcomes(job)) == 8
        assert proxy.log and all(e.method == "CONNECT" for e in proxy.log)
        assert server.stats()["batches"] >= 1


# --- plan --check-endpoints ------------------------------------------------------------------------


def test_plan_checks_every_endpoint_sending_no_prompt(tmp_path: Path, server: FakeServer, ca: Any,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with tls_front(server.base_url, _server_context(ca, "localhost")) as front:
        good = {"name": "good", "model": "openai/gpt-4o-mini", "api_base": server.base_url, "api_key_env": TEST_KEY_ENV,
                "protocol": "gemba-mqm"}
        bad = {**good, "name": "bad", "api_base": f"https://localhost:{front.port}/v1"}
        job = make_job(tmp_path, server, judges=[good, bad])
        before = server.stats()["requests_total"]
        assert main(["plan", str(job.config), "--check-endpoints"]) == 1
        out = " ".join(capsys.readouterr().out.split())
        assert "judges[good]" in out and "judges[bad]" in out and "certificate" in out
        assert server.stats()["requests_total"] == before
        monkeypatch.setenv("SSL_CERT_FILE", str(_ca_file(ca, tmp_path)))
        assert main(["plan", str(job.config), "--check-endpoints"]) == 0
