"""What every family of ``attack.py`` shares: the tally, the planted secrets, commands run with a
bound, the check of a run against the fake server's oracle, and the search for secrets.

An attempt is one attack (a command, a request, a kill): it ends in a clear error, or in
something that must never happen (a traceback, a hang, a task lost or duplicated, a score that
differs from the oracle, a planted secret found), or in neither (the attack was absorbed: a run
that finished, a 200 whose data is right). ``unclear`` counts what is neither clear nor a
failure the columns name: an exit code the attack did not expect, or an error that names nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "JUDGE_ENGINE_ATTACK_KEY"
KEY = "sk-attackPlanted" + "0" * 4 + "env7f3a91c2"
"""The API key, shaped like one (the redaction's regular expressions could catch it)."""
SHAPELESS_ENV = "JUDGE_ENGINE_ATTACK_TOKEN"
SHAPELESS = "plantedToken" + "-4be0d1"
"""A second secret in the environment, shaped like nothing (only its value can be redacted)."""
URL_USER, URL_PASSWORD = "attackUser" + "-19c2", "attackUrlPassword" + "-83d0aa"
HEADER_SECRET = "attackHeader" + "Secret-5e61f0"
"""A credential written into ``params.extra_headers`` (a gateway's own key)."""
SECRETS = {"env key": KEY, "env token": SHAPELESS, "url user": URL_USER, "url password": URL_PASSWORD,
           "extra_headers": HEADER_SECRET}
INPUT_NAMES = frozenset({"config.yaml", "items.jsonl", "items.csv", "fewshot.jsonl", "rubric.j2"})
"""Files the attack writes itself (holding the secrets on purpose): never searched."""
COLUMNS = ("attempts", "clear", "tracebacks", "hangs", "lost", "duplicated", "wrong", "leaked", "unclear")
MUST_BE_ZERO = ("tracebacks", "hangs", "lost", "duplicated", "wrong", "leaked", "unclear")
FIELDS = {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang"}


@dataclass
class Attempt:
    """One attack and what it came to."""

    name: str
    clear: bool = False
    traceback: bool = False
    hang: bool = False
    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    leaked: int = 0
    unclear: bool = False
    note: str = ""

    def problems(self) -> list[str]:
        found = [name for name, bad in (("traceback", self.traceback), ("hang", self.hang), ("unclear", self.unclear))
                 if bad]
        found += [f"{name} {count}" for name, count in (("lost", self.lost), ("duplicated", self.duplicated),
                                                          ("wrong", self.wrong), ("leaked", self.leaked)) if count]
        return found


@dataclass
class Family:
    """One row of the table."""

    name: str
    attempts: list[Attempt] = field(default_factory=list)
    skipped: str = ""
    seconds: float = 0.0

    def add(self, attempt: Attempt) -> Attempt:
        self.attempts.append(attempt)
        return attempt

    def row(self) -> dict[str, int]:
        a = self.attempts
        return {"attempts": len(a), "clear": sum(x.clear for x in a), "tracebacks": sum(x.traceback for x in a),
                "hangs": sum(x.hang for x in a), "lost": sum(x.lost for x in a),
                "duplicated": sum(x.duplicated for x in a), "wrong": sum(x.wrong for x in a),
                "leaked": sum(x.leaked for x in a), "unclear": sum(x.unclear for x in a)}


def table(families: Sequence[Family]) -> str:
    """The families as a Markdown table, a total row under them."""
    width = max(len(f.name) for f in families) + 2
    lines = ["| family".ljust(width + 2) + " | " + " | ".join(COLUMNS) + " |",
             "|" + "-" * (width + 1) + "|" + "|".join("-" * (len(c) + 2) for c in COLUMNS) + "|"]
    total: Counter[str] = Counter()
    for family in families:
        row = family.row()
        total.update(row)
        cells = [str(row[c]).rjust(len(c)) for c in COLUMNS]
        lines.append(f"| {family.name.ljust(width)} | " + " | ".join(cells) + " |")
    lines.append(f"| {'total'.ljust(width)} | " + " | ".join(str(total[c]).rjust(len(c)) for c in COLUMNS) + " |")
    return "\n".join(lines)


# --- commands with a bound ------------------------------------------------------------------------


@dataclass
class Done:
    code: int | None
    out: str
    err: str
    seconds: float
    hung: bool

    @property
    def text(self) -> str:
        return self.out + self.err

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.text


def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, KEY_ENV: KEY, SHAPELESS_ENV: SHAPELESS, "PYTHONPATH": str(REPO),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "100"}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    env.update(extra)
    return env


class Outputs:
    """Every command's output, kept for the search for secrets at the end."""

    texts: list[tuple[str, str]] = []


def judge_engine(argv: Sequence[str], *, cwd: Path, timeout: float = 120.0, env: dict[str, str] | None = None,
                 prefix: Sequence[str] = ()) -> Done:
    """``python -m judge_engine.cli *argv`` in ``cwd``; killed (``hung``) after ``timeout`` s."""
    command = [*prefix, sys.executable, "-m", "judge_engine.cli", *argv]
    return command_done(command, cwd=cwd, timeout=timeout, env=env)


def command_done(command: Sequence[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> Done:
    started = time.monotonic()
    process = subprocess.Popen(list(command), cwd=cwd, env=env or child_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        hung = True
    done = Done(None if hung else process.returncode, out, err, time.monotonic() - started, hung)
    Outputs.texts.append((" ".join(command[-4:]), done.text))
    return done


def spawn(argv: Sequence[str], *, cwd: Path, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``judge-engine *argv`` in the background, its output appended to ``log``."""
    with log.open("ab") as handle:
        return subprocess.Popen([sys.executable, "-m", "judge_engine.cli", *argv], cwd=cwd, env=env or child_env(),
                                stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)


def judged(attempt: Attempt, done: Done, *, expect: Iterable[int], names: Sequence[str] = (),
           clear_codes: Iterable[int] = (2, 5)) -> Attempt:
    """Fill ``attempt`` from a command: a traceback, a hang, a clear error (an exit code of
    ``clear_codes`` whose message holds every one of ``names``), or an unexpected exit code."""
    attempt.traceback = done.traceback
    attempt.hang = done.hung
    if done.hung:
        attempt.note = f"no exit after {done.seconds:.0f} s"
        return attempt
    attempt.leaked += leaks_in_text(done.text)
    if done.code in set(clear_codes) and done.code in set(expect):
        message = done.err.strip()
        attempt.clear = bool(message) and all(name in message for name in names)
        attempt.unclear = not attempt.clear
    else:
        attempt.unclear = done.code not in set(expect)
    if attempt.unclear or attempt.traceback:
        attempt.note = f"exit {done.code}: {_tail(done.text)}"
    return attempt


def _tail(text: str, size: int = 300) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    tail = " / ".join(lines[-3:])
    return tail[-size:]


# --- secrets --------------------------------------------------------------------------------------


def leaks_in_text(text: str) -> int:
    return sum(1 for secret in SECRETS.values() if secret in text)


def leaks_in_files(root: Path) -> list[str]:
    """Every planted secret in any file under ``root`` (the attack's own inputs excepted)."""
    found = []
    for path in root.rglob("*"):
        if path.is_symlink() or not path.is_file() or path.name in INPUT_NAMES or path.suffix == ".yaml":
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        found += [f"{name} in {path}" for name, secret in SECRETS.items() if secret.encode() in data]
    return found


def scan_attempt(root: Path) -> Attempt:
    """The search of every file a family wrote, as one attempt."""
    leaks = leaks_in_files(root)
    return Attempt("every file written, searched for the planted secrets", leaked=len(leaks), note="; ".join(leaks[:5]))


# --- jobs and runs --------------------------------------------------------------------------------


def write_items(path: Path, count: int, *, hostile: bool = False) -> list[dict[str, Any]]:
    """``count`` short workload rows (the fake's oracle knows their scores); ``hostile``: some
    rows' text is markup, template syntax, control and bidi characters, and some ids are odd."""
    from benchmarks.workload import iter_rows

    path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for index, row in enumerate(iter_rows(count, min_words=6, max_words=18)):
        row = {key: row[key] for key in ("id", "src", "tgt", "src_lang", "tgt_lang")}
        if hostile:
            row["src"] = HOSTILE_TEXTS[index % len(HOSTILE_TEXTS)] + " " + row["src"]
            if index < len(HOSTILE_IDS):
                row["id"] = HOSTILE_IDS[index]
        rows.append(row)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return rows


PWNED = "__attackPwned"
HOSTILE_TEXTS = [
    f"<script>window.{PWNED}=1</script>",
    f'<img src=x onerror="window.{PWNED}=1">',
    f'"><svg onload="window.{PWNED}=1">',
    "{{ 7 * 7 }} {% for x in range(10**9) %}{% endfor %} {{ item.update({'id': 'HIJACKED'}) }}",
    "\u202eevil\u202c zero\u200bwidth \u0000nul \u001b[31mred\u001b[0m",
    f"javascript:window.{PWNED}=1 [link](javascript:alert(1))",
    "${jndi:ldap://x} %s%s%n ' OR 1=1 -- ; DROP TABLE outcomes;",
]
HOSTILE_IDS = ["<b>id</b>", "id with spaces & ? # %", "../../etc/passwd", "e\u0301", "\u00e9", "\u202eid",
               "'; DROP TABLE tasks; --", "id\u0000nul"]


def gemba_judge(name: str, api_base: str, **extra: Any) -> dict[str, Any]:
    judge = {"name": name, "model": "openai/gpt-4o-mini", "api_base": api_base, "api_key_env": KEY_ENV,
             "protocol": "gemba-mqm", "temperatures": [0.0], "max_tokens": 300, "timeout_s": 10,
             "limits": {"concurrency": 8}, "retries": {"transport": 2, "reasks": 1, "backoff_max_s": 0.05},
             "params": {"extra_headers": {"X-Gateway-Key": HEADER_SECRET}}}
    judge.update(extra)
    return judge


def write_config(folder: Path, judges: list[dict[str, Any]], *, items: str = "items.jsonl", **extra: Any) -> Path:
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    config = {"dataset": {"path": items, "fields": FIELDS}, "judges": judges, "output": {"dir": "runs"},
              "cache": {"dir": "cache"}, **extra}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def with_user_info(url: str) -> str:
    return url.replace("http://", f"http://{URL_USER}:{URL_PASSWORD}@", 1)


def run_dirs(job: Path) -> list[Path]:
    runs = job / "runs"
    return sorted(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()) if runs.exists() else []


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    found = []
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            try:
                found.append(json.loads(line))
            except ValueError:
                pass  # a torn last line: the engine cuts it on resume
    return found


class Oracle:
    """The fake server's answer's score for each item and temperature (GEMBA-MQM)."""

    def __init__(self) -> None:
        from benchmarks.workload import Oracle as Base

        self.base = Base("gemba-mqm")
        self._memo: dict[tuple[str, float], float | None] = {}

    def score(self, row: dict[str, Any], temperature: float) -> float | None:
        key = (json.dumps(row, sort_keys=True), temperature)
        if key not in self._memo:
            self._memo[key] = self.base.expected(row, temperature)[0]
        return self._memo[key]


def check_run(attempt: Attempt, run: Path, rows: Sequence[dict[str, Any]], oracle: Oracle,
              judges: dict[str, Sequence[float]], *, retried: bool = False) -> Attempt:
    """Lost, duplicated and silently wrong tasks of ``run``: every (item, judge, temperature)
    needs exactly one outcome line (more are duplicates unless ``retried``: a ``--retry``
    supersedes), each scored one the oracle's score; a run that says ``completed`` with a task
    missing is wrong too."""
    outcomes = [o for o in read_lines(run / "outcomes.jsonl") if not str(o.get("judge", "")).endswith(":item")]
    by_task: Counter[tuple[Any, ...]] = Counter()
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for outcome in outcomes:
        key = (outcome.get("item_id"), outcome.get("judge"), outcome.get("temperature"))
        by_task[key] += 1
        latest[key] = outcome
    expected = {(str(row["id"]), judge, t): row for row in rows for judge, temps in judges.items() for t in temps}
    missing = [key for key in expected if key not in by_task]
    attempt.lost += len(missing)
    if not retried:
        attempt.duplicated += sum(count - 1 for count in by_task.values() if count > 1)
    wrong = [key for key, outcome in latest.items() if key in expected and outcome.get("status") == "scored"
             and not _same(outcome.get("score"), oracle.score(expected[key], float(key[2])))]
    attempt.wrong += len(wrong) + len([key for key in latest if key not in expected])
    status = _status(run)
    if missing and status == "completed":
        attempt.wrong += 1
    if missing or wrong or attempt.duplicated:
        attempt.note += f" [{run.name}: {len(missing)} missing, {len(wrong)} wrong, status {status}]"
    return attempt


def _same(a: Any, b: Any) -> bool:
    return isinstance(a, int | float) and isinstance(b, int | float) and abs(a - b) < 1e-9


def _status(run: Path) -> str | None:
    try:
        return str(json.loads((run / "run.json").read_text(encoding="utf-8")).get("status"))
    except (OSError, ValueError):
        return None


def wait_for(predicate: Any, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def line_count(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 16), b""))
    except OSError:
        return 0


def kill_group(process: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def mount(*args: str) -> bool:
    """``mount *args`` (root, where mounts are allowed); False when it cannot."""
    try:
        return subprocess.run(["mount", *args], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)
