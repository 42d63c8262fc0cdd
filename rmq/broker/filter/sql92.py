"""SQL92 property filters (MessageSelector.bySql): tokenizer, recursive-descent parser, evaluator.

    expr = compile_sql92("a > 5 AND b = 'x'")     # SqlFilterError (with .position) if malformed
    expr.matches({"a": "7", "b": "x"})              # True

The language is RocketMQ's (a subset of JMS selectors):

* literals: 'strings' ('' escapes a quote), integers (optional L suffix, 0x hex),
  decimals and exponents, a leading + or -, TRUE, FALSE, NULL; identifiers name
  message properties (TAGS and KEYS included);
* comparisons =, <> (also !=), <, <=, >, >=; IS [NOT] NULL; [NOT] BETWEEN a AND b;
  [NOT] IN ('x', 'y'); AND, OR, NOT and parentheses. Keywords are case-insensitive.
  NOT binds looser than a comparison, as in SQL: `NOT a = 1` is `NOT (a = 1)`.

Semantics follow RocketMQ's evaluator (from ActiveMQ's): property values are text and
are read as numbers (or booleans) when compared with a number (or boolean); a comparison
involving a missing property, or text that is not a number, is *unknown*. NOT keeps
unknown unknown; AND and OR treat unknown as false. A message matches only when the
whole expression is true, so a filter on a property the message lacks never matches,
whichever way it is written (`a <> 'x'`, `NOT a = 1`, `a NOT IN (...)`, `a NOT BETWEEN`).
Ordering comparisons and BETWEEN take numbers; IN takes strings; mistakes there are
parse errors, as in RocketMQ.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

Value = str | int | float | bool | None
Operand = Callable[[Mapping[str, str]], Value]
Predicate = Callable[[Mapping[str, str]], bool | None]

MAX_EXPRESSION_LENGTH = 64 * 1024  # bytes; a subscription string is small, a runaway one is an error


class SqlFilterError(ValueError):
    """A malformed expression; `position` is the 0-based character index of the problem."""

    def __init__(self, message: str, position: int, expression: str) -> None:
        near = expression[position : position + 20]
        where = f'near "{near}"' if near else "at the end"
        super().__init__(f"{message} at position {position} ({where}) in SQL92 expression {expression!r}")
        self.position = position


# -- tokens ----------------------------------------------------------------------------

KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "LIKE", "ESCAPE"})


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "num", "str", "id", "kw", "op", "end"
    value: Value
    pos: int


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<hex>0[xX][0-9a-fA-F]+[lL]?)
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+[lL]?)
  | (?P<str>'(?:[^']|'')*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$.]*)
  | (?P<op><>|!=|<=|>=|[=<>(),+-])
    """,
    re.VERBOSE,
)


def tokenize(text: str) -> list[Token]:
    out: list[Token] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos] == "'":
                raise SqlFilterError("unterminated string literal", pos, text)
            raise SqlFilterError(f"unexpected character {text[pos]!r}", pos, text)
        kind = m.lastgroup
        raw = m.group()
        if kind == "hex":
            out.append(Token("num", int(raw.rstrip("lL"), 16), pos))
        elif kind == "float":
            out.append(Token("num", float(raw), pos))
        elif kind == "int":
            out.append(Token("num", int(raw.rstrip("lL")), pos))
        elif kind == "str":
            out.append(Token("str", raw[1:-1].replace("''", "'"), pos))
        elif kind == "id":
            upper = raw.upper()
            out.append(Token("kw", upper, pos) if upper in KEYWORDS else Token("id", raw, pos))
        elif kind == "op":
            out.append(Token("op", "<>" if raw == "!=" else raw, pos))
        pos = m.end()
    out.append(Token("end", None, n))
    return out


# -- evaluation helpers ------------------------------------------------------------------

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")


