"""Decode Spark ``UnsafeRow`` bytes (the rows of every state store) given their schema.

Layout (docs/spark-checkpoint-format.md §8.4), all numbers little-endian::

    [null bitset: ceil(n/64) words][n 8-byte slots][variable-length data]

Fixed-width values sit in their slot; variable-length ones store ``(offset << 32) | size`` with
the offset relative to the row (or array) start. Arrays are ``UnsafeArrayData``
(``[int64 n][null bitset][n elements, padded to 8][data]``), maps are
``[int64 keyArrayBytes][key array][value array]``.

Python values per Spark type:

==========================  ===========================================================
boolean/byte/short/int/long ``bool`` / ``int``
float/double                ``float`` (float keeps the float32 value)
decimal(p,s)                ``decimal.Decimal`` with exponent ``-s`` (p <= 18 from the slot,
                            larger from the BigInteger bytes)
string, char, varchar       ``str`` (invalid UTF-8 replaced by U+FFFD, like Spark's toString)
binary                      ``bytes``
date                        ``datetime.date``
timestamp                   ``datetime.datetime`` aware, UTC
timestamp_ntz               ``datetime.datetime`` naive
time(p)                     ``datetime.time``
interval year-month         ``int`` months
interval day-time           ``datetime.timedelta``
calendar interval           ``CalendarInterval``
struct                      ``dict`` keyed by ``StructType.unique_names()`` (or a tuple)
array                       ``list``
map                         ``dict`` when the key type is atomic, else a ``list`` of
                            ``(key, value)`` tuples (struct/array/map keys are unhashable)
void (null type)            ``None``
variant                     ``Variant(value, metadata)`` raw bytes
==========================  ===========================================================

Corrupt input raises ``FormatError`` (never IndexError/struct.error/MemoryError): every
offset and size is checked against the enclosing row before it is read.
"""

from __future__ import annotations

import datetime as dt
import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S

MAX_LONG_DIGITS = 18  # Decimal.MAX_LONG_DIGITS: larger precisions are variable-length


@dataclass(frozen=True)
class CalendarInterval:
    months: int
    days: int
    microseconds: int


@dataclass(frozen=True)
class Variant:
    """A VARIANT value: Spark's binary value and metadata, undecoded."""

    value: bytes
    metadata: bytes


class RowError(Exception):
    """A damaged row, raised while decoding (here and in ``unsaferow_arrow``); the public entry
    points turn it into ``for_file``'s FormatError."""

    def __init__(self, problem: str, offset: int) -> None:
        super().__init__(problem)
        self.problem = problem
        self.offset = offset

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problem, self.offset))  # pickles across worker processes

    def for_file(self, path: str) -> FormatError:
        return FormatError(path, f"bad UnsafeRow: {self.problem}", offset=self.offset)


_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_DECIMAL_CONTEXT = Context(prec=100)
_MAX_U32 = 0xFFFFFFFF

# A value converter gets the raw slot value (fixed types), or the raw slot plus the container
# buffer, container start and container size (variable-length types).
FixedConv = Callable[[Any], Any]
VarConv = Callable[[int, bytes, int, int], Any]


@dataclass(frozen=True)
class _TypePlan:
    slot_fmt: str  # struct format of the 8-byte row slot
    elem_fmt: str  # struct format of one array element
    elem_size: int
    fixed: FixedConv | None = None  # None: the raw value is the result
    var: VarConv | None = None  # set for variable-length types
    always_null: bool = False


def _temporal(make: Callable[[int], Any], what: str) -> FixedConv:
    def conv(raw: int) -> Any:
        try:
            return make(raw)
        except (OverflowError, ValueError):
            # Spark allows values outside Python's datetime range (years < 1 or > 9999).
            raise RowError(f"{what} value {raw} is outside Python's supported range", 0) from None

    return conv


def _date(days: int) -> dt.date:
    return _EPOCH_DATE + dt.timedelta(days)


def _timestamp(micros: int) -> dt.datetime:
    return _EPOCH_UTC + dt.timedelta(0, 0, micros)  # positional: 2x faster


