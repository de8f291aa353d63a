"""A custom judge's score: one field, or a small arithmetic expression over its fields.

``score: quality`` takes the field's number; ``score: "mean(fluency, adequacy) - 0.5 * count(errors)"``
computes one. The expression is parsed with Python's :mod:`ast` and only these nodes are
accepted: numbers, field names, ``+ - * /``, unary ``-``/``+``, parentheses, and the calls
``mean(...)``, ``min(...)``, ``max(...)`` (one or more arguments) and ``count(spans_field)`` (how
many quotes). It is evaluated by walking that tree; nothing is ever passed to ``eval``. The
score's range follows from the fields' ranges by interval arithmetic (unbounded when a field is,
or when a divisor's range contains 0), so ``plan``, the manifest and the engine's range check
know it like a built-in protocol's. A divisor that is 0 whatever the answer (``a / (b - b)``,
found by that range or by reading the divisor as a linear form) is refused when the config is
read, as is an expression past :data:`MAX_LENGTH` characters or :data:`MAX_DEPTH` levels; a
divisor that is 0 only for some values makes those answers ``out_of_range``. :class:`ScoreRule`
applies the ``score`` option to a verdict, and says what the verdict is as a jury vote.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from judge_engine.errors import ReasonCode, VerdictError
from judge_engine.protocols.base import VoteScale
from judge_engine.protocols.custom_fields import (
    BooleanField,
    CandidateField,
    FieldProblem,
    IntegerField,
    LabelField,
    NumberField,
    SpansField,
    TextField,
)

Bounds = tuple[float, float] | None
Linear = tuple[float, dict[str, float]] | None
"""An expression as ``constant + sum(coefficient * field)``, or None when it is not linear."""

FUNCTIONS = ("mean", "min", "max", "count")
MAX_LENGTH = 2_000
"""Most characters of a score expression (Python's parser needs gigabytes for 10^5 signs)."""
MAX_DEPTH = 200
"""Most levels of nesting in a score expression (a sum of 200 terms is 200 levels deep)."""
_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}


@dataclass(frozen=True, slots=True)
class ScoreExpression:
    """A checked score expression.

    Attributes:
        source: the text as configured.
        names: the fields it reads.
        bounds: the range of its value (None: unbounded).
    """

    source: str
    tree: ast.expr
    names: frozenset[str]
    bounds: Bounds

    def evaluate(self, numbers: Mapping[str, float], counts: Mapping[str, int]) -> float:
        """The expression's value for one verdict's numbers (and spans fields' quote counts).

        Raises:
            ZeroDivisionError: a divisor is 0 for these values.
        """
        return _evaluate(self.tree, numbers, counts)


def parse_score(source: str, numeric: Mapping[str, Bounds], spans: frozenset[str]) -> ScoreExpression:
    """Check ``source`` against the fields it may read.

    Args:
        numeric: the fields that have a number, with their ranges (None: unbounded).
        spans: the spans fields (for ``count``).

    Raises:
        ValueError: a syntax error, a node outside the allowed set, or a name that is not a
            numeric field (the message says which and what is allowed).
    """
    text = source.strip()
    if len(text) > MAX_LENGTH:
        raise ValueError(f"score: the expression is {len(text):,} characters long, more than {MAX_LENGTH:,}")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"score {source!r} is not an expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"score: the expression nests more than {MAX_DEPTH} levels deep") from None
    if _depth(tree) > MAX_DEPTH:
        raise ValueError(f"score: the expression nests more than {MAX_DEPTH} levels deep (a long sum? mean() and "
                         "parentheses keep it shallow)")
    names: set[str] = set()
    bounds = _check(tree, numeric, spans, names)
    if bounds is not None and not all(math.isfinite(b) for b in bounds):
        raise ValueError(f"score: the expression's value overflows (its range is {bounds[0]:g}..{bounds[1]:g})")
    return ScoreExpression(source, tree, frozenset(names), bounds)