def _as_number(value: str) -> int | float | None:
    text = value.strip()
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def _coerce(left: Value, right: Value) -> tuple[Value, Value] | None:
    """Bring both sides to one type the way RocketMQ does, or None when they cannot be."""
    if isinstance(left, bool) or isinstance(right, bool):
        if isinstance(left, str):
            left = left.strip().lower() == "true"
        if isinstance(right, str):
            right = right.strip().lower() == "true"
        return (left, right) if isinstance(left, bool) and isinstance(right, bool) else None
    if isinstance(left, str) and isinstance(right, str):
        return left, right
    if isinstance(left, str):
        left = _as_number(left)
    if isinstance(right, str):
        right = _as_number(right)
    if left is None or right is None:
        return None
    return left, right


def _equal(left: Value, right: Value) -> bool | None:
    if left is None or right is None:
        return None
    pair = _coerce(left, right)
    return None if pair is None else pair[0] == pair[1]


_ORDER: dict[str, Callable[[Value, Value], bool]] = {
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
}


def _ordered(op: str, left: Value, right: Value) -> bool | None:
    if left is None or right is None:
        return None
    if isinstance(left, str) and isinstance(right, str):  # two properties: compare as numbers
        left, right = _as_number(left), _as_number(right)
        if left is None or right is None:
            return None
    pair = _coerce(left, right)
    if pair is None or isinstance(pair[0], (bool, str)):
        return None
    return _ORDER[op](pair[0], pair[1])


def _and(a: Predicate, b: Predicate) -> Predicate:
    return lambda m: bool(a(m)) and bool(b(m))


def _or(a: Predicate, b: Predicate) -> Predicate:
    return lambda m: bool(a(m)) or bool(b(m))


def _not(a: Predicate) -> Predicate:
    def run(m: Mapping[str, str]) -> bool | None:
        v = a(m)
        return None if v is None else not v

    return run