def _timestamp_ntz(micros: int) -> dt.datetime:
    return _EPOCH_NAIVE + dt.timedelta(0, 0, micros)


def _time(nanos: int) -> dt.time:
    if not 0 <= nanos < 86_400_000_000_000:
        raise ValueError("time of day out of range")
    micros = nanos // 1000
    seconds, us = divmod(micros, 1_000_000)
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return dt.time(h, m, s, us)


def _span(raw: int, base: int, size: int, what: str) -> tuple[int, int]:
    """Absolute start and end of a variable-length value, checked against its container."""
    offset = raw >> 32
    length = raw & _MAX_U32
    if offset + length > size:
        raise RowError(
            f"{what} at offset {offset} with size {length} runs past the end of its "
            f"{size}-byte container",
            base,
        )
    start = base + offset
    return start, start + length


def _string(raw: int, buf: bytes, base: int, size: int) -> str:
    start, end = _span(raw, base, size, "string")
    return buf[start:end].decode("utf-8", "replace")


def _binary(raw: int, buf: bytes, base: int, size: int) -> bytes:
    start, end = _span(raw, base, size, "binary")
    return buf[start:end]


def _calendar(raw: int, buf: bytes, base: int, size: int) -> CalendarInterval:
    start, end = _span(raw, base, size, "calendar interval")
    if end - start != 16:
        raise RowError(f"calendar interval must be 16 bytes, found {end - start}", start)
    months, days, micros = struct.unpack_from("<iiq", buf, start)
    return CalendarInterval(months, days, micros)


def _variant(raw: int, buf: bytes, base: int, size: int) -> Variant:
    # UnsafeWriter.write(VariantVal) in the 4.3.0 bytecode: [int32 valueSize][value][metadata]
    # (no real checkpoint with a variant was seen).
    start, end = _span(raw, base, size, "variant")
    if end - start < 4:
        raise RowError("variant shorter than its 4-byte header", start)
    (value_size,) = struct.unpack_from("<i", buf, start)
    if not 0 <= value_size <= end - start - 4:
        raise RowError(f"variant value size {value_size} does not fit", start)
    return Variant(buf[start + 4 : start + 4 + value_size], buf[start + 4 + value_size : end])


def _big_decimal(scale: int) -> VarConv:
    def conv(raw: int, buf: bytes, base: int, size: int) -> Decimal:
        start, end = _span(raw, base, size, "decimal")
        # BigInteger.toByteArray is never empty, and Spark reserves 16 bytes (38 digits).
        if not 0 < end - start <= 16:
            raise RowError(f"decimal of {end - start} bytes (expected 1-16)", start)
        unscaled = int.from_bytes(buf[start:end], "big", signed=True)
        return Decimal(unscaled).scaleb(-scale, _DECIMAL_CONTEXT)

    return conv


def _small_decimal(scale: int) -> FixedConv:
    def conv(unscaled: int) -> Decimal:
        return Decimal(unscaled).scaleb(-scale, _DECIMAL_CONTEXT)

    return conv


_FIXED = {
    "boolean": _TypePlan("?7x", "?", 1),
    "byte": _TypePlan("b7x", "b", 1),
    "short": _TypePlan("h6x", "h", 2),
    "integer": _TypePlan("i4x", "i", 4),
    "long": _TypePlan("q", "q", 8),
    "float": _TypePlan("f4x", "f", 4),
    "double": _TypePlan("d", "d", 8),
    "date": _TypePlan("i4x", "i", 4, _temporal(_date, "date")),
    "timestamp": _TypePlan("q", "q", 8, _temporal(_timestamp, "timestamp")),
    "timestamp_ntz": _TypePlan("q", "q", 8, _temporal(_timestamp_ntz, "timestamp_ntz")),
    "string": _TypePlan("Q", "Q", 8, var=_string),
    "binary": _TypePlan("Q", "Q", 8, var=_binary),
    "interval": _TypePlan("Q", "Q", 8, var=_calendar),
    "variant": _TypePlan("Q", "Q", 8, var=_variant),
    # NullType: always null; arrays of it use 8-byte elements (not byte-verified).
    "void": _TypePlan("8x", "8x", 8, always_null=True),
}