def _depth(tree: ast.AST) -> int:
    """How deeply ``tree`` nests (walked without recursion)."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        todo.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check(node: ast.expr, numeric: Mapping[str, Bounds], spans: frozenset[str], names: set[str]) -> Bounds:
    """Walk the tree, refusing anything not allowed; returns the node's range."""
    match node:
        case ast.Constant(value=bool()):
            raise ValueError("score: true/false are not numbers here")
        case ast.Constant(value=int() | float() as value):
            return (float(value), float(value))
        case ast.Name(id=name):
            if name not in numeric:
                allowed = ", ".join(sorted(numeric)) or "none: declare an integer, number or boolean field"
                raise ValueError(f"score: {name!r} is not a field with a number (those are: {allowed}; a label "
                                 "or candidate field needs a score_map)")
            names.add(name)
            return numeric[name]
        case ast.UnaryOp(op=ast.USub() | ast.UAdd() as op, operand=operand):
            inner = _check(operand, numeric, spans, names)
            return inner if inner is None or isinstance(op, ast.UAdd) else (-inner[1], -inner[0])
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _OPERATORS:
            divisor = _check(right, numeric, spans, names)
            if isinstance(op, ast.Div) and (divisor == (0.0, 0.0) or _is_zero(_linear(right))):
                raise ValueError(f"score: {ast.unparse(right)!r} is 0 whatever the answer, so the score would divide "
                                 "by zero for every answer")
            return _combine(type(op), _check(left, numeric, spans, names), divisor)
        case ast.Call(func=ast.Name(id="count"), args=[ast.Name(id=name)], keywords=[]):
            if name not in spans:
                raise ValueError(f"score: count() takes a spans field, and {name!r} is not one")
            names.add(name)
            return None
        case ast.Call(func=ast.Name(id="mean" | "min" | "max" as function), args=[_, *_] as args, keywords=[]):
            parts = [_check(arg, numeric, spans, names) for arg in args]
            if any(part is None for part in parts):
                return None
            lows, highs = [p[0] for p in parts if p], [p[1] for p in parts if p]
            if function == "mean":
                return (sum(lows) / len(lows), sum(highs) / len(highs))
            pick = min if function == "min" else max
            return (pick(lows), pick(highs))
    raise ValueError(f"score: {ast.unparse(node)!r} is not allowed (numbers, fields, + - * /, parentheses, "
                     f"{', '.join(f + '()' for f in FUNCTIONS)})")


def _combine(op: type[ast.operator], left: Bounds, right: Bounds) -> Bounds:
    if left is None or right is None:
        return None
    if op is ast.Add:
        return (left[0] + right[0], left[1] + right[1])
    if op is ast.Sub:
        return (left[0] - right[1], left[1] - right[0])
    if op is ast.Div:
        if right[0] <= 0 <= right[1]:
            return None
        right = (1 / right[1], 1 / right[0])
    products = [a * b for a in left for b in right]
    return (min(products), max(products))


def _linear(node: ast.expr) -> Linear:
    """``node`` (already checked) as a linear form over its fields, or None when it is not
    one: what finds a divisor such as ``(a - a)`` or ``mean(a, b) - (a + b) / 2`` that is 0 for
    every answer, which interval arithmetic cannot see."""
    match node:
        case ast.Constant(value=int() | float() as value):
            return float(value), {}
        case ast.Name(id=name):
            return 0.0, {name: 1.0}
        case ast.UnaryOp(op=op, operand=operand):
            return _scaled(_linear(operand), -1.0 if isinstance(op, ast.USub) else 1.0)
        case ast.BinOp(left=left, op=ast.Add() | ast.Sub() as op, right=right):
            return _sum([_linear(left), _scaled(_linear(right), -1.0 if isinstance(op, ast.Sub) else 1.0)])
        case ast.BinOp(left=left, op=ast.Mult(), right=right):
            a, b = _linear(left), _linear(right)
            if a is not None and b is not None and not (a[1] and b[1]):
                return _scaled(a, b[0]) if not b[1] else _scaled(b, a[0])
        case ast.BinOp(left=left, op=ast.Div(), right=right):
            a, b = _linear(left), _linear(right)
            if b is not None and not b[1] and b[0] != 0:
                return _scaled(a, 1.0 / b[0])
        case ast.Call(func=ast.Name(id="count"), args=[ast.Name(id=name)]):
            return 0.0, {f"count({name})": 1.0}
        case ast.Call(func=ast.Name(id="mean"), args=args):
            return _scaled(_sum([_linear(arg) for arg in args]), 1.0 / len(args))
        case ast.Call(func=ast.Name(id="min" | "max"), args=args):
            forms = [_linear(arg) for arg in args]
            if forms[0] is not None and all(_is_zero(_sum([f, _scaled(forms[0], -1.0)])) for f in forms):
                return forms[0]  # min(a, a) is a
    return None


def _scaled(form: Linear, factor: float) -> Linear:
    return None if form is None else (form[0] * factor, {k: v * factor for k, v in form[1].items()})


def _sum(forms: list[Linear]) -> Linear:
    constant, terms = 0.0, dict[str, float]()
    for form in forms:
        if form is None:
            return None
        constant += form[0]
        for name, coefficient in form[1].items():
            terms[name] = terms.get(name, 0.0) + coefficient
    return constant, terms


