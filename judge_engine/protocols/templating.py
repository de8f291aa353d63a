"""The one home of jinja2: a sandboxed, strict environment that renders prompt templates.

Templates are data (``judge_engine/protocols/prompts/<protocol>/<name>.j2``). Dataset text only ever enters
as variables, never as template source, so an item containing ``{{`` is rendered literally.
Templates read their variables and cannot change them (an immutable sandbox: ``item.update``,
``list.append``... are refused), so a template cannot alter the item it judges.

A custom judge's template (``protocol: custom``) comes from the user's config, as a file or inline
text: :func:`render_source` renders it in a second sandbox with the same rules but no loader, so
the template is one self-contained text (no ``include``/``import``) and the hash of that text
(:func:`~judge_engine.util.jsonio.text_hash`) covers everything that shapes its prompts. A config
template is also bounded, because it renders on the engine's event loop: every loop iteration
and call counts as a step, every value it makes (and its output) is measured, and a render that
passes :data:`MAX_RENDER_STEPS`, :data:`MAX_RENDER_CHARS` or :data:`MAX_RENDER_S` stops with a
:class:`~judge_engine.errors.TemplateError` naming the template. The checks are cooperative
(a sandbox call hook, counted loops, sized values), never a thread that cannot be stopped; an
operation that could make a value far past the limit in one step (``"x" * 10**9``,
``"%999999999d" % 1``, ``s.ljust(10**9)``, ``join`` of huge parts) is refused before it runs.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.exceptions
import jinja2.meta
import jinja2.nodes
import jinja2.sandbox
import jinja2.utils

from judge_engine.errors import TemplateError
from judge_engine.util.jsonio import text_hash

PROMPTS_DIR = Path(__file__).parent / "prompts"


MAX_RENDER_CHARS = 8_000_000
"""Most characters a config template may render, and most characters (or elements) of any value
it makes on the way: about 2M tokens, more than any model's context window."""
MAX_RENDER_MADE = 8 * MAX_RENDER_CHARS
"""Most characters (or elements) of all the values one render makes, together: what bounds its
memory when it makes many large values and keeps them (a list of long texts)."""
MAX_RENDER_STEPS = 1_000_000
"""Most loop iterations and calls in one render of a config template (a prompt takes hundreds)."""
MAX_RENDER_S = 2.0
"""Most seconds one render of a config template may take (a prompt takes well under 1 ms)."""
_MAX_INT_BITS = 100_000
"""Most bits of an integer a config template computes (``2 ** 10 ** 9`` would take minutes)."""
_WIDE = re.compile(r"%[-#0 +*]*(?:\d{8,}|\.\d{8,})|\{[^{}]*:[^{}]*\d{8,}[^{}]*\}")
"""A %-format or str.format field with a width or precision of 10^7 or more."""
_WIDTH_METHODS = frozenset({"ljust", "rjust", "center", "zfill", "expandtabs"})
"""str methods whose integer argument is the length of what they make."""
_WIDTH_FILTERS = frozenset({"center", "indent", "batch", "slice"})
"""Filters whose integer arguments are a width or a count of what they make."""


class _Limit(Exception):
    """A config template's render passed one of its bounds (becomes a TemplateError)."""


@dataclass(slots=True)
class _Budget:
    """One render's steps so far and its deadline."""

    deadline: float
    steps: int = 0
    made: int = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_RENDER_STEPS:
            raise _Limit(f"it took more than {MAX_RENDER_STEPS:,} steps (loop iterations and calls)")
        if not self.steps % 256:  # the clock costs more than a step
            self.tick()

    def add(self, size: int) -> None:
        self.made += size
        if self.made > MAX_RENDER_MADE:
            raise _Limit(f"its values came to more than {MAX_RENDER_MADE:,} characters or elements together")

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise _Limit(f"it took longer than {MAX_RENDER_S:g} s")


_BUDGET: ContextVar[_Budget | None] = ContextVar("judge_engine_render_budget", default=None)
"""The budget of the config template rendering now (None: a package template, unbounded)."""


