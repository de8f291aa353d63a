"""``python -m judge_engine.fake --port 0 --config '{"rpm": 600}' [--state-dir DIR [--read-only]]``

Prints exactly one line, ``judge-engine fake server listening on http://127.0.0.1:PORT/v1``, once
it serves, then serves on 127.0.0.1 until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from judge_engine.fake.app import FakeApp
from judge_engine.fake.batch_state import BatchStore
from judge_engine.fake.config import FakeConfig
from judge_engine.fake.process import READY_PREFIX
from judge_engine.util import jsonio


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m judge_engine.fake",
        description="The judge-engine fake OpenAI-compatible server (binds 127.0.0.1 only).",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument(
        "--config", default="{}", help='FakeConfig as JSON, e.g. \'{"rpm": 600, "latency_s": 0.2}\''
    )
    parser.add_argument(
        "--parent", type=int, default=None, help="exit when the process with this pid is gone"
    )
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="keep the batch APIs' files and batches here, and serve those found there")
    parser.add_argument("--read-only", action="store_true", help="with --state-dir: serve them, write nothing")
    args = parser.parse_args(argv)
    try:
        args.config = FakeConfig.model_validate(jsonio.loads(args.config))
    except (ValueError, ValidationError) as exc:
        parser.error(f"--config: {exc}")
    return args


async def _watch_parent(parent: int, stop: asyncio.Event) -> None:
    """A parent killed with SIGKILL cannot stop its children: notice it and stop ourselves."""
    while not stop.is_set():
        if os.getppid() != parent:
            stop.set()
            return
        await asyncio.sleep(0.5)


async def serve(port: int, config: FakeConfig, parent: int | None = None, *, state_dir: Path | None = None,
                read_only: bool = False) -> None:
    app = FakeApp(config, store=BatchStore(state_dir, read_only=read_only) if state_dir else None)
    bound = await app.start(port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"{READY_PREFIX}http://127.0.0.1:{bound}/v1", flush=True)
    watcher = asyncio.create_task(_watch_parent(parent, stop)) if parent is not None else None
    try:
        await stop.wait()
    finally:
        if watcher is not None:
            watcher.cancel()
        await app.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    asyncio.run(serve(args.port, args.config, args.parent, state_dir=args.state_dir, read_only=args.read_only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
