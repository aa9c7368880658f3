"""The ``--where`` language over a state row's key and value columns: comparisons
(``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``), ``in (...)``, ``is [not] null``, joined by
``and`` / ``or`` (``and`` binds tighter) and grouped with parentheses.

    key.user = 'u1'
    value.last < '2024-01-01' and key.user in ('a', 'b')
    value.count >= 10 or value.note is null

A column is ``key.<field>`` or ``value.<field>`` (nested: ``key.window.start``), or a bare
field name found in the key, else the value. Literals: 'text' (``''`` is a quote), numbers,
true, false, null. A text literal compared with a timestamp or a date is read as ISO 8601.
A bad expression is one line naming the token or the column.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ckpt_cli.errors import UsageError
from ckpt_cli.formats import spark_types as S

Row = Mapping[str, Any]
Test = Callable[[Row], bool]

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"|(?P<op><=|>=|!=|<>|=|<|>|\(|\)|,)|(?P<name>[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*))"
)
_KEYWORDS = {"and", "or", "in", "is", "not", "null", "true", "false"}


class WhereError(UsageError):
    """A ``--where`` expression that does not parse, or names a column there is not."""


@dataclass(frozen=True)
class _Token:
    kind: str  # str, num, op, name, end
    text: str
    at: int


@dataclass(frozen=True)
class Where:
    """A parsed ``--where``: called on a row, whether it matches; ``sides``: which of the
    row's ``key`` and ``value`` it reads (a reader that needs only keys decodes no value)."""

    test: Test
    sides: frozenset[str]

    def __call__(self, row: Row) -> bool:
        return self.test(row)


def parse_where(text: str, columns: Iterable[str] | None = None) -> Where:
    """``text`` as a test of rows ``{"key": {...}, "value": {...}}``. ``columns``: the
    columns there are (``key.a``, ``value.b``...), to refuse others by name up front."""
    tokens = _tokens(text)
    parser = _Parser(text, tokens, set(columns) if columns is not None else None)
    test = parser.expr()
    if parser.peek().kind != "end":
        parser.fail(parser.peek(), "expected and, or or the end")
    return Where(test, frozenset(parser.sides))


def _tokens(text: str) -> list[_Token]:
    found, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            token = text[at:].strip().split()[0] if text[at:].strip() else text[at:]
            raise WhereError(f"--where {text!r}: cannot read {token!r} (at {at + 1})")
        kind = match.lastgroup or "op"
        found.append(_Token(kind, match.group(kind), match.start(kind)))
        at = match.end()
    found.append(_Token("end", "", len(text)))
    return found