def _step() -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.step()


def _sized(value: Any) -> Any:
    """``value``, unless it is larger than a config template may make."""
    if isinstance(value, str | bytes | list | tuple | dict | set | frozenset) and len(value) > MAX_RENDER_CHARS:
        unit = "characters" if isinstance(value, str | bytes) else "elements"
        raise _Limit(f"it made a value of {len(value):,} {unit}, more than {MAX_RENDER_CHARS:,}")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise _Limit(f"it made a number of {value.bit_length():,} bits")
    return value


def _made(value: Any) -> Any:
    """A value the template made: :func:`_sized`, and counted in the render's total."""
    _sized(value)
    budget = _BUDGET.get()
    if budget is not None and isinstance(value, str | bytes | list | tuple | dict | set | frozenset):
        budget.add(len(value))
    return value


def _projected(size: int) -> None:
    if size > MAX_RENDER_CHARS:
        raise _Limit(f"it would make a value of {size:,} characters or elements, more than {MAX_RENDER_CHARS:,}")


def _no_wide_format(text: Any) -> None:
    if isinstance(text, str) and (match := _WIDE.search(text)):
        raise _Limit(f"it formats with a width past the size limit ({match.group()!r})")


def _no_wide_numbers(values: Iterable[Any]) -> None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_RENDER_CHARS:
            raise _Limit(f"it asks for a width or count of {value:,}, more than {MAX_RENDER_CHARS:,}")


def _joined_size(separator: Any, parts: Any) -> None:
    if isinstance(parts, list | tuple) and isinstance(separator, str):
        _projected(sum(len(p) for p in parts if isinstance(p, str)) + len(separator) * max(0, len(parts) - 1))


def _replaced_size(text: Any, old: Any, new: Any) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        count = text.count(old) if old else len(text) + 1
        _projected(len(text) + count * (len(new) - len(old)))


