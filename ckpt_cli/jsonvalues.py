"""Decoded state values as plain JSON, compiled once per schema.

``state.json_value`` converts any value by inspecting its type; replaying millions of rows
needs a converter that knows the schema: JSON-native columns pass through untouched, and
timestamps are formatted from their fields without ``strftime``. The output is the same as
``json_value``'s (timestamps ISO-8601 with microseconds, ``Z`` for UTC; dates ISO; decimals as
strings; binary as hex).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

from ckpt_cli.formats import schema as S

Converter = Callable[[Any], Any]

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def _identity(value: Any) -> Any:
    return value


def _float(value: Any) -> Any:
    if value is None or math.isfinite(value):
        return value
    return str(value)


def format_timestamp(value: dt.datetime) -> str:
    """ISO-8601 with microseconds and a 4-digit year; aware values in UTC with ``Z``
    (``strftime("%Y")`` would drop the leading zeros of years before 1000)."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
        suffix = "Z"
    else:
        suffix = ""
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:"
        f"{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}{suffix}"
    )


def _timestamp(value: Any) -> Any:
    return None if value is None else format_timestamp(value)


def _iso(value: Any) -> Any:
    return None if value is None else value.isoformat()


def _str(value: Any) -> Any:
    return None if value is None else str(value)


def _hex(value: Any) -> Any:
    return None if value is None else bytes(value).hex()


def _fallback(value: Any) -> Any:
    from ckpt_cli.state import json_value

    return json_value(value)


def converter_for(data_type: S.DataType) -> Converter:
    """A function turning a decoded value of ``data_type`` into plain JSON."""
    if isinstance(data_type, S.AtomicType):
        name = data_type.name
        if name in ("boolean", "byte", "short", "integer", "long", "string", "void"):
            return _identity
        if name in ("float", "double"):
            return _float
        if name in ("timestamp", "timestamp_ntz"):
            return _timestamp
        if name == "date":
            return _iso
        if name == "binary":
            return _hex
        return _fallback
    if isinstance(data_type, S.StringLikeType):
        return _identity
    if isinstance(data_type, S.DecimalType):
        return _str
    if isinstance(data_type, S.StructType):
        return struct_converter(data_type)
    if isinstance(data_type, S.ArrayType):
        element = converter_for(data_type.element_type)
        if element is _identity:
            return _identity
        return lambda v: None if v is None else [element(x) for x in v]
    return _fallback


def struct_converter(schema: S.StructType) -> Converter:
    """For a decoded struct (a dict keyed by ``unique_names()``), converted in place."""
    names = schema.unique_names()
    convs = [converter_for(f.data_type) for f in schema.fields]
    special = [(n, c) for n, c in zip(names, convs, strict=True) if c is not _identity]
    if not special:
        return _identity

    def convert(row: Any) -> Any:
        # Decoded rows are fresh dicts: converted in place.
        if row is None:
            return None
        for name, conv in special:
            row[name] = conv(row[name])
        return row

    return convert
