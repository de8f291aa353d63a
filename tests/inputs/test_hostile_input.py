"""The fuzz corpus of issue 24, point 6: configs and datasets mutated as an attacker would (wrong
types, missing and repeated keys, huge, negative, NaN and infinite numbers, empty and unicode
strings, deep nesting, alias bombs, bad encodings, truncated files, BOMs, CRLF, binary junk), and
each case the issue names. For every case: no traceback, no hang (a bound per case), and either
a valid config (exit 0) or exit 2 with a message naming the key or the line; nothing is sent.

Cases run in-process through ``main(["plan", ...])`` (``plan`` prepares the run exactly as
``run`` does, renders every prompt and sends nothing), so the corpus takes seconds; the cases of
the issue also run as ``run`` against the fake server (nothing reaches it), and a few as a
subprocess, for the command's exit code and stderr.
"""

from __future__ import annotations

import copy
import functools
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine import cli
from judge_engine.cli import main
from judge_engine.fake import FakeServer
from tests.harness import TEST_KEY_ENV, write_items

BOUND_S = 10.0
"""What one case may take, in-process (most take milliseconds; a loaded machine is slow)."""
CONFIG = "config.yaml"


# --- the jobs mutated ---------------------------------------------------------------------------


def gemba_config(server: FakeServer | None = None) -> dict[str, Any]:
    return {
        "dataset": {"path": "items.jsonl", "fields": {"source": "src", "target": "tgt", "source_lang": "src_lang",
                                                      "target_lang": "tgt_lang"}, "limit": 3},
        "judges": [{"name": "mqm", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm",
                    "api_base": server.base_url if server else "http://127.0.0.1:9/v1", "api_key_env": TEST_KEY_ENV,
                    "temperatures": [0.0], "repeats": 1, "max_tokens": 300, "timeout_s": 10,
                    "params": {"top_p": 0.9, "extra_body": {"seed": 1}},
                    "limits": {"rpm": 600, "tpm": 100000, "concurrency": 4},
                    "retries": {"transport": 2, "reasks": 1, "backoff_max_s": 0.01}}],
        "output": {"dir": "runs"}, "cache": {"dir": "cache"},
    }


def custom_config(server: FakeServer | None = None) -> dict[str, Any]:
    config = gemba_config(server)
    config["judges"][0].update(name="mine", protocol="custom", protocol_options={
        "template": "Source: {{ source }}\nTranslation: {{ target }}", "output": "json", "score": "mean(fluency, adequacy)",
        "fields": {"reasoning": "text", "fluency": {"type": "integer", "min": 1, "max": 5},
                   "adequacy": {"type": "number", "min": 0, "max": 5}}})
    return config


