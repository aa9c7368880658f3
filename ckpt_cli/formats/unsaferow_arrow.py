"""Decode many UnsafeRows at once into Arrow arrays, with numpy: no Python object per row.

The rows sit in one bytes buffer, row ``i`` at ``buf[offsets[i]:offsets[i] + sizes[i]]`` (the
layout is ``unsaferow``'s). Each field becomes one gather over every row: a fixed-width slot
is read at ``row start + 8 * (null words + ordinal)`` through a numpy view of the buffer with
a one-byte stride (any alignment), nulls come from the bitset words, strings and binary are
``(offset << 32) | size`` words whose bytes are gathered into one Arrow data buffer, nested
structs recurse on the rows that are not null, arrays and maps (``UnsafeArrayData``) expand
into one flat column of elements. Every offset and size is checked against its container
as ``unsaferow`` checks it, so damaged bytes give ``FormatError``, never a wrong value.

``unsaferow`` stays the reference (tests compare both on random schemas and damaged rows).
Types without a columnar decoder here (calendar intervals, variants, ``time``, decimals of
more than 18 digits) raise ``ColumnarUnsupported`` when compiled, as does a map whose key
is null (Arrow maps cannot hold one); callers then decode those rows one by one.
Values are Arrow's natural types: timestamps ``timestamp[us, UTC]``, ``timestamp_ntz``
``timestamp[us]``, dates ``date32``, compact decimals ``decimal128(p, s)``, day-time
intervals ``duration[us]``, year-month intervals ``int32`` months.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ckpt_cli.errors import FormatError
from ckpt_cli.formats.spark_types import (
    ArrayType,
    AtomicType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    MapType,
    StringLikeType,
    StructType,
    UserDefinedType,
    YearMonthIntervalType,
)
from ckpt_cli.formats.unsaferow import MAX_LONG_DIGITS, RowError

Int64s = np.ndarray[Any, np.dtype[np.int64]]
Bools = np.ndarray[Any, np.dtype[np.bool_]]

# Arrow's 32-bit offsets bound one string column of a batch.
_MAX_ARROW_BYTES = (1 << 31) - 1


class ColumnarUnsupported(Exception):
    """These rows need the row-at-a-time decoder (a type or a value Arrow cannot hold here)."""


# (numpy dtype of the stored value, its width in an array, Arrow type)
_FIXED: dict[str, tuple[str, int, pa.DataType]] = {
    "boolean": ("u1", 1, pa.bool_()),
    "byte": ("<i1", 1, pa.int8()),
    "short": ("<i2", 2, pa.int16()),
    "integer": ("<i4", 4, pa.int32()),
    "long": ("<i8", 8, pa.int64()),
    "float": ("<f4", 4, pa.float32()),
    "double": ("<f8", 8, pa.float64()),
    "date": ("<i4", 4, pa.date32()),
    "timestamp": ("<i8", 8, pa.timestamp("us", tz="UTC")),
    "timestamp_ntz": ("<i8", 8, pa.timestamp("us")),
}
_VARIABLE = {"string": pa.string(), "binary": pa.binary()}


def _unwrap(t: DataType) -> DataType:
    while isinstance(t, UserDefinedType):
        t = t.sql_type
    if isinstance(t, StringLikeType):
        return AtomicType("string")
    return t


def arrow_type(t: DataType) -> pa.DataType:
    """The Arrow type a column of Spark type ``t`` decodes to (ColumnarUnsupported if none)."""
    t = _unwrap(t)
    if isinstance(t, AtomicType):
        if t.name in _FIXED:
            return _FIXED[t.name][2]
        if t.name in _VARIABLE:
            return _VARIABLE[t.name]
        if t.name == "void":
            return pa.null()
    if isinstance(t, DecimalType) and t.precision <= MAX_LONG_DIGITS:
        return pa.decimal128(max(t.precision, 1), t.scale)
    if isinstance(t, YearMonthIntervalType):
        return pa.int32()
    if isinstance(t, DayTimeIntervalType):
        return pa.duration("us")
    if isinstance(t, StructType):
        return pa.struct(
            [
                pa.field(name, arrow_type(f.data_type))
                for name, f in zip(t.unique_names(), t.fields, strict=True)
            ]
        )
    if isinstance(t, ArrayType):
        return pa.list_(arrow_type(t.element_type))
    if isinstance(t, MapType):
        return pa.map_(arrow_type(t.key_type), arrow_type(t.value_type))
    raise ColumnarUnsupported(f"no columnar decoder for Spark type {t!r}")


def _element_width(t: DataType) -> int:
    t = _unwrap(t)
    if isinstance(t, AtomicType) and t.name in _FIXED:
        return _FIXED[t.name][1]
    if isinstance(t, YearMonthIntervalType):
        return 4
    return 8


@dataclass
class _Buffer:
    """The rows' bytes with numpy views reading a little-endian value at any byte offset."""

    data: bytes | bytearray

    def __post_init__(self) -> None:
        self.u1 = np.frombuffer(self.data, dtype=np.uint8)
        self._views: dict[str, np.ndarray[Any, Any]] = {}

    def read(self, dtype: str, pos: Int64s) -> np.ndarray[Any, Any]:
        view = self._views.get(dtype)
        if view is None:
            width = np.dtype(dtype).itemsize
            count = max(0, len(self.data) - width + 1)
            view = np.ndarray((count,), dtype=dtype, buffer=self.data, strides=(1,))
            self._views[dtype] = view
        return view[pos]