def _is_zero(form: Linear) -> bool:
    """Whether a linear form is 0 for every value of its fields (up to rounding)."""
    if form is None:
        return False
    scale = max([abs(form[0]), *(abs(c) for c in form[1].values()), 1.0])
    return all(abs(c) <= 1e-12 * scale for c in [form[0], *form[1].values()])


def _evaluate(node: ast.expr, numbers: Mapping[str, float], counts: Mapping[str, int]) -> float:
    match node:
        case ast.Constant(value=int() | float() as value):
            return float(value)
        case ast.Name(id=name):
            return numbers[name]
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_evaluate(operand, numbers, counts)
        case ast.UnaryOp(operand=operand):
            return _evaluate(operand, numbers, counts)
        case ast.BinOp(left=left, op=op, right=right):
            return _OPERATORS[type(op)](_evaluate(left, numbers, counts), _evaluate(right, numbers, counts))
        case ast.Call(func=ast.Name(id="count"), args=[ast.Name(id=name)]):
            return float(counts[name])
        case ast.Call(func=ast.Name(id=function), args=args):
            values = [_evaluate(arg, numbers, counts) for arg in args]
            return sum(values) / len(values) if function == "mean" else (min if function == "min" else max)(values)
    raise AssertionError(ast.dump(node))  # _check admitted only the nodes above


class ScoreRule:
    """How a verdict becomes its score and its jury vote, from the ``score`` option."""

    def __init__(self, fields: Mapping[str, Any], source: str | None) -> None:
        self.fields = fields
        self.field: str | None = None
        self.expression: ScoreExpression | None = None
        self.spec: Any = None
        if source is not None and source.strip() in fields:
            self.field = source.strip()
            self.spec = fields[self.field]
            if isinstance(self.spec, TextField | SpansField):
                raise ValueError(f"score: {self.field} is a {self.spec.type} field, which has no score (use a number, "
                                 "a label, a boolean, or an expression such as count(...))")
        elif source is not None:
            numeric = {name: spec.bounds() for name, spec in fields.items() if spec.numeric}
            spans = frozenset(name for name, spec in fields.items() if isinstance(spec, SpansField))
            self.expression = parse_score(source, numeric, spans)

    @property
    def bounds(self) -> tuple[float, float] | None:
        if self.expression is not None:
            return self.expression.bounds
        return self.spec.bounds() if self.spec is not None and self.spec.numeric else None

    @property
    def scale(self) -> VoteScale | None:
        spec = self.spec
        if self.expression is not None or isinstance(spec, NumberField):
            return VoteScale("interval", bounds=self.bounds)
        if isinstance(spec, IntegerField) or (isinstance(spec, LabelField | CandidateField) and spec.numeric):
            return VoteScale("ordinal", bounds=self.bounds)
        if isinstance(spec, LabelField):
            return VoteScale("categorical", values=spec.choices)
        if isinstance(spec, BooleanField):
            return VoteScale("categorical", values=("false", "true"))
        if isinstance(spec, CandidateField):
            return VoteScale("categorical")
        return None

    def vote(self, verdict: Mapping[str, Any], score: float | None) -> str | float | None:
        scale = self.scale
        if scale is None or scale.kind != "categorical":
            return score
        value = verdict.get(f"{self.field}_id" if isinstance(self.spec, CandidateField) else str(self.field))
        if isinstance(value, bool):
            return "true" if value else "false"
        return None if value is None else str(value)

    def compute(self, values: Mapping[str, Any]) -> float | None:
        if self.field is not None:
            if not self.spec.numeric:
                return None
            value = values[f"{self.field}_id"] if isinstance(self.spec, CandidateField) else values[self.field]
            return self._number(self.spec, value)
        if self.expression is None:
            return None
        return self._evaluate(self.expression, values)

    def _evaluate(self, expression: ScoreExpression, values: Mapping[str, Any]) -> float:
        fields = self.fields
        numbers = {name: self._number(fields[name], values[f"{name}_id"] if isinstance(fields[name], CandidateField)
                                      else values[name])
                   for name in expression.names if fields[name].numeric}
        counts = {name: len(values[name]) for name in expression.names if isinstance(fields[name], SpansField)}
        try:
            return expression.evaluate(numbers, counts)
        except ZeroDivisionError:
            raise VerdictError(f"the score {expression.source!r} divides by zero for these values",
                               code=ReasonCode.OUT_OF_RANGE) from None

    @staticmethod
    def _number(spec: Any, value: Any) -> float:
        try:
            return float(spec.number(value))
        except FieldProblem as problem:
            raise VerdictError(str(problem), code=problem.code) from None