def write_job(folder: Path, config: dict[str, Any] | str | bytes, items: int = 4) -> Path:
    """``config.yaml`` (a mapping, or the file's text or bytes) and ``items.jsonl`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "items.jsonl").exists():
        write_items(folder / "items.jsonl", items)
    path = folder / CONFIG
    if isinstance(config, bytes):
        path.write_bytes(config)
    else:
        path.write_text(config if isinstance(config, str) else yaml.safe_dump(config, allow_unicode=True),
                        encoding="utf-8")
    return path


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One plan before the timed ones: the first imports litellm (seconds on a loaded machine)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["plan", str(write_job(tmp_path_factory.mktemp("warm"), gemba_config()))]) == 0


@dataclass(frozen=True)
class Outcome:
    code: int
    err: str
    seconds: float


def plan(path: Path, capsys: pytest.CaptureFixture[str]) -> Outcome:
    """``judge-engine plan`` in this process: a traceback is an exception here, and fails the test."""
    capsys.readouterr()
    started = time.monotonic()
    code = main(["plan", str(path)])
    seconds = time.monotonic() - started
    return Outcome(code, capsys.readouterr().err, seconds)


def check(outcome: Outcome, *named: str) -> None:
    """Exit 2 within the bound, with one message naming each of ``named``."""
    assert outcome.seconds < BOUND_S, outcome
    assert outcome.code == 2, outcome
    assert outcome.err.startswith("judge-engine: error: ") and "Traceback" not in outcome.err, outcome
    for name in named:
        assert name in outcome.err, (name, outcome.err)


# --- the cases the issue names ------------------------------------------------------------------


def alias_bomb(indent: str, depth: int = 9, width: int = 10) -> str:
    """The billion laughs: nine lines whose aliases expand to 10^9 strings."""
    lines = [f'{indent}l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, depth):
        lines.append(f"{indent}l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines)


def named_case_text(name: str, folder: Path, server: FakeServer | None) -> str | bytes:
    """The config file of one of the issue's cases."""
    gemba, custom = gemba_config(server), custom_config(server)
    dump = yaml.safe_dump
    match name:
        case "temperature_nan":
            gemba["judges"][0]["temperatures"] = [math.nan]
            return dump(gemba)
        case "max_tokens_huge":
            return dump(gemba).replace("max_tokens: 300", "max_tokens: 100000000000000000000")
        case "max_tokens_true":  # was read as 1: every answer cut, every task unscored
            gemba["judges"][0]["max_tokens"] = True
            return dump(gemba)
        case "rpm_true" | "tpm_tiny":  # 1 a minute, or a pace that never sends: the run hung
            gemba["judges"][0].setdefault("limits", {})["rpm" if name == "rpm_true" else "tpm"] = (
                True if name == "rpm_true" else 1e-300)
            return dump(gemba)
        case "not_utf8":
            return dump(gemba).replace("name: mqm", "name: mqm # caf\xe9").encode("latin-1")
        case "alias_bomb":
            return dump(gemba).replace("extra_body:\n      seed: 1", "extra_body:\n" + alias_bomb(" " * 6))
        case "deep_nesting":
            return dump(gemba).replace("seed: 1", "seed: " + "[" * 5000 + "1" + "]" * 5000)
        case "score_unary_minuses" | "score_long_sum" | "score_zero_divisor" | "score_zero_difference":
            custom["judges"][0]["protocol_options"]["score"] = {
                "score_unary_minuses": "-" * 100_000 + "fluency",
                "score_long_sum": " + ".join(["fluency"] * 50_000),
                "score_zero_divisor": "fluency / (adequacy - adequacy)",
                "score_zero_difference": "fluency / (mean(fluency, adequacy) - (fluency + adequacy) / 2)",
            }[name]
            return dump(custom)
        case "field_min_nan" | "field_max_inf":
            field = custom["judges"][0]["protocol_options"]["fields"]["adequacy"]
            field["min" if name == "field_min_nan" else "max"] = math.nan if name == "field_min_nan" else math.inf
            return dump(custom)
        case "output_dev_null":
            gemba["output"]["dir"] = "/dev/null"
            return dump(gemba)
        case "cache_cannot_be_made":
            (folder / "a-file").write_text("not a folder")
            gemba["cache"]["dir"] = "a-file/cache"
            return dump(gemba)
    raise AssertionError(name)


NAMED = {
    "temperature_nan": ["judges[mqm].temperatures[0]"],
    "max_tokens_huge": ["judges[mqm].max_tokens"],
    "max_tokens_true": ["judges[mqm].max_tokens", "valid integer"],
    "rpm_true": ["judges[mqm].limits.rpm", "valid number"],
    "tpm_tiny": ["judges[mqm].limits.tpm"],
    "not_utf8": ["line ", "not UTF-8"],
    "alias_bomb": ["judges[0].params.extra_body.l5[9]", "more than 1,000,000 values once its aliases are expanded"],
    "deep_nesting": ["judges[0].params.extra_body.seed", "nested more than 64 levels"],
    "score_unary_minuses": ["judges[mine].protocol_options", "score: the expression is 100,00"],
    "score_long_sum": ["judges[mine].protocol_options", "characters long, more than 2,000"],
    "score_zero_divisor": ["judges[mine].protocol_options", "'adequacy - adequacy' is 0 whatever the answer"],
    "score_zero_difference": ["judges[mine].protocol_options", "is 0 whatever the answer"],
    "field_min_nan": ["judges[mine].protocol_options.fields.adequacy.min"],
    "field_max_inf": ["judges[mine].protocol_options.fields.adequacy.max"],
    "output_dev_null": ["output.dir: /dev/null is not a folder"],
    "cache_cannot_be_made": ["cache.dir: cannot make", "a-file is not a folder"],
}
"""Each case of the issue and what its message must name."""


