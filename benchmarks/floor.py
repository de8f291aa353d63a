"""The client floor: the engine's own requests replayed by a bare HTTP loop at the same pace.

A paced profile makes every request (or pair, ``--burst``) wake the client from idle, and on a
small VM each wake-up costs far more than the same work done back to back (a bare aiohttp POST
of a 9 KB body: ~0.17 ms of CPU back to back; at 50 requests per second ~1.0 ms one at a time,
~0.7 in pairs). This script measures that floor for one profile: it reads the requests the
engine sent (its transcripts), sends them to a fresh fake server with the same latency at the
engine's accepted rate, with nothing else (no templates, cache, lanes, parsing or records), and
prints the CPU per request of that loop alone, start-up excluded. The engine's figure minus this
one is what the engine itself adds. The loop sends with the direct transport's client
(:class:`judge_engine.providers.http.ChatClient`, on aiohttp since issue 32) by default, or with
a bare aiohttp session (``--client aiohttp``).

    python benchmarks/floor.py TRANSCRIPTS --rate 50 --latency 0.5 --jitter 0.1 [--n 2000] [--burst 2] [--client chat|aiohttp]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def bodies(transcripts: Path, n: int) -> list[bytes]:
    """The first ``n`` request bodies the engine sent, as the direct transport sends them."""
    from judge_engine.rundir.records import AttemptRecord
    from judge_engine.rundir.store import iter_transcript

    out: list[bytes] = []
    for record in iter_transcript(transcripts.parent):
        if not isinstance(record, AttemptRecord) or record.cache_hit:
            continue
        sent: dict[str, Any] = dict(record.request)
        sent.pop("api_base", None)
        sent["model"] = str(sent["model"]).removeprefix("openai/")
        out.append(json.dumps(sent).encode())
        if len(out) >= n:
            break
    return out


async def replay(url: str, payloads: list[bytes], rate: float, burst: int = 1, client: str = "chat") -> float:
    """Send ``payloads`` at ``rate`` per second, ``burst`` at a time as the engine's lanes do (0:
    back to back, 64 at a time); return CPU seconds per request. ``client``: ``chat``, the
    direct transport's client (:class:`judge_engine.providers.http.ChatClient`), or ``aiohttp``,
    a bare session."""
    import aiohttp

    from judge_engine.providers.http import ChatClient
    from judge_engine.providers.network import Network

    headers = {"Content-Type": "application/json", "Authorization": "Bearer floor", "Accept-Encoding": "identity"}
    pool = ChatClient(Network())
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async def by_aiohttp(body: bytes) -> None:
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()

        async def by_chat(body: bytes) -> None:
            await pool.post(url, body, headers, 120.0)

        one = by_chat if client == "chat" else by_aiohttp
        await one(payloads[0])  # connection set-up and first-use costs are start-up
        started = time.process_time()
        if rate <= 0:
            slots = asyncio.Semaphore(64)

            async def limited(body: bytes) -> None:
                async with slots:
                    await one(body)

            await asyncio.gather(*(limited(body) for body in payloads))
            await pool.aclose()
            return (time.process_time() - started) / len(payloads)
        pending = []
        next_at = time.monotonic()
        for index, body in enumerate(payloads, start=1):
            pending.append(asyncio.create_task(one(body)))
            if index % burst:
                continue
            next_at += burst / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        await asyncio.gather(*pending)
        cpu = (time.process_time() - started) / len(payloads)
        await pool.aclose()
        return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcripts", type=Path)
    parser.add_argument("--rate", type=float, required=True, help="requests per second (0: back to back)")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--jitter", type=float, default=0.1)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=1, help="requests sent together (the lanes' limits.burst)")
    parser.add_argument("--client", choices=("chat", "aiohttp"), default="chat",
                        help="chat: the direct transport's client (what the engine sends with); "
                             "aiohttp: a bare aiohttp session")
    args = parser.parse_args()
    from judge_engine.fake import FakeConfig, FakeServerProcess

    payloads = bodies(args.transcripts, args.n)
    with FakeServerProcess(FakeConfig(latency_s=args.latency, latency_jitter_s=args.jitter)) as server:
        cpu = asyncio.run(replay(server.base_url + "/chat/completions", payloads, args.rate, max(1, args.burst),
                                args.client))
    print(json.dumps({"requests": len(payloads), "cpu_ms_per_request": round(cpu * 1000, 3)}))


if __name__ == "__main__":
    main()
