"""How a message names what it is about, so that it helps the second time too.

A judge is named as the config file names it: ``judges[NAME]``, followed by ``.key`` when the
message is about one of its settings (``judges[mqm].limits.rpm: ...``) and by its model when it is
about the judge at work (``judges[mqm] (openai/gpt-4o) stopped: ...``); a jury is
``juries[NAME]``. The reader can search the file for either. (Tables and progress lines, whose
rows are judges, show the bare name as a label.) A name or key that is not known is answered with
the nearest known one when one is close: ``did you mean `temperatures`?``.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
"""What a judge's or jury's name may be (:class:`~judge_engine.inputs.config.JudgeConfig`)."""
CUTOFF = 0.6
"""How alike (difflib's ratio, 0-1) a known name must be to be suggested: ``temprature`` and
``temperatures`` are 0.91 alike, ``rpn`` and ``rpm`` 0.67, ``extra_section`` and ``dataset`` 0.4."""


def judge_ref(name: str, key: str = "") -> str:
    """``judges[NAME]``, or ``judges[NAME].key`` for one of its settings."""
    return f"judges[{name}]" + (f".{key}" if key else "")


def with_model(name: str, model: str) -> str:
    """A judge's name with the model it ran beside it, for a table's cell when ``--model``
    swapped the config's: ``mqm-mini (claude-sonnet-4-5)`` (the provider's prefix left out;
    the notes name the model whole)."""
    return f"{name} ({model.rsplit('/', 1)[-1]})"


def swapped_note(models: Mapping[str, str]) -> str | None:
    """The note of a run whose judges ``--model`` swapped: which model they ran, whole."""
    if not models:
        return None
    ran = sorted(set(models.values()))
    return (f"--model: {', '.join(models)} ran {', '.join(ran)}, not the model{'s' if len(models) > 1 else ''} "
            f"the config names; tables show it beside the name")


def judge_stopped(name: str, model: str, why: str) -> str:
    """The message of a judge that stopped: ``judges[mqm] (openai/gpt-4o) stopped: why``."""
    return f"{judge_ref(name)} ({model}) stopped: {why}"


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word``, when it is close (:data:`CUTOFF`); None otherwise
    (and for ``word`` itself: a name that is known needs no suggestion)."""
    names = [k for k in dict.fromkeys(known) if k != word]
    found = difflib.get_close_matches(word, names, n=1, cutoff=CUTOFF)
    if not found:  # a name typed in another case: Temperatures
        lowered = {k.lower(): k for k in names}
        found = [lowered[m] for m in difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=CUTOFF)]
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``did you mean `temperatures`?`` for the nearest known name, or ``""`` when none is close."""
    found = nearest(word, known)
    return f"did you mean `{found}`?" if found else ""


def unknown_key(key: str, known: Iterable[str], *, what: str = "key") -> str:
    """``unknown key`` (or ``unknown option``...), with the nearest known one when one is close."""
    hint = did_you_mean(key, known)
    return f"unknown {what}; {hint}" if hint else f"unknown {what}"


def cascade_title(name: str) -> str:
    """How a message names a cascade: ``cascade`` for the default name, else ``cascade NAME``
    (not "cascade cascade")."""
    return "cascade" if name == "cascade" else f"cascade {name}"


NAMED = ("judges", "juries")
"""The config's lists whose entries a message names by their ``name`` (``judges[mqm]``)."""


def config_key(loc: Sequence[int | str], raw: Any = None) -> str:
    """The dotted key at ``loc`` in a config (``judges[mqm].limits.rpm``): an entry of
    :data:`NAMED` by its name when ``raw`` (the config as read) gives it a usable one, unique
    in its list; otherwise by its position (``judges[0]``)."""
    out = ""
    for depth, part in enumerate(loc):
        if isinstance(part, int):
            name = _entry_name(raw, loc[0], part) if depth == 1 else None
            out += f"[{name if name is not None else part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _entry_name(raw: Any, section: int | str, index: int) -> str | None:
    entries = raw.get(section) if isinstance(raw, Mapping) and section in NAMED else None
    if not isinstance(entries, list) or not 0 <= index < len(entries) or not isinstance(entries[index], Mapping):
        return None
    name = entries[index].get("name")
    names = [e.get("name") for e in entries if isinstance(e, Mapping)]
    usable = isinstance(name, str) and 0 < len(name) <= 100 and _NAME.fullmatch(name) is not None
    return name if usable and names.count(name) == 1 else None


