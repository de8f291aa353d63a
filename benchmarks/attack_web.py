"""``attack.py``'s families over HTTP: the viewer probed (paths, methods, Host headers, query
values, pages in headless Chromium), and a hostile provider (``attack_provider.py``)."""

from __future__ import annotations

import http.client
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import quote

from benchmarks.attack_common import (
    HOSTILE_IDS,
    KEY_ENV,
    PWNED,
    Attempt,
    Family,
    check_run,
    gemba_judge,
    judge_engine,
    judged,
    leaks_in_text,
    read_lines,
    run_dirs,
    scan_attempt,
    with_user_info,
    write_config,
    write_items,
)

if TYPE_CHECKING:
    from benchmarks.attack import Context

CHROMIUM = Path("/usr/bin/chromium")


class ProviderProcess:
    """``attack_provider.py`` in a child process, in front of the fake server at ``upstream``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> Self:
        from benchmarks.attack_provider import READY

        script = Path(__file__).with_name("attack_provider.py")
        self.process = subprocess.Popen([sys.executable, str(script), "--upstream", self.upstream],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(READY):
            raise RuntimeError(f"the attack provider did not start: {line!r}")
        self.url = line[len(READY):].strip()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


# --- the hostile provider -------------------------------------------------------------------------


def provider(ctx: Context, family: Family) -> None:
    from benchmarks.attack_provider import BATCH_MODES, MODES

    root = ctx.folder("provider")
    modes = [*MODES, *BATCH_MODES]
    litellm = ["ok", "echo_content", "garbage", "storm_inf", "usage_negative", "usage_huge", "logprobs_positive"]
    if ctx.quick:
        modes = [m for m in modes if m in ("ok", "echo_content", "garbage", "slowloris", "storm_inf", "storm_year_9999",
                                           "usage_negative", "usage_huge", "logprobs_positive", "batch_duplicated")]
        litellm = ["storm_inf", "usage_huge"]
    for transport, chosen in (("auto", modes), ("litellm", litellm)):
        for number, mode in enumerate(chosen):
            _provider_case(ctx, family, root / f"{transport}-{mode}", mode, transport, user_info=number % 2 == 0)
    family.add(scan_attempt(root))


def _provider_case(ctx: Context, family: Family, folder: Path, mode: str, transport: str, *, user_info: bool) -> None:
    base = f"{ctx.proxy_url}/{mode}/v1"
    judge = gemba_judge("j", with_user_info(base) if user_info and transport == "auto" else base, timeout_s=3,
                        transport=transport, retries={"transport": 1, "reasks": 1, "backoff_max_s": 0.05,
                                                      "rate_limit_max": 5})
    if user_info and transport == "auto":
        judge.pop("api_key_env")  # the URL's credentials are the key (both would be the Authorization header)
    items = 12 if mode.startswith("batch") else 5
    if mode.startswith("logprobs"):
        rows = _pairwise_job(folder, judge)
    else:
        rows = write_items(folder / "items.jsonl", items)
        if mode.startswith("batch"):
            judge.update(mode="batch", batch={"poll_interval_s": 0.2, "fallback": "batch", "max_rounds": 3})
        write_config(folder, [judge])
    done = judge_engine(["run", "config.yaml", "--no-live"], cwd=folder, timeout=60)
    attempt = judged(Attempt(f"{mode} ({transport})"), done, expect=(0, 1, 3))
    runs = run_dirs(folder)
    if runs and not done.hung:
        run = runs[0]
        if not mode.startswith("logprobs"):
            check_run(attempt, run, rows, ctx.oracle, {"j": [0.0]})
            if _status(run) != "completed":
                attempt.lost = 0  # a stopped judge leaves its tasks for resume: not lost
        _truthful_figures(attempt, run)
    family.add(attempt)


def _status(run: Path) -> str | None:
    try:
        return str(json.loads((run / "run.json").read_text()).get("status"))
    except (OSError, ValueError):
        return None


def _pairwise_job(folder: Path, judge: dict[str, Any]) -> list[dict[str, Any]]:
    example = Path(__file__).resolve().parents[1] / "examples" / "pairwise_annotators"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "items.jsonl").write_bytes((example / "items.jsonl").read_bytes())
    (folder / "fewshot.jsonl").write_bytes((example / "fewshot.jsonl").read_bytes())
    judge.update(protocol="pairwise-annotators", protocol_options={"examples_file": "fewshot.jsonl"})
    judge.pop("max_tokens", None)
    import yaml

    document = {"dataset": {"path": "items.jsonl", "limit": 3}, "judges": [judge], "output": {"dir": "runs"},
                "cache": {"dir": "cache"}}
    (folder / "config.yaml").write_text(yaml.safe_dump(document))
    return []


def _truthful_figures(attempt: Attempt, run: Path) -> None:
    """Spend is never negative nor infinite, and a confidence is a probability."""
    try:
        manifest = json.loads((run / "run.json").read_text())
    except (OSError, ValueError):
        attempt.wrong += 1
        attempt.note += " run.json is not JSON"
        return
    bad = [f"{path}={value}" for path, value in _numbers(manifest.get("spend"), "spend")
           if value < 0 or not math.isfinite(value)]
    for outcome in read_lines(run / "outcomes.jsonl"):
        confidence = outcome.get("confidence") or {}
        values = [confidence.get("value"), *(confidence.get("probs") or {}).values(), confidence.get("mass")]
        bad += [f"confidence {v}" for v in values if isinstance(v, int | float) and not 0 <= v <= 1 + 1e-9]
    if bad:
        attempt.wrong += 1
        attempt.note += f" untruthful figures: {', '.join(bad[:4])}"


def _numbers(value: Any, path: str) -> list[tuple[str, float]]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [(path, float(value))]
    if isinstance(value, dict):
        return [found for key, child in value.items() for found in _numbers(child, f"{path}.{key}")]
    if isinstance(value, list):
        return [found for index, child in enumerate(value) for found in _numbers(child, f"{path}[{index}]")]
    return []


# --- the viewer -----------------------------------------------------------------------------------


class Viewer:
    """``judge-engine view RUN...`` in a child process."""

    def __init__(self, runs: list[Path], cwd: Path) -> None:
        from benchmarks.attack_common import child_env

        env = child_env()
        env.pop(KEY_ENV)  # another user's viewer: its own environment redacts nothing here
        self.process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", "view", *map(str, runs)], cwd=cwd,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        self.port = 0
        for line in self.process.stdout:
            if "http://127.0.0.1:" in line:
                self.port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
                break
        if not self.port:
            raise RuntimeError("the viewer did not start")

    def request(self, method: str, path: str, *, host: str | None = None, timeout: float = 20) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            if host is not None:
                connection.putheader("Host", host)
            connection.endheaders()
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def get(self, path: str) -> Any:
        status, body = self.request("GET", path, host=f"127.0.0.1:{self.port}")
        return json.loads(body) if status == 200 else None

    def stop(self) -> str:
        self.process.terminate()
        try:
            out, _ = self.process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        return out


def _hostile_run(ctx: Context) -> Path:
    folder = ctx.folder("viewer-run")
    write_items(folder / "items.jsonl", 16, hostile=True)
    judges = [gemba_judge("mqm", with_user_info(ctx.fake_url)),
              gemba_judge("warm", ctx.fake_url, temperatures=[0.7])]  # a judge's name is refused unless [A-Za-z0-9_.-]
    judges[0].pop("api_key_env")  # the URL's credentials are its key
    write_config(folder, judges)
    judge_engine(["run", "config.yaml", "--no-live"], cwd=folder, timeout=120)
    return run_dirs(folder)[0]


def viewer(ctx: Context, family: Family) -> None:
    run = _hostile_run(ctx)
    served = Viewer([run], cwd=run.parent)
    pages: list[bytes] = []
    try:
        _wait_derived(served)
        port = served.port
        rows = (served.get("/api/tasks?size=200") or {}).get("rows", [])
        for method, path, host in _probes(port, rows, ctx.quick):
            attempt = Attempt(f"{method} {path[:80]} Host={host!r}")
            try:
                status, body = served.request(method, path, host=host)
            except (TimeoutError, OSError) as exc:
                attempt.hang = isinstance(exc, TimeoutError)
                attempt.unclear = not attempt.hang
                attempt.note = f"{type(exc).__name__}: {exc}"
                family.add(attempt)
                continue
            pages.append(body)
            _judge_response(attempt, method, path, host, port, status, body)
            family.add(attempt)
        _browser(ctx, family, served, rows)
    finally:
        log = served.stop()
    family.add(Attempt("the viewer's own output", traceback="Traceback" in log, leaked=leaks_in_text(log),
                       note=log[-300:] if "Traceback" in log else ""))
    family.add(Attempt("every page served, searched for the planted secrets",
                       leaked=sum(leaks_in_text(p.decode("utf-8", "replace")) for p in pages)))
    family.add(scan_attempt(run))


def _wait_derived(served: Viewer) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        overview = served.get("/api/overview") or {}
        if all(r.get("derived", {}).get("items") for r in overview.get("runs", [{}])):
            return
        time.sleep(0.2)


def _judge_response(attempt: Attempt, method: str, path: str, host: str | None, port: int, status: int,
                    body: bytes) -> None:
    legit_host = host in (f"127.0.0.1:{port}", f"localhost:{port}")
    attempt.leaked = leaks_in_text(body.decode("utf-8", "replace"))
    if status >= 500:
        attempt.traceback = True
        attempt.note = f"{status}: {body[:300]!r}"
    elif 400 <= status < 500:
        attempt.clear = True
    elif not legit_host or method not in ("GET", "HEAD"):
        attempt.wrong = 1  # served to a foreign Host or for a method that should not be
        attempt.note = f"{status} for {method} with Host {host!r}"
    elif path.startswith("/api/item?id=") and status == 200:
        document = json.loads(body)
        if not document.get("tasks"):
            attempt.wrong = 1
            attempt.note = f"item page without its tasks: {body[:200]!r}"


def _probes(port: int, rows: list[dict[str, Any]], quick: bool) -> list[tuple[str, str, str | None]]:
    host = f"127.0.0.1:{port}"
    paths = ["/", "/static/app.js", "/static/../../../etc/passwd", "/static/..%2f..%2f..%2fetc%2fpasswd",
             "/%2e%2e/%2e%2e/etc/passwd", "/static/%00", "/static/index.html%00.js", "/" + "a" * 8000,
             "/api/", "/api/overview/..", "/api/item", "/api/item?id=", "/api/transcript", "/api/transcript?task=nope",
             "/api/transcript?run=99999999999999999999&task=x", "/api/transcript?run=-1&task=x", "/.git/config",
             "//etc/passwd", "/api/overview?" + "a=1&" * 2000, "/api/item?id=" + "x" * 100_000, "/static/%2e%2e",
             "/api/tasks?page=1&page=2", "/api/item?id=%ff%fe", "/api/tasks?q=%ff"]
    probes: list[tuple[str, str, str | None]] = [("GET", p, host) for p in paths]
    methods = ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND", "CONNECT", "BREW", "HEAD"]
    probes += [(m, p, host) for m in methods for p in ("/", "/api/overview", "/api/tasks?page=1")]
    hosts = ["evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "localhost", "", None,
             f"127.0.0.1:{port + 1}", f"[::1]:{port}", f"LOCALHOST:{port}", f"127.0.0.1:{port}.", f"0.0.0.0:{port}",
             f"127.0.0.1:{port}@evil.example", f"2130706433:{port}", f"localhost:{port}", host]
    probes += [("GET", "/api/overview", h) for h in hosts]
    values = ["99999999999999999999", "1e400", "-1", "0", "nan", "inf", "-inf", "", "x" * 10_000, "☃💥", "%00",
              '"', "*", "NEAR(", "a OR", "') OR 1=1 --", "\\", "%", "_", "1.5", "0x10", "[]", "{}", "<script>"]
    parameters = ["judge", "status", "reason", "temperature", "repeat", "min", "max", "q", "item", "sort", "page", "size",
                  "run", "order"]
    if quick:
        values = values[::3]
    probes += [("GET", f"/api/tasks?{p}={quote(v)}", host) for p in parameters for v in values]
    probes += [("GET", f"/api/item?id={quote(str(i))}", host) for i in HOSTILE_IDS]
    probes += [("GET", f"/api/transcript?run={quote(str(r.get('run')))}&task={quote(str(r.get('task_id')))}", host)
               for r in rows[: 8 if quick else 40]]
    probes += [("GET", f"/api/transcript?run={quote(v)}&task=x", host) for v in values]
    return probes


def _browser(ctx: Context, family: Family, served: Viewer, rows: list[dict[str, Any]]) -> None:
    """Every kind of page in headless Chromium: none of the run's text runs as script."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        family.skipped = "no playwright: HTTP-level probes only"
        return
    if not CHROMIUM.exists():
        family.skipped = f"no Chromium at {CHROMIUM}: HTTP-level probes only"
        return
    url = f"http://127.0.0.1:{served.port}/"
    targets = [("overview", url, ".judge h2"), ("tasks", url + "#/tasks", "table.tasks tbody tr")]
    targets += [(f"item {i!r}", url + f"#/item?id={quote(i)}", ".task-card") for i in HOSTILE_IDS]
    items = sorted({str(r.get("item_id")) for r in rows})
    targets += [(f"item {i!r}", url + f"#/item?id={quote(i)}", ".task-card") for i in items[: 4 if ctx.quick else 16]]
    targets += [(f"transcript {r['task_id'][:12]}", url + f"#/transcript?run={r['run']}&task={quote(r['task_id'])}",
                 "section.attempt") for r in rows[: 4 if ctx.quick else 16]]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                             args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            for name, target, ready in targets:
                family.add(_browse(browser, name, target, ready))
        finally:
            browser.close()


def _browse(browser: Any, name: str, target: str, ready: str) -> Attempt:
    attempt = Attempt(f"chromium: {name}")
    context = browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(target)
        try:
            page.wait_for_selector(ready, timeout=15_000)
        except Exception:  # playwright's TimeoutError: the page never drew what it should
            attempt.hang = True
            attempt.note = f"{ready} never appeared"
        ran = page.evaluate(f"() => window.{PWNED} ?? null")
        handlers = page.evaluate("() => [...document.querySelectorAll('*')].filter((n) => "
                                 "[...n.attributes].some((a) => a.name.startsWith('on'))).length")
        text = page.evaluate("() => document.body.innerText")
        attempt.leaked = leaks_in_text(text)
        if ran is not None or dialogs or handlers:
            attempt.wrong = 1
            attempt.note = f"script ran: {ran}, dialogs {dialogs}, elements with handlers {handlers}"
        if errors:
            attempt.traceback = True
            attempt.note += f" page errors: {errors[:2]}"
    finally:
        context.close()
    return attempt
