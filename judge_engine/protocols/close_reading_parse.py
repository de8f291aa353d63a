"""Reading close-reading answers: expression lists in every shape real judges return them.

Helpers of :mod:`judge_engine.protocols.close_reading`. Real answers (e.g. the 100 Claude-4.1
answers of the Death of the Novel(ty) repository) come as a JSON list, a JSON list inside a
```` ```json ```` fence or after a sentence of prose, several ``{...}`` objects separated by blank
lines (or in several fences), a Python literal, or a list whose quotes are the curly quotes of
the prompt's own format line (``[{“expression”: “...”}]``). Keys are matched case-insensitively,
any key starting with ``expression`` counts as the expression (Claude sometimes writes
``expressionlovled``), and a missing justification reads as "".

The reading is layered, strictest first: JSON values found anywhere in the text, then a Python
literal, then a tolerant key scanner that takes the text between ``"expression":`` keys (it copes
with curly-quote delimiters and unescaped inner quotes, as in the novelty prompt's own example).
A layer wins only if it read as many expressions as the text has expression keys, and only if
every bracket opened before the first record is closed after the last, so a partly broken or
cut-off answer is never silently shortened: it is a :class:`VerdictError` and gets re-asked.
"None found" is the answer's first value being an empty list (``[]``, ``{"expressions": []}``),
never an empty list somewhere inside another value.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

from judge_engine.errors import ReasonCode, VerdictError
from judge_engine.util.text import QUOTE_MARKS

Record = dict[str, str]
"""One expression as the judge wrote it: ``{"expression": ..., "justification": ...}``."""

_KEY = re.compile(
    rf"[{QUOTE_MARKS}]\s*(?P<key>expression\w*|justification|error)\s*[{QUOTE_MARKS}]\s*:\s*",
    re.IGNORECASE,
)
# What may stand between an answer's prose and its first record: brackets, blanks and a quoted
# wrapper key ('{"expressions": [{'); the brackets among it are the ones the answer must close.
_OPENING = re.compile(rf"(?:[\[{{\s]|[{QUOTE_MARKS}][\w ]*[{QUOTE_MARKS}]\s*:)*\Z")
_CLOSER = {"[": "]", "{": "}"}
_TRAILING_STRUCTURE = re.compile(r"(?:\s|[,\[\]{}]|```(?:json)?)*$")
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def read_expressions(answer: str) -> list[Record]:
    """Every ``{expression, justification}`` the answer contains, in order.

    Returns an empty list only for an explicit empty list (``[]``, ``{"expressions": []}``).

    Raises:
        VerdictError: a refusal or error object, an empty expression, an object with no
            expression, a list cut off, or no readable list.
    """
    text = answer.strip()
    if not text:
        raise VerdictError("the answer is empty", raw=answer)
    kinds = [_kind(m.group("key")) for m in _KEY.finditer(text)]
    expected = sum(kind in ("expression", "error") for kind in kinds)
    best: list[Record] = []
    for layer in (_from_json, _from_literal, _from_scan):
        records = layer(text)
        if len(records) > len(best):
            best = records
        if best and len(best) >= expected:
            break
    if best and len(best) < expected:
        raise VerdictError(
            f"read only {len(best)} of the {expected} expressions in the answer; "
            'answer with one valid JSON list of {"expression", "justification"} objects',
            raw=answer,
        )
    if kinds.count("justification") > len(best):
        # An object without its expression is no record: it would vanish from the count.
        raise VerdictError(
            "an object has a justification but no expression: give every object both",
            raw=answer,
            code=ReasonCode.INCOMPLETE,
        )
    if not best:
        return _none_found(text, answer)
    if not _closed(text):
        # The tolerant layers would read the records before the break and drop the rest.
        raise VerdictError(
            "the list of expressions is not closed: the answer looks cut off",
            raw=answer,
            code=ReasonCode.INCOMPLETE,
        )
    return _checked(best, answer)


def _none_found(text: str, answer: str) -> list[Record]:
    """``[]`` when the answer's first value (after any prose, inside any fence) is an empty list,
    bare or as ``{"expressions": []}``: the judge found none. An empty list anywhere else is not
    that answer (``{"errors": []}`` used to score 0), nor is a value the answer stops inside
    (``{"expressions": []`` is ``incomplete``, as ``{}`` is: the list is missing)."""
    value, cut = _first_value(_unfenced(text))
    if _records_of(value) == ([], True):
        return []
    raise VerdictError(
        'no list of {"expression": ..., "justification": ...} objects found in the answer',
        raw=answer,
        code=ReasonCode.INCOMPLETE if cut or value == {} else ReasonCode.UNREADABLE,
    )


def _first_value(body: str) -> tuple[Any, bool]:
    """The JSON or Python-literal value at the first ``[`` or ``{`` of ``body`` (None when it
    reads as neither), and whether the text ends inside that value."""
    start = _next_open(body, 0)
    if start == -1:
        return None, False
    try:
        return json.JSONDecoder().raw_decode(body, start)[0], False
    except json.JSONDecodeError as exc:
        cut = exc.pos >= len(body.rstrip())
    end = body.rfind("]" if body[start] == "[" else "}")
    try:
        return ast.literal_eval(body[start : end + 1]), False
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None, cut


def _closed(text: str) -> bool:
    """Whether every bracket opened just before the first record (the record's ``{``, a list's
    ``[``, a ``{"expressions": [`` wrapper) is closed after the last record, innermost first.

    The wrapper key is not a record key: when it was taken for one, the list's ``[`` came after
    the "first key" and a JSON answer cut after a whole record was scored on the records before
    the cut."""
    keys = [m for m in _KEY.finditer(text) if _kind(m.group("key")) is not None]
    if not keys:
        return True
    opening = _OPENING.search(text, 0, keys[0].start())
    assert opening is not None  # the pattern matches the empty string at the end
    position = keys[-1].end()
    for opener in reversed([c for c in opening.group() if c in _CLOSER]):
        position = text.find(_CLOSER[opener], position)
        if position == -1:
            return False
        position += 1
    return True


def _checked(records: list[Record], answer: str) -> list[Record]:
    errors = [r["error"] for r in records if "error" in r and not r.get("expression")]
    if errors:
        raise VerdictError(
            f"the judge refused or reported an error: {errors[0]!r}", raw=answer, code=ReasonCode.REFUSED
        )
    problems = [
        f"expression {n} is empty"
        for n, r in enumerate(records, start=1)
        if not r.get("expression", "").strip()
    ]
    if problems:
        raise VerdictError(problems, raw=answer)
    return [
        {"expression": r["expression"], "justification": r.get("justification", "")}
        for r in records
    ]


# --- layer 1: JSON values anywhere in the text ------------------------------------------------


def _from_json(text: str) -> list[Record]:
    return [record for value in _json_values(text) for record in _records_of(value)[0]]


def _json_values(text: str) -> Iterator[Any]:
    """Relevant JSON values decoded at any ``[`` or ``{``, left to right, never overlapping."""
    decoder = json.JSONDecoder()
    position = 0
    while True:
        start = _next_open(text, position)
        if start == -1:
            return
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        if _records_of(value) != ([], False):
            yield value
            position = end
        else:
            position = start + 1


def _next_open(text: str, position: int) -> int:
    hits = [i for i in (text.find("[", position), text.find("{", position)) if i != -1]
    return min(hits) if hits else -1


def _records_of(value: Any) -> tuple[list[Record], bool]:
    """Records in a decoded value, and whether it is an empty list (bare or in the wrapper)."""
    if isinstance(value, dict):
        wrapped = value.get("expressions")
        if isinstance(wrapped, list):
            return _records_of(wrapped)
        record = _record(value)
        return ([record], False) if record else ([], False)
    if isinstance(value, list):
        if not value:
            return [], True
        records = [r for item in value if isinstance(item, dict) and (r := _record(item))]
        return records, False
    return [], False


def _record(raw: dict[Any, Any]) -> Record | None:
    record: Record = {}
    for key, value in raw.items():
        kind = _kind(str(key))
        if kind is not None and kind not in record and value is not None:
            record[kind] = (
                value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            )
    return record if ("expression" in record or "error" in record) else None


def _kind(key: str) -> str | None:
    key = key.strip().lower()
    if key.startswith("expression") and key != "expressions":
        return "expression"
    if key in ("justification", "error"):
        return key
    return None


# --- layer 2: a Python literal (single-quoted dicts) ------------------------------------------


def _from_literal(text: str) -> list[Record]:
    body = _unfenced(text)
    for opener, closer in (("[", "]"), ("{", "}")):
        start, end = body.find(opener), body.rfind(closer)
        if start == -1 or end <= start:
            continue
        try:
            value = ast.literal_eval(body[start : end + 1])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, tuple):  # "{...}, {...}" evaluates to a tuple of dicts
            value = list(value)
        records, _ = _records_of(value)
        if records:
            return records
    return []


def _unfenced(text: str) -> str:
    fences = _FENCE.findall(text)
    return "\n".join(fences) if fences else text


# --- layer 3: a tolerant scanner over quoted keys ---------------------------------------------


def _from_scan(text: str) -> list[Record]:
    matches = [m for m in _KEY.finditer(text) if _kind(m.group("key")) is not None]
    records: list[Record] = []
    current: Record = {}
    for index, match in enumerate(matches):
        last = index + 1 == len(matches)
        region = text[match.end() : len(text) if last else matches[index + 1].start()]
        kind = _kind(match.group("key"))
        assert kind is not None
        if kind in current:
            records.append(current)
            current = {}
        current[kind] = _scanned_value(region, last=last)
    if current:
        records.append(current)
    return [r for r in records if "expression" in r or "error" in r]


def _scanned_value(region: str, *, last: bool) -> str:
    if last and "}" in region:
        region = region[: region.rfind("}")]
    value = _TRAILING_STRUCTURE.sub("", region).strip()
    if value[:1] and value[0] in QUOTE_MARKS:
        value = value[1:]
    if value[-1:] and value[-1] in QUOTE_MARKS:
        value = value[:-1]
    return value.replace('\\"', '"').replace("\\n", "\n").strip()


# --- the passage's length ------------------------------------------------------------------


def count_words(passage: str) -> int:
    """Words of a passage: whitespace-separated tokens (``"don't stop—now"`` is 2 words)."""
    return len(passage.split())
