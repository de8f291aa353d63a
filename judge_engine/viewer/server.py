"""The viewer's HTTP server (aiohttp.web: the project's server library, as the fake server's).

Routes (GET only; nothing the viewer serves can change a run)::

    /                     the page (static/index.html)
    /static/<file>        its modules and style sheet (package data, no build step)
    /api/overview         runs, judges, counts, spend, histograms, consistency, filter values
    /api/tasks?...        one list page (judge, status, reason, temperature, repeat, min, max,
                          q, item, sort, page, size)
    /api/item?id=ITEM     every task of the item, with its protocol's card
    /api/transcript?run=N&task=TASK_ID     every attempt of the task

Every database call runs on one query thread (SQLite connections are not shared between threads),
so the event loop only moves bytes; the builder derives in the background
(:mod:`judge_engine.viewer.derived`).

Safety: run text is hostile input. It is only ever sent as JSON strings and the page builds its
DOM with ``textContent``; every response carries a strict Content-Security-Policy (scripts and
styles from this server only, nothing inline) and ``X-Content-Type-Options: nosniff``. Requests
whose ``Host`` is not this loopback address are refused (a web page elsewhere cannot reach the
viewer by DNS rebinding), unless ``--host`` widened the bind on purpose. The values of
environment variables named like secrets (``*_KEY``, ``*_TOKEN``...), anything shaped like an
API key and the credentials of any URL are redacted from every response, by the one redaction the
engine's writers use (:mod:`judge_engine.util.redaction`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import ClientSession, web
from aiohttp.http_exceptions import HttpProcessingError

from judge_engine.errors import RunDirError
from judge_engine.trust.estimate_rows import HumanTable
from judge_engine.util.jsonio import dumps
from judge_engine.util.redaction import redact, secrets_in_environment
from judge_engine.viewer.catalog import Catalog
from judge_engine.viewer.derived import Builder
from judge_engine.viewer.pages import Pages
from judge_engine.viewer.queries import whole_parameter

STATIC = Path(__file__).parent / "static"
LOOPBACK = "127.0.0.1"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
T = TypeVar("T")


class _ClientMistakes(logging.Filter):
    """aiohttp logs a request it cannot parse (no ``Host`` header, a broken request line) with a
    traceback, after answering it 400: the client's mistake, never the viewer's, so not shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], HttpProcessingError))


_HTTP_LOG = logging.getLogger("judge_engine.viewer.http")
_HTTP_LOG.addFilter(_ClientMistakes())


