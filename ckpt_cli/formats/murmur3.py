"""Spark's ``Murmur3Hash`` (``hash()`` in SQL, the hash of ``HashPartitioning``), as pure functions.

A shuffle sends a row to partition ``pmod(hash(key columns), numPartitions)`` with seed 42;
a stateful operator's state rows live in the partition their key was shuffled to. These
functions give the same 32-bit signed results as Spark's ``Murmur3_x86_32`` and
``Murmur3HashFunction`` (``catalyst/expressions/hash.scala``):

- ``hash_unsafe_bytes`` is ``Murmur3_x86_32.hashUnsafeBytes``: little-endian 4-byte words, then
  each tail byte mixed on its own as a *signed* byte (not standard murmur3's packed tail);
- a row chains the seed through its columns: ``h = hash(col_i, type_i, h)``; a null leaves
  ``h`` unchanged; structs, arrays and maps chain through their fields, elements and
  key/value pairs in order;
- floats and doubles hash their bits (``floatToIntBits``: one NaN) with -0.0 as 0.0;
  decimals of precision <= 18 their unscaled long, larger ones ``BigInteger.toByteArray``.

Values are the Python values ``formats.unsaferow`` decodes (``datetime`` for timestamps,
``Decimal``, ``dict`` for structs...). ``formats.murmur3_columns`` hashes many keys at once
with numpy.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.unsaferow import CalendarInterval

SEED = 42  # HashPartitioning's Murmur3Hash seed
MAX_LONG_DIGITS = 18  # Decimal.MAX_LONG_DIGITS

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_M32 = 0xFFFFFFFF
_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NTZ = dt.datetime(1970, 1, 1)
_MICRO = dt.timedelta(microseconds=1)


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & _M32
    k1 = ((k1 << 15) | (k1 >> 17)) & _M32
    return (k1 * _C2) & _M32


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = ((h1 << 13) | (h1 >> 19)) & _M32
    return (h1 * 5 + 0xE6546B64) & _M32


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    h1 ^= h1 >> 16
    return _signed(h1)


def hash_int(value: int, seed: int = SEED) -> int:
    """``Murmur3_x86_32.hashInt``: a 32-bit int (boolean, byte, short, int, date...)."""
    return _fmix(_mix_h1(seed & _M32, _mix_k1(value & _M32)), 4)


def hash_long(value: int, seed: int = SEED) -> int:
    """``Murmur3_x86_32.hashLong``: the low word, then the high word."""
    h1 = _mix_h1(seed & _M32, _mix_k1(value & _M32))
    h1 = _mix_h1(h1, _mix_k1((value >> 32) & _M32))
    return _fmix(h1, 8)


def hash_unsafe_bytes(data: bytes, seed: int = SEED) -> int:
    """``Murmur3_x86_32.hashUnsafeBytes`` (strings, binary, big decimals)."""
    n = len(data)
    aligned = n - n % 4
    h1 = seed & _M32
    for word in struct.unpack_from(f"<{aligned // 4}I", data):
        h1 = _mix_h1(h1, _mix_k1(word))
    for i in range(aligned, n):
        # Platform.getByte: a signed byte, widened to int.
        h1 = _mix_h1(h1, _mix_k1((data[i] - 256 if data[i] > 127 else data[i]) & _M32))
    return _fmix(h1, n)


def pmod(h: int, m: int) -> int:
    """Spark's ``pmod``: the non-negative remainder (Python's ``%`` with ``m > 0``)."""
    if m <= 0:
        raise ValueError(f"pmod by {m}: the partition count must be positive")
    return h % m


# -- values by Spark type ---------------------------------------------------------------------


def _float_bits(value: float) -> int:
    if value != value:
        return 0x7FC00000  # Float.floatToIntBits: the canonical NaN
    return 0 if value == 0.0 else int(struct.unpack("<I", struct.pack("<f", value))[0])


def _double_bits(value: float) -> int:
    if value != value:
        return 0x7FF8000000000000
    return 0 if value == 0.0 else int(struct.unpack("<Q", struct.pack("<d", value))[0])


def _unscaled(value: Decimal, scale: int) -> int:
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"decimal {value} is not finite")
    unscaled = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    power = int(10 ** abs(shift))
    unscaled = unscaled * power if shift >= 0 else unscaled // power
    return -unscaled if sign else unscaled


def _big_integer_bytes(n: int) -> bytes:
    # java.math.BigInteger.toByteArray: minimal two's complement, big-endian.
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def _micros(value: dt.datetime, epoch: dt.datetime) -> int:
    return (value - epoch) // _MICRO


def _atomic(value: Any, name: str, seed: int) -> int:
    if name == "boolean":
        return hash_int(1 if value else 0, seed)
    if name in ("byte", "short", "integer"):
        return hash_int(value, seed)
    if name == "long":
        return hash_long(value, seed)
    if name == "float":
        return hash_int(_float_bits(value), seed)
    if name == "double":
        return hash_long(_double_bits(value), seed)
    if name == "string":
        return hash_unsafe_bytes(value.encode("utf-8", "surrogatepass"), seed)
    if name == "binary":
        return hash_unsafe_bytes(bytes(value), seed)
    if name == "date":
        return hash_int((value - _EPOCH_DAY).days, seed)
    if name == "timestamp":
        return hash_long(_micros(value, _EPOCH_UTC), seed)
    if name == "timestamp_ntz":
        return hash_long(_micros(value, _EPOCH_NTZ), seed)
    if name == "interval" and isinstance(value, CalendarInterval):
        seed = hash_long(value.microseconds, seed)
        return hash_int(value.months, hash_int(value.days, seed))
    raise TypeError(f"Spark cannot hash a {name} value for partitioning")


def _hash_value(value: Any, data_type: S.DataType, seed: int) -> int:
    if value is None:
        return seed
    if isinstance(data_type, S.AtomicType):
        return _atomic(value, data_type.name, seed)
    if isinstance(data_type, S.StringLikeType):
        if "collate" in data_type.json_name.lower():
            # A non-binary collation hashes its collation key, which ckpt does not compute.
            raise TypeError(f"{data_type.json_name}: collated strings are not supported")
        return hash_unsafe_bytes(value.encode("utf-8", "surrogatepass"), seed)
    if isinstance(data_type, S.DecimalType):
        unscaled = _unscaled(value, data_type.scale)
        if data_type.precision <= MAX_LONG_DIGITS:
            return hash_long(unscaled, seed)
        return hash_unsafe_bytes(_big_integer_bytes(unscaled), seed)
    if isinstance(data_type, S.YearMonthIntervalType):
        return hash_int(value, seed)
    if isinstance(data_type, S.DayTimeIntervalType):
        return hash_long(value // _MICRO, seed)
    if isinstance(data_type, S.TimeType):
        nanos = (value.hour * 3600 + value.minute * 60 + value.second) * 10**9
        return hash_long(nanos + value.microsecond * 1000, seed)
    if isinstance(data_type, S.StructType):
        fields = value.values() if isinstance(value, dict) else value
        return hash_row(list(fields), [f.data_type for f in data_type.fields], seed)
    if isinstance(data_type, S.ArrayType):
        for element in value:
            seed = _hash_value(element, data_type.element_type, seed)
        return seed
    if isinstance(data_type, S.MapType):
        pairs = value.items() if isinstance(value, dict) else value
        for k, v in pairs:
            seed = _hash_value(k, data_type.key_type, seed)
            seed = _hash_value(v, data_type.value_type, seed)
        return seed
    if isinstance(data_type, S.UserDefinedType):
        return _hash_value(value, data_type.sql_type, seed)
    raise TypeError(f"Spark cannot hash a {data_type.simple_string()} value for partitioning")


def hash_value(value: Any, data_type: S.DataType, seed: int = SEED) -> int:
    """One value of a Spark type, chained from ``seed`` (``hash(value)`` in Spark SQL)."""
    return _hash_value(value, data_type, seed)


def hash_row(values: Sequence[Any], types: Sequence[S.DataType], seed: int = SEED) -> int:
    """``Murmur3Hash(columns)``: the seed chained through each column in order."""
    if len(values) != len(types):
        raise ValueError(f"{len(values)} values for {len(types)} types")
    for value, data_type in zip(values, types, strict=True):
        seed = _hash_value(value, data_type, seed)
    return seed


def check_hashable(data_type: S.DataType, *, path: str, what: str) -> None:
    """Raise ``FormatError`` when a column of ``data_type`` cannot be hashed as Spark does."""
    probe: list[S.DataType] = [data_type]
    while probe:
        t = probe.pop()
        if isinstance(t, S.AtomicType) and t.name in ("variant", "void"):
            if t.name == "variant":
                raise FormatError(path, f"{what}: Spark does not partition by a variant")
        elif isinstance(t, S.StringLikeType) and "collate" in t.json_name.lower():
            raise FormatError(path, f"{what}: collated strings ({t.json_name}) are not supported")
        elif isinstance(t, S.StructType):
            probe.extend(f.data_type for f in t.fields)
        elif isinstance(t, S.ArrayType):
            probe.append(t.element_type)
        elif isinstance(t, S.MapType):
            probe.extend((t.key_type, t.value_type))
        elif isinstance(t, S.UserDefinedType):
            probe.append(t.sql_type)
        elif not isinstance(
            t,
            S.AtomicType
            | S.DecimalType
            | S.StringLikeType
            | S.YearMonthIntervalType
            | S.DayTimeIntervalType
            | S.TimeType,
        ):
            raise FormatError(path, f"{what}: cannot hash a {t.simple_string()} column")
