"""``formats.murmur3`` for many keys at once, with numpy: the same results, column by column.

A batch of keys is hashed column by column, each column's hashes seeding the next (as
``hash_row`` chains them per key). Integer-like columns (boolean, byte, short, int, date,
year-month interval; long, timestamp, timestamp_ntz, day-time interval) and byte-like ones
(string, binary) are hashed as arrays; a column of strings is split by byte length, each
length one ``(keys, length)`` byte matrix mixed a word (then a tail byte) at a time. Other
types (floats, decimals, structs, arrays, maps...) take the scalar path per value. A null
leaves its key's seed unchanged.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ckpt_cli.formats import murmur3
from ckpt_cli.formats.spark_types import (
    AtomicType,
    DataType,
    DayTimeIntervalType,
    StringLikeType,
    StructType,
    UserDefinedType,
    YearMonthIntervalType,
)

U32 = npt.NDArray[np.uint32]
I32 = npt.NDArray[np.int32]

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NTZ = dt.datetime(1970, 1, 1)
_MICRO = dt.timedelta(microseconds=1)


def _mix_k1(k1: U32) -> U32:
    k1 = k1 * _C1
    k1 = (k1 << np.uint32(15)) | (k1 >> np.uint32(17))
    out: U32 = k1 * _C2
    return out


def _mix_h1(h1: U32, k1: U32) -> U32:
    h1 = h1 ^ k1
    h1 = (h1 << np.uint32(13)) | (h1 >> np.uint32(19))
    out: U32 = h1 * np.uint32(5) + np.uint32(0xE6546B64)
    return out


def _fmix(h1: U32, length: int) -> U32:
    h1 = h1 ^ np.uint32(length)
    h1 = h1 ^ (h1 >> np.uint32(16))
    h1 = h1 * np.uint32(0x85EBCA6B)
    h1 = h1 ^ (h1 >> np.uint32(13))
    h1 = h1 * np.uint32(0xC2B2AE35)
    out: U32 = h1 ^ (h1 >> np.uint32(16))
    return out


def _u32(values: npt.ArrayLike) -> U32:
    # Two's complement low 32 bits of any int64 values.
    out: U32 = np.asarray(values, dtype=np.int64).astype(np.uint32)
    return out


def _seeds(seed: int | npt.ArrayLike, n: int) -> U32:
    return _u32(np.broadcast_to(np.asarray(seed, dtype=np.int64), (n,)))


def _ints(h: U32, values: U32) -> U32:
    with np.errstate(over="ignore"):
        return _fmix(_mix_h1(h, _mix_k1(values)), 4)


def _longs(h: U32, values: npt.NDArray[np.int64]) -> U32:
    v = values.view(np.uint64)
    low = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (v >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        return _fmix(_mix_h1(_mix_h1(h, _mix_k1(low)), _mix_k1(high)), 8)


def hash_int_array(values: Iterable[int] | npt.ArrayLike, seed: int | npt.ArrayLike = 42) -> I32:
    """``murmur3.hash_int`` of each value (seed: one, or one per value)."""
    v = _u32(np.asarray(values, dtype=np.int64))
    out: I32 = _ints(_seeds(seed, v.size), v).view(np.int32)
    return out


def hash_long_array(values: Iterable[int] | npt.ArrayLike, seed: int | npt.ArrayLike = 42) -> I32:
    """``murmur3.hash_long`` of each value (seed: one, or one per value)."""
    v = np.asarray(values, dtype=np.int64)
    out: I32 = _longs(_seeds(seed, v.size), v).view(np.int32)
    return out


def hash_bytes_array(values: Sequence[bytes], seed: int | npt.ArrayLike = 42) -> I32:
    """``murmur3.hash_unsafe_bytes`` of each value, grouped by length."""
    return _bytes(_seeds(seed, len(values)), values).view(np.int32)


def _bytes(h: U32, values: Sequence[bytes]) -> U32:
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    data = np.frombuffer(b"".join(values), dtype=np.uint8)
    return _bytes_at(h, data, np.cumsum(lengths) - lengths, lengths)


def _bytes_at(h: U32, data: npt.NDArray[np.uint8], at: Any, lengths: Any) -> U32:
    """``_bytes`` of the values ``data[at[i]:][:lengths[i]]``."""
    out: U32 = h.copy()
    for length in np.unique(lengths).tolist():
        idx = np.flatnonzero(lengths == length)
        matrix = data[at[idx, None] + np.arange(length)]  # one row of bytes per value
        aligned = length - length % 4
        words = np.ascontiguousarray(matrix[:, :aligned]).view("<u4").astype(np.uint32)
        g = h[idx]
        with np.errstate(over="ignore"):
            for w in range(aligned // 4):
                g = _mix_h1(g, _mix_k1(words[:, w]))
            for i in range(aligned, length):
                # Platform.getByte: the signed byte, widened to int.
                g = _mix_h1(
                    g, _mix_k1(matrix[:, i].view(np.int8).astype(np.int64).astype(np.uint32))
                )
            out[idx] = _fmix(g, length)
    return out


def pmod_array(hashes: npt.ArrayLike, m: int) -> npt.NDArray[np.int64]:
    """``murmur3.pmod`` of each hash."""
    if m <= 0:
        raise ValueError(f"pmod by {m}: the partition count must be positive")
    out: npt.NDArray[np.int64] = np.mod(np.asarray(hashes, dtype=np.int64), m)
    return out


# -- columns of decoded values --------------------------------------------------------------

_INT_LIKE = {"boolean", "byte", "short", "integer"}
_LONG_LIKE = {"long"}


def _int_of(name: str) -> Any:
    if name == "date":
        return lambda d: d.toordinal() - _EPOCH_ORDINAL
    if name == "timestamp":
        return lambda t: (t - _EPOCH_UTC) // _MICRO
    if name == "timestamp_ntz":
        return lambda t: (t - _EPOCH_NTZ) // _MICRO
    return int


def _kind(t: DataType) -> tuple[str, Any] | None:
    """How a column is hashed as an array: ("int"|"long"|"bytes", value -> int/bytes)."""
    while isinstance(t, UserDefinedType):
        t = t.sql_type
    if isinstance(t, AtomicType):
        if t.name in _INT_LIKE or t.name == "date":
            return "int", _int_of(t.name)
        if t.name in _LONG_LIKE or t.name in ("timestamp", "timestamp_ntz"):
            return "long", _int_of(t.name)
        if t.name == "string":
            return "bytes", lambda s: s.encode("utf-8", "surrogatepass")
        if t.name == "binary":
            return "bytes", bytes
        return None
    if isinstance(t, StringLikeType) and "collate" not in t.json_name.lower():
        return "bytes", lambda s: s.encode("utf-8", "surrogatepass")
    if isinstance(t, YearMonthIntervalType):
        return "int", int
    if isinstance(t, DayTimeIntervalType):
        return "long", lambda d: d // _MICRO
    return None


def hash_column(values: Sequence[Any], data_type: DataType, seeds: U32) -> U32:
    """Each value's hash chained from its key's seed (nulls keep it)."""
    kind = _kind(data_type)
    if kind is None:
        return _u32(
            [
                murmur3.hash_value(v, data_type, s)
                for v, s in zip(values, seeds.tolist(), strict=True)
            ]
        )
    how, convert = kind
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    if how == "bytes":
        filled = [b"" if v is None else convert(v) for v in values]
        hashed = _bytes(seeds, filled)
    else:
        ints = np.fromiter(
            (0 if v is None else convert(v) for v in values), dtype=np.int64, count=len(values)
        )
        hashed = _ints(seeds, _u32(ints)) if how == "int" else _longs(seeds, ints)
    if nulls.any():
        hashed = np.where(nulls, seeds, hashed)
    return hashed


def hash_columns(
    columns: Sequence[Sequence[Any]], types: Sequence[DataType], n: int, seed: int = 42
) -> I32:
    """``murmur3.hash_row`` of ``n`` keys given column by column."""
    h = _seeds(seed, n)
    for values, data_type in zip(columns, types, strict=True):
        h = hash_column(values, data_type, h)
    out: I32 = h.view(np.int32)
    return out


# -- straight from UnsafeRow bytes -----------------------------------------------------------

# Slot layouts of the flat types: (struct format of the slot's value, array kind).
_SLOTS = {
    "boolean": ("<?", "int"),
    "byte": ("<b", "int"),
    "short": ("<h", "int"),
    "integer": ("<i", "int"),
    "date": ("<i", "int"),
    "long": ("<q", "long"),
    "timestamp": ("<q", "long"),
    "timestamp_ntz": ("<q", "long"),
    "string": ("<q", "bytes"),
    "binary": ("<q", "bytes"),
}


def raw_hashable(data_type: DataType) -> bool:
    """Whether ``hash_unsafe_rows`` reads a column of this type from its slot: the flat
    types, and structs of them (a window's ``struct<start, end>``)."""
    if isinstance(data_type, StructType):
        return all(raw_hashable(f.data_type) for f in data_type.fields)
    return isinstance(data_type, AtomicType) and data_type.name in _SLOTS


def hash_unsafe_rows(
    rows: Sequence[bytes],
    start: int,
    num_fields: int,
    columns: Sequence[tuple[int, DataType]],
    seed: int = 42,
) -> I32:
    """``murmur3.hash_row`` of top-level columns of UnsafeRows, read from their slots
    without decoding the rows: ``rows[k][start:]`` is a row of ``num_fields`` fields;
    ``columns``: (ordinal, type) of ``raw_hashable`` types. A value outside its row raises
    ValueError (the caller decodes such rows to say what is wrong)."""
    out: I32 = _hash_rows(rows, start, num_fields, columns, _seeds(seed, len(rows))).view(np.int32)
    return out


def _hash_rows(
    rows: Sequence[bytes],
    start: int,
    num_fields: int,
    columns: Sequence[tuple[int, DataType]],
    h: U32,
) -> U32:
    words = (num_fields + 63) // 64
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    if (
        len(rows)
        and int(lengths.min()) >= start + 8 * (words + num_fields)  # every slot in its row
        and not any(isinstance(t, StructType) for _, t in columns)
    ):
        return _hash_packed(b"".join(rows), lengths, start, words, columns, h)
    for ordinal, data_type in columns:
        word_at, bit = start + 8 * (ordinal // 64), 1 << (ordinal % 64)
        slot = start + 8 * words + 8 * ordinal
        nulls = [int.from_bytes(r[word_at : word_at + 8], "little") & bit != 0 for r in rows]
        if isinstance(data_type, StructType):
            fmt, kind = "<q", "struct"
        else:
            assert isinstance(data_type, AtomicType)
            fmt, kind = _SLOTS[data_type.name]
        unpack = struct.Struct(fmt).unpack_from
        try:
            raw = [0 if null else unpack(r, slot)[0] for r, null in zip(rows, nulls, strict=True)]
        except struct.error as exc:
            raise ValueError(f"row shorter than its slots: {exc}") from None
        null_mask = np.array(nulls, dtype=bool)
        if kind in ("bytes", "struct"):
            values = []
            for r, word in zip(rows, raw, strict=True):
                at, size = start + (word >> 32), word & 0xFFFFFFFF
                if at + size > len(r):
                    raise ValueError("a value points outside its row")
                values.append(r[at : at + size])
            if isinstance(data_type, StructType):
                # A struct hashes as its fields, chained; a null one keeps the seed (hashed
                # as a zeroed row, then dropped).
                fields = [(i, f.data_type) for i, f in enumerate(data_type.fields)]
                zeroed = bytes(8 * ((len(fields) + 63) // 64 + len(fields)))
                values = [zeroed if null else v for v, null in zip(values, nulls, strict=True)]
                hashed = _hash_rows(values, 0, len(fields), fields, h)
            else:
                hashed = _bytes(h, values)
        else:
            ints = np.array(raw, dtype=np.int64)
            hashed = _ints(h, _u32(ints)) if kind == "int" else _longs(h, ints)
        h = np.where(null_mask, h, hashed) if null_mask.any() else hashed
    return h


def _hash_packed(
    joined: bytes,
    lengths: npt.NDArray[np.int64],
    start: int,
    words: int,
    columns: Sequence[tuple[int, DataType]],
    h: U32,
) -> U32:
    """``_hash_rows`` of rows of flat columns, every slot inside its row, read in bulk from
    the rows joined (``lengths``: each row's): no Python step per row."""
    data = np.frombuffer(joined, dtype=np.uint8)
    rows_at = np.cumsum(lengths) - lengths
    longs = np.ndarray((max(0, len(joined) - 7),), "<u8", buffer=joined, strides=(1,))
    for ordinal, data_type in columns:
        assert isinstance(data_type, AtomicType)
        word_at = start + 8 * (ordinal // 64)
        slot = rows_at + start + 8 * words + 8 * ordinal
        null = ((longs[rows_at + word_at] >> np.uint64(ordinal % 64)) & np.uint64(1)).astype(bool)
        fmt, kind = _SLOTS[data_type.name]
        if kind == "bytes":
            word = longs[slot]
            at = rows_at + start + (word >> np.uint64(32)).astype(np.int64)
            size = (word & np.uint64(0xFFFFFFFF)).astype(np.int64)
            if bool(((at + size > rows_at + lengths) & ~null).any()):
                raise ValueError("a value points outside its row")
            at[null], size[null] = 0, 0  # a null's slot may hold anything
            hashed = _bytes_at(h, data, at, size)
        elif fmt == "<?":
            hashed = _ints(h, (data[slot] != 0).astype(np.uint32))  # any non-zero byte is true
        else:
            width = struct.calcsize(fmt)
            view = np.ndarray((len(joined) - width + 1,), fmt, buffer=joined, strides=(1,))
            ints = view[slot].astype(np.int64)
            hashed = _ints(h, _u32(ints)) if kind == "int" else _longs(h, ints)
        h = np.where(null, h, hashed) if null.any() else hashed
    return h
