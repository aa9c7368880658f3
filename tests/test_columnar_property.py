"""The columnar decoder (``formats/unsaferow_arrow``) against the row decoder it must agree
with (``formats/unsaferow``): random schemas (nested, null-heavy), several rows in one buffer
at arbitrary offsets, and damaged rows, which must fail as FormatError in both."""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.unsaferow import make_decoder
from ckpt_cli.formats.unsaferow_arrow import (
    ColumnarUnsupported,
    check_supported,
    decode_rows,
)
from tests.formats.test_unsaferow import field, row_schemas, values_for, write_row

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _supported(schema: S.StructType) -> bool:
    try:
        check_supported(schema)
    except ColumnarUnsupported:
        return False
    return True


supported_schemas = row_schemas.filter(_supported)


def _norm(t: S.DataType, v: Any) -> Any:
    """A value in a form both decoders' outputs compare equal in (NaN-safe, maps as pairs)."""
    if v is None:
        return None
    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if isinstance(t, S.StructType):
        items = list(v.values()) if isinstance(v, dict) else list(v)
        return tuple(_norm(f.data_type, x) for f, x in zip(t.fields, items, strict=True))
    if isinstance(t, S.ArrayType):
        return [_norm(t.element_type, x) for x in v]
    if isinstance(t, S.MapType):
        pairs = list(v.items()) if isinstance(v, dict) else [tuple(p) for p in v]
        return [(_norm(t.key_type, k), _norm(t.value_type, x)) for k, x in pairs]
    if isinstance(t, S.DecimalType):
        return int(v.scaleb(t.scale))
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None), "utc"
    if isinstance(v, float):
        return repr(v)
    return v


def _row_outcome(schema: S.StructType, rows: list[bytes]) -> tuple[str, Any]:
    decode = make_decoder(schema)
    try:
        return "value", [_norm(schema, decode(r)) for r in rows]
    except FormatError:
        return "error", None


def _dedup_maps(schema: S.StructType, reference: Any, got: Any) -> Any:
    """Arrow keeps a map's repeated keys; the row decoder's dict keeps the last."""

    def walk(t: S.DataType, ref: Any, v: Any) -> Any:
        if v is None or ref is None:
            return v
        if isinstance(t, S.StructType):
            return tuple(walk(f.data_type, r, x) for f, r, x in zip(t.fields, ref, v, strict=True))
        if isinstance(t, S.ArrayType):
            return [walk(t.element_type, r, x) for r, x in zip(ref, v, strict=False)]
        if isinstance(t, S.MapType):
            if len(v) != len(ref):
                v = list(dict(v).items())
            return [(k, walk(t.value_type, r[1], x)) for (k, x), r in zip(v, ref, strict=False)]
        return v

    return [walk(schema, r, x) for r, x in zip(reference, got, strict=False)]


def _columnar_outcome(
    schema: S.StructType, buf: bytes, offsets: Any, sizes: Any
) -> tuple[str, Any]:
    try:
        array = decode_rows(buf, offsets, sizes, schema)
    except FormatError:
        return "error", None
    except ColumnarUnsupported:
        return "unsupported", None
    try:
        return "value", [_norm(schema, row) for row in array.to_pylist()]
    except (ValueError, OverflowError):
        # A value Arrow holds but Python cannot (a year outside 1-9999): the row decoder
        # refuses such a row with FormatError.
        return "error", None


def _pack(rows: list[bytes], gaps: list[bytes]) -> tuple[bytes, Any, Any]:
    """Rows in one buffer with junk between them, as records lie in a decompressed file."""
    buf = bytearray()
    offsets = []
    for row, gap in zip(rows, gaps, strict=True):
        buf += gap
        offsets.append(len(buf))
        buf += row
    return bytes(buf), np.array(offsets, np.int64), np.array([len(r) for r in rows], np.int64)


@st.composite
def batches(draw: st.DrawFn) -> tuple[S.StructType, list[bytes], list[bytes]]:
    schema = draw(supported_schemas)
    values = draw(st.lists(values_for(schema), min_size=1, max_size=6))
    rows = [write_row(schema, v) for v in values]
    gaps = draw(st.lists(st.binary(max_size=9), min_size=len(rows), max_size=len(rows)))
    return schema, rows, gaps


