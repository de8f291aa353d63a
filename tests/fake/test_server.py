"""The fake OpenAI-compatible server over real HTTP (urllib / http.client, never litellm)."""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import socket
import time
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

import pytest

from judge_engine.errors import VerdictError
from judge_engine.fake import MALFORMED_ANSWERS, FakeConfig, FakeServer, FakeServerProcess
from judge_engine.protocols.gemba_mqm import GembaMQM

GEMBA = GembaMQM()
ITEM = {
    "source": "Der alte Hund schlief den ganzen Nachmittag vor dem Kamin.",
    "target": "The old dog slept the whole afternoon in front of the fireplace.",
    "source_lang": "German",
    "target_lang": "English",
}


def item(n: int) -> dict[str, str]:
    return {**ITEM, "target": f"{ITEM['target']} Sentence number {n} follows here."}


def request_body(messages: list[dict[str, str]] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "model": "fake-judge",
        "messages": messages or GEMBA.render(ITEM),
        "temperature": 0,
        **extra,
    }


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content(self) -> str:
        return str(self.json["choices"][0]["message"]["content"])


def post(
    url: str,
    payload: Any,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 5,
    path: str = "/chat/completions",
) -> Reply:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    request = urllib.request.Request(url + path, data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Reply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, dict(exc.headers), exc.read())


@pytest.fixture
def server() -> Any:
    with FakeServer(FakeConfig()) as running:
        yield running


# --- answers -----------------------------------------------------------------------------------