def _check_call(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse, before it runs, a call whose result would be far past the size limit."""
    for value in (*args, *kwargs.values()):
        _sized(value)  # an argument grown too large (a macro calling itself with doubled text)
    owner = getattr(function, "__self__", None)
    wrapped = getattr(function, "__wrapped__", None)  # the sandbox's str.format
    if wrapped is not None and isinstance(getattr(wrapped, "__self__", None), str):
        _no_wide_format(wrapped.__self__)
    if not isinstance(owner, str):
        return
    name = getattr(function, "__name__", "")
    if name in _WIDTH_METHODS:
        _no_wide_numbers((*args, *kwargs.values()))
    elif name == "join" and args:
        _joined_size(owner, args[0])
    elif name == "replace" and len(args) >= 2:
        _replaced_size(owner, args[0], args[1])


def _guarded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (a filter) counted as a step, refused when it would make too large a
    value, and its result measured."""
    passes_first = getattr(function, "jinja_pass_arg", None) is not None  # a context or environment first

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _step()
        values = args[1:] if passes_first else args
        value, rest = (values[0], values[1:]) if values else (None, ())
        if name in _WIDTH_FILTERS:
            _no_wide_numbers((*rest, *kwargs.values()))
        elif name == "format":
            _no_wide_format(value)
        elif name == "join":
            _joined_size(rest[0] if rest else kwargs.get("d", ""), value)
        elif name == "replace" and len(rest) >= 2:
            _replaced_size(value, rest[0], rest[1])
        return _made(function(*args, **kwargs))

    return guarded


def _counted(iterable: Any) -> Iterator[Any]:
    """A ``for`` loop's iterable, each iteration counted as a step."""
    budget = _BUDGET.get()
    if budget is None:
        yield from iterable
        return
    for value in iterable:
        budget.step()
        yield value


def _tilde(*parts: Any) -> str:
    """The ``~`` operator, refused when the joined text would be too large."""
    texts = [str(part) for part in parts]
    _projected(sum(len(text) for text in texts))
    return str(_made("".join(texts)))


def _concat(chunks: Iterable[str]) -> str:
    """Joins a render's output (and a block's, a macro's) 64 chunks at a time, measured as it
    goes: stops once it passes the size limit or the deadline."""
    budget = _BUDGET.get()
    chunks = iter(chunks)
    parts: list[str] = []
    size = 0
    while block := list(itertools.islice(chunks, 64)):
        size += sum(map(len, block))
        if size > MAX_RENDER_CHARS:
            raise _Limit(f"it rendered more than {MAX_RENDER_CHARS:,} characters")
        if budget is not None:
            budget.tick()
        parts += block
    return "".join(parts)


class _Namespace(jinja2.utils.Namespace):
    """``namespace()``, whose attributes cannot grow past the size limit."""

    def __setitem__(self, name: str, value: Any) -> None:
        super().__setitem__(name, _sized(value))  # made (and counted) by the expression assigned


class _BoundedCode(jinja2.compiler.CodeGenerator):
    """Compiles a config template with its loops counted and its ``~`` measured."""

    def visit_Template(self, node: jinja2.nodes.Template, frame: Any = None) -> None:
        def guard(function: str, *args: Any) -> jinja2.nodes.Call:
            line = args[0].lineno if args else None
            callee = jinja2.nodes.ImportedName(f"{__name__}.{function}", lineno=line)
            return jinja2.nodes.Call(callee, list(args), [], None, None, lineno=line)

        for loop in node.find_all(jinja2.nodes.For):
            loop.iter = guard("_counted", loop.iter)
        for parent in node.find_all(jinja2.nodes.Node):
            for field, child in parent.iter_fields():
                if isinstance(child, jinja2.nodes.Concat):
                    setattr(parent, field, guard("_tilde", *child.nodes))
                elif isinstance(child, list):
                    child[:] = [guard("_tilde", *c.nodes) if isinstance(c, jinja2.nodes.Concat) else c for c in child]
        super().visit_Template(node, frame)


class _BoundedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """The sandbox of config templates: immutable, no loader, and bounded (see the module
    docstring)."""

    code_generator_class = _BoundedCode
    concat = staticmethod(_concat)
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self) -> None:
        super().__init__(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
                         trim_blocks=False, lstrip_blocks=False)
        self.filters = {name: _guarded_filter(name, function) for name, function in self.filters.items()}
        self.globals["namespace"] = _Namespace
        del self.globals["lipsum"]  # filler text, up to any size: nothing a prompt needs

    def call(self, context: Any, function: Any, /, *args: Any, **kwargs: Any) -> Any:
        _step()
        _check_call(function, args, kwargs)
        return _made(super().call(context, function, *args, **kwargs))

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _step()
        numbers = isinstance(left, int) and isinstance(right, int)
        if operator == "*" and numbers:
            if left.bit_length() + right.bit_length() > _MAX_INT_BITS:
                raise _Limit("it multiplies numbers past the size limit")
        elif operator == "*":
            sequence, times = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(times, int) and hasattr(sequence, "__len__"):
                _projected(len(sequence) * times)
        elif operator == "**" and numbers and right > 0 and abs(left).bit_length() * right > _MAX_INT_BITS:
            raise _Limit(f"it raises a number to the power {right:,}, past the size limit")
        elif operator == "+" and hasattr(left, "__len__") and hasattr(right, "__len__"):
            _projected(len(left) + len(right))
        elif operator == "%":
            _no_wide_format(left)
        return _made(super().call_binop(context, operator, left, right))


@lru_cache(maxsize=1)
def _environment() -> jinja2.sandbox.SandboxedEnvironment:
    return jinja2.sandbox.ImmutableSandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        # Byte-exact prompts: keep every newline as written, including the final one.
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        # Templates are part of the package and hashed once into cache keys (template_hash):
        # checking their mtimes on every render cost a stat() per prompt and could only make
        # the prompt disagree with its recorded hash.
        auto_reload=False,
    )


