"""Plain values as Arrow columns: the values of ``rows.RowDecoder.json_row`` (timestamps
ISO-8601, dates ISO, decimals and day-time intervals as text, binary as hex, integers as
``int64``) made from ``formats/unsaferow_arrow``'s natural Arrow types, and those values as
JSON text, column by column (numpy for dates and timestamps, pyarrow.compute for the rest).

``RowPath`` is raised where a batch's values have no exact columnar form (a year outside
1-9999, a non-finite float in JSON): the caller takes the row path for that batch.
"""

from __future__ import annotations

import math
from decimal import Context
from json.encoder import encode_basestring
from typing import Any

import orjson

from ckpt_cli.formats import spark_types as S

_DECIMAL_CONTEXT = Context(prec=100)
# Years 1-9999, as Python's datetime (the row path's limits).
_MIN_DAY = -719162
_MAX_DAY = 2932896
_DAY_US = 86_400_000_000


class RowPath(Exception):
    """This batch goes through the row path."""


def concatenated(text: Any) -> bytes:
    """The bytes of a string array without nulls, one value after another."""
    import numpy as np

    offsets = np.frombuffer(text.buffers()[1], np.int32, len(text) + 1, 4 * text.offset)
    start, end = int(offsets[0]), int(offsets[-1])
    data: bytes = text.buffers()[2][start:end].to_pybytes()  # one copy
    return data


# -- plain values: the row path's JSON values, as Arrow columns ---------------------------------


def has_map(t: S.DataType) -> bool:
    """Whether ``t`` holds a map at any depth: a map's plain value is the row path's dict,
    keyed by ``str(key)``, which neither the columnar replay nor ``json_text`` makes."""
    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if isinstance(t, S.MapType):
        return True
    if isinstance(t, S.ArrayType):
        return has_map(t.element_type)
    if isinstance(t, S.StructType):
        return any(has_map(f.data_type) for f in t.fields)
    return False


def plain_type(t: S.DataType) -> Any:
    """The Arrow type of a column's plain values."""
    import pyarrow as pa

    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if isinstance(t, S.StructType):
        return pa.struct(
            [
                pa.field(name, plain_type(f.data_type))
                for name, f in zip(t.unique_names(), t.fields, strict=True)
            ]
        )
    if isinstance(t, S.ArrayType):
        return pa.list_(plain_type(t.element_type))
    if isinstance(t, S.MapType):  # the row path's dict, keyed by str(key)
        return pa.map_(pa.string(), plain_type(t.value_type))
    if isinstance(t, S.AtomicType):
        if t.name == "boolean":
            return pa.bool_()
        if t.name in ("byte", "short", "integer", "long"):
            return pa.int64()
        if t.name in ("float", "double"):
            return pa.float64()
        if t.name == "void":
            return pa.null()
    if isinstance(t, S.YearMonthIntervalType):
        return pa.int64()
    return pa.string()


def plain(array: Any, t: S.DataType) -> Any:
    """A column of ``unsaferow_arrow`` values as the row path's plain JSON values."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    mask = pc.is_null(array) if array.null_count else None
    if isinstance(t, S.StructType):
        children = [plain(array.field(i), f.data_type) for i, f in enumerate(t.fields)]
        if not children:
            return pa.StructArray.from_buffers(pa.struct([]), len(array), [_validity(array)])
        return pa.StructArray.from_arrays(children, fields=list(plain_type(t)), mask=mask)
    if isinstance(t, S.ArrayType):
        values = plain(array.values, t.element_type)
        return pa.ListArray.from_arrays(array.offsets, values, plain_type(t), mask=mask)
    target = plain_type(t)
    if isinstance(t, S.AtomicType) and t.name in ("timestamp", "timestamp_ntz", "date"):
        raw = array.cast(pa.int64() if t.name != "date" else pa.int32())
        numbers = np.asarray(raw.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        if t.name == "date":
            text = _format_dates(numbers)
        else:
            text = _format_timestamps(numbers, "Z" if t.name == "timestamp" else "")
        return _fixed_width_strings(text, array)
    if isinstance(t, S.AtomicType) and t.name == "binary":
        return _hex(array)
    if isinstance(t, S.DecimalType):
        return pa.array(
            [None if d is None else str(d.scaleb(0, _DECIMAL_CONTEXT)) for d in array.to_pylist()],
            pa.string(),
        )
    if isinstance(t, S.DayTimeIntervalType):
        return pa.array([None if d is None else str(d) for d in array.to_pylist()], pa.string())
    return array.cast(target)


def _validity(array: Any) -> Any:
    return array.buffers()[0] if array.null_count else None


def _digits(out: Any, column: int, values: Any, width: int) -> None:
    """``values`` (non-negative, below 10**9) as ``width`` ASCII digits at
    ``out[:, column:]``."""
    import numpy as np

    values = values.astype(np.int32)  # int32 division is the faster
    for i in range(width - 1, -1, -1):
        out[:, column + i] = 48 + values % 10
        values = values // 10


def _civil(days: Any) -> tuple[Any, Any, Any]:
    """Year, month, day of days since 1970-01-01 (proleptic Gregorian; Howard Hinnant's
    ``civil_from_days``), vectorised."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 - 12 * (mp >= 10)
    year = yoe + era * 400 + (month <= 2)
    return year, month, day