def test_gemba_prompt_gets_a_gemba_answer_with_usage(server: FakeServer) -> None:
    messages = GEMBA.render(ITEM)
    reply = post(server.base_url, request_body(messages))
    assert reply.status == 200
    data = reply.json
    assert data["object"] == "chat.completion" and data["model"] == "fake-judge"
    choice = data["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "stop"
    GEMBA.parse(reply.content, ITEM)  # raises VerdictError if the fake wrote something unreadable
    expected_prompt = sum(math.ceil(len(m["content"]) / 4) + 4 for m in messages)
    expected_completion = math.ceil(len(reply.content) / 4)
    assert data["usage"] == {
        "prompt_tokens": expected_prompt,
        "completion_tokens": expected_completion,
        "total_tokens": expected_prompt + expected_completion,
    }


def test_chars_per_token_changes_the_fake_tokenizer(server: FakeServer) -> None:
    messages = GEMBA.render(ITEM)
    server.update(chars_per_token=2.5)
    reply = post(server.base_url, request_body(messages))
    assert reply.json["usage"]["prompt_tokens"] == sum(math.ceil(len(m["content"]) / 2.5) + 4 for m in messages)
    assert reply.json["usage"]["completion_tokens"] == math.ceil(len(reply.content) / 2.5)


def test_same_request_same_answer_and_temperature_can_change_it(server: FakeServer) -> None:
    assert (
        post(server.base_url, request_body()).content
        == post(server.base_url, request_body()).content
    )
    changed = [
        n
        for n in range(20)
        if post(server.base_url, request_body(GEMBA.render(item(n)), temperature=0)).content
        != post(server.base_url, request_body(GEMBA.render(item(n)), temperature=1.5)).content
    ]
    assert changed, "temperature never changed an answer over 20 items"


def test_json_mode_returns_json(server: FakeServer) -> None:
    reply = post(server.base_url, request_body(response_format={"type": "json_object"}))
    verdict = json.loads(reply.content)
    assert isinstance(verdict["errors"], list)
    GEMBA.parse(reply.content, ITEM)
    text = post(server.base_url, request_body(response_format={"type": "text"})).content
    assert not text.lstrip().startswith("{")


def test_reask_turns_are_stripped(server: FakeServer) -> None:
    original = GEMBA.render(ITEM)
    reask = GEMBA.reask(VerdictError(["no 'Critical:' section found"], raw="meh"))
    conversation = [
        *original,
        {"role": "assistant", "content": "meh"},
        {"role": "user", "content": reask},
    ]
    twice = [
        *conversation,
        {"role": "assistant", "content": "still meh"},
        {"role": "user", "content": reask},
    ]
    first = post(server.base_url, request_body(original)).content
    assert post(server.base_url, request_body(conversation)).content == first
    assert post(server.base_url, request_body(twice)).content == first


def test_unknown_prompt_gets_a_generic_answer(server: FakeServer) -> None:
    reply = post(server.base_url, request_body([{"role": "user", "content": "Hello?"}]))
    assert reply.status == 200 and "generic answer" in reply.content
    as_json = post(
        server.base_url,
        request_body([{"role": "user", "content": "Hi"}], response_format={"type": "json_object"}),
    )
    assert "answer" in json.loads(as_json.content)


def test_max_tokens_cuts_the_answer(server: FakeServer) -> None:
    reply = post(server.base_url, request_body(max_tokens=3))
    assert reply.json["choices"][0]["finish_reason"] == "length"
    assert len(reply.content) <= 12 and reply.json["usage"]["completion_tokens"] <= 3


def test_bad_requests_get_400(server: FakeServer) -> None:
    assert post(server.base_url, b"{not json").status == 400
    assert post(server.base_url, request_body(stream=True)).status == 400
    assert post(server.base_url, {"model": "m", "messages": "hi"}).status == 400
    assert post(server.base_url, {"messages": [{"role": "user", "content": "x"}]}).status == 400
    assert "error" in post(server.base_url, b"[]").json


def test_models_route_and_v1_prefix(server: FakeServer) -> None:
    with urllib.request.urlopen(server.base_url + "/models") as response:
        assert json.load(response)["data"][0]["id"] == "fake-judge"
    assert post(server.url, request_body(), path="/chat/completions").status == 200


# --- rate limits ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["seconds", "ms", "date", "none"])
def test_rpm_limit_gives_429_with_retry_after(mode: str) -> None:
    with FakeServer(FakeConfig(rpm=120, window_s=1, retry_after=mode)) as server:  # 2 per second
        bodies = [request_body(GEMBA.render(item(n))) for n in range(3)]
        assert [post(server.base_url, b).status for b in bodies[:2]] == [200, 200]
        limited = post(server.base_url, bodies[2])
        assert limited.status == 429
        assert limited.json["error"]["code"] == "rate_limit_exceeded"
        headers = {k.lower(): v for k, v in limited.headers.items()}
        if mode == "seconds":
            wait = float(headers["retry-after"])
            assert 0.5 < wait <= 1.0
        elif mode == "ms":
            wait = int(headers["retry-after-ms"]) / 1000
            assert "retry-after" not in headers and 0.5 < wait <= 1.0
        elif mode == "date":
            when = email.utils.parsedate_to_datetime(headers["retry-after"]).timestamp()
            assert time.time() < when <= time.time() + 3
            wait = 1.0
        else:
            assert "retry-after" not in headers and "retry-after-ms" not in headers
            wait = 1.0
        time.sleep(wait)  # the 429 consumed no quota: after the wait the window has room
        assert post(server.base_url, bodies[2]).status == 200
        stats = server.stats()
        assert stats["rate_limited"] == 1 and stats["accepted_requests"] == 3


def test_tpm_limit_and_request_too_large() -> None:
    one = post_tokens = None
    with FakeServer() as probe:
        one = probe_reply = post(probe.base_url, request_body())
        post_tokens = probe_reply.json["usage"]["total_tokens"]
    assert one is not None and post_tokens is not None
    tpm = (post_tokens + 10) * 60 * 2  # window_s=0.5 holds post_tokens + 10 tokens
    with FakeServer(FakeConfig(tpm=tpm, window_s=0.5)) as server:
        assert post(server.base_url, request_body()).status == 200
        limited = post(server.base_url, request_body(temperature=0.5))
        assert limited.status == 429 and limited.json["error"]["type"] == "tokens"
        assert 0 < float(limited.headers["Retry-After"]) <= 0.5
        assert server.stats()["accepted_tokens"] == post_tokens
        server.update(tpm=60 * 100)  # window of 50 tokens: this request can never fit
        too_large = post(server.base_url, request_body(temperature=0.7))
        assert too_large.status == 429 and "too large" in too_large.json["error"]["message"]
        assert "Retry-After" not in too_large.headers


def test_storm_forces_429_then_clears() -> None:
    storm = {"start_s": 0, "duration_s": 0.4, "retry_after_s": 2.5}
    with FakeServer(FakeConfig.model_validate({"storm": storm})) as server:
        limited = post(server.base_url, request_body())
        assert limited.status == 429 and limited.headers["Retry-After"] == "2.500"
        time.sleep(0.45)
        assert post(server.base_url, request_body()).status == 200
        stats = server.stats()
        assert stats["by_fault"]["storm"] == 1 and stats["accepted_requests"] == 1


# --- faults --------------------------------------------------------------------------------------


def test_error_rates_are_roughly_right_and_retries_redraw() -> None:
    with FakeServer(FakeConfig(error_500_rate=0.2, error_503_rate=0.1, seed=7)) as server:
        statuses = Counter(
            post(server.base_url, request_body([{"role": "user", "content": f"q{n}"}])).status
            for n in range(400)
        )
        # 500 on p=0.2 (mean 80, sd 8); 503 when its draw fires and 500's did not: p=0.08 (32, sd 5.4)
        assert 50 <= statuses[500] <= 110 and 12 <= statuses[503] <= 52
        assert statuses[200] + statuses[500] + statuses[503] == 400
        body = request_body([{"role": "user", "content": "again"}])
        server.update(error_503_rate=0, error_500_rate=0.5)
        retried = {post(server.base_url, body).status for _ in range(20)}
        assert retried == {200, 500}  # an identical retry gets a fresh draw
        error = post(server.base_url, body)
        while error.status != 500:
            error = post(server.base_url, body)
        assert error.json["error"]["type"] == "server_error"


def test_faults_are_deterministic_for_the_same_traffic() -> None:
    def run() -> list[int]:
        with FakeServer(FakeConfig(error_500_rate=0.3, seed=3)) as server:
            return [
                post(server.base_url, request_body(temperature=t / 10)).status for t in range(20)
            ]

    assert run() == run()


def test_reset_and_truncation_are_client_errors() -> None:
    with FakeServer(FakeConfig(reset_rate=1.0)) as server:
        with pytest.raises((OSError, http.client.HTTPException)):
            post(server.base_url, request_body())
        assert server.stats()["by_fault"] == {"reset": 1}
        server.update(reset_rate=0, truncate_rate=1.0)
        with pytest.raises(http.client.IncompleteRead):
            post(server.base_url, request_body())
        stats = server.stats()
        assert stats["by_fault"] == {"reset": 1, "truncate": 1} and stats["accepted_requests"] == 2


def test_hang_makes_the_client_time_out_and_does_not_block_shutdown() -> None:
    started = time.monotonic()
    with FakeServer(FakeConfig(hang_rate=1.0, hang_s=30)) as server:
        with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
            post(server.base_url, request_body(), timeout=0.3)
        assert server.stats()["by_fault"] == {"hang": 1}
    assert time.monotonic() - started < 5


def test_malformed_and_cut_off_answers() -> None:
    with FakeServer() as plain:
        full = post(plain.base_url, request_body()).content
    with FakeServer(FakeConfig(malformed_rate=1.0)) as server:
        reply = post(server.base_url, request_body())
        assert reply.status == 200 and reply.content in MALFORMED_ANSWERS
        with pytest.raises(VerdictError):
            GEMBA.parse(reply.content, ITEM)
        server.update(malformed_rate=0, cut_off_rate=1.0)
        cut = post(server.base_url, request_body())
        assert cut.json["choices"][0]["finish_reason"] == "length"
        assert cut.content == full[: len(full) // 2]
        assert cut.json["usage"]["completion_tokens"] == math.ceil(len(cut.content) / 4)
        assert server.stats()["by_fault"] == {"cut_off": 1, "malformed": 1}


def test_latency_is_applied() -> None:
    with FakeServer(FakeConfig(latency_s=0.2, latency_jitter_s=0.05)) as server:
        started = time.monotonic()
        assert post(server.base_url, request_body()).status == 200
        assert 0.14 <= time.monotonic() - started < 1.0


# --- auth ----------------------------------------------------------------------------------------


def test_wrong_api_key_gets_401_without_echoing_it() -> None:
    with FakeServer(FakeConfig(require_api_key="sk-right-key")) as server:
        wrong = post(
            server.base_url, request_body(), headers={"Authorization": "Bearer sk-wrong-secret"}
        )
        assert wrong.status == 401
        assert b"sk-wrong-secret" not in wrong.body and b"sk-right-key" not in wrong.body
        assert wrong.json["error"]["code"] == "invalid_api_key"
        assert post(server.base_url, request_body()).status == 401
        right = post(
            server.base_url, request_body(), headers={"Authorization": "Bearer sk-right-key"}
        )
        assert right.status == 200
        config = post(server.url, {}, path="/_fake/config").json
        assert config["require_api_key"] == "***"


# --- control routes and stats ----------------------------------------------------------------------


def test_stats_counters_config_patch_and_reset(server: FakeServer) -> None:
    post(server.base_url, request_body())
    post(server.base_url, request_body())
    post(server.base_url, request_body(model="other-judge"))
    post(server.base_url, b"nope")
    stats = server.stats()
    assert stats["requests_total"] == 4
    assert stats["by_status"] == {"200": 3, "400": 1}
    assert stats["by_model"] == {"fake-judge": 2, "other-judge": 1}
    assert stats["by_protocol"] == {"gemba-mqm": 3}
    assert stats["accepted_requests"] == 3 and stats["distinct_bodies"] == 2
    assert stats["accepted_tokens"] > 3 * 1000
    assert 0 <= stats["first_accepted_s"] <= stats["last_accepted_s"] <= stats["uptime_s"]
    with urllib.request.urlopen(server.url + "/_fake/stats") as response:
        assert json.load(response)["requests_total"] == 4

    patched = post(server.url, {"rpm": 600, "storm": {"duration_s": 1}}, path="/_fake/config")
    assert patched.status == 200 and patched.json["rpm"] == 600
    assert server.config.storm is not None and server.config.storm.retry_after_s == 1.0
    assert (
        post(server.url, {"storm": None, "latency_s": 0}, path="/_fake/config").json["storm"]
        is None
    )
    assert post(server.url, {"rpm": -1}, path="/_fake/config").status == 400
    assert post(server.url, {"no_such_field": 1}, path="/_fake/config").status == 400
    assert server.config.rpm == 600

    assert post(server.url, {}, path="/_fake/reset").status == 200
    stats = server.stats()
    assert (
        stats["requests_total"] == 0 and stats["distinct_bodies"] == 0 and stats["by_status"] == {}
    )
    server.update(rpm=None)
    assert server.config.rpm is None


def test_config_rejects_a_window_that_holds_no_request() -> None:
    with pytest.raises(ValueError, match="window_s"):
        FakeConfig(rpm=10, window_s=1)


# --- separate process --------------------------------------------------------------------------------


def test_subprocess_mode_starts_serves_and_stops() -> None:
    with FakeServerProcess(FakeConfig(rpm=120, window_s=1)) as server:
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        assert post(server.base_url, request_body()).status == 200
        server.update(latency_s=0.01)
        assert server.stats()["accepted_requests"] == 1
        server.reset()
        assert server.stats()["requests_total"] == 0
        process = server._process
    assert process is not None and process.poll() is not None


@pytest.mark.slow
def test_subprocess_server_exits_when_its_parent_is_killed() -> None:
    """``--demo`` starts the fake as a child; a kill -9 of the engine must not orphan it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import sys, time\n"
        "from judge_engine.fake import FakeServerProcess\n"
        "server = FakeServerProcess().start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        try:  # reap it if it became our zombie (it is not our child; just poll)
            os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the fake server outlived its killed parent")