class _Parser:
    def __init__(self, text: str, tokens: list[_Token], columns: set[str] | None) -> None:
        self.text, self.tokens, self.columns, self.i = text, tokens, columns, 0
        self.sides: set[str] = set()  # "key", "value": what the expression reads

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def word(self, token: _Token) -> str | None:
        return token.text.lower() if token.kind == "name" else None

    def skipped(self, word: str) -> bool:
        """Whether the next token is the keyword ``word`` (then taken)."""
        if self.word(self.peek()) != word:
            return False
        self.take()
        return True

    def expect(self, text: str, what: str) -> None:
        """Take the next token, which must be ``text`` (else ``what`` is the error)."""
        token = self.take()
        if token.text != text:
            self.fail(token, what)

    def fail(self, token: _Token, what: str) -> Any:
        shown = repr(token.text) if token.kind != "end" else "the end"
        raise WhereError(f"--where {self.text!r}: {what}, not {shown} (at {token.at + 1})")

    def expr(self) -> Test:
        return self.joined("or", self.conjunction, any)

    def conjunction(self) -> Test:
        return self.joined("and", self.comparison, all)

    def joined(
        self, word: str, part: Callable[[], Test], combine: Callable[[Iterable[bool]], bool]
    ) -> Test:
        """One or more ``part`` joined by ``word``: true when ``combine`` (any, all) of them
        is."""
        tests = [part()]
        while self.word(self.peek()) == word:
            self.take()
            tests.append(part())
        return tests[0] if len(tests) == 1 else (lambda row: combine(t(row) for t in tests))

    def comparison(self) -> Test:
        token = self.take()
        if token.kind == "op" and token.text == "(":
            test = self.expr()
            self.expect(")", "expected )")
            return test
        if token.kind != "name" or token.text.lower() in _KEYWORDS:
            self.fail(token, "expected a column")
        column = self.column(token)
        op = self.take()
        word = self.word(op)
        if word == "is":
            negate = self.skipped("not")
            if self.word(self.take()) != "null":
                self.fail(self.tokens[self.i - 1], "expected null")
            return lambda row: (_value(row, column) is None) != negate
        if word == "in" or (word == "not" and self.skipped("in")):
            negate = word == "not"
            self.expect("(", "expected ( after in")
            values = [self.literal()]
            while self.peek().text == ",":
                self.take()
                values.append(self.literal())
            self.expect(")", "expected , or )")
            return lambda row: any(_equal(_value(row, column), v) for v in values) != negate
        if op.kind != "op" or op.text not in ("=", "!=", "<>", "<", "<=", ">", ">="):
            self.fail(op, "expected =, !=, <, <=, >, >=, in or is")
        literal = self.literal()
        return _comparing(column, op.text, literal)

    def column(self, token: _Token) -> tuple[str, ...]:
        parts = tuple(token.text.split("."))
        found = self._resolved(parts)
        if found is not None:
            self.sides.add(found[0])
            return found
        shown = ", ".join(sorted(self.columns or ()))
        raise WhereError(f"--where {self.text!r}: no column {token.text} (columns: {shown})")

    def _resolved(self, parts: tuple[str, ...]) -> tuple[str, ...] | None:
        if self.columns is None:
            return parts
        if parts[0] in ("key", "value") and ".".join(parts) in self.columns:
            return parts
        for side in ("key", "value"):
            if ".".join((side, *parts)) in self.columns:
                return (side, *parts)
        return None

    def literal(self) -> Any:
        token = self.take()
        if token.kind == "str":
            return token.text[1:-1].replace("''", "'")
        if token.kind == "num":
            return float(token.text) if re.search(r"[.eE]", token.text) else int(token.text)
        word = self.word(token)
        if word in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[word]
        return self.fail(token, "expected a value ('text', a number, true, false or null)")


def _value(row: Row, column: tuple[str, ...]) -> Any:
    value: Any = row
    for part in column:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part, None)
    return value


def _coerced(value: Any, literal: Any) -> Any:
    """``literal`` in the type of ``value`` where the two differ in spelling only: ISO text
    for timestamps and dates, numbers for decimals."""
    if isinstance(literal, str):
        try:
            if isinstance(value, dt.datetime):
                parsed = dt.datetime.fromisoformat(literal.replace("Z", "+00:00"))
                if value.tzinfo is not None and parsed.tzinfo is None:
                    parsed = parsed.replace(tzinfo=dt.timezone.utc)
                return parsed
            if isinstance(value, dt.date):
                return dt.date.fromisoformat(literal[:10])
        except ValueError:
            return literal
    if isinstance(value, Decimal) and isinstance(literal, (int, float)):
        try:
            return Decimal(str(literal))
        except InvalidOperation:
            return literal
    return literal


def _equal(value: Any, literal: Any) -> bool:
    if value is None or literal is None:
        return value is None and literal is None
    return bool(value == _coerced(value, literal))


def _comparing(column: tuple[str, ...], op: str, literal: Any) -> Test:
    def test(row: Row) -> bool:
        value = _value(row, column)
        if op in ("=", "!=", "<>"):
            return _equal(value, literal) != (op != "=")
        if value is None or literal is None:
            return False  # null is neither less nor more, as in SQL
        other = _coerced(value, literal)
        try:
            if op == "<":
                return bool(value < other)
            if op == "<=":
                return bool(value <= other)
            if op == ">":
                return bool(value > other)
            return bool(value >= other)
        except TypeError:
            return False  # text against a number: no order, as a comparison of no row

    return test


def schema_columns(key: S.StructType, value: S.StructType) -> list[str]:
    """The columns of a store's rows by its schema (nested struct fields by dots)."""
    out: list[str] = []

    def walk(prefix: str, t: S.DataType) -> None:
        out.append(prefix)
        if isinstance(t, S.StructType):
            for f in t.fields:
                walk(f"{prefix}.{f.name}", f.data_type)

    for side, t in (("key", key), ("value", value)):
        for f in t.fields:
            walk(f"{side}.{f.name}", f.data_type)
    return out


__all__ = ["Where", "WhereError", "parse_where", "schema_columns"]