def _plan(data_type: S.DataType, as_tuple: bool, depth: int = 0) -> _TypePlan:
    if isinstance(data_type, S.AtomicType):
        plan = _FIXED.get(data_type.name)
        if plan is None:
            raise ValueError(f"cannot decode Spark type {data_type.name!r}")
        return plan
    if isinstance(data_type, S.StringLikeType):
        return _FIXED["string"]
    if isinstance(data_type, S.DecimalType):
        if data_type.precision <= MAX_LONG_DIGITS:
            return _TypePlan("q", "q", 8, _small_decimal(data_type.scale))
        return _TypePlan("Q", "Q", 8, var=_big_decimal(data_type.scale))
    if isinstance(data_type, S.YearMonthIntervalType):
        return _TypePlan("i4x", "i", 4)
    if isinstance(data_type, S.DayTimeIntervalType):
        return _TypePlan(
            "q", "q", 8, _temporal(lambda us: dt.timedelta(microseconds=us), "interval")
        )
    if isinstance(data_type, S.TimeType):
        return _TypePlan("q", "q", 8, _temporal(_time, "time"))
    if isinstance(data_type, S.UserDefinedType):
        return _plan(data_type.sql_type, as_tuple, depth + 1)
    if isinstance(data_type, S.StructType):
        return _TypePlan("Q", "Q", 8, var=_nested_struct(data_type, as_tuple, depth + 1))
    if isinstance(data_type, S.ArrayType):
        return _TypePlan("Q", "Q", 8, var=_nested_array(data_type, as_tuple, depth + 1))
    if isinstance(data_type, S.MapType):
        return _TypePlan("Q", "Q", 8, var=_nested_map(data_type, as_tuple, depth + 1))
    if isinstance(data_type, S.UnknownType):
        raise ValueError(f"cannot decode unknown Spark type {data_type.json_text}")
    raise ValueError(f"cannot decode Spark type {data_type!r}")


# -- rows ------------------------------------------------------------------------------------

RowFn = Callable[[bytes, int, int], Any]


def _compile_struct(schema: S.StructType, as_tuple: bool, depth: int = 0) -> RowFn:
    """A function ``(buf, start, size) -> dict | tuple`` decoding one UnsafeRow."""
    if depth > 100:
        raise ValueError("schema nested too deeply")
    n = len(schema.fields)
    words = (n + 63) // 64
    fixed_size = 8 * (words + n)
    plans = [_plan(f.data_type, as_tuple, depth) for f in schema.fields]
    # One unpack reads the null bitset words and every slot; void slots are read as "q" so
    # that value indexes equal field ordinals.
    slots = struct.Struct(
        "<" + "Q" * words + "".join("q" if p.always_null else p.slot_fmt for p in plans)
    )
    unpack_from = slots.unpack_from
    names = schema.unique_names()
    fixed_steps = tuple((i, p.fixed) for i, p in enumerate(plans) if p.fixed is not None)
    var_steps = tuple((i, p.var) for i, p in enumerate(plans) if p.var is not None)
    always_null = sum(1 << i for i, p in enumerate(plans) if p.always_null)
    # Bits past the last field are meaningless (and must not index past the values).
    field_mask = (1 << n) - 1
    plain = not fixed_steps and not var_steps

    def decode(buf: bytes, start: int, size: int) -> Any:
        if size < fixed_size:
            raise RowError(
                f"row of {size} bytes is shorter than the {fixed_size} bytes of null bits and "
                f"slots its {n} fields need",
                start,
            )
        raw = unpack_from(buf, start)
        if words == 1:
            nulls = (raw[0] | always_null) & field_mask
        else:
            nulls = always_null
            for w in range(words):
                nulls |= raw[w] << (64 * w)
            nulls &= field_mask
        if plain and not nulls:
            values = raw[words:]
            return values if as_tuple else dict(zip(names, values, strict=True))
        out = list(raw[words:])
        for i, fixed in fixed_steps:
            if not nulls >> i & 1:
                out[i] = fixed(out[i])
        for i, var in var_steps:
            if not nulls >> i & 1:
                out[i] = var(out[i], buf, start, size)
        while nulls:
            low = nulls & -nulls
            out[low.bit_length() - 1] = None
            nulls ^= low
        return tuple(out) if as_tuple else dict(zip(names, out, strict=True))

    return decode


