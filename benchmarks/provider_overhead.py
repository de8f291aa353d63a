"""CPU per call of the provider seam alone (either transport) against the fake server.

    python benchmarks/provider_overhead.py [--n 2000] [--concurrency 64] [--protocol gemba-mqm]
                                           [--transport direct|litellm|both]

No engine, no lanes, no store: only the provider (``OpenAIHTTPProvider`` or ``LiteLLMProvider``
and litellm), so a change in ``judge_engine/providers/`` shows up undiluted. The fake server runs in its own process
(its CPU is not counted); the first 200 calls warm up (lazy imports, client creation) and are not
counted either. Prints ms of this process's CPU (user + system) per call.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workload import KEY, MODEL, Oracle, iter_rows  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(base_url: str, *, n: int, concurrency: int, protocol: str, warmup: int = 200,
                  transport: str = "litellm") -> dict[str, float]:
    from judge_engine.providers.base import ProviderRequest
    from judge_engine.providers.litellm import LiteLLMProvider
    from judge_engine.providers.openai_http import OpenAIHTTPProvider

    oracle = Oracle(protocol)
    requests = [
        ProviderRequest(model=MODEL, messages=oracle.messages(row), temperature=0.0, max_tokens=300,
                        api_base=base_url, timeout_s=30.0)
        for row in iter_rows(n + warmup)
    ]
    provider = OpenAIHTTPProvider(api_key=KEY) if transport == "direct" else LiteLLMProvider(api_key=KEY)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(request: ProviderRequest) -> None:
        async with semaphore:
            await provider.complete(request)

    await asyncio.gather(*(one(r) for r in requests[:warmup]))
    cpu, wall = _cpu(), time.perf_counter()
    await asyncio.gather(*(one(r) for r in requests[warmup:]))
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    if isinstance(provider, OpenAIHTTPProvider):
        await provider.aclose()
    return {"calls": n, "cpu_ms_per_call": 1000 * cpu / n, "wall_s": wall}


def install_transform_check() -> tuple[list[int], Callable[[], None]]:
    """Make every chat request compute the SDK's own transform too and assert that the adapter's
    shortcut produced the same body; returns a one-element list counting the checked calls and a
    function that puts the adapter's shortcut back (``tests/providers/test_provider_overhead.py``)."""
    from judge_engine.providers.litellm import LiteLLMProvider

    LiteLLMProvider()  # installs the adapter's shortcut
    from openai.resources.chat.completions import completions as module

    fast = module.async_maybe_transform
    original = fast._judge_engine_original
    checked = [0]

    async def both(data, expected_type):  # type: ignore[no-untyped-def]
        ours = await fast(data, expected_type)
        theirs = await original(data, expected_type)
        assert ours == theirs, (ours, theirs)
        checked[0] += 1
        return ours

    module.async_maybe_transform = both

    def restore() -> None:
        module.async_maybe_transform = fast

    return checked, restore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--protocol", default="gemba-mqm")
    parser.add_argument("--transport", choices=["direct", "litellm", "both"], default="both")
    parser.add_argument("--verify", action="store_true",
                        help="also run the SDK's request transform on every call and assert the same body")
    args = parser.parse_args()
    checked = install_transform_check()[0] if args.verify else None
    from judge_engine.fake import FakeConfig, FakeServerProcess

    transports = ["direct", "litellm"] if args.transport == "both" else [args.transport]
    with FakeServerProcess(FakeConfig()) as server:
        for transport in transports:
            result = asyncio.run(measure(server.base_url, n=args.n, concurrency=args.concurrency,
                                         protocol=args.protocol, transport=transport))
            print(f"{transport:>8}: {result['calls']} calls, {result['cpu_ms_per_call']:.2f} ms CPU per call "
                  f"({result['wall_s']:.1f} s wall)")
    if checked is not None:
        print(f"request bodies identical to the OpenAI SDK's transform: {checked[0]} calls checked")


if __name__ == "__main__":
    main()
