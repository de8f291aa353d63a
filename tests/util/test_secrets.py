"""No secret in anything a run writes or shows (issue 24, point 1).

A distinct secret is planted at every door one can come in by: an environment variable named by
``api_key_env``, a config ``api_key`` (OpenAI's bearer and Anthropic's ``x-api-key``), an
``api_base``'s user-info (sent as basic auth), an ``api_base``'s query (refused), a proxy's password
(in ``HTTP_PROXY`` and in a judge's ``proxy:``, sent as ``Proxy-Authorization``), and a hostile
gateway (:attr:`FakeConfig.echo_credentials`) that echoes the credentials it received in its
response headers, a kept header (``x-request-id``) included, and in its error bodies. The runs go
online and in batch mode, with failing requests (500s, failed batch requests, a 401 that stops a
judge). Then every file the runs wrote (run directories, the cache, exports, a rescore), every
command's output and every JSON page of ``judge-engine view`` is searched for every secret.

Each piece of the redaction is also unit-tested at the end: :mod:`judge_engine.util.redaction` is the
one home of it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.util.redaction import (
    MARK,
    kept_headers,
    redact,
    redact_url,
    url_credentials,
    url_secrets,
)
from tests.harness import read_lines, write_items
from tests.netfronts import ForwardProxy

ENV_VAR = "JUDGE_ENGINE_PLANTED_KEY"
# Built here, and shaped like no API key: only redaction by what they are can catch them.
ENV_SECRET = "plantedEnv" + "Value-41c7e2"
CONFIG_SECRET = "plantedConfig" + "Value-9b02fd"
ANTHROPIC_SECRET = "plantedXApi" + "Value-5d18c3"
URL_USER = "planted" + "User-77ab"
URL_PASSWORD = "plantedUrl" + "Password-e40f19"
QUERY_SECRET = "plantedQuery" + "Value-2c6b8a"
WRONG_SECRET = "plantedWrong" + "Value-0f3d7e"
BASIC_TOKEN = base64.b64encode(f"{URL_USER}:{URL_PASSWORD}".encode()).decode()
PROXY_ENV_PASSWORD = "plantedProxyEnv" + "Password-6e21aa"
PROXY_CONFIG_PASSWORD = "plantedProxyConfig" + "Password-83c0d4"
SECRETS = {"environment": ENV_SECRET, "config api_key": CONFIG_SECRET, "config api_key (x-api-key)": ANTHROPIC_SECRET,
           "url user": URL_USER, "url password": URL_PASSWORD, "basic-auth token": BASIC_TOKEN,
           "url query": QUERY_SECRET, "a wrong key": WRONG_SECRET, "the environment's proxy password": PROXY_ENV_PASSWORD,
           "a judge's proxy password": PROXY_CONFIG_PASSWORD,
           "a proxy's basic token": base64.b64encode(f"judge:{PROXY_CONFIG_PASSWORD}".encode()).decode()}
FIELDS = {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang"}


def _judge(name: str, server: FakeServer, temperature: float, **extra: Any) -> dict[str, Any]:
    """A GEMBA-MQM judge on the fake server (one temperature each, so no two share cache keys)."""
    return {"name": name, "model": "openai/gpt-4o-mini", "api_base": server.base_url, "protocol": "gemba-mqm",
            "temperatures": [temperature], "max_tokens": 300, "timeout_s": 10,
            "limits": {"concurrency": 4}, "retries": {"transport": 1, "reasks": 1, "backoff_max_s": 0.02}, **extra}


def _write_job(folder: Path, judges: list[dict[str, Any]], *, items: int = 6) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_items(folder / "items.jsonl", items)
    config = {"dataset": {"path": "items.jsonl", "fields": FIELDS}, "judges": judges, "output": {"dir": "runs"},
              "cache": {"dir": "cache"}}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _with_user_info(url: str) -> str:
    return url.replace("http://", f"http://{URL_USER}:{URL_PASSWORD}@")


class Shown:
    """Everything the commands printed and the viewer served, by where it came from."""

    def __init__(self, capsys: Any) -> None:
        self.capsys = capsys
        self.texts: dict[str, str] = {}

    def command(self, *argv: str, expect: set[int] | None = None) -> int:
        code = main(list(argv))
        out, err = self.capsys.readouterr()
        self.texts[f"judge-engine {' '.join(argv)}"] = out + err
        assert expect is None or code in expect, (argv, code, err[-2000:])
        return code


def _batch_judges(server: FakeServer) -> list[dict[str, Any]]:
    batch = {"poll_interval_s": 0.05, "fallback": "batch", "max_rounds": 2}
    return [
        _judge("batch-env", server, 0.7, mode="batch", batch=batch, api_key_env=ENV_VAR),
        _judge("batch-url", server, 0.9, mode="batch", batch=batch, api_base=_with_user_info(server.base_url)),
        _judge("batch-anthropic", server, 1.1, mode="batch", batch=batch, model="anthropic/claude-haiku-4-5",
               api_base=server.url, api_key=ANTHROPIC_SECRET),
    ]


@pytest.mark.slow
def test_no_planted_secret_reaches_a_file_an_output_or_a_page(tmp_path: Path, capsys: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, ENV_SECRET)
    shown = Shown(capsys)
    fake = FakeConfig(echo_credentials=True, error_500_rate=0.3, seed=5,
                      batch=FakeBatchConfig(processing_s=0.2, failure_rate=0.3))
    with FakeServer(fake) as server, ForwardProxy(credentials=f"judge:{PROXY_ENV_PASSWORD}") as everyones, \
            ForwardProxy(credentials=f"judge:{PROXY_CONFIG_PASSWORD}") as its_own:
        # Online and batch judges, with 500s (echoing bodies) and failed batch requests, through
        # proxies that want credentials: the environment's, and one judge's own.
        config = _write_job(tmp_path / "job", [
            _judge("env", server, 0.0, api_key_env=ENV_VAR),
            _judge("env-litellm", server, 0.2, api_key_env=ENV_VAR, transport="litellm"),
            _judge("config", server, 0.3, api_key=CONFIG_SECRET, proxy=its_own.url),
            _judge("url", server, 0.5, api_base=_with_user_info(server.base_url)),
            *_batch_judges(server),
        ])
        monkeypatch.setenv("HTTP_PROXY", everyones.url)
        shown.command("plan", str(config), "--check-endpoints", expect={0})
        shown.command("run", str(config), "--no-live", expect={0, 3})
        monkeypatch.delenv("HTTP_PROXY")
        assert len(everyones.log) > 0 and len(its_own.log) > 0
        run = _only_run(tmp_path / "job")
        assert server.stats()["requests_total"] > 0 and server.stats()["batches"] >= 3
        outcomes = read_lines(run / "outcomes.jsonl")
        assert {o["judge"] for o in outcomes} == {"env", "env-litellm", "config", "url", "batch-env", "batch-url",
                                                  "batch-anthropic"}
        errors = [line for line in read_lines(run / "transcripts.jsonl") if line.get("error")]
        assert any("the request carried" in e["error"]["message"] for e in errors)  # the echoes came, redacted

        # A wrong key: the gateway's 401 quotes it back, and the judge stops.
        server.update(require_api_key="the-right-key-0000", error_500_rate=0.0)
        wrong = _write_job(tmp_path / "wrong", [_judge("wrong", server, 0.0, api_key=WRONG_SECRET)])
        shown.command("run", str(wrong), "--no-live", expect={1})
        assert "AuthenticationError" in shown.texts[f"judge-engine run {wrong} --no-live"]
        server.update(require_api_key=None)

        # A key in the URL's query: refused before anything is sent.
        sent = server.stats()["requests_total"]
        query = _write_job(tmp_path / "query", [_judge("query", server, 0.0,
                                                       api_base=f"{server.base_url}?api-key={QUERY_SECRET}")])
        shown.command("plan", str(query), expect={2})
        shown.command("run", str(query), "--no-live", expect={2})
        assert server.stats()["requests_total"] == sent

    wrong_run = _only_run(tmp_path / "wrong")
    for run_dir in (run, wrong_run):
        shown.command("status", str(run_dir), expect={0})
        shown.command("show", str(run_dir), "--limit", "50", expect={0})
        shown.command("show", str(run_dir), "--status", "unscored", "--limit", "50", expect={0})
        shown.command("export", str(run_dir), "--with-items", expect={0})
        shown.command("export", str(run_dir), "--format", "jsonl", "-o", "-", expect={0})
    shown.command("show", str(run), "--item", "item-00001", expect={0})
    shown.command("stats", str(run), "--json", str(tmp_path / "stats.json"), expect={0})
    shown.command("rescore", str(run), "--output", str(tmp_path / "job" / "runs" / "rescored"), expect={0, 3})
    pages = _viewer_pages([run, wrong_run])
    url_judge = [p for where, p in pages.items() if "transcript" in where and '"url"' in p]
    assert url_judge and all(f"http://{MARK}@127.0.0.1" in p for p in url_judge)  # shown, without credentials

    leaks = [f"{name} in {path}" for path in _written(tmp_path) for name, secret in SECRETS.items()
             if secret.encode() in path.read_bytes()]
    leaks += [f"{name} in the output of {where}" for where, text in shown.texts.items()
              for name, secret in SECRETS.items() if secret in text]
    leaks += [f"{name} in the viewer's {where}" for where, text in pages.items()
              for name, secret in SECRETS.items() if secret in text]
    assert leaks == []


def _only_run(job: Path) -> Path:
    (run,) = [p for p in (job / "runs").iterdir() if p.is_dir() and not p.is_symlink()]
    return run


def _written(root: Path) -> list[Path]:
    """Every file the runs, the cache, the exports and the stats wrote (the configs, which hold
    the secrets on purpose, excepted)."""
    return [p for p in root.rglob("*") if p.is_file() and p.name not in ("config.yaml", "items.jsonl")]


def _viewer_pages(runs: list[Path]) -> dict[str, str]:
    """``judge-engine view`` over ``runs``, as another user would start it (without the planted
    variable in its environment: its own redaction of secret-named variables hides nothing
    here), and every JSON page: the overview, the task lists, every item, every transcript."""
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", "view", *map(str, runs)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = _viewer_url(process)
        pages: dict[str, str] = {}

        def get(path: str) -> Any:
            with urllib.request.urlopen(url + path, timeout=30) as response:
                pages[path] = response.read().decode()
            return json.loads(pages[path])

        deadline = time.monotonic() + 60
        while not all(r["derived"]["items"] and r["derived"]["attempts"] for r in get("api/overview")["runs"]):
            assert time.monotonic() < deadline, pages["api/overview"]
            time.sleep(0.1)
        rows = get("api/tasks?size=200")["rows"] + get("api/tasks?size=200&status=unscored")["rows"]
        for item in {r["item_id"] for r in rows}:
            get(f"api/item?id={quote(item)}")
        for row in rows:
            get(f"api/transcript?run={row['run']}&task={row['task_id']}")
        return pages
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _viewer_url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if "http://127.0.0.1:" in line:
            return line[line.index("http://"):].strip()
    raise AssertionError(f"the viewer did not start: {''.join(seen)}")


# --- the pieces -----------------------------------------------------------------------------


def test_redact_url_removes_user_info_and_credential_parameters() -> None:
    assert redact_url("https://user:pa%40ss@proxy.example:8443/v1") == f"https://{MARK}@proxy.example:8443/v1"
    assert redact_url("https://gw.example/v1?api-version=2024-06-01&api-key=abc123&sig=xyz&token=t0k3n") == (
        f"https://gw.example/v1?api-version=2024-06-01&api-key={MARK}&sig={MARK}&token={MARK}")
    assert redact_url("http://host/v1?Subscription-Key=k3y#access_token=zzz") == (
        f"http://host/v1?Subscription-Key={MARK}#access_token={MARK}")
    for plain in ("http://127.0.0.1:8000/v1", "https://api.openai.com/v1", None, ""):
        assert redact_url(plain) == plain  # run ids and cache keys of URLs without credentials stay put


def test_redact_text_catches_keys_tokens_and_url_credentials() -> None:
    text = ("401: got Authorization: Bearer abcdefghijk and Basic " + base64.b64encode(b"u:p4ssw0rd").decode()
            + ", x-api-key: plainvalue123, {'api_key': 'zzzz9999'}, for http://me:pw@h:1/v1?key=k9k9k9 (sk-"
            + "abcdefghijklmnop1234) known-value")
    cleaned = redact(text, ["known-value"])
    for gone in ("abcdefghijk", "dTpwNHNzdzByZA==", "plainvalue123", "zzzz9999", "me:pw", "k9k9k9",
                 "abcdefghijklmnop1234", "known-value"):
        assert gone not in cleaned, gone
    assert "http://[REDACTED]@h:1/v1?key=[REDACTED]" in cleaned
    # Words are not keys: a judge's answer shown by the viewer keeps its text.
    prose = "A basic translation: the bearer of the letter keeps its sense; the key point stands."
    assert redact(prose) == prose


def test_kept_headers_are_an_allow_list_with_values_redacted() -> None:
    headers = {"Authorization": "Bearer abcdefghijk", "x-api-key": "kkkkkkkk", "Set-Cookie": "s=1",
               "x-ratelimit-limit-requests": "500", "anthropic-ratelimit-tokens-limit": "80000",
               "Retry-After": "2", "request-id": "req_1", "X-Request-ID": "echo kkkkkkkk Bearer abcdefghijk",
               "llm_provider-authorization": "Bearer abcdefghijk"}
    assert kept_headers(headers, ["kkkkkkkk"]) == {
        "x-ratelimit-limit-requests": "500", "anthropic-ratelimit-tokens-limit": "80000", "retry-after": "2",
        "request-id": "req_1", "x-request-id": f"echo {MARK} {MARK}"}


def test_url_credentials_mean_basic_auth() -> None:
    url, header = url_credentials("https://us%40er:p%3Ass@proxy.example/v1/chat/completions")
    assert url == "https://proxy.example/v1/chat/completions"
    assert header == "Basic " + base64.b64encode(b"us@er:p:ss").decode()
    assert url_credentials("http://127.0.0.1:8000/v1") == ("http://127.0.0.1:8000/v1", None)
    assert set(url_secrets("https://us%40er:p%3Ass@proxy.example/v1")) >= {"us%40er:p%3Ass", "us@er:p:ss",
                                                                         base64.b64encode(b"us@er:p:ss").decode()}