# Straight-line code per flat schema: one unpack, inline conversions, a literal dict. It only
# handles rows without nulls whose checks all pass; anything else (a null, a span out of
# bounds, a date out of Python's range) re-decodes through the general decoder, so results
# and error messages are the general decoder's. Doubles decode speed for typical state rows.
_INLINE = {
    "boolean": "{v}",
    "byte": "{v}",
    "short": "{v}",
    "integer": "{v}",
    "long": "{v}",
    "float": "{v}",
    "double": "{v}",
    "date": "_EPOCH_DATE + _td({v})",
    "timestamp": "_EPOCH_UTC + _td(0, 0, {v})",
    "timestamp_ntz": "_EPOCH_NAIVE + _td(0, 0, {v})",
    "string": "buf[start + ({v} >> 32):start + {e}].decode('utf-8', 'replace')",
    "binary": "buf[start + ({v} >> 32):start + {e}]",
}


def _inline_name(data_type: S.DataType) -> str | None:
    if isinstance(data_type, S.StringLikeType):
        return "string"
    if isinstance(data_type, S.AtomicType) and data_type.name in _INLINE:
        return data_type.name
    if isinstance(data_type, S.YearMonthIntervalType):
        return "integer"
    return None


def _compile_flat_struct(schema: S.StructType, as_tuple: bool, general: RowFn) -> RowFn | None:
    """Generated decoder for a struct of at most 64 inline-able fields, or None."""
    n = len(schema.fields)
    kinds = [_inline_name(f.data_type) for f in schema.fields]
    if not 0 < n <= 64 or None in kinds:
        return None
    slot_fmt = "".join(_FIXED[k].slot_fmt for k in kinds if k is not None)
    names = schema.unique_names()
    args = ", ".join(f"a{i}" for i in range(n))
    lines = [
        "def row(buf, start, size):",
        f"    if size < {8 * (1 + n)}:",
        "        return _general(buf, start, size)",
        f"    nulls, {args}, = _unpack_from(buf, start)",
        f"    if nulls & {(1 << n) - 1}:",
        "        return _general(buf, start, size)",
    ]
    values = []
    for i, kind in enumerate(kinds):
        assert kind is not None
        if kind in ("string", "binary"):
            lines.append(f"    e{i} = (a{i} >> 32) + (a{i} & {_MAX_U32})")
            lines.append(f"    if e{i} > size:")
            lines.append("        return _general(buf, start, size)")
        values.append(_INLINE[kind].format(v=f"a{i}", e=f"e{i}"))
    if as_tuple:
        result = "(" + "".join(f"{v}, " for v in values) + ")"
    else:
        result = (
            "{" + ", ".join(f"{name!r}: {v}" for name, v in zip(names, values, strict=True)) + "}"
        )
    lines += [
        "    try:",
        f"        return {result}",
        "    except (OverflowError, ValueError):",
        "        return _general(buf, start, size)",
    ]
    scope: dict[str, Any] = {
        "_general": general,
        "_unpack_from": struct.Struct("<Q" + slot_fmt).unpack_from,
        "_td": dt.timedelta,
        "_EPOCH_DATE": _EPOCH_DATE,
        "_EPOCH_UTC": _EPOCH_UTC,
        "_EPOCH_NAIVE": _EPOCH_NAIVE,
    }
    exec("\n".join(lines), scope)  # noqa: S102 - the source is built from the schema only
    fn: RowFn = scope["row"]
    return fn


def _nested_struct(schema: S.StructType, as_tuple: bool, depth: int) -> VarConv:
    row = _compile_struct(schema, as_tuple, depth)

    def conv(raw: int, buf: bytes, base: int, size: int) -> Any:
        start, end = _span(raw, base, size, "struct")
        return row(buf, start, end - start)

    return conv


# -- arrays and maps -------------------------------------------------------------------------