@lru_cache(maxsize=1)
def _source_environment() -> _BoundedSandbox:
    """The sandbox of config templates: like the package's, without a loader, and bounded."""
    return _BoundedSandbox()


@lru_cache(maxsize=64)
def _compiled(source: str) -> jinja2.Template:
    return _source_environment().from_string(source)


def check_source(source: str, *, name: str = "template") -> set[str]:
    """Compile template text from a config; returns the names of the variables it reads.

    Raises:
        TemplateError: a syntax error (with its line), or an ``include``/``import``/``extends``
            (a config template must be one text: its hash is what names its prompts).
    """
    environment = _source_environment()
    try:
        tree = environment.parse(source)
        if any(True for _ in jinja2.meta.find_referenced_templates(tree)):
            raise TemplateError(f"{name}: include, import and extends are not available in a config template "
                                "(write it as one file)")
        return set(jinja2.meta.find_undeclared_variables(tree))  # compiles: an unknown filter or test fails here
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{name}: line {exc.lineno}: {exc.message}") from None
    except RecursionError:  # jinja2's lexer, parser and compiler recurse once per level
        raise TemplateError(f"{name}: it nests too deeply to be read (brackets, blocks or an expression inside "
                            "one another)") from None


def variable_lines(source: str) -> dict[str, int]:
    """The line (from 1) where template text first reads each variable it does not set itself,
    for a message that names where to fix a variable the items lack. The text must compile
    (:func:`check_source` first)."""
    lines: dict[str, int] = {}
    try:
        tree = _source_environment().parse(source)
        undeclared = jinja2.meta.find_undeclared_variables(tree)
        for node in tree.find_all(jinja2.nodes.Name):
            if node.ctx == "load" and node.name in undeclared:
                lines[node.name] = min(node.lineno, lines.get(node.name, node.lineno))
    except RecursionError:  # deep, yet read by check_source: the messages go without a line
        return {}
    return lines


def render_source(source: str, /, *, name: str = "template", **variables: Any) -> str:
    """Render template text from a config (a custom judge's) with ``variables``, in a sandbox
    with the same rules as :func:`render` (strict undefined, no autoescape, newlines kept,
    variables read-only) and within the bounds of the module docstring.

    Raises:
        TemplateError: anything that stops the render (a variable that was not given, an attempt
            to change a variable, a bound passed, the template's own error such as ``1 / 0``),
            naming ``name``.
    """
    token = _BUDGET.set(_Budget(time.monotonic() + MAX_RENDER_S))
    try:
        return _compiled(source).render(**variables)
    except _Limit as exc:
        raise TemplateError(f"{name}: rendering stopped: {exc}") from None
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"{name}: {exc.message}") from exc
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateError(f"{name}: {exc} (a template reads its variables and cannot change them)") from None
    except jinja2.TemplateError as exc:
        raise TemplateError(f"{name}: {exc}") from exc
    except RecursionError:
        raise TemplateError(f"{name}: rendering stopped: it nests or calls itself too deeply") from None
    except Exception as exc:  # the template's own mistake ("a" + 1, 1 / 0, range(10**9)), not a bug of ours
        raise TemplateError(f"{name}: {type(exc).__name__}: {exc}") from None
    finally:
        _BUDGET.reset(token)


def render(template: str, /, **variables: Any) -> str:
    """Render ``template`` (a path under ``judge_engine/protocols/prompts``) with ``variables``.

    Raises:
        TemplateError: the template is missing or refers to a variable that was not given.
    """
    try:
        return _environment().get_template(template).render(**variables)
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"prompt template not found: {template}") from exc
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"template {template}: {exc.message}") from exc
    except jinja2.TemplateError as exc:
        raise TemplateError(f"template {template}: {exc}") from exc


@lru_cache(maxsize=256)
def template_hash(template: str) -> str:
    """Content hash of one template file, recorded in run manifests and cache keys."""
    path = PROMPTS_DIR / template
    if not path.is_file():
        raise TemplateError(f"prompt template not found: {template}")
    return text_hash(path.read_bytes())