@pytest.mark.parametrize("name", sorted(NAMED))
def test_each_case_of_the_issue_is_exit_2_naming_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        name: str) -> None:
    path = write_job(tmp_path, named_case_text(name, tmp_path, None))
    check(plan(path, capsys), *NAMED[name])


@pytest.mark.parametrize("name", sorted(NAMED))
def test_each_case_of_the_issue_sends_nothing_when_run(tmp_path: Path, fake_server: FakeServer,
                                                       capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = write_job(tmp_path, named_case_text(name, tmp_path, fake_server))
    capsys.readouterr()
    assert main(["run", str(path), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert all(part in err for part in NAMED[name]) and "Traceback" not in err, err
    assert fake_server.stats()["requests_total"] == 0
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alias_bomb", "not_utf8", "score_zero_divisor", "output_dev_null"])
def test_the_command_exits_2_with_one_line_on_stderr(tmp_path: Path, name: str) -> None:
    path = write_job(tmp_path, named_case_text(name, tmp_path, None))
    done = subprocess.run([sys.executable, "-m", "judge_engine.cli", "run", str(path), "--no-live"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("judge-engine: error: ") and "Traceback" not in done.stderr
    assert all(part in done.stderr for part in NAMED[name]), done.stderr


# --- the systematic corpus: every key of two configs, every kind of value -------------------------

VALUES: dict[str, Any] = {
    "null": None, "empty": "", "unicode": "☃ ünï 💥", "bool": True, "zero": 0, "negative": -1,
    "huge": 10**20, "big": 10**15, "tiny": 1e-300, "nan": math.nan, "inf": math.inf, "-inf": -math.inf,
    "list": [1, "x"], "mapping": {"x": 1}, "long": "x" * 100_000,
}
"""What each key of the configs is set to, in turn (the kinds of the attack's 177 mutations)."""


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every key and list entry under ``value``."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield (*path, key)
            yield from leaves(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield (*path, index)
            yield from leaves(child, (*path, index))


def dotted(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def mutated(config: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """``config`` with the key at ``path`` set to ``value`` (or removed, for the sentinel ``...``)."""
    config = copy.deepcopy(config)
    parent = config
    for part in path[:-1]:
        parent = parent[part]
    if value is ...:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return config


def systematic() -> Iterator[tuple[str, str, tuple[Any, ...], Any]]:
    for name, build in (("gemba", gemba_config), ("custom", custom_config)):
        base = build()
        for path in leaves(base):
            if name == "custom" and path[:3] != ("judges", 0, "protocol_options"):
                continue  # the rest is the gemba config's
            for kind, value in (("missing", ...), *VALUES.items()):
                yield name, kind, path, value


CORPUS = list(systematic())


@pytest.mark.slow
def test_the_systematic_config_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each key set to each kind of value, or removed: a valid config (exit 0) or exit 2 naming
    the key (or a key above it, or the dataset's line it makes unreadable), never a traceback,
    never past the bound."""
    monkeypatch.setattr(cli, "parser", functools.lru_cache(maxsize=1)(cli.parser))  # built once, not 800 times
    problems = []
    for number, (name, kind, path, value) in enumerate(CORPUS):
        build = gemba_config if name == "gemba" else custom_config
        outcome = plan(write_job(tmp_path / str(number), mutated(build(), path, value)), capsys)
        where = f"{name}: {dotted(path)} = {kind}"
        if outcome.seconds > BOUND_S or outcome.code not in (0, 2) or "Traceback" in outcome.err:
            problems.append(f"{where}: {str(outcome)[:300]}")
        elif outcome.code == 2 and not _names(outcome.err, path):
            problems.append(f"{where}: does not name the key: {outcome.err.strip()[:300]}")
        elif outcome.code == 0 and kind in ("nan", "inf", "-inf", "huge"):
            problems.append(f"{where}: accepted")
    assert problems == [], "\n".join(problems)


def _names(err: str, path: tuple[Any, ...]) -> bool:
    """Whether an error names the key at ``path`` or one above it (a judge's keys also as
    ``judges[<name>]``), or the dataset line the key made unreadable."""
    if "items.jsonl:" in err or "dataset file not found" in err or "is a folder" in err:
        return True
    keys = [dotted(path[:end]) for end in range(len(path), 0, -1)]
    if path[:1] == ("judges",) and len(path) > 2:
        keys += [f"judges[{judge}].{dotted(path[2:end])}" for judge in ("mqm", "mine") for end in range(len(path), 2, -1)]
        keys += [f"judges[{judge}]" for judge in ("mqm", "mine")]
    return any(f"{key}:" in err or f"{key}." in err or f"{key}[" in err for key in keys)


# --- config files: encodings, truncation, repeated keys, YAML tricks ------------------------------


def config_files() -> dict[str, tuple[bytes, tuple[str, ...]]]:
    """Name -> (the file's bytes, what the error names; empty: the file is valid)."""
    text = yaml.safe_dump(gemba_config(), sort_keys=False)
    raw = text.encode()
    judge_line = text.index("  model: ")
    return {
        "bom": (b"\xef\xbb\xbf" + raw, ()),
        "crlf": (raw.replace(b"\n", b"\r\n"), ()),
        "latin-1": (text.replace("name: mqm", "name: mq\xe9").encode("latin-1"), ("not UTF-8 text (byte ",)),
        "utf-16": (text.encode("utf-16"), ("line 1: not UTF-8",)),
        "binary junk": (raw + bytes(range(256)), ("not UTF-8",)),
        "nul": (raw.replace(b"dir: runs", b"dir: ru\x00ns"), ("invalid YAML",)),
        "control character": (raw.replace(b"dir: runs", b"dir: ru\x07ns"), ("invalid YAML",)),
        **{f"truncated at {share}%": (raw[: len(raw) * share // 100], ("",)) for share in (10, 35, 60, 85)},
        "empty": (b"", ("the config must be a mapping",)),
        "a scalar": (b"42\n", ("the config must be a mapping",)),
        "a list": (b"- dataset\n- judges\n", ("the config must be a mapping",)),
        "tab indentation": (raw.replace(b"\n  path", b"\n\tpath"), ("invalid YAML",)),
        "top-level key twice": (raw + b"output: {dir: elsewhere}\n", ("output: the key is given twice",)),
        "judge key twice": (
            (text[:judge_line] + "  model: openai/gpt-4o\n" + text[judge_line:]).encode(), ("judges[0].model: the key",)),
        "alias inside its own anchor": (raw + b"extra: &a [1, *a]\n", ("extra[1]: the alias *a",)),
        "undefined alias": (raw + b"extra: *nowhere\n", ("extra: the alias *nowhere",)),
        "python tag": (raw + b"extra: !!python/object/apply:os.system ['true']\n", ("invalid YAML",)),
        "deep mapping": (raw + b"extra: " + b"{a: " * 5000 + b"1" + b"}" * 5000 + b"\n",
                         ("nested more than 64 levels",)),
        "huge integer": (raw + b"extra: " + b"9" * 500 + b"\n", ("extra: a number of",)),
        "huge key count": (raw + b"extra: {" + b", ".join(b"k%d: 1" % i for i in range(20000)) + b"}\n",
                           ("extra: unknown key",)),
    }


FILES = config_files()


@pytest.mark.parametrize("name", sorted(FILES))
def test_mutated_config_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    content, named = FILES[name]
    outcome = plan(write_job(tmp_path, content), capsys)
    if not named:
        assert outcome.code == 0 and outcome.seconds < BOUND_S, outcome
    elif named == ("",):  # truncated: valid up to the cut, or an error naming a key or line
        assert outcome.code in (0, 2) and "Traceback" not in outcome.err and outcome.seconds < BOUND_S, outcome
        assert outcome.code == 0 or " line " in outcome.err or ": " in outcome.err.removeprefix("judge-engine: error: ")
    else:
        check(outcome, *named)


def test_a_config_path_that_is_a_folder_or_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "folder.yaml").mkdir()
    check(plan(tmp_path / "folder.yaml", capsys), "cannot read the config file")
    check(plan(tmp_path / "missing.yaml", capsys), "config file not found")


# --- datasets: JSONL and CSV, byte by byte --------------------------------------------------------

LINE = '{"id": "x9", "src": "a", "tgt": "b", "src_lang": "en", "tgt_lang": "de"}'


def jsonl_cases(good: bytes) -> dict[str, tuple[bytes, str | None]]:
    """Name -> (items.jsonl, what the error names; None: valid)."""
    lines = good.splitlines(keepends=True)
    second = lines[1]
    return {
        "bom": (b"\xef\xbb\xbf" + good, None),
        "crlf": (good.replace(b"\n", b"\r\n"), None),
        "latin-1 line": (lines[0] + second.replace(b"She", b"S\xefe") + b"".join(lines[2:]), "items.jsonl:2: not valid JSON"),
        "utf-16": (good.decode().encode("utf-16"), "items.jsonl:1: not valid JSON"),
        "binary junk line": (lines[0] + bytes(range(1, 256)) + b"\n" + b"".join(lines[1:]), "items.jsonl:2: not valid JSON"),
        "nul in a value": (lines[0] + second.replace(b"She", b"S\x00e") + b"".join(lines[2:]), "items.jsonl:2: not valid JSON"),
        "truncated": (good[:-20], "items.jsonl:4: not valid JSON"),
        "empty": (b"", "the dataset has no items"),
        "blank lines only": (b"\n \n\t\n", "the dataset has no items"),
        "a key twice": (lines[0] + second.replace(b'"src": ', b'"src": "first", "src": ') + b"".join(lines[2:]),
                        "items.jsonl:2: the key 'src' is given twice"),
        "a nested key twice": (lines[0] + second.replace(b'"src_lang"', b'"meta": {"a": 1, "a": 2}, "src_lang"')
                               + b"".join(lines[2:]), "items.jsonl:2: the key 'a' is given twice"),
        "deep nesting": (lines[0] + second.replace(b'"src_lang"', b'"deep": ' + b"[" * 5000 + b"]" * 5000 + b', "src_lang"')
                         + b"".join(lines[2:]), "items.jsonl:2: "),
        "nesting past what a task id can hash": (
            lines[0] + second.replace(b'"src_lang"', b'"deep": ' + b"[" * 300 + b"]" * 300 + b', "src_lang"')
            + b"".join(lines[2:]), "items.jsonl:2: values nested more than 64 levels"),
        "infinite number": (lines[0] + second.replace(b'"src_lang"', b'"n": 1e400, "src_lang"') + b"".join(lines[2:]),
                            "items.jsonl:2: not valid JSON"),
        "NaN": (lines[0] + second.replace(b'"src_lang"', b'"n": NaN, "src_lang"') + b"".join(lines[2:]),
                "items.jsonl:2: not valid JSON"),
        "a list line": (lines[0] + b"[1, 2]\n" + b"".join(lines[1:]), "items.jsonl:2: each line must be a JSON object"),
        "id null": (lines[0] + LINE.replace('"x9"', "null").encode() + b"\n", "items.jsonl:2: required field 'id'"),
        "id empty": (lines[0] + LINE.replace('"x9"', '""').encode() + b"\n", "items.jsonl:2: required field 'id'"),
        "id a number": (lines[0] + LINE.replace('"x9"', "7").encode() + b"\n", None),
        "id unicode": (lines[0] + LINE.replace('"x9"', '"☃💥\\u0000"').encode() + b"\n", None),
        "id repeated": (good + lines[0], "items.jsonl:5: duplicate id"),
        "a field of the wrong type": (lines[0] + LINE.replace('"a"', "[1, 2]").encode() + b"\n", None),
        "a long line": (lines[0] + LINE.replace('"a"', '"' + "a" * 1_000_000 + '"').encode() + b"\n", None),
        "colons and quotes in text": (lines[0] + LINE.replace('"a"', '"x: \\"y\\": z"').encode() + b"\n", None),
        "a key spaced from its colon": (lines[0] + LINE.replace('"src": "a"', '"src" : "a", "src"  :"b"').encode()
                                        + b"\n", "items.jsonl:2: the key 'src' is given twice"),
    }


def csv_cases() -> dict[str, tuple[bytes, str | None]]:
    header = b"id,src,tgt,src_lang,tgt_lang\n"
    rows = b"a,hello,hallo,en,de\nb,cat,Katze,en,de\n"
    return {
        "good": (header + rows, None),
        "bom": (b"\xef\xbb\xbf" + header + rows, None),
        "crlf": ((header + rows).replace(b"\n", b"\r\n"), None),
        "a column named twice": (b"id,src,tgt,src,src_lang,tgt_lang\n" + b"a,x,y,z,en,de\n",
                                 "items.csv:1: columns 2 and 4 are both named 'src'"),
        "latin-1": (header + rows + b"c,caf\xe9,Kaffee,en,de\n", "items.csv:4: not UTF-8"),
        "utf-16": ((header + rows).decode().encode("utf-16"), "items.csv:1: "),
        "nul": (header + b"a,hel\x00lo,hallo,en,de\n", None),  # a character like any other since Python 3.11
        "binary junk": (header + rows + bytes(range(1, 128)) + b"\n", "items.csv:4: "),
        "quote left open": (header + b'a,"hello,hallo,en,de\n' + rows, "items.csv:2: "),
        "more values": (header + b"a,b,c,d,e,f\n", "items.csv:2: more values than header columns"),
        "fewer values": (header + b"a,b\n", "items.csv:2: required field"),
        "truncated": ((header + rows)[:-9], "items.csv:3: required field"),
        "empty": (b"", "the dataset has no items"),
        "header only": (header, "the dataset has no items"),
    }


@pytest.mark.parametrize("case", sorted(jsonl_cases(b"a\nb\nc\n")))
def test_mutated_jsonl_datasets(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    write_items(tmp_path / "items.jsonl", 4)
    content, named = jsonl_cases((tmp_path / "items.jsonl").read_bytes())[case]
    (tmp_path / "items.jsonl").write_bytes(content)
    config = gemba_config()
    del config["dataset"]["limit"]
    outcome = plan(write_job(tmp_path, config), capsys)
    if named is None:
        assert outcome.code == 0 and outcome.seconds < BOUND_S, outcome
    else:
        check(outcome, named)


@pytest.mark.parametrize("case", sorted(csv_cases()))
def test_mutated_csv_datasets(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    content, named = csv_cases()[case]
    (tmp_path / "items.csv").write_bytes(content)
    config = gemba_config()
    config["dataset"] = {"path": "items.csv", **{k: v for k, v in config["dataset"].items() if k != "path"}}
    outcome = plan(write_job(tmp_path, config), capsys)
    if named is None:
        assert outcome.code == 0 and outcome.seconds < BOUND_S, outcome
    else:
        check(outcome, named)


# --- point 7: two --new-run in the same instant ---------------------------------------------------


def test_two_new_runs_in_the_same_instant_get_their_own_directories(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock gives both runs the same microsecond: the second takes the next one (the id
    was to the second before, so the second run was refused by the first one's lock)."""
    from datetime import UTC, datetime

    from judge_engine.planning import plan as planning
    from judge_engine.running import session

    instants = iter([datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)] * 3 + [datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=UTC)])

    class Clock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return next(instants)

    monkeypatch.setattr(planning, "datetime", Clock)
    path = write_job(tmp_path, gemba_config())
    first = session.prepare(path, new_run=True, check_keys=False)
    second = session.prepare(path, new_run=True, check_keys=False)
    assert first.run_dir.name.endswith("-20260102T030405000006")
    assert second.run_dir.name.endswith("-20260102T030405000007")
    assert sorted([second.run_dir.name, first.run_dir.name]) == [first.run_dir.name, second.run_dir.name]


@pytest.mark.slow
def test_two_new_run_processes_started_together_both_finish(tmp_path: Path, fake_server: FakeServer) -> None:
    path = write_job(tmp_path, gemba_config(fake_server))
    command = [sys.executable, "-m", "judge_engine.cli", "run", str(path), "--no-live", "--new-run"]
    processes = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    results = [(p.wait(timeout=180), p.stderr.read() if p.stderr else "") for p in processes]
    assert [code for code, _ in results] == [0, 0], results
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    assert len(runs) == 2 and all((run / "run.json").exists() for run in runs)