def _agree(schema: S.StructType, rows: list[bytes], buf: bytes, offsets: Any, sizes: Any) -> None:
    expected = _row_outcome(schema, rows)
    got = _columnar_outcome(schema, buf, offsets, sizes)
    if got[0] == "unsupported":
        return  # the caller decodes these rows one by one
    assert got[0] == expected[0], (expected, got)
    if got[0] == "value":
        assert repr(_dedup_maps(schema, expected[1], got[1])) == repr(expected[1])


@PROPERTY
@given(batches())
def test_columnar_equals_rows(case: tuple[S.StructType, list[bytes], list[bytes]]) -> None:
    schema, rows, gaps = case
    buf, offsets, sizes = _pack(rows, gaps)
    expected = _row_outcome(schema, rows)
    assert expected[0] == "value"
    got = _columnar_outcome(schema, buf, offsets, sizes)
    assert got[0] == "value"  # valid rows never need the row decoder
    assert repr(_dedup_maps(schema, expected[1], got[1])) == repr(expected[1])


@PROPERTY
@given(batches(), st.data())
def test_damaged_rows_fail_alike(
    case: tuple[S.StructType, list[bytes], list[bytes]], data: st.DataObject
) -> None:
    schema, rows, gaps = case
    damaged = [bytearray(r) for r in rows]
    for _ in range(data.draw(st.integers(1, 6))):
        row = data.draw(st.sampled_from(damaged))
        if row:
            row[data.draw(st.integers(0, len(row) - 1))] = data.draw(st.integers(0, 255))
    which = data.draw(st.integers(0, len(damaged) - 1))
    damaged[which] = damaged[which][: data.draw(st.integers(0, len(damaged[which])))]
    rows = [bytes(r) for r in damaged]
    buf, offsets, sizes = _pack(rows, gaps)
    _agree(schema, rows, buf, offsets, sizes)


@PROPERTY
@given(batches(), st.data())
def test_offsets_out_of_range_are_format_errors(
    case: tuple[S.StructType, list[bytes], list[bytes]], data: st.DataObject
) -> None:
    schema, rows, gaps = case
    buf, offsets, sizes = _pack(rows, gaps)
    i = data.draw(st.integers(0, len(rows) - 1))
    if data.draw(st.booleans()):
        sizes[i] += data.draw(st.integers(len(buf) - int(offsets[i]) - int(sizes[i]) + 1, 1 << 40))
    else:
        offsets[i] = data.draw(st.sampled_from([-1, len(buf) + 1, 1 << 40]))
    with pytest.raises(FormatError):
        decode_rows(buf, offsets, sizes, schema)


def test_string_word_past_the_row_names_the_problem() -> None:
    schema = S.StructType((field("s", S.STRING),))
    row = bytearray(write_row(schema, {"s": "abc"}))
    struct.pack_into("<Q", row, 8, (16 << 32) | 64)  # 64 bytes from offset 16: past the row
    with pytest.raises(FormatError, match="string at offset 16 with size 64 runs past"):
        decode_rows(bytes(row), np.array([0]), np.array([len(row)]), schema)


def test_big_decimals_and_calendar_intervals_need_the_row_decoder() -> None:
    for t in (S.DecimalType(25, 5), S.CALENDAR_INTERVAL):
        with pytest.raises(ColumnarUnsupported):
            check_supported(S.StructType((field("x", t),)))


def test_null_heavy_nested_rows() -> None:
    inner = S.StructType((field("a", S.LONG), field("b", S.ArrayType(S.STRING))))
    schema = S.StructType((field("n", inner), field("m", S.MapType(S.INTEGER, inner))))
    values = [
        {"n": None, "m": None},
        {"n": {"a": None, "b": [None, "x"]}, "m": {1: None, 2: {"a": 3, "b": None}}},
        {"n": {"a": 7, "b": []}, "m": {}},
    ] * 50
    rows = [write_row(schema, v) for v in values]
    buf, offsets, sizes = _pack(rows, [b""] * len(rows))
    got = decode_rows(buf, offsets, sizes, schema).to_pylist()
    assert [_norm(schema, g) for g in got] == [_norm(schema, v) for v in values]
    assert got[1]["m"] == [(1, None), (2, {"a": 3, "b": None})]
