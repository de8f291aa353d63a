"""The client floor: the engine's own requests replayed by a bare aiohttp loop at the same pace.

A paced profile makes every request (or pair, ``--burst``) wake the client from idle, and on a
small VM each wake-up costs far more than the same work done back to back (a bare aiohttp POST
of a 9 KB body: ~0.17 ms of CPU back to back; at 50 requests per second ~1.0 ms one at a time,
~0.7 in pairs). This script measures that floor for one profile: it reads the requests the
engine sent (its transcripts), sends them to a fresh fake server with the same latency at the
engine's accepted rate, with nothing else (no templates, cache, lanes, parsing or records), and
prints the CPU per request of that loop alone, start-up excluded. The engine's figure minus this
one is what the engine itself adds.

    python benchmarks/floor.py TRANSCRIPTS --rate 50 --latency 0.5 --jitter 0.1 [--n 2000] [--burst 2]
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
    from judge_engine.records import AttemptRecord
    from judge_engine.store import iter_transcript

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


class _RawConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection read by hand: what an HTTP client costs at least."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[bytes] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        at = self.buffer.find(b"content-length:", 0, end)
        if at < 0:
            at = self.buffer.find(b"Content-Length:", 0, end)
        length = int(self.buffer[at + 15: self.buffer.find(b"\r\n", at)])
        if len(self.buffer) >= end + 4 + length:
            body = bytes(self.buffer[end + 4: end + 4 + length])
            del self.buffer[: end + 4 + length]
            self.waiter.set_result(body)


async def replay(url: str, payloads: list[bytes], rate: float, burst: int = 1, client: str = "aiohttp") -> float:
    """Send ``payloads`` at ``rate`` per second, ``burst`` at a time as the engine's lanes do (0:
    back to back, 64 at a time); return CPU seconds per request. ``client``: ``aiohttp``, or
    ``raw`` (a hand-read HTTP/1.1 connection pool: what any HTTP client costs at least)."""
    from urllib.parse import urlsplit

    import aiohttp

    headers = {"Content-Type": "application/json", "Authorization": "Bearer floor"}
    parts = urlsplit(url)
    idle: list[_RawConnection] = []
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async def by_aiohttp(body: bytes) -> None:
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()

        async def by_hand(body: bytes) -> None:
            if idle:
                connection = idle.pop()
            else:
                _, connection = await loop.create_connection(_RawConnection, parts.hostname, parts.port)
            head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                    f"Authorization: Bearer floor\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            connection.waiter = loop.create_future()
            assert connection.transport is not None
            connection.transport.write(head + body)
            json.loads(await connection.waiter)
            connection.waiter = None
            idle.append(connection)

        one = by_hand if client == "raw" else by_aiohttp

        await one(payloads[0])  # connection set-up and first-use costs are start-up
        started = time.process_time()
        if rate <= 0:
            slots = asyncio.Semaphore(64)

            async def limited(body: bytes) -> None:
                async with slots:
                    await one(body)

            await asyncio.gather(*(limited(body) for body in payloads))
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
        return (time.process_time() - started) / len(payloads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcripts", type=Path)
    parser.add_argument("--rate", type=float, required=True, help="requests per second (0: back to back)")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--jitter", type=float, default=0.1)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=1, help="requests sent together (the lanes' limits.burst)")
    parser.add_argument("--client", choices=("aiohttp", "raw"), default="aiohttp",
                        help="raw: a hand-read HTTP/1.1 connection in place of aiohttp")
    args = parser.parse_args()
    from judge_engine.fake import FakeConfig, FakeServerProcess

    payloads = bodies(args.transcripts, args.n)
    with FakeServerProcess(FakeConfig(latency_s=args.latency, latency_jitter_s=args.jitter)) as server:
        cpu = asyncio.run(replay(server.base_url + "/chat/completions", payloads, args.rate, max(1, args.burst),
                                args.client))
    print(json.dumps({"requests": len(payloads), "cpu_ms_per_request": round(cpu * 1000, 3)}))


if __name__ == "__main__":
    main()