# -- parser ----------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, message: str, token: Token | None = None) -> SqlFilterError:
        return SqlFilterError(message, (token or self.tok).pos, self.text)

    def accept(self, kind: str, value: str | None = None) -> Token | None:
        t = self.tok
        if t.kind == kind and (value is None or t.value == value):
            self.i += 1
            return t
        return None

    def expect(self, kind: str, value: str, what: str) -> Token:
        t = self.accept(kind, value)
        if t is None:
            raise self.error(f"expected {what}")
        return t

    def parse(self) -> Predicate:
        if self.tok.kind == "end":
            raise self.error("empty expression")
        pred = self.or_expr()
        if self.tok.kind != "end":
            raise self.error("unexpected text after the expression")
        return pred

    def or_expr(self) -> Predicate:
        pred = self.and_expr()
        while self.accept("kw", "OR"):
            pred = _or(pred, self.and_expr())
        return pred

    def and_expr(self) -> Predicate:
        pred = self.not_expr()
        while self.accept("kw", "AND"):
            pred = _and(pred, self.not_expr())
        return pred

    def not_expr(self) -> Predicate:
        if self.accept("kw", "NOT"):
            return _not(self.not_expr())
        return self.predicate()

    def predicate(self) -> Predicate:
        if self.tok.kind == "op" and self.tok.value == "(":
            self.i += 1
            pred = self.or_expr()
            self.expect("op", ")", "')'")
            return pred
        start = self.tok
        left, left_kind = self.operand()
        t = self.tok
        if t.kind == "op" and t.value in ("=", "<>"):
            self.i += 1
            right, _ = self.operand()
            if t.value == "=":
                return lambda m: _equal(left(m), right(m))
            return _not(lambda m: _equal(left(m), right(m)))
        if t.kind == "op" and t.value in _ORDER:
            self.i += 1
            self.check_numeric(left_kind, start)
            right_start = self.tok
            right, right_kind = self.operand()
            self.check_numeric(right_kind, right_start)
            op = str(t.value)
            return lambda m: _ordered(op, left(m), right(m))
        if self.accept("kw", "IS"):
            negate = self.accept("kw", "NOT") is not None
            self.expect("kw", "NULL", "NULL after IS")
            return (lambda m: left(m) is not None) if negate else (lambda m: left(m) is None)
        negate = self.accept("kw", "NOT") is not None
        if self.accept("kw", "BETWEEN"):
            self.check_numeric(left_kind, start)
            low_start = self.tok
            low, low_kind = self.operand()
            self.check_numeric(low_kind, low_start)
            self.expect("kw", "AND", "AND in BETWEEN")
            high_start = self.tok
            high, high_kind = self.operand()
            self.check_numeric(high_kind, high_start)
            if negate:  # a < low OR a > high
                return _or(lambda m: _ordered("<", left(m), low(m)), lambda m: _ordered(">", left(m), high(m)))
            return _and(lambda m: _ordered(">=", left(m), low(m)), lambda m: _ordered("<=", left(m), high(m)))
        if self.accept("kw", "IN"):
            return self.in_list(left, negate)
        if self.tok.kind == "kw" and self.tok.value == "LIKE":
            raise self.error("LIKE is not supported")
        if negate:
            raise self.error("expected BETWEEN or IN after NOT")
        if left_kind == "bool":
            return lambda m: left(m)  # type: ignore[return-value]
        raise self.error("expected a comparison (=, <>, <, <=, >, >=, IS, BETWEEN or IN)")

    def in_list(self, left: Operand, negate: bool) -> Predicate:
        self.expect("op", "(", "'(' after IN")
        items: set[str] = set()
        while True:
            t = self.accept("str")
            if t is None:
                raise self.error("IN takes string literals")
            items.add(str(t.value))
            if self.accept("op", ")"):
                break
            self.expect("op", ",", "',' or ')' in the IN list")
        frozen = frozenset(items)

        def run(m: Mapping[str, str]) -> bool | None:
            v = left(m)
            if not isinstance(v, str):
                return None
            return (v in frozen) != negate

        return run

    def check_numeric(self, kind: str, token: Token) -> None:
        if kind in ("str", "bool", "null"):
            raise self.error("only numbers and properties can be compared with <, <=, >, >= or BETWEEN", token)

    def operand(self) -> tuple[Operand, str]:
        """A property or a literal, and its kind: "id", "num", "str", "bool", "null"."""
        t = self.tok
        if t.kind == "id":
            self.i += 1
            name = str(t.value)
            return (lambda m: m.get(name)), "id"
        if t.kind == "str" or t.kind == "num":
            self.i += 1
            value = t.value
            return (lambda m: value), t.kind
        if t.kind == "op" and t.value in ("+", "-"):
            self.i += 1
            n = self.tok
            if n.kind != "num":
                raise self.error("expected a number after the sign")
            self.i += 1
            value = -n.value if t.value == "-" else n.value  # type: ignore[operator]
            return (lambda m: value), "num"
        if t.kind == "kw" and t.value in ("TRUE", "FALSE"):
            self.i += 1
            flag = t.value == "TRUE"
            return (lambda m: flag), "bool"
        if t.kind == "kw" and t.value == "NULL":
            self.i += 1
            return (lambda m: None), "null"
        if t.kind == "end":
            raise self.error("expected an operand")
        raise self.error("expected a property name or a literal")


# -- public ------------------------------------------------------------------------------


class SqlFilter:
    """A compiled expression."""

    __slots__ = ("_predicate", "expression")

    def __init__(self, expression: str, predicate: Predicate) -> None:
        self.expression = expression
        self._predicate = predicate

    def matches(self, properties: Mapping[str, str]) -> bool:
        return self._predicate(properties) is True

    def __repr__(self) -> str:
        return f"<SqlFilter {self.expression!r}>"


@lru_cache(maxsize=1024)
def compile_sql92(expression: str) -> SqlFilter:
    """Parse `expression`; raises SqlFilterError naming the position of the first problem."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SqlFilterError(f"expression longer than {MAX_EXPRESSION_LENGTH} characters", 0, expression[:40])
    return SqlFilter(expression, _Parser(expression).parse())