ArrayFn = Callable[[bytes, int, int], list[Any]]


def _compile_array(element_type: S.DataType, as_tuple: bool, depth: int) -> ArrayFn:
    """A function ``(buf, start, size) -> list`` decoding one UnsafeArrayData."""
    p = _plan(element_type, as_tuple, depth)
    elem_size = p.elem_size
    fmt = p.elem_fmt

    def decode(buf: bytes, start: int, size: int) -> list[Any]:
        if size < 8:
            raise RowError(f"array of {size} bytes has no element count", start)
        (count,) = struct.unpack_from("<q", buf, start)
        header = 8 + ((count + 63) // 64) * 8
        # Checking against the container size first bounds every list built below.
        if count < 0 or header + count * elem_size > size:
            raise RowError(
                f"array claims {count} elements, more than its {size} bytes can hold", start
            )
        if count == 0:
            return []
        nulls = int.from_bytes(buf[start + 8 : start + header], "little")
        if p.always_null:
            return [None] * count
        values = list(struct.unpack_from(f"<{count}{fmt}", buf, start + header))
        if p.var is not None:
            var = p.var
            for i, raw in enumerate(values):
                values[i] = None if nulls >> i & 1 else var(raw, buf, start, size)
        elif p.fixed is not None:
            fixed = p.fixed
            for i, raw in enumerate(values):
                values[i] = None if nulls >> i & 1 else fixed(raw)
        elif nulls:
            for i in range(count):
                if nulls >> i & 1:
                    values[i] = None
        return values

    return decode


def _nested_array(data_type: S.ArrayType, as_tuple: bool, depth: int) -> VarConv:
    array = _compile_array(data_type.element_type, as_tuple, depth)

    def conv(raw: int, buf: bytes, base: int, size: int) -> list[Any]:
        start, end = _span(raw, base, size, "array")
        return array(buf, start, end - start)

    return conv


_UNHASHABLE_KEYS = (S.StructType, S.ArrayType, S.MapType)


def _hashable_key(data_type: S.DataType) -> bool:
    while isinstance(data_type, S.UserDefinedType):
        data_type = data_type.sql_type
    return not isinstance(data_type, _UNHASHABLE_KEYS)


def _nested_map(data_type: S.MapType, as_tuple: bool, depth: int) -> VarConv:
    keys_fn = _compile_array(data_type.key_type, as_tuple, depth)
    values_fn = _compile_array(data_type.value_type, as_tuple, depth)
    as_dict = _hashable_key(data_type.key_type)

    def conv(raw: int, buf: bytes, base: int, size: int) -> Any:
        start, end = _span(raw, base, size, "map")
        total = end - start
        if total < 8:
            raise RowError(f"map of {total} bytes has no key array size", start)
        (key_bytes,) = struct.unpack_from("<q", buf, start)
        if not 0 <= key_bytes <= total - 8:
            raise RowError(f"map key array size {key_bytes} does not fit in {total} bytes", start)
        keys = keys_fn(buf, start + 8, key_bytes)
        values = values_fn(buf, start + 8 + key_bytes, total - 8 - key_bytes)
        if len(keys) != len(values):
            raise RowError(f"map has {len(keys)} keys but {len(values)} values", start)
        if as_dict:
            return dict(zip(keys, values, strict=True))
        return list(zip(keys, values, strict=True))

    return conv


# -- public API ------------------------------------------------------------------------------

Decoder = Callable[[bytes | bytearray | memoryview], Any]


def make_decoder(schema: S.StructType, *, path: str = "<row>", as_tuple: bool = False) -> Decoder:
    """Compile ``schema`` once into a fast ``decode(data) -> dict`` (or tuple) function.

    ``path`` names the file in errors. The decoder raises FormatError when the bytes do not fit
    the schema; rows longer than the schema needs are accepted, as Spark does.
    Raises FormatError at compile time for a type ckpt cannot decode.
    """
    try:
        row = _compile_struct(schema, as_tuple)
        row = _compile_flat_struct(schema, as_tuple, row) or row
    except ValueError as exc:
        raise FormatError(path, str(exc)) from None

    def decode(data: bytes | bytearray | memoryview) -> Any:
        buf = data if isinstance(data, bytes) else bytes(data)
        try:
            return row(buf, 0, len(buf))
        except RowError as exc:
            raise exc.for_file(path) from None
        except (struct.error, OverflowError, MemoryError) as exc:
            # The explicit checks above should make these unreachable; never leak them.
            raise FormatError(path, f"bad UnsafeRow: {exc}") from None

    return decode


def decode_row(
    data: bytes | bytearray | memoryview,
    schema: S.StructType,
    *,
    path: str = "<row>",
    as_tuple: bool = False,
) -> Any:
    """Decode one UnsafeRow; a dict keyed by ``schema.unique_names()`` (tuple if ``as_tuple``).

    For many rows, use ``make_decoder`` once instead.
    """
    return make_decoder(schema, path=path, as_tuple=as_tuple)(data)


def _variable_length(data_type: S.DataType) -> bool:
    """Whether a field's slot points at bytes after the fixed part (offset << 32 | size)."""
    try:
        return _plan(data_type, False).var is not None
    except ValueError:
        return True


@functools.lru_cache(maxsize=256)
def _variable_length_fields(schema: S.StructType) -> frozenset[int]:
    # Per schema, not per row: a nested type's plan compiles its decoders.
    return frozenset(i for i, f in enumerate(schema.fields) if _variable_length(f.data_type))


def row_layout_problem(schema: S.StructType, data: bytes | bytearray | memoryview) -> str | None:
    """What about an UnsafeRow's bytes does not fit ``schema``, or None.

    Spark's ``UnsafeRowWriter`` lays a row out exactly: the null bitset, one 8-byte slot per
    field, then each variable-length value the slots point at, padded to 8 bytes, nothing
    after (what ``UnsafeRowUtils.validateStructuralIntegrity`` checks of state rows). A row
    written under another schema (a field added or dropped with
    ``stateStore.stateSchemaCheck=false``) is longer or shorter than that: Spark reads the
    missing slots from whatever follows the row."""
    buf = bytes(data)
    n = len(schema.fields)
    words = (n + 63) // 64
    fixed = 8 * words + 8 * n
    size = len(buf)
    if size < fixed:
        return f"{size} bytes, shorter than the {fixed} the schema's {n} fields take"
    if size % 8:
        return f"{size} bytes, not a multiple of 8"
    bits = int.from_bytes(buf[: 8 * words], "little")
    if bits >> n:
        return f"null bits set beyond the schema's {n} fields"
    end = fixed
    variable = _variable_length_fields(schema)
    for i, f in enumerate(schema.fields):
        if bits >> i & 1 or i not in variable:
            continue
        raw = int.from_bytes(buf[8 * words + 8 * i : 8 * words + 8 * i + 8], "little")
        offset, length = raw >> 32, raw & 0xFFFFFFFF
        if offset < fixed or offset + length > size:
            return f"field {f.name!r} points at bytes {offset}-{offset + length} of {size}"
        end = max(end, offset + (length + 7) // 8 * 8)
    if end != size:
        return f"{size} bytes where the schema's {n} fields take {end}"
    return None


# Spark's Decimal.MAX_LONG_DIGITS: a wider decimal is 16 bytes after the fixed part, reserved
# even when null (UnsafeRowWriter.write of a null decimal keeps the offset for an update).
_MAX_LONG_DIGITS = 18


def project_fields(
    rows: list[tuple[bytes, S.StructType]],
    picks: list[tuple[int, int]],
    *,
    path: str = "<row>",
) -> bytes:
    """An UnsafeRow of the fields ``picks`` names (``(row index, field ordinal)``, in order)
    of ``rows`` (bytes, schema), laid out as Spark's ``UnsafeProjection`` writes it: a null
    bitset, a slot per field, each variable-length value after them padded to 8 bytes, in
    field order. Values are copied, not decoded, so nested rows, arrays and maps move as
    they are (their offsets are relative to themselves). Splits a key into a prefix-scan
    key's two rows and joins them back."""
    m = len(picks)
    fixed = 8 * ((m + 63) // 64) + 8 * m
    out = bytearray(fixed)
    var = bytearray()
    for j, (r, i) in enumerate(picks):
        data, schema = rows[r]
        n = len(schema.fields)
        words = (n + 63) // 64
        if not 0 <= i < n or len(data) < 8 * words + 8 * n:
            raise FormatError(path, f"no field {i} in a row of {len(data)} bytes, {n} fields")
        null = (data[(i // 64) * 8 + (i % 64) // 8] >> (i % 8)) & 1
        at = 8 * words + 8 * i
        (raw,) = struct.unpack_from("<q", data, at)
        data_type = schema.fields[i].data_type
        if null:
            out[(j // 64) * 8 + (j % 64) // 8] |= 1 << (j % 8)
        wide = isinstance(data_type, S.DecimalType) and data_type.precision > _MAX_LONG_DIGITS
        if wide or (not null and _variable_length(data_type)):
            offset, size = (raw >> 32) & 0xFFFFFFFF, raw & 0xFFFFFFFF
            length = 16 if wide else size
            if offset + length > len(data) or (not wide and offset < 8 * words + 8 * n):
                raise FormatError(path, f"field {i} points outside its row ({offset}+{length})")
            start = fixed + len(var)
            var += data[offset : offset + length]
            var += bytes(-length % 8)
            struct.pack_into("<q", out, 8 * ((m + 63) // 64) + 8 * j, (start << 32) | size)
        elif not null:
            out[8 * ((m + 63) // 64) + 8 * j : 8 * ((m + 63) // 64) + 8 * j + 8] = data[at : at + 8]
    return bytes(out + var)


# -- writing ---------------------------------------------------------------------------------

# The types a flat row encoder writes: fixed-width integers and booleans in their slot (the
# rest of the 8 bytes zero, as UnsafeRowWriter zeroes the slot first), strings after the
# fixed region, padded to 8 bytes with zeros, their slot (offset << 32 | size).
_ENCODABLE = {"boolean", "byte", "short", "integer", "long", "string"}
_INT_RANGES = {"byte": 8, "short": 16, "integer": 32, "long": 64}


def flat_row_encoder(schema: S.StructType) -> Callable[[Any], bytes | None] | None:
    """An encoder of rows of ``schema`` (a dict keyed by ``schema.unique_names()``, as
    :func:`make_decoder` gives them) into the UnsafeRow Spark writes, or None when a field's
    type is not one it writes (booleans, integers, strings). The encoder gives None for a
    row that no value of the schema equals: other keys, a value of another type, an integer
    out of range."""
    kinds = []
    for f in schema.fields:
        t = f.data_type
        name = t.name if isinstance(t, S.AtomicType) else None
        if name not in _ENCODABLE:
            return None
        kinds.append(name)
    names = schema.unique_names()
    n = len(kinds)
    bitset = ((n + 63) // 64) * 8
    fixed = bitset + 8 * n

    def encode(row: Any) -> bytes | None:
        if not isinstance(row, dict) or len(row) != n:
            return None
        head = bytearray(fixed)
        tail = bytearray()
        for i, (kind, name) in enumerate(zip(kinds, names, strict=True)):
            if name not in row:
                return None
            value = row[name]
            slot = bitset + 8 * i
            if value is None:
                head[i // 8] |= 1 << (i % 8)
            elif kind == "string":
                if not isinstance(value, str):
                    return None
                data = value.encode("utf-8")
                struct.pack_into("<q", head, slot, ((fixed + len(tail)) << 32) | len(data))
                tail += data + bytes(-len(data) % 8)
            elif kind == "boolean":
                if not isinstance(value, bool):
                    return None
                head[slot] = int(value)
            else:
                bits = _INT_RANGES[kind]
                if isinstance(value, bool) or not isinstance(value, int):
                    return None
                if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                    return None
                struct.pack_into("<q", head, slot, value)
                if bits < 64:  # the slot's upper bytes stay zero (not sign-extended)
                    head[slot + bits // 8 : slot + 8] = bytes(8 - bits // 8)
        return bytes(head + tail)

    return encode
