"""``judge-engine view RUN_DIR [RUN_DIR ...]``: audit runs in the browser (:mod:`judge_engine.viewer`).

Starts a local server on 127.0.0.1 (a free port unless ``--port``), prints its URL and serves
until Ctrl-C; it opens a browser only when asked (``--open``). ``--host`` widens the bind on
purpose, with a warning: the runs' text is then readable from the network. ``--check`` starts
the server, asks it for its page, overview and first list page as a browser would, prints what
it got and how fast, and exits (0; 2 when a directory is not a run).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from judge_engine.cli import EXIT_OK

if TYPE_CHECKING:
    from judge_engine.cli.display import Terminal as Console

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    view = commands.add_parser("view", help="audit runs in the browser: overview, items, transcripts (local server)",
                               description="Serves the runs on http://127.0.0.1:PORT/ until Ctrl-C. Several run "
                                           "directories are shown together (e.g. two judges' runs on one dataset).")
    view.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                      help="run directories, shown as one list (RUNS/<run id>, or RUNS/latest)")
    view.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    view.add_argument("--host", default="127.0.0.1",
                      help="address to listen on (default 127.0.0.1; anything else exposes the runs to the network)")
    view.add_argument("--open", action="store_true", help="open the page in the default browser")
    view.add_argument("--check", action="store_true",
                      help="start, load the page, the overview and the first list page once, print them, and exit")
    human = view.add_argument_group("human labels: each judge's human-scale estimate on the overview")
    human.add_argument("--human-table", type=Path, metavar="FILE", help="human labels: CSV, TSV or JSONL, one row per item")
    human.add_argument("--key", default="id", metavar="ID", help="its item id column (default id)")
    human.add_argument("--human", metavar="COLUMN", help="its label column")
    human.add_argument("--positive", metavar="VALUE", help="labels that are not numbers: the share equal to VALUE")
    human.add_argument("--by", metavar="COLUMN", help="a dataset column to estimate per value of (e.g. system)")
    view.set_defaults(handler=view_command)


def view_command(args: argparse.Namespace) -> int:
    import asyncio

    from judge_engine.cli.display import make_console, say

    console = make_console()
    if args.human_table is not None and not args.human:
        from judge_engine.cli.stats import fail

        return fail("view", "--human-table needs --human COLUMN (and --key ID, default id)")
    if args.host not in LOCAL_HOSTS:
        say(console, f"[bold red]warning:[/bold red] listening on {args.host}: anyone who can reach this machine "
                     "can read these runs (dataset text, prompts, answers)")
    try:
        asyncio.run(_serve(args, console))
    except KeyboardInterrupt:  # the first Ctrl-C cancels the server's task; its cleanup has run
        say(console, "viewer stopped")
    return EXIT_OK


async def _serve(args: argparse.Namespace, console: Console) -> None:
    import asyncio
    import webbrowser

    from judge_engine.cli.display import escape, path_line, say
    from judge_engine.trust.estimate_rows import HumanTable
    from judge_engine.viewer.server import Viewer, check

    human = HumanTable(args.human_table, args.key, args.human, args.positive, args.by) if args.human_table else None
    viewer = Viewer(args.run_dirs, host=args.host, port=args.port, human=human)
    try:
        url = await viewer.start()
        synthetic = viewer.catalog.synthetic() if viewer.catalog is not None else None
        if synthetic:
            say(console, f"[bold yellow]{escape(synthetic)}[/bold yellow]")
        if args.check:
            found = await check(viewer)
            timings = " · ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in found["seconds"].items())
            say(console, f"viewer ok at {url}: {found['tasks']:,} tasks; judges {', '.join(found['judges'])}; {timings}")
            return
        path_line(console, "judge-engine view (Ctrl-C to stop)", url)
        if args.open:
            webbrowser.open(url)
        await asyncio.Event().wait()
    finally:
        await viewer.stop()
