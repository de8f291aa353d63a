"""``attack.py``'s families of hostile input: mutated configs and datasets, hostile side files
(templates, few-shot files), template injection and render bombs, score-expression injection.

The corpus is the fuzz test's (``tests/inputs/test_hostile_input.py``: every key of two configs
set to every kind of value, config files and datasets byte by byte, every case the issue names):
one corpus, two uses. The test plans each case in-process; here each is a real ``judge-engine
run`` against the fake server, in a worker process that is killed and replaced when a case
passes its bound (a hang). Each case must end in a clear error (exit 2 naming its key, line or
file, with nothing sent) or a run that went as it should; never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from benchmarks.attack_common import Attempt, Family, child_env, read_lines, run_dirs, scan_attempt

if TYPE_CHECKING:
    from benchmarks.attack import Context

BOUND_S = 30.0
"""What one case may take as a ``run`` of 3 items (a loaded machine is slow)."""
SENTINEL = "PWNED-BY-ATTACK"
"""A file a score expression or template would create if it ran code."""


# --- the worker: cases run in a process that outlives them ----------------------------------------


def serve() -> None:
    """The worker's loop: one JSON line in (``cwd``, ``argv``), one JSON line out (``code``,
    ``err``, ``seconds``; ``code`` null when ``main`` raised: ``err`` holds the traceback)."""
    from judge_engine.cli import main

    reply = os.fdopen(os.dup(1), "w", encoding="utf-8")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # whatever writes to the descriptor itself cannot break the protocol
    for line in sys.stdin:
        case = json.loads(line)
        os.chdir(case["cwd"])
        out, err = io.StringIO(), io.StringIO()
        started = time.monotonic()
        code: int | None
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(case["argv"])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException:  # the traceback is the finding
                code = None
                err.write(traceback.format_exc())
        reply.write(json.dumps({"code": code, "out": _ends(out.getvalue()), "err": _ends(err.getvalue()),
                                "seconds": time.monotonic() - started}) + "\n")
        reply.flush()


def _ends(text: str, size: int = 3000) -> str:
    """The start (what the message names) and the end (a traceback's last frames) of ``text``."""
    return text if len(text) <= 2 * size else f"{text[:size]} [...] {text[-size:]}"


class Worker:
    """A process running :func:`serve`; :meth:`run` bounds each case."""

    def __init__(self) -> None:
        from tests.harness import TEST_KEY_ENV

        self.env = child_env(**{TEST_KEY_ENV: "fake-key-0000"})
        self.process: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()

    def _start(self) -> subprocess.Popen[str]:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "from benchmarks.attack_inputs import serve; serve()"], env=self.env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.lines = queue.Queue()
            threading.Thread(target=self._read, args=(self.process, self.lines), daemon=True).start()
        return self.process

    @staticmethod
    def _read(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put("")  # the worker died

    def run(self, cwd: Path, argv: list[str], bound: float = BOUND_S) -> dict[str, Any]:
        """``judge-engine *argv`` in ``cwd``: ``{"code", "err", "seconds", "hung"}``."""
        process = self._start()
        assert process.stdin is not None
        process.stdin.write(json.dumps({"cwd": str(cwd), "argv": argv}) + "\n")
        process.stdin.flush()
        try:
            line = self.lines.get(timeout=bound)
        except queue.Empty:
            self.close()
            return {"code": None, "out": "", "err": "", "seconds": bound, "hung": True}
        if not line:
            self.close()
            return {"code": None, "out": "", "err": "the worker died", "seconds": 0.0, "hung": False}
        return {**json.loads(line), "hung": False}

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def _judge_case(ctx: Context, family: Family, worker: Worker, name: str, folder: Path, *,
                names: tuple[str, ...] = (), valid: bool | None = None, accepted_is_wrong: bool = False) -> Attempt:
    """Run ``folder``'s config and judge it: exit 2 naming every one of ``names`` (and nothing
    sent) is clear; exit 0 is absorbed when the case may be valid (``valid`` None or True);
    anything else is a finding."""
    before = _requests(ctx)
    done = worker.run(folder, ["run", "config.yaml", "--no-live"])
    sent = _requests(ctx) - before
    attempt = Attempt(name)
    err = done["err"]
    attempt.hang = done["hung"]
    attempt.traceback = done["code"] is None and not done["hung"] or "Traceback (most recent call last)" in err
    if attempt.hang or attempt.traceback:
        attempt.note = f"{done['seconds']:.0f} s: {err.strip()[-300:]}"
    elif done["code"] == 2:
        attempt.clear = err.startswith("judge-engine: error: ") and all(n in err for n in names) and valid is not True
        attempt.unclear = not attempt.clear
        if sent:
            attempt.wrong += 1
            err += f" ({sent} requests sent before the refusal)"
    elif done["code"] in (0, 3) and valid is not False:
        _check_accepted(attempt, folder, done["code"], accepted_is_wrong)
    else:
        attempt.unclear = True
    if attempt.unclear or attempt.wrong:
        attempt.note = f"exit {done['code']}: {err.strip()[-300:]}"
    return family.add(attempt)


def _check_accepted(attempt: Attempt, folder: Path, code: int, accepted_is_wrong: bool) -> None:
    """An accepted config: a run that is complete, its tasks each once, and not a value that
    cannot be meant (NaN, infinite, 10^20)."""
    runs = run_dirs(folder) or sorted(p.parent for p in folder.rglob("run.json"))  # output.dir moved by the case
    if accepted_is_wrong:
        attempt.wrong += 1
        attempt.note = "accepted"
        return
    if not runs:
        attempt.unclear = True
        return
    outcomes = read_lines(runs[0] / "outcomes.jsonl")
    keys = [(o.get("item_id"), o.get("judge"), o.get("temperature"), o.get("repeat")) for o in outcomes]
    attempt.duplicated += len(keys) - len(set(keys))
    status = json.loads((runs[0] / "run.json").read_text(encoding="utf-8")).get("status")
    if status != "completed":
        attempt.lost += 1
    if code == 3 and outcomes and all(o.get("status") != "scored" for o in outcomes):
        attempt.wrong += 1  # accepted, then every answer fails: the config was the mistake
        attempt.note = "every task unscored: " + str(outcomes[0].get("reason", ""))[:200]


def _requests(ctx: Context) -> int:
    try:
        return int(ctx.fake_stats()["requests_total"])
    except Exception:  # the fake's stats unavailable: "nothing sent" is not checked
        return 0


# --- configs --------------------------------------------------------------------------------------


def configs(ctx: Context, family: Family) -> None:
    from tests.inputs import test_hostile_input as corpus

    server = SimpleNamespace(base_url=ctx.fake_url)
    worker = Worker()
    root = ctx.folder("configs")
    cases = list(corpus.CORPUS)
    if ctx.quick:
        cases = ctx.rng.sample(cases, 120)
    try:
        for number, (name, kind, path, value) in enumerate(cases):
            build = corpus.gemba_config if name == "gemba" else corpus.custom_config
            folder = root / f"m{number}"
            _job(folder, corpus.mutated(build(server), path, value))
            _judge_case(ctx, family, worker, f"{name}: {corpus.dotted(path)} = {kind}", folder,
                        accepted_is_wrong=kind in ("nan", "inf", "-inf", "huge"))
        for name, named in corpus.NAMED.items():
            folder = root / f"named-{name}"
            folder.mkdir(parents=True, exist_ok=True)
            _job(folder, corpus.named_case_text(name, folder, server))  # type: ignore[arg-type]
            _judge_case(ctx, family, worker, f"issue case {name}", folder, names=tuple(named), valid=False)
        for name, (content, named) in corpus.config_files().items():
            folder = root / f"file-{name.replace(' ', '-').replace('%', '')}"
            _job(folder, content.replace(b"http://127.0.0.1:9/v1", ctx.fake_url.encode()))  # the fake, not a dead port
            valid = True if not named else (None if named == ("",) else False)
            _judge_case(ctx, family, worker, f"config file: {name}", folder,
                        names=() if named == ("",) else named, valid=valid)
    finally:
        worker.close()
    family.add(scan_attempt(root))


def _job(folder: Path, config: dict[str, Any] | str | bytes, *, items: bytes | None = None,
         items_name: str = "items.jsonl") -> None:
    import yaml

    from tests.harness import write_items

    folder.mkdir(parents=True, exist_ok=True)
    if items is not None:
        (folder / items_name).write_bytes(items)
    elif not (folder / "items.jsonl").exists():
        write_items(folder / "items.jsonl", 3)
    path = folder / "config.yaml"
    if isinstance(config, bytes):
        path.write_bytes(config)
    else:
        path.write_text(config if isinstance(config, str) else yaml.safe_dump(config, allow_unicode=True),
                        encoding="utf-8")


# --- datasets -------------------------------------------------------------------------------------


def datasets(ctx: Context, family: Family) -> None:
    from tests.harness import write_items
    from tests.inputs import test_hostile_input as corpus

    server = SimpleNamespace(base_url=ctx.fake_url)
    worker = Worker()
    root = ctx.folder("datasets")
    write_items(root / "good.jsonl", 4)
    good = (root / "good.jsonl").read_bytes()
    try:
        for name, (content, named) in corpus.jsonl_cases(good).items():
            config = corpus.gemba_config(server)
            del config["dataset"]["limit"]
            folder = root / f"jsonl-{len(family.attempts)}"
            _job(folder, config, items=content)
            _judge_case(ctx, family, worker, f"items.jsonl: {name}", folder, names=(named,) if named else (),
                        valid=named is None)
        for name, (content, named) in corpus.csv_cases().items():
            config = corpus.gemba_config(server)
            config["dataset"] = {"path": "items.csv", **{k: v for k, v in config["dataset"].items() if k != "path"}}
            folder = root / f"csv-{len(family.attempts)}"
            _job(folder, config, items=content, items_name="items.csv")
            _judge_case(ctx, family, worker, f"items.csv: {name}", folder, names=(named,) if named else (),
                        valid=named is None)
    finally:
        worker.close()
    family.add(scan_attempt(root))


# --- side files, templates and score expressions --------------------------------------------------


def _custom(ctx: Context, folder: Path, options: dict[str, Any], *, items: int = 4) -> None:
    from tests.protocols.test_custom_judges import job

    folder.mkdir(parents=True, exist_ok=True)
    job(folder, SimpleNamespace(base_url=ctx.fake_url), options, items=items)  # type: ignore[arg-type]


def side_files(ctx: Context, family: Family) -> None:
    from tests.protocols.test_custom_judges import JSON_OPTIONS

    worker = Worker()
    root = ctx.folder("side-files")
    contents = {"not UTF-8": b"Grade: caf\xe9 {{ question }}", "empty": b"", "binary": bytes(range(256)),
                "NUL": b"{{ question }}\x00{{ response }}", "unclosed tag": b"{{ question ",
                "unknown filter": b"{{ question|nosuch }}", "huge": b"{{ question }}" + b"x" * 20_000_000}
    try:
        for name, content in contents.items():
            folder = root / name.replace(" ", "-")
            _custom(ctx, folder, {**JSON_OPTIONS, "template_file": "rubric.j2"})
            (folder / "rubric.j2").write_bytes(content)
            _judge_case(ctx, family, worker, f"template_file: {name}", folder, names=("rubric.j2",))
        for name, make in (("a folder", lambda p: p.mkdir()), ("missing", lambda p: None),
                           ("a FIFO", lambda p: os.mkfifo(p))):
            folder = root / f"template-{name.replace(' ', '-')}"
            _custom(ctx, folder, {**JSON_OPTIONS, "template_file": "other.j2"})
            make(folder / "other.j2")
            _judge_case(ctx, family, worker, f"template_file is {name}", folder, names=("other.j2",), valid=False)
    finally:
        worker.close()
    family.add(scan_attempt(root))


RENDER_BOMBS = [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ question }}",
    "{{ (range(100000)|map('string')|map('center', 2000)|join)|length }}{{ question }}",
    "{{ 'x' * 10 ** 9 }}", "{{ 2 ** 1000000000 }}", "{{ '%999999999d' % 1 }}", "{{ 'x'.ljust(10 ** 9) }}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
]
INJECTIONS = [
    "{% set _ = item.update({'id': 'HIJACKED'}) %}{{ question }}", "{{ item.pop('id') }}{{ question }}",
    "{{ item.clear() }}{{ question }}", "{{ ''.__class__.__mro__[1].__subclasses__() }}{{ question }}",
    "{{ cycler.__init__.__globals__.os.system('touch " + SENTINEL + "') }}{{ question }}",
    "{{ lipsum.__globals__['os'].popen('touch " + SENTINEL + "').read() }}{{ question }}",
    "{{ self._TemplateReference__context }}{{ question }}", "{{ config }}{{ request }}{{ question }}",
    "{% include '/etc/passwd' %}{{ question }}", "{% import 'os' as os %}{{ question }}",
    "{% if item.id == 'q3' %}{{ item.pop('id') }}{% endif %}{{ question }}",
]