class Viewer:
    """One viewer: the catalog of runs, the builder, the HTTP server.

    Args:
        run_dirs: the run directories to open together.
        host: where to listen; the loopback address unless widened on purpose.
        port: 0 for a free port.
        human: a human table: the overview shows each judge's human-scale estimate beside its raw
            mean (:mod:`judge_engine.trust.estimate_rows`).
    """

    def __init__(self, run_dirs: Sequence[Path], *, host: str = LOOPBACK, port: int = 0,
                 human: HumanTable | None = None) -> None:
        self.run_dirs = list(run_dirs)
        self.human = human
        self.host = host
        self.requested_port = port
        self.port = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-engine-view-query")
        self._runner: web.AppRunner | None = None
        self._secrets = secrets_in_environment()
        self._files = {p.name: (p.read_bytes(), _TYPES[p.suffix]) for p in STATIC.iterdir() if p.suffix in _TYPES}
        self.catalog: Catalog | None = None
        self.builder: Builder | None = None
        self.pages: Pages | None = None

    @property
    def url(self) -> str:
        host = "[::1]" if self.host == "::1" else self.host
        return f"http://{LOOPBACK if host in ('0.0.0.0', '::') else host}:{self.port}/"

    async def start(self) -> str:
        """Open the runs, start deriving, bind; the page's URL.

        Raises:
            RunDirError: a path that is not a run directory.
            CalibrationError: the human table cannot be read.
            OSError: the port is taken.
        """
        labels = await self._db(self.human.read) if self.human is not None else None
        self.catalog = await self._db(Catalog, self.run_dirs)
        self.builder = Builder(self.catalog)
        self.pages = Pages(self.catalog, self.builder, human=labels, by=self.human.by if self.human else None)
        self.builder.start()
        self._runner = web.AppRunner(self.application(), access_log=None, handle_signals=False, shutdown_timeout=0.5,
                                    logger=_HTTP_LOG)
        await self._runner.setup()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.requested_port))
        except OSError:
            sock.close()
            raise
        await web.SockSite(self._runner, sock).start()
        self.port = int(sock.getsockname()[1])
        asyncio.get_running_loop().create_task(self._warm())
        return self.url

    async def _warm(self) -> None:
        """Once the order indexes exist, build the disagreement order, so sorting by it is
        instant when asked."""
        assert self.catalog is not None and self.builder is not None and self.pages is not None
        runs, states = self.catalog.runs, self.builder.states
        while not all(state.indexed or not run.in_index or state.problems for run, state in zip(runs, states, strict=True)):
            await asyncio.sleep(0.2)
        await self._db(self.pages.ensure_spread)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.builder is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.builder.stop)
        if self.catalog is not None:
            await self._db(self.catalog.close)
        self._executor.shutdown(wait=True)

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on the query thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # --- the application ----------------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/api/overview", self._overview)
        app.router.add_get("/api/tasks", self._tasks)
        app.router.add_get("/api/item", self._item)
        app.router.add_get("/api/transcript", self._transcript)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        if self.host == LOOPBACK and request.host not in (f"{LOOPBACK}:{self.port}", f"localhost:{self.port}"):
            response: web.StreamResponse = web.Response(status=403, text="this viewer answers on its own address only")
        else:
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                response = web.Response(status=exc.status, text=exc.text)
            except (RunDirError, ValueError) as exc:
                response = self._json({"error": str(exc)}, status=404 if isinstance(exc, RunDirError) else 400)
            except (sqlite3.Error, OSError) as exc:  # the run's files changed under the viewer, or a bug
                response = self._json({"error": f"{type(exc).__name__}: {exc}"}, status=500)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    def _json(self, document: Any, *, status: int = 200) -> web.Response:
        text = redact(dumps(document).decode(), self._secrets)
        return web.Response(text=text, status=status, content_type="application/json")

    async def _index(self, request: web.Request) -> web.Response:
        return await self._static_file("index.html")

    async def _static(self, request: web.Request) -> web.Response:
        return await self._static_file(request.match_info["name"])

    async def _static_file(self, name: str) -> web.Response:
        found = self._files.get(name)
        if found is None:
            raise web.HTTPNotFound()
        body, kind = found
        return web.Response(body=body, headers={"Content-Type": kind, "Cache-Control": "no-cache"})

    async def _overview(self, request: web.Request) -> web.Response:
        assert self.pages is not None
        return self._json(await self._db(self.pages.overview))

    async def _tasks(self, request: web.Request) -> web.Response:
        assert self.pages is not None
        return self._json(await self._db(self.pages.task_page, dict(request.query)))

    async def _item(self, request: web.Request) -> web.Response:
        assert self.pages is not None
        item_id = request.query.get("id")
        if not item_id:
            raise ValueError("id: which item? (?id=ITEM)")
        return self._json(await self._db(self.pages.item, item_id))

    async def _transcript(self, request: web.Request) -> web.Response:
        assert self.pages is not None
        task_id = request.query.get("task")
        if not task_id:
            raise ValueError("task: which task? (?run=N&task=TASK_ID)")
        number = whole_parameter(dict(request.query), "run") or 0
        return self._json(await self._db(self.pages.transcript, number, task_id))


async def check(viewer: Viewer) -> dict[str, Any]:
    """Ask the running viewer for its page, overview and first list page, as a browser would
    (``judge-engine view --check``): how many tasks, and how long each answer took."""
    timings: dict[str, float] = {}
    async with ClientSession() as session:
        found: dict[str, Any] = {}
        for name, path in (("page", ""), ("overview", "api/overview"), ("first_page", "api/tasks?page=1")):
            started = time.perf_counter()
            async with session.get(viewer.url + path) as response:
                response.raise_for_status()
                found[name] = await (response.text() if name == "page" else response.json())
            timings[name] = time.perf_counter() - started
    return {"tasks": found["first_page"]["total"], "judges": [j["label"] for j in found["overview"]["judges"]],
            "demo": found["overview"]["demo"], "seconds": timings}