def _format_dates(days: Any) -> Any:
    """``YYYY-MM-DD`` of days since 1970-01-01, as an (n, 10) uint8 array."""
    import numpy as np

    if not len(days):
        return np.empty((0, 10), np.uint8)
    first, last = int(days.min()), int(days.max())
    if first < _MIN_DAY or last > _MAX_DAY:
        raise RowPath
    if last - first < len(days):  # fewer days than values: each day formatted once
        # gathered as 10-byte items, not rows of a 2-D array: one copy per value, not ten
        table = _date_text(np.arange(first, last + 1)).view("V10").ravel()
        return table[days - first].view(np.uint8).reshape(-1, 10)
    return _date_text(days)


def _date_text(days: Any) -> Any:
    import numpy as np

    year, month, day = _civil(days)
    out = np.full((len(days), 10), ord("-"), np.uint8)
    _digits(out, 0, year, 4)
    _digits(out, 5, month, 2)
    _digits(out, 8, day, 2)
    return out


_CLOCK: Any = None  # "HH:MM:SS" of each second of a day, 8-byte items
_THOUSANDS: Any = None  # "000" to "999", 3-byte items


def _tables() -> tuple[Any, Any]:
    import numpy as np

    global _CLOCK, _THOUSANDS
    if _CLOCK is None:
        seconds = np.arange(86_400)
        clock = np.full((86_400, 8), ord(":"), np.uint8)
        _digits(clock, 0, seconds // 3600, 2)
        _digits(clock, 3, seconds // 60 % 60, 2)
        _digits(clock, 6, seconds % 60, 2)
        thousands = np.empty((1000, 3), np.uint8)
        _digits(thousands, 0, np.arange(1000), 3)
        _CLOCK, _THOUSANDS = clock.view("V8").ravel(), thousands.view("V3").ravel()
    return _CLOCK, _THOUSANDS


def _format_timestamps(micros: Any, suffix: str) -> Any:
    """``YYYY-MM-DDTHH:MM:SS.ffffff`` + suffix, as ``rows.format_timestamp`` writes it: the
    date and the time of day looked up in tables, the fraction three digits at a time.

    Each piece is gathered as one fixed-size item into a field of a record per value (a
    gather of 2-D rows copied byte by byte, twice as slow)."""
    import numpy as np

    clock, thousands = _tables()
    days, rest = np.divmod(micros, _DAY_US)
    seconds, fraction = np.divmod(rest, 1_000_000)
    width = 26 + len(suffix)
    record = np.dtype(
        {
            "names": ["date", "clock", "millis", "micros"],
            "formats": ["V10", "V8", "V3", "V3"],
            "offsets": [0, 11, 20, 23],
            "itemsize": width,
        }
    )
    out = np.empty(len(micros), record)
    text = out.view(np.uint8).reshape(-1, width)
    out["date"] = _format_dates(days).view("V10").ravel()
    text[:, 10] = ord("T")
    out["clock"] = clock[seconds]
    text[:, 19] = ord(".")
    fraction = fraction.astype(np.int32)  # int32 division is the faster
    out["millis"] = thousands[fraction // 1000]
    out["micros"] = thousands[fraction % 1000]
    if suffix:
        text[:, 26] = ord(suffix)
    return text


def _fixed_width_strings(text: Any, like: Any) -> Any:
    """A string array of the rows of ``text`` (an (n, w) uint8 array), null where ``like``
    is null."""
    import numpy as np
    import pyarrow as pa

    n, width = text.shape
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(
        pa.string(),
        n,
        [_validity_of(like), pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(text))],
    )


def _validity_of(array: Any) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not array.null_count:
        return None
    valid = pc.is_valid(array).to_numpy(zero_copy_only=False)
    return pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())


_HEX = None


def _hex(array: Any) -> Any:
    """Binary values as lowercase hex text."""
    import numpy as np
    import pyarrow as pa

    global _HEX
    if _HEX is None:
        _HEX = np.frombuffer(b"".join(f"{i:02x}".encode() for i in range(256)), np.uint16)
    offsets = np.frombuffer(array.buffers()[1], np.int32, len(array) + 1, 4 * array.offset)
    data = np.frombuffer(array.buffers()[2] or b"", np.uint8)[int(offsets[0]) : int(offsets[-1])]
    text = _HEX[data]
    return pa.Array.from_buffers(
        pa.string(),
        len(array),
        [
            _validity_of(array),
            pa.py_buffer(((offsets - offsets[0]) * 2).astype(np.int32)),
            pa.py_buffer(text),
        ],
    )


# -- JSON text ------------------------------------------------------------------------------


def json_text(array: Any, t: S.DataType, repr_floats: bool) -> Any:
    """Each plain value of Spark type ``t`` as JSON text (``null`` for nulls): what
    ``orjson.dumps`` (or the generated encoder, with ``repr_floats``) writes for the row
    path's value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    n = len(array)
    if pa.types.is_null(array.type):
        return pa.repeat(pa.scalar("null"), n)
    if isinstance(t, S.StructType):
        text = joined(_struct_parts(array, t, repr_floats), n)
    elif isinstance(t, S.ArrayType):
        elements = json_text(array.values, t.element_type, repr_floats)
        inner = pc.binary_join(pa.ListArray.from_arrays(array.offsets, elements), ",")
        text = pc.binary_join_element_wise("[", inner, "]", "")
    elif pa.types.is_floating(array.type):
        text = _floats(array, repr_floats)
    elif pa.types.is_string(array.type):
        # Text ckpt wrote (dates, timestamps, hex, decimals) has nothing to escape.
        text = _quoted(array) if _is_string(t) else pc.binary_join_element_wise('"', array, '"', "")
    else:  # booleans and integers
        text = array.cast(pa.string())
    if array.null_count:
        text = pc.if_else(pc.is_null(array), "null", text)
    return text


def json_parts(array: Any, t: S.DataType, repr_floats: bool) -> list[Any]:
    """``json_text`` as pieces for one ``joined`` (literals and string arrays without nulls):
    a struct without nulls is its fields' pieces between labels, so a row of nested structs
    is joined once instead of once per struct."""
    import pyarrow as pa

    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if not array.null_count:
        if isinstance(t, S.StructType):
            return _struct_parts(array, t, repr_floats)
        if pa.types.is_string(array.type) and (not _is_string(t) or not _escapes(array)):
            return ['"', array, '"']  # text ckpt wrote, or strings with nothing to escape
    return [json_text(array, t, repr_floats)]


def _struct_parts(array: Any, t: S.StructType, repr_floats: bool) -> list[Any]:
    parts: list[Any] = []
    for i, (name, f) in enumerate(zip(t.unique_names(), t.fields, strict=True)):
        parts.append(("{" if i == 0 else ",") + encode_basestring(name) + ":")
        parts += json_parts(array.field(i), f.data_type, repr_floats)
    parts.append("}" if parts else "{}")
    return parts


def joined(parts: list[Any], n: int) -> Any:
    """The ``n`` strings of ``parts`` (literals and string arrays) joined row by row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    merged: list[Any] = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    if not n:
        return pa.array([], pa.string())
    text = pc.binary_join_element_wise(*merged, "")
    return pa.repeat(text, n) if isinstance(text, pa.Scalar) else text


def _is_string(t: S.DataType) -> bool:
    return isinstance(t, S.StringLikeType) or isinstance(t, S.AtomicType) and t.name == "string"


def _floats(array: Any, repr_floats: bool) -> Any:
    import pyarrow as pa

    values = array.to_pylist()
    if any(v is not None and not math.isfinite(v) for v in values):
        raise RowPath  # the row path writes them as strings
    if repr_floats:
        return pa.array(["null" if v is None else repr(v) for v in values], pa.string())
    return pa.array(orjson.dumps(values)[1:-1].decode().split(","), pa.string())


def _escapes(text: Any) -> bool:
    """Whether a string array without nulls holds a control character, a quote or a
    backslash: a scan of its UTF-8 bytes (every byte of a multi-byte character is >= 0x80)."""
    import numpy as np

    if not len(text):
        return False
    offsets = np.frombuffer(text.buffers()[1], np.int32, len(text) + 1, 4 * text.offset)
    data = np.frombuffer(text.buffers()[2] or b"", np.uint8)[int(offsets[0]) : int(offsets[-1])]
    return bool(((data < 0x20) | (data == 0x22) | (data == 0x5C)).any())


def _quoted(array: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    filled = array.fill_null("")
    if not _escapes(filled):
        return pc.binary_join_element_wise('"', filled, '"', "")  # nothing to escape
    if pc.any(pc.match_substring_regex(filled, "[\\x00-\\x1f]")).as_py():
        return pa.array([encode_basestring(s) for s in filled.to_pylist()], pa.string())
    escaped = pc.replace_substring(filled, "\\", "\\\\")
    escaped = pc.replace_substring(escaped, '"', '\\"')
    return pc.binary_join_element_wise('"', escaped, '"', "")