def describe_error(model: Any, error: Mapping[str, Any], *, what: str = "key") -> str:
    """A pydantic ``error`` under ``model`` in words: an unknown key (or option...) with the
    nearest known one, a value outside a closed set with the nearest allowed one (a suggestion
    never repeats the value typed: it may be a secret); otherwise pydantic's message."""
    kind, loc = error["type"], tuple(error["loc"])
    if kind == "extra_forbidden" and loc:
        return unknown_key(str(loc[-1]), known_keys(model, loc[:-1]), what=what)
    message = str(error["msg"]).removeprefix("Value error, ")
    context = error.get("ctx") or {}
    given, allowed = ((error.get("input"), context.get("expected")) if kind == "literal_error"
                      else (context.get("tag"), context.get("expected_tags")))
    if kind in ("literal_error", "union_tag_invalid") and isinstance(given, str) and allowed:
        hint = did_you_mean(given, re.findall(r"'([^']*)'", str(allowed)))
        return f"{message}; {hint}" if hint else message
    return message


def shown_loc(model: Any, loc: Sequence[int | str]) -> tuple[int | str, ...]:
    """``loc`` as the file spells it: without the tags pydantic puts in the location of a
    tagged union's member (``fields.score.integer.min`` is ``fields.score.min``)."""
    node: Any = model
    shown: list[int | str] = []
    for part in loc:
        step = _step(node, part) if node is not None else None
        if not (step is not None and _models(node) and isinstance(part, str) and not _has_field(node, part)):
            shown.append(part)
        node = step
    return tuple(shown)


def known_keys(model: Any, loc: Sequence[int | str]) -> list[str]:
    """The keys accepted at ``loc`` (a pydantic error's location, without the unknown key itself)
    under the pydantic model ``model``: the fields of the model found by walking its annotations
    (lists, mappings, optional values, tagged unions); empty where the walk finds no model."""
    node: Any = model
    for part in loc:
        node = _step(node, part)
        if node is None:
            return []
    return list(dict.fromkeys(name for m in _models(node) for name in m.model_fields))


def _has_field(node: Any, part: str) -> bool:
    return any(part in m.model_fields for m in _models(node))


def _step(node: Any, part: int | str) -> Any:
    """The annotation one location part below ``node`` (None: not a place the walk can follow)."""
    models = _models(node)
    if models and isinstance(part, str):
        for m in models:
            if part in m.model_fields:
                return m.model_fields[part].annotation
        tagged = [m for m in models if part in _tags(m)]  # a tagged union puts the tag in the location
        return Union[tuple(tagged)] if tagged else None  # noqa: UP007 (built from a tuple)
    node = _bare(node)
    origin, args = get_origin(node), get_args(node)
    if origin in (list, tuple, set, frozenset) or (isinstance(origin, type) and issubclass(origin, Sequence)):
        return args[0] if args else None
    if origin is dict or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return args[1] if len(args) == 2 else None
    return None


def _bare(node: Any) -> Any:
    """``node`` without ``Annotated[...]`` and without ``| None``."""
    while get_origin(node) is Annotated:
        node = get_args(node)[0]
    if get_origin(node) in (Union, types.UnionType):
        rest = [a for a in get_args(node) if a is not type(None)]
        if len(rest) == 1:
            return _bare(rest[0])
    return node


def _models(node: Any) -> list[Any]:
    """The pydantic models ``node`` may be (one, or the members of a union)."""
    node = _bare(node)
    members = get_args(node) if get_origin(node) in (Union, types.UnionType) else (node,)
    return [_bare(m) for m in members if isinstance(_bare(m), type) and hasattr(_bare(m), "model_fields")]


def _tags(model: Any) -> set[str]:
    """The literal values of a model's fields: a tagged union's tag is one of them."""
    return {str(value) for f in model.model_fields.values() if get_origin(f.annotation) is Literal
            for value in get_args(f.annotation)}
