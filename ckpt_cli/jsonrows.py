"""UnsafeRow bytes straight to JSON text, compiled per schema: the replay fast path.

Decoding every row into Python objects and then serialising them is most of the time of a
large replay. For rows whose columns are all flat (booleans, integers, floats, strings, dates,
timestamps, void) this module generates, once per schema, one Python function that unpacks the
null bitset and all fixed slots with a single ``struct`` call and formats the JSON object
directly. Its output parses to the same JSON as the general path
(``RowDecoder.json_row`` + a JSON encoder); tests/test_jsonrows.py checks that on real rows and
on generated ones.

Rows it cannot handle exactly (a string pointing outside the row, a date or timestamp outside
years 1-9999, a non-finite float, bytes too short) are handed to the general decoder, which
decodes them or raises the project's FormatError.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from ckpt_cli.formats import schema as S

_FLAT = {
    "boolean": "?",
    "byte": "b",
    "short": "h",
    "integer": "i",
    "long": "q",
    "float": "f",
    "double": "d",
    "date": "i",
    "timestamp": "q",
    "timestamp_ntz": "q",
    "string": "q",
    "void": "q",
}
_MIN_DAY = dt.date(1, 1, 1).toordinal() - dt.date(1970, 1, 1).toordinal()
_MAX_DAY = dt.date(9999, 12, 31).toordinal() - dt.date(1970, 1, 1).toordinal()
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000


class Fallback(Exception):
    """The row needs the general decoder."""


_days_cache: dict[int, str] = {}


def _day(days: int) -> str:
    text = _days_cache.get(days)
    if text is None:
        if not _MIN_DAY <= days <= _MAX_DAY:
            raise Fallback
        d = dt.date.fromordinal(_EPOCH_ORDINAL + days)
        text = f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
        if len(_days_cache) < 100_000:
            _days_cache[days] = text
    return text


_minutes_cache: dict[int, str] = {}
_MIN_MINUTE = _MIN_DAY * 1440
_MAX_MINUTE = (_MAX_DAY + 1) * 1440 - 1


def _ts(micros: int, suffix: str) -> str:
    seconds, us = divmod(micros, 1_000_000)
    minute, second = divmod(seconds, 60)
    head = _minutes_cache.get(minute)
    if head is None:
        if not _MIN_MINUTE <= minute <= _MAX_MINUTE:
            raise Fallback
        days, rest = divmod(minute, 1440)
        head = f'"{_day(days)}T{rest // 60:02d}:{rest % 60:02d}:'
        if len(_minutes_cache) > 200_000:
            _minutes_cache.clear()
        _minutes_cache[minute] = head
    return f'{head}{second:02d}.{us:06d}{suffix}"'


def _date(days: int) -> str:
    return f'"{_day(days)}"'


def _float(value: float) -> str:
    if not math.isfinite(value):
        raise Fallback
    return repr(value)


def _string(buf: bytes, base: int, raw: int, end: int) -> str:
    offset, size = raw >> 32, raw & 0xFFFFFFFF
    start = base + offset
    if offset < 0 or start + size > end:
        raise Fallback
    return str(encode_basestring(buf[start : start + size].decode("utf-8", "replace")))


def _type_name(t: S.DataType) -> str | None:
    if isinstance(t, S.AtomicType):
        return t.name if t.name in _FLAT else None
    if isinstance(t, S.StringLikeType):
        return "string"
    return None


def compile_row(schema: S.StructType) -> Callable[[bytes, int, int], str] | None:
    """``f(buf, base, end) -> JSON object text`` for a row at ``buf[base:end]``, or None when
    a column is not flat."""
    names = schema.unique_names()
    kinds = [_type_name(f.data_type) for f in schema.fields]
    if any(k is None for k in kinds):
        return None
    n = len(kinds)
    words = (n + 63) // 64
    fmt = (
        "<"
        + "q" * words
        + "".join(
            # Every slot is 8 bytes: narrower types sit in its low bytes, padded after.
            f"{_FLAT[k]}{8 - struct.calcsize(_FLAT[k])}x"
            if struct.calcsize(_FLAT[k]) < 8
            else _FLAT[k]
            for k in kinds
            if k is not None
        )
    )
    unpacker = struct.Struct(fmt)
    pieces: list[str] = []  # the f-string's parts: literal text and {expressions}
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        literal = ("{" if i == 0 else ",") + encode_basestring(name) + ":"
        pieces.append(literal.replace("{", "{{").replace("}", "}}"))
        slot = f"v[{words + i}]"
        null = f"v[{i // 64}] >> {i % 64} & 1"
        if kind == "void":
            value = "'null'"
        elif kind == "boolean":
            value = f"'true' if {slot} else 'false'"
        elif kind in ("byte", "short", "integer", "long"):
            value = slot
        elif kind in ("float", "double"):
            value = f"_float({slot})"
        elif kind == "date":
            value = f"_date({slot})"
        elif kind == "timestamp":
            value = f"_ts({slot}, 'Z')"
        elif kind == "timestamp_ntz":
            value = f"_ts({slot}, '')"
        else:  # string
            value = f"_string(buf, base, {slot}, end)"
        pieces.append(f"{{'null' if {null} else {value}}}")
    pieces.append("}}" if n else "{{}}")
    body = "".join(pieces)
    lines = [
        "def encode(buf, base, end):",
        f"    if end - base < {unpacker.size}:",
        "        raise Fallback",
        "    v = unpack_from(buf, base)",
        f'    return f"""{body}"""',
    ]
    namespace: dict[str, Any] = {
        "unpack_from": unpacker.unpack_from,
        "Fallback": Fallback,
        "_float": _float,
        "_day": _day,
        "_date": _date,
        "_ts": _ts,
        "_string": _string,
    }
    exec("\n".join(lines), namespace)  # noqa: S102 - code generated above from the schema
    encode: Callable[[bytes, int, int], str] = namespace["encode"]
    return encode


class LineEncoder:
    """A state row (raw key and value bytes as stored) to one JSON line in the shape of Spark's
    statestore source, through the compiled encoders, else the general decoder."""

    def __init__(self, decoder: Any) -> None:
        from ckpt_cli.state import RowDecoder

        assert isinstance(decoder, RowDecoder)
        self.decoder = decoder
        schema = decoder.schema
        self.key = compile_row(schema.key) if schema is not None else None
        self.value = compile_row(schema.value) if schema is not None else None
        self.rocks = decoder.rocks

    @property
    def compiled(self) -> bool:
        return self.key is not None and self.value is not None

    def line(self, partition: int, key: bytes, value: bytes) -> str:
        if self.key is not None and self.value is not None:
            try:
                if self.rocks:
                    if key[:1] != b"\x00" or value[:1] != b"\x00":
                        raise Fallback
                    k = self.key(key, 1, len(key))
                    v = self.value(value, 1, len(value))
                else:
                    k = self.key(key, 0, len(key))
                    v = self.value(value, 0, len(value) & ~7)
                return f'{{"partition_id":{partition},"key":{k},"value":{v}}}\n'
            except (Fallback, struct.error, IndexError):
                pass
        import orjson

        json_key, json_value = self.decoder.json_row(key, value)
        row = {"partition_id": partition, "key": json_key, "value": json_value}
        return str(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE).decode())
