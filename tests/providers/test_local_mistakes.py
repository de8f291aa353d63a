"""Our own mistakes are never the provider's verdict: settings the clients cannot use are refused
by the config (exit 2, the key named, nothing sent), and a failure on our side before a request
leaves is neither a call nor an answer (the judge stops with its cause, nothing is recorded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import judge_engine
from judge_engine.cli import main
from judge_engine.errors import ConfigError
from judge_engine.fake import FakeServer
from judge_engine.providers.base import refused_before_sending
from tests.harness import TEST_KEY_ENV, TRANSPORTS, make_job, read_lines


@pytest.mark.parametrize(
    ("judge", "expected"),
    [
        ({"timeout_s": float("inf")}, "judges[mqm].timeout_s"),
        ({"timeout_s": float("nan")}, "judges[mqm].timeout_s"),
        ({"timeout_s": 0}, "judges[mqm].timeout_s"),
        ({"timeout_s": 1e12}, "judges[mqm].timeout_s"),
        ({"timeout_s": 1e-300}, "judges[mqm].timeout_s: Input should be greater than or equal to 0.1"),
        ({"params": {"extra_body": "seed"}}, "judges[mqm].params: extra_body: must be a mapping"),
        ({"params": {"extra_headers": [1]}}, "judges[mqm].params: extra_headers: must be a mapping"),
        ({"api_base": "file:///etc/passwd"}, "judges[mqm].api_base: must start with http:// or https://"),
        ({"api_base": "ftp://127.0.0.1/v1"}, "judges[mqm].api_base: must start with http:// or https://"),
        ({"api_base": "http:///v1"}, "judges[mqm].api_base: names no host"),
        ({"api_base": "http://127.0.0.1:99999/v1"}, "judges[mqm].api_base: not a URL"),
        ({"api_base": "http://127.0.0.1:8000/v1?api-key=hunter2hunter2"}, "judges[mqm].api_base: a base URL cannot carry a query"),
        ({"deployments": [{"api_base": "unix:///tmp/sock"}]}, "judges[mqm].deployments[0].api_base: must start with"),
    ],
)
def test_settings_no_client_can_use_exit_2_naming_the_key(tmp_path: Path, fake_server: FakeServer, capsys: Any,
                                                          judge: dict[str, Any], expected: str) -> None:
    job = make_job(tmp_path, fake_server, items=3, judge=judge)
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert "hunter2" not in err  # a refused URL is never echoed: it may hold a secret
    assert fake_server.stats()["requests_total"] == 0
    assert not job.runs.exists()


def test_url_credentials_beside_a_key_or_through_litellm_exit_2(tmp_path: Path, fake_server: FakeServer,
                                                                  capsys: Any) -> None:
    with_credentials = fake_server.base_url.replace("http://", "http://proxy-user:hunter2hunter2@")
    job = make_job(tmp_path, fake_server, items=3, judge={"api_base": with_credentials})  # and api_key_env
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert "judges[mqm]: its api_base carries credentials" in err and "keep one" in err
    job = make_job(tmp_path, fake_server, items=3, judge={"api_base": with_credentials, "api_key_env": None,
                                                          "transport": "litellm"})
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert "judges[mqm].api_base: credentials in the URL" in err and "litellm" in err
    assert "hunter2" not in err
    job = make_job(tmp_path, fake_server, items=3)
    with pytest.raises(ConfigError, match="the api_base override: a URL with credentials") as raised:
        judge_engine.run(job.config, api_base=with_credentials)  # run.json records the overrides
    assert "hunter2" not in str(raised.value)
    assert fake_server.stats()["requests_total"] == 0
    assert not job.runs.exists()


def test_url_credentials_are_sent_as_basic_auth(tmp_path: Path, fake_server: FakeServer) -> None:
    """What a user behind a basic-auth proxy expects: ``user:password@`` works, and is recorded
    nowhere."""
    fake_server.update(require_api_key="hunter2hunter2")  # basic auth with this password passes
    with_credentials = fake_server.base_url.replace("http://", "http://proxy-user:hunter2hunter2@")
    job = make_job(tmp_path, fake_server, items=4, judge={"api_base": with_credentials, "api_key_env": None})
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    assert {o["status"] for o in read_lines(run / "outcomes.jsonl")} == {"scored"}
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["config"]["judges"][0]["api_base"] == fake_server.base_url.replace("http://", "http://[REDACTED]@")
    for path in run.rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes() and b"proxy-user" not in path.read_bytes(), path


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_request_our_client_refuses_is_not_a_call_nor_a_verdict(transport: str, tmp_path: Path,
                                                                  fake_server: FakeServer, capsys: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A key read with a line break (a ``.env`` file with CRLF endings): the HTTP client refuses
    the header before anything is sent. Before, the task was recorded ``provider_rejected`` (or,
    under litellm, retried to ``transport_exhausted``) and counted as calls."""
    monkeypatch.setenv(TEST_KEY_ENV, "fake-test-key-0000\r\nX-Injected: 1")
    job = make_job(tmp_path, fake_server, items=6, judge={"transport": transport, "retries": {"transport": 2}})
    assert main(["run", str(job.config), "--no-live"]) == 1
    err = capsys.readouterr().err
    assert "judges[mqm] (openai/gpt-4o-mini) stopped" in err and "nothing was sent" in err
    assert "fake-test-key" not in err
    run = job.only_run()
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "failed" and "nothing was sent" in manifest["failures"]["mqm"]
    assert manifest["spend"]["total"]["calls"] == 0
    assert read_lines(run / "outcomes.jsonl") == []  # undone, for resume: no provider_rejected
    assert not (run / "transcripts.jsonl").exists() or read_lines(run / "transcripts.jsonl") == []
    assert fake_server.stats()["requests_total"] == 0
    monkeypatch.setenv(TEST_KEY_ENV, "fake-test-key-0000")  # the cause fixed: resume finishes the run
    assert main(["resume", str(run), "--no-live"]) == 0
    assert len(read_lines(run / "outcomes.jsonl")) == 6


def test_only_a_refusal_at_the_root_of_the_chain_is_local() -> None:
    """litellm wraps its client's refusal to send as a server error; the cause chain tells."""
    def chain(*errors: BaseException) -> BaseException:
        for inner, outer in zip(errors, errors[1:], strict=False):
            outer.__context__ = inner
        return errors[-1]

    assert refused_before_sending(chain(ValueError("Forbidden control character"), RuntimeError("InternalServerError")))
    assert refused_before_sending(chain(OverflowError("cannot convert float infinity"), RuntimeError("wrapped")))
    assert not refused_before_sending(chain(json.JSONDecodeError("bad", "x", 0), RuntimeError("an answer, unread")))
    assert not refused_before_sending(chain(ValueError("parsing"), ConnectionResetError(), RuntimeError("wrapped")))
    assert not refused_before_sending(RuntimeError("anything else"))