def templates(ctx: Context, family: Family) -> None:
    from tests.protocols.test_custom_judges import JSON_OPTIONS

    worker = Worker()
    root = ctx.folder("templates")
    try:
        for number, template in enumerate(INJECTIONS + RENDER_BOMBS):
            folder = root / f"t{number}"
            _custom(ctx, folder, {**JSON_OPTIONS, "template": template, "template_file": None})
            # refused as a template (protocol_options.template...) or as the dataset lines lacking
            # the variables it reads (items.jsonl:N: required field 'lipsum'): both are clear
            attempt = _judge_case(ctx, family, worker, f"template {template[:60]!r}", folder)
            _no_code_ran(attempt, folder)
            ids = {o.get("item_id") for run in run_dirs(folder) for o in read_lines(run / "outcomes.jsonl")}
            if ids - {f"q{i}" for i in range(4)}:
                attempt.wrong += 1
                attempt.note += f" item ids changed: {sorted(map(str, ids))[:4]}"
    finally:
        worker.close()
    family.add(scan_attempt(root))


SCORES = [
    "__import__('os').system('touch " + SENTINEL + "')", "().__class__.__base__.__subclasses__()",
    "score.__class__", "(lambda: 1)()", "[x for x in (1,)]", "open('/etc/passwd')", "exec('1')", "eval('1')",
    "score if score else __builtins__", "globals()", "score; import os", "score\nimport os", "f'{score}'",
    "score ** 10 ** 10", "9 ** 9 ** 9", "-" * 100_000 + "score", " + ".join(["score"] * 50_000),
    "score / (score - score)", "(" * 5000 + "score" + ")" * 5000, "score[0]", "score.real", "{score}",
    "'x' * 10 ** 9", "nosuch", "", "score, score", "score @ score", "score if True else 1",
]


def scores(ctx: Context, family: Family) -> None:
    from tests.protocols.test_custom_judges import JSON_OPTIONS

    worker = Worker()
    root = ctx.folder("scores")
    try:
        for number, expression in enumerate(SCORES):
            folder = root / f"s{number}"
            _custom(ctx, folder, {**JSON_OPTIONS, "score": expression})
            attempt = _judge_case(ctx, family, worker, f"score {expression[:60]!r}", folder,
                                  names=("protocol_options",))
            _no_code_ran(attempt, folder)
            for run in run_dirs(folder):
                bad = [o["score"] for o in read_lines(run / "outcomes.jsonl")
                       if isinstance(o.get("score"), float) and not math.isfinite(o["score"])]
                if bad:
                    attempt.wrong += 1
                    attempt.note += f" scores {bad[:3]}"
    finally:
        worker.close()
    family.add(scan_attempt(root))


def _no_code_ran(attempt: Attempt, folder: Path) -> None:
    if (folder / SENTINEL).exists() or Path(SENTINEL).exists():
        attempt.wrong += 1
        attempt.note += " injected code ran"
