"""What gateways, proxies and servers do to a run (issue 35), one row per family: 20-item
GEMBA-MQM runs on the default transport through loopback fronts (``tests/netfronts.py``) in
front of the fake server, each run a process of its own, as a user's would be.

    python benchmarks/network_fronts.py [--items 20] [--repeats 3] [--timeout 120]

Families: a gateway that redirects to another origin (307) or to its own with a 301, which must
stop the judge naming the Location and never reach the other origin; a same-origin 307, which
must be followed; a proxy answering 407, a proxy that refuses connections and one that drops them,
which must stop the judge naming the proxy; 2xx answers the client cannot read (an undecodable
``Content-Encoding: br``, a body cut after its head), which must be booked at an estimate; and a
server that closes every kept connection after its answer, with ``retries.transport: 0``, which
must lose nothing.

Columns: attempts (runs); exit (the codes seen); requests (at the front, the most in one run);
lost (tasks of a run expected to finish with no scored outcome); wrong (an item verdict that is
the network's doing: ``provider_rejected``, or any task scored by another origin); tracebacks (in
any output); hangs (no end within --timeout); unclear (an exit code other than the family's, or a
message that does not name the Location or the proxy); unbooked (2xx answers the front sent whose
cost run.json does not book at an estimate: its spend's ``estimated_calls``). Every column after requests must be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from judge_engine.fake import FakeConfig, FakeServer  # noqa: E402
from tests.harness import TEST_KEY, TEST_KEY_ENV, make_job, read_lines  # noqa: E402
from tests.netfronts import ForwardProxy, Gateway, dead_proxy  # noqa: E402

CHAT = "/v1/chat/completions"
NOT_BROTLI = b"\x8b\x7f not a brotli stream at all \xff\xfe"
COLUMNS = ["attempts", "exit", "requests", "lost", "wrong", "tracebacks", "hangs", "unclear", "unbooked"]


@dataclass
class Unreadable(Gateway):
    """A gateway whose 2xx answers cannot be read: ``br`` (an encoding header over bytes no
    decoder reads) or ``cut`` (half the body its Content-Length promises, then the close)."""

    mode: str = "br"
    sent_2xx: int = 0

    async def _forward(self, method: str, path: str, headers: list[str], body: bytes) -> bytes:
        answer = await super()._forward(method, path, headers, body)
        head, _, rest = answer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        if b" 2" not in lines[0][:12]:
            return answer
        self.sent_2xx += 1
        kept = [line for line in lines if not line.lower().startswith((b"content-length:", b"content-encoding:"))]
        if self.mode == "br":
            return b"\r\n".join([*kept, b"Content-Encoding: br", b"Content-Length: %d" % len(NOT_BROTLI)]) + \
                b"\r\n\r\n" + NOT_BROTLI
        return b"\r\n".join([*kept, b"Content-Length: %d" % len(rest)]) + b"\r\n\r\n" + rest[: len(rest) // 2]


@dataclass
class Family:
    name: str
    expected_exit: frozenset[int]
    """A clear end: 1, a judge stopped (fix the cause, then resume); 3, completed with unscored tasks."""
    must_name: str = ""
    """What the output must name (the Location, the proxy's address)."""
    finishes: bool = False
    """Every task must end scored."""
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Front:
    """A family's front for one run: the judge's extra keys, the requests it saw, the 2xx
    answers it sent unreadable, the requests that reached another origin, and what must be named."""

    judge: dict[str, Any]
    requests: Callable[[], int]
    unreadable_2xx: Callable[[], int] = lambda: 0
    elsewhere: Callable[[], int] = lambda: 0
    name: str = ""


def _port(server: FakeServer) -> tuple[str, int]:
    host_port = server.base_url.split("//", 1)[1].split("/", 1)[0]
    host, _, port = host_port.rpartition(":")
    return host, int(port)


@contextmanager
def _front(family: str, fake: FakeServer) -> Iterator[Front]:
    backend = _port(fake)
    if family == "307 to another origin":
        with Gateway(backend=backend) as other, Gateway(backend=backend, status=307) as gateway:
            gateway.moved[CHAT] = f"{other.url}{CHAT}"
            yield Front({"api_base": f"{gateway.url}/v1"}, lambda: len(gateway.log), elsewhere=lambda: len(other.log),
                        name=f"{other.url}{CHAT}")
    elif family == "301 on the same origin":
        with Gateway(backend=backend, status=301, moved={CHAT: "/v2/chat/completions"}) as gateway:
            yield Front({"api_base": f"{gateway.url}/v1"}, lambda: len(gateway.log), name="/v2/chat/completions")
    elif family == "307 on the same origin":
        with Gateway(backend=backend, status=307, moved={CHAT: "/v2/chat/completions"},
                     served={"/v2/chat/completions": CHAT}) as gateway:
            yield Front({"api_base": f"{gateway.url}/v1"}, lambda: len(gateway.log))
    elif family == "proxy asking 407":
        with ForwardProxy(credentials="judge:right-password") as proxy:
            yield Front({"api_base": fake.base_url, "proxy": f"http://127.0.0.1:{proxy.port}"}, lambda: len(proxy.log),
                        name=f"127.0.0.1:{proxy.port}")
    elif family in ("proxy refusing", "proxy dropping"):
        with dead_proxy("refused" if family == "proxy refusing" else "silent") as url:
            address = url.rsplit("@", 1)[1]
            yield Front({"api_base": fake.base_url, "proxy": url}, lambda: 0, name=address)
    elif family in ("2xx in undecodable br", "2xx cut after its head"):
        mode = "br" if "br" in family else "cut"
        with Unreadable(backend=backend, mode=mode, close_kept=mode == "cut") as gateway:
            yield Front({"api_base": f"{gateway.url}/v1"}, lambda: len(gateway.log), lambda: gateway.sent_2xx)
    elif family == "kept connections closed":
        with Gateway(backend=backend, close_kept=True) as gateway:
            yield Front({"api_base": f"{gateway.url}/v1", "retries": {"transport": 0, "reasks": 2}},
                        lambda: len(gateway.log))
    else:
        raise ValueError(family)


FAMILIES = [
    Family("307 to another origin", frozenset({1}), must_name="location"),
    Family("301 on the same origin", frozenset({1}), must_name="location"),
    Family("307 on the same origin", frozenset({0}), finishes=True),
    Family("proxy asking 407", frozenset({1}), must_name="proxy"),
    Family("proxy refusing", frozenset({1}), must_name="proxy"),
    Family("proxy dropping", frozenset({1}), must_name="proxy"),
    Family("2xx in undecodable br", frozenset({1, 3})),
    Family("2xx cut after its head", frozenset({1, 3})),
    Family("kept connections closed", frozenset({0}), finishes=True),
]


def _estimated(run_dir: Path) -> tuple[int, float]:
    """run.json's calls booked at an estimate (billed but not read), and their cost."""
    manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    spend = (manifest.get("spend") or {}).get("total") or {}
    return int(spend.get("estimated_calls", 0) or 0), float(spend.get("estimated_cost", 0.0) or 0.0)


def _one(family: Family, items: int, timeout: float, work: Path) -> dict[str, Any]:
    with FakeServer(FakeConfig()) as fake, _front(family.name, fake) as front:
        job = make_job(work, None, items=items, judge={"api_base": None, **front.judge})
        env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "COLUMNS": "100"}
        for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            env.pop(name, None)
        env["NO_PROXY"] = env["no_proxy"] = ""
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-m", "judge_engine", "run", str(job.config), "--no-live"],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
            code, said, hung = done.returncode, done.stdout + done.stderr, False
        except subprocess.TimeoutExpired as expired:
            code, said, hung = -1, f"{expired.stdout or ''}{expired.stderr or ''}", True
        took = time.monotonic() - started
        outcomes = read_lines(job.only_run() / "outcomes.jsonl") if job.run_dirs() and \
            (job.only_run() / "outcomes.jsonl").exists() else []
        last = {o["task_id"]: o for o in outcomes}.values()  # a task's last line is its outcome
        scored = sum(1 for o in last if o.get("status") == "scored")
        rejected = sum(1 for o in last if o.get("reason_code") == "provider_rejected")
        lost = items - scored if family.finishes else 0
        wrong = rejected + front.elsewhere()
        named = True
        if family.must_name == "location":
            named = front.name in said and "api_base" in said
        elif family.must_name == "proxy":
            named = front.name in said and "proxy" in said.lower() and "right-password" not in said \
                and "s3cret" not in said
        unclear = int(code not in family.expected_exit or not named)
        unbooked = 0
        if front.unreadable_2xx() and job.run_dirs():
            calls, cost = _estimated(job.only_run())
            unbooked = max(0, front.unreadable_2xx() - calls) if cost > 0 else front.unreadable_2xx()
        return {"exit": code, "requests": front.requests(), "lost": lost, "wrong": wrong,
                "tracebacks": int("Traceback (most recent call last)" in said), "hangs": int(hung),
                "unclear": unclear, "unbooked": unbooked, "took": took, "said": said.strip().splitlines()[-3:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--only", default="", help="a word of the families to run")
    args = parser.parse_args()
    problems = []
    print(f"{args.items}-item runs, default transport, {args.repeats} per family\n")
    print("| family | " + " | ".join(COLUMNS) + " | slowest |")
    print("|---|" + "---:|" * (len(COLUMNS) + 1))
    for family in FAMILIES:
        if args.only and args.only not in family.name:
            continue
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as work:
                family.rows.append(_one(family, args.items, args.timeout, Path(work)))
        rows = family.rows
        cells = [str(len(rows)), "/".join(sorted({str(r["exit"]) for r in rows})), str(max(r["requests"] for r in rows))]
        cells += [str(sum(r[c] for r in rows)) for c in COLUMNS[3:]]
        print(f"| {family.name} | " + " | ".join(cells) + f" | {max(r['took'] for r in rows):.1f} s |")
        for row in rows:
            if any(row[c] for c in COLUMNS[3:]):
                problems.append((family.name, row))
    for name, row in problems:
        print(f"\n{name}: exit {row['exit']}; " + "; ".join(f"{c} {row[c]}" for c in COLUMNS[3:] if row[c]))
        for line in row["said"]:
            print(f"    {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