def _ranges(starts: Int64s, counts: Int64s, step: int = 1) -> Int64s:
    """``starts[j] + step * k`` for ``k < counts[j]``, concatenated."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    first = np.cumsum(counts) - counts
    within = np.arange(total, dtype=np.int64) - np.repeat(first, counts)
    return np.repeat(starts, counts) + step * within


def _gather_bytes(b: _Buffer, starts: Int64s, lengths: Int64s) -> Any:
    """The byte ranges concatenated (a buffer-like object).

    Ranges in buffer order without overlap (a column of rows packed one after another) are
    cut out by Arrow: a binary array over the buffer whose values alternate between the gap
    before a range and the range, filtered to the ranges (one memcpy each, no Python object
    per value). Others are gathered byte by byte.
    """
    if not bool(lengths.all()):
        some = lengths > 0
        starts, lengths = starts[some], lengths[some]
    if len(starts) == 0:
        return b""
    ends = starts + lengths
    lo, hi = int(starts[0]), int(ends[-1])
    if not bool((starts[1:] >= ends[:-1]).all()) or hi - lo > _MAX_ARROW_BYTES:
        return b.u1[_ranges(starts, lengths)]
    bounds = np.empty(2 * len(starts) + 1, np.int32)
    bounds[0] = 0
    bounds[1::2] = starts - lo
    bounds[2::2] = ends - lo
    pieces = pa.Array.from_buffers(
        pa.binary(), 2 * len(starts), [None, pa.py_buffer(bounds), pa.py_buffer(b.data)[lo:hi]]
    )
    # Every other piece (bits 0b10101010): built from bytes, as pa.array(numpy) would
    # import numpy.ma (15-20 ms) on a replay's first batch.
    keep = pa.Array.from_buffers(
        pa.bool_(), 2 * len(starts), [None, pa.py_buffer(b"\xaa" * ((len(starts) + 3) // 4))]
    )
    ranges = pieces.filter(keep)
    return ranges.buffers()[2][: int(lengths.sum())]


def _as_buffer(data: Any) -> pa.Buffer:
    return data if isinstance(data, pa.Buffer) else pa.py_buffer(data)


def _validity(valid: Bools | None) -> pa.Buffer | None:
    if valid is None or bool(valid.all()):
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())


def _first(mask: Bools) -> int | None:
    """The index of the first True in ``mask`` (the row an error names), or None."""
    found = np.flatnonzero(mask)
    return int(found[0]) if len(found) else None


def _spans(
    b: _Buffer, pos: Int64s, base: Int64s, size: Int64s, valid: Bools, what: str
) -> tuple[Int64s, Int64s]:
    """Absolute start and length of the variable-length values whose words are at ``pos``,
    each checked against its container (the values of null slots are zero)."""
    word = b.read("<u8", pos)
    offset = (word >> np.uint64(32)).astype(np.int64)
    length = (word & np.uint64(0xFFFFFFFF)).astype(np.int64)
    if not bool(valid.all()):
        offset[~valid] = 0
        length[~valid] = 0
    i = _first(offset + length > size)
    if i is not None:
        raise RowError(
            f"{what} at offset {offset[i]} with size {length[i]} runs past the end of its "
            f"{size[i]}-byte container",
            int(base[i]),
        )
    return base + offset, length


def _bytes_column(b: _Buffer, starts: Int64s, lengths: Int64s, valid: Bools, t: pa.DataType) -> Any:
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _MAX_ARROW_BYTES:
        raise ColumnarUnsupported("more string bytes than one Arrow array holds")
    data = _gather_bytes(b, starts, lengths)
    array = pa.Array.from_buffers(
        pa.binary(),
        len(starts),
        [_validity(valid), pa.py_buffer(offsets.astype(np.int32)), _as_buffer(data)],
    )
    if t == pa.binary():
        return array
    try:
        return array.cast(pa.string())  # checks the UTF-8
    except pa.ArrowInvalid:
        # Invalid UTF-8 reads as U+FFFD, as Spark's UTF8String.toString does.
        return pa.array(
            [None if v is None else v.decode("utf-8", "replace") for v in array.to_pylist()],
            pa.string(),
        )


def _expand(values: Any, valid: Bools, t: pa.DataType) -> Any:
    """``values`` (one per valid item) spread out to every item, null where not valid."""
    if len(values) == len(valid):
        return values
    if len(values) == 0:
        return pa.nulls(len(valid), t)
    index = np.zeros(len(valid), np.int64)
    index[valid] = np.arange(len(values))
    return values.take(pa.array(index, mask=~valid))


def _column(b: _Buffer, t: DataType, pos: Int64s, base: Int64s, size: Int64s, valid: Bools) -> Any:
    """The values of type ``t`` whose slots (or array elements) are at ``pos``, inside the
    containers at ``base`` of ``size`` bytes; null where not ``valid``."""
    t = _unwrap(t)
    n = len(pos)
    atype = arrow_type(t)
    if isinstance(t, AtomicType) and t.name == "void":
        return pa.nulls(n)
    if isinstance(t, AtomicType) and t.name in _VARIABLE:
        starts, lengths = _spans(b, pos, base, size, valid, t.name)
        return _bytes_column(b, starts, lengths, valid, atype)
    if isinstance(t, AtomicType) and t.name == "boolean":
        bits = np.packbits(b.read("u1", pos) != 0, bitorder="little")
        return pa.Array.from_buffers(atype, n, [_validity(valid), pa.py_buffer(bits.tobytes())])
    if isinstance(t, (AtomicType, YearMonthIntervalType, DayTimeIntervalType, DecimalType)):
        if isinstance(t, AtomicType):
            dtype = _FIXED[t.name][0]
        else:
            dtype = "<i4" if isinstance(t, YearMonthIntervalType) else "<i8"
        values = b.read(dtype, pos)
        if isinstance(t, DecimalType):  # 128-bit little-endian: the long, sign-extended
            wide = np.empty((n, 2), np.int64)
            wide[:, 0] = values
            wide[:, 1] = values >> 63
            values = wide
        return pa.Array.from_buffers(atype, n, [_validity(valid), pa.py_buffer(values.tobytes())])
    what = "struct" if isinstance(t, StructType) else "array" if isinstance(t, ArrayType) else "map"
    starts, lengths = _spans(b, pos, base, size, valid, what)
    starts, lengths = starts[valid], lengths[valid]
    if isinstance(t, StructType):
        inner: Any = _struct(b, t, starts, lengths)
    elif isinstance(t, ArrayType):
        offsets, elements = _array(b, t.element_type, starts, lengths)
        inner = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), elements, type=atype)
    else:
        assert isinstance(t, MapType)
        inner = _map(b, t, starts, lengths, atype)
    return _expand(inner, valid, atype)


def _struct(b: _Buffer, t: StructType, starts: Int64s, sizes: Int64s) -> Any:
    n_fields = len(t.fields)
    words = (n_fields + 63) // 64
    fixed = 8 * (words + n_fields)
    short = _first(sizes < fixed)
    if short is not None:
        raise RowError(
            f"row of {sizes[short]} bytes is shorter than the {fixed} bytes of null bits "
            f"and slots its {n_fields} fields need",
            int(starts[short]),
        )
    null_words = [b.read("<u8", starts + 8 * w) for w in range(words)]
    children = []
    for i, f in enumerate(t.fields):
        valid = (null_words[i // 64] >> np.uint64(i % 64)) & np.uint64(1) == 0
        pos = starts + 8 * (words + i)
        children.append(_column(b, f.data_type, pos, starts, sizes, valid))
    names = t.unique_names()
    if not children:  # a struct of no fields still has one (empty) value per row
        return pa.StructArray.from_buffers(pa.struct([]), len(starts), [None])
    return pa.StructArray.from_arrays(children, names=list(names))


def _array(b: _Buffer, element: DataType, starts: Int64s, sizes: Int64s) -> tuple[Int64s, Any]:
    """List offsets and the flat elements of the UnsafeArrayData at ``starts``."""
    i = _first(sizes < 8)
    if i is not None:
        raise RowError(f"array of {sizes[i]} bytes has no element count", int(starts[i]))
    counts = b.read("<i8", starts).astype(np.int64)
    width = _element_width(element)
    # Bounding the count by the size first keeps the arithmetic below from overflowing.
    plausible = (counts >= 0) & (counts <= sizes)
    header = 8 + ((np.where(plausible, counts, 0) + 63) // 64) * 8
    i = _first(~plausible | (header + np.where(plausible, counts, 0) * width > sizes))
    if i is not None:
        raise RowError(
            f"array claims {counts[i]} elements, more than its {sizes[i]} bytes can hold",
            int(starts[i]),
        )
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    if offsets[-1] > _MAX_ARROW_BYTES:
        raise ColumnarUnsupported("more array elements than one Arrow array holds")
    pos = _ranges(starts + header, counts, width)
    index = _ranges(np.zeros(len(starts), np.int64), counts)
    owner_start = np.repeat(starts, counts)
    null_bytes = b.u1[owner_start + 8 + (index >> 3)]
    valid = (null_bytes >> (index & 7).astype(np.uint8)) & 1 == 0
    elements = _column(b, element, pos, owner_start, np.repeat(sizes, counts), valid)
    return offsets, elements


def _map(b: _Buffer, t: MapType, starts: Int64s, sizes: Int64s, atype: pa.DataType) -> Any:
    i = _first(sizes < 8)
    if i is not None:
        raise RowError(f"map of {sizes[i]} bytes has no key array size", int(starts[i]))
    key_bytes = b.read("<i8", starts).astype(np.int64)
    i = _first((key_bytes < 0) | (key_bytes > sizes - 8))
    if i is not None:
        raise RowError(
            f"map key array size {key_bytes[i]} does not fit in {sizes[i]} bytes", int(starts[i])
        )
    offsets, keys = _array(b, t.key_type, starts + 8, key_bytes)
    value_offsets, values = _array(b, t.value_type, starts + 8 + key_bytes, sizes - 8 - key_bytes)
    i = _first(np.diff(offsets) != np.diff(value_offsets))
    if i is not None:
        raise RowError(
            f"map has {offsets[i + 1] - offsets[i]} keys but "
            f"{value_offsets[i + 1] - value_offsets[i]} values",
            int(starts[i]),
        )
    if keys.null_count:
        raise ColumnarUnsupported("a map key is null")
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, values, type=atype)


def check_supported(schema: StructType) -> None:
    """Raise ColumnarUnsupported when a column of ``schema`` has no columnar decoder."""
    arrow_type(schema)


def decode_rows(
    data: bytes | bytearray,
    offsets: Int64s,
    sizes: Int64s,
    schema: StructType,
    *,
    path: str = "<rows>",
) -> Any:
    """The rows ``data[offsets[i]:offsets[i] + sizes[i]]`` as one ``pyarrow.StructArray``
    with a child per column (named by ``schema.unique_names()``).

    FormatError when a row does not fit its schema (as ``unsaferow.make_decoder`` raises for
    it), ColumnarUnsupported when the rows need ``unsaferow`` instead.
    """
    offsets = np.asarray(offsets, np.int64)
    sizes = np.asarray(sizes, np.int64)
    check_supported(schema)
    if len(offsets) != len(sizes):
        raise ValueError("offsets and sizes differ in length")
    i = _first((offsets < 0) | (sizes < 0) | (offsets + sizes > len(data)))
    if i is not None:
        raise FormatError(
            path,
            f"row {i} at {offsets[i]} of {sizes[i]} bytes is outside the {len(data)}-byte buffer",
        )
    try:
        return _struct(_Buffer(data), schema, offsets, sizes)
    except RowError as exc:
        raise exc.for_file(path) from None
