"""UnsafeRow decoding: real Spark 4.3 rows, a round trip through a small writer, and fuzzing."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import struct
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats import unsaferow
from ckpt_cli.formats.state_schema import parse_state_schema
from ckpt_cli.formats.unsaferow import (
    CalendarInterval,
    Variant,
    decode_row,
    make_decoder,
)

DATA = Path(__file__).parent / "data_rows"
UTC = dt.timezone.utc
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=UTC)
EPOCH = dt.datetime(1970, 1, 1)

# -- a minimal UnsafeRow writer (docs/spark-checkpoint-format.md §8.4) ----------------------


def _pad8(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % 8)


def _us(delta: dt.timedelta) -> int:
    return delta // dt.timedelta(microseconds=1)


WIDE = Context(prec=100)  # the default 28 digits would round decimal(38, s)


def _unscaled(value: Decimal, scale: int) -> int:
    return int(value.scaleb(scale, WIDE))


def _fixed(t: S.DataType, v: Any) -> tuple[str, Any] | None:
    """struct format + value of a fixed-width type, or None when variable-length."""
    if isinstance(t, S.AtomicType):
        name = t.name
        table: dict[str, tuple[str, Any]] = {
            "boolean": ("?", v),
            "byte": ("b", v),
            "short": ("h", v),
            "integer": ("i", v),
            "long": ("q", v),
            "float": ("f", v),
            "double": ("d", v),
        }
        if name in table:
            return table[name]
        if name == "date":
            return ("i", (v - dt.date(1970, 1, 1)).days)
        if name == "timestamp":
            return ("q", _us(v - EPOCH_UTC))
        if name == "timestamp_ntz":
            return ("q", _us(v - EPOCH))
        if name == "void":
            return ("q", 0)
        return None
    if isinstance(t, S.DecimalType) and t.precision <= 18:
        return ("q", _unscaled(v, t.scale))
    if isinstance(t, S.YearMonthIntervalType):
        return ("i", v)
    if isinstance(t, S.DayTimeIntervalType):
        return ("q", _us(v))
    if isinstance(t, S.TimeType):
        return ("q", ((v.hour * 60 + v.minute) * 60 + v.second) * 10**9 + v.microsecond * 1000)
    return None


def _elem_size(t: S.DataType) -> int:
    fixed = _fixed(t, _sample(t))
    if fixed is None or isinstance(t, S.AtomicType) and t.name == "void":
        return 8
    return struct.calcsize(fixed[0])


def _sample(t: S.DataType) -> Any:
    samples: dict[str, Any] = {
        "date": dt.date(1970, 1, 1),
        "timestamp": EPOCH_UTC,
        "timestamp_ntz": EPOCH,
    }
    if isinstance(t, S.AtomicType):
        return samples.get(t.name, 0)
    if isinstance(t, S.DecimalType):
        return Decimal(0)
    if isinstance(t, S.DayTimeIntervalType):
        return dt.timedelta(0)
    if isinstance(t, S.TimeType):
        return dt.time(0)
    return 0


def _var_payload(t: S.DataType, v: Any) -> bytes:
    if isinstance(t, S.StringLikeType) or isinstance(t, S.AtomicType) and t.name == "string":
        return str(v).encode("utf-8")
    if isinstance(t, S.AtomicType) and t.name == "binary":
        return bytes(v)
    if isinstance(t, S.AtomicType) and t.name == "interval":
        return struct.pack("<iiq", v.months, v.days, v.microseconds)
    if isinstance(t, S.AtomicType) and t.name == "variant":
        return struct.pack("<i", len(v.value)) + bytes(v.value) + bytes(v.metadata)
    if isinstance(t, S.DecimalType):
        unscaled = _unscaled(v, t.scale)
        return unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)
    if isinstance(t, S.StructType):
        return write_row(t, v)
    if isinstance(t, S.ArrayType):
        return write_array(t.element_type, v)
    if isinstance(t, S.MapType):
        pairs = list(v.items()) if isinstance(v, dict) else list(v)
        keys = write_array(t.key_type, [k for k, _ in pairs])
        values = write_array(t.value_type, [x for _, x in pairs])
        return struct.pack("<q", len(keys)) + keys + values
    raise AssertionError(f"no writer for {t}")


def write_row(schema: S.StructType, values: Any) -> bytes:
    """Encode a dict (keyed by unique names) or tuple as UnsafeRow bytes."""
    if isinstance(values, dict):
        values = tuple(values[n] for n in schema.unique_names())
    n = len(schema.fields)
    bitset_len = (n + 63) // 64 * 8
    nulls = 0
    slots = bytearray(8 * n)
    var = bytearray()
    for i, (f, v) in enumerate(zip(schema.fields, values, strict=True)):
        t = f.data_type
        if v is None or isinstance(t, S.AtomicType) and t.name == "void":
            nulls |= 1 << i
            continue
        fixed = _fixed(t, v)
        if fixed is not None:
            struct.pack_into("<" + fixed[0], slots, 8 * i, fixed[1])
            continue
        payload = _var_payload(t, v)
        offset = bitset_len + 8 * n + len(var)
        struct.pack_into("<Q", slots, 8 * i, offset << 32 | len(payload))
        if isinstance(t, S.DecimalType):  # Spark reserves 16 bytes for a big decimal
            payload = payload.ljust(16, b"\x00")
        var += _pad8(payload)
    return nulls.to_bytes(bitset_len, "little") + bytes(slots) + bytes(var)


def write_array(t: S.DataType, values: list[Any]) -> bytes:
    n = len(values)
    header = 8 + (n + 63) // 64 * 8
    size = _elem_size(t)
    elems = bytearray(n * size)
    elems_len = len(_pad8(bytes(elems)))
    nulls = 0
    var = bytearray()
    for i, v in enumerate(values):
        if v is None:
            nulls |= 1 << i
            continue
        fixed = _fixed(t, v)
        if fixed is not None:
            struct.pack_into("<" + fixed[0], elems, i * size, fixed[1])
            continue
        payload = _var_payload(t, v)
        offset = header + elems_len + len(var)
        struct.pack_into("<Q", elems, i * size, offset << 32 | len(payload))
        var += _pad8(payload)
    return (
        struct.pack("<q", n)
        + nulls.to_bytes(header - 8, "little")
        + _pad8(bytes(elems))
        + bytes(var)
    )


# -- hand-written cases ----------------------------------------------------------------------


def field(name: str, t: S.DataType) -> S.StructField:
    return S.StructField(name, t)


def test_doc_sample_row() -> None:
    # §8.4: one string field "key0" is 24 bytes.
    data = bytes.fromhex("000000000000000004000000100000006b65793000000000")
    schema = S.StructType((field("key", S.STRING),))
    assert decode_row(data, schema) == {"key": "key0"}
    assert write_row(schema, {"key": "key0"}) == data


def test_doc_sample_aggregation_value() -> None:
    data = bytes.fromhex("00000000000000000200000000000000040000000000000000295E10D70D0600")
    schema = S.StructType((field("count", S.LONG), field("sum", S.LONG), field("max", S.TIMESTAMP)))
    row = decode_row(data, schema)
    assert row["count"] == 2 and row["sum"] == 4
    assert row["max"].tzinfo is UTC and row["max"].year == 2024


def test_all_types_round_trip() -> None:
    inner = S.StructType((field("a", S.STRING), field("n", S.LONG)))
    schema = S.StructType(
        (
            field("b", S.BOOLEAN),
            field("y", S.BYTE),
            field("h", S.SHORT),
            field("i", S.INTEGER),
            field("l", S.LONG),
            field("f", S.FLOAT),
            field("d", S.DOUBLE),
            field("dec", S.DecimalType(10, 2)),
            field("big", S.DecimalType(38, 6)),
            field("s", S.STRING),
            field("c", S.StringLikeType("varchar(3)")),
            field("bin", S.BINARY),
            field("date", S.DATE),
            field("ts", S.TIMESTAMP),
            field("ntz", S.TIMESTAMP_NTZ),
            field("ym", S.YearMonthIntervalType(0, 1)),
            field("dti", S.DayTimeIntervalType(0, 3)),
            field("cal", S.CALENDAR_INTERVAL),
            field("t", S.TimeType(6)),
            field("st", inner),
            field("arr", S.ArrayType(S.INTEGER)),
            field("sarr", S.ArrayType(S.STRING)),
            field("m", S.MapType(S.STRING, S.LONG)),
            field("sm", S.MapType(inner, S.INTEGER)),
            field("nul", S.NULL),
            field("var", S.VARIANT),
            field("max", S.LONG),
            field("max", S.DATE),
        )
    )
    value = {
        "b": True,
        "y": -5,
        "h": 300,
        "i": -70000,
        "l": 2**40,
        "f": 0.5,
        "d": -1.25e300,
        "dec": Decimal("-12345678.90"),
        "big": Decimal("-12345678901234567890123456789012.345678"),
        "s": "héllo \U0001f600",
        "c": "abc",
        "bin": b"\x00\xff",
        "date": dt.date(1601, 2, 3),
        "ts": dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
        "ntz": dt.datetime(1900, 1, 1, 0, 0, 0, 1),
        "ym": -14,
        "dti": dt.timedelta(days=-3, microseconds=5),
        "cal": CalendarInterval(1, -2, 3),
        "t": dt.time(23, 59, 59, 999999),
        "st": {"a": None, "n": 7},
        "arr": [1, None, -3],
        "sarr": ["x", None, ""],
        "m": {"k": 1, "z": None},
        "sm": [({"a": "p", "n": 1}, 2)],
        "nul": None,
        "var": Variant(b"\x0c\x01", b"\x01\x00\x00"),
        "max": 1,
        "max#27": dt.date(2000, 1, 1),
    }
    assert schema.unique_names()[-2:] == ("max", "max#27")
    data = write_row(schema, value)
    assert decode_row(data, schema) == value
    as_tuple = decode_row(memoryview(data), schema, as_tuple=True)
    expected = list(value.values())
    expected[19] = (None, 7)  # nested structs are tuples too
    expected[23] = [(("p", 1), 2)]
    assert as_tuple == tuple(expected)


def test_nulls_beyond_64_fields() -> None:
    schema = S.StructType(tuple(field(f"c{i}", S.LONG) for i in range(70)))
    values = {f"c{i}": (None if i in (0, 63, 64, 69) else i) for i in range(70)}
    assert decode_row(write_row(schema, values), schema) == values


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "shorter than"),
        (b"\x00" * 8 + struct.pack("<Q", 16 << 32 | 9) + b"abc\x00\x00\x00\x00\x00", "runs past"),
        (b"\x00" * 8 + struct.pack("<Q", 0xFFFFFFF0 << 32 | 1), "runs past"),
    ],
)
def test_corrupt_string_slot(data: bytes, problem: str) -> None:
    schema = S.StructType((field("s", S.STRING),))
    with pytest.raises(FormatError, match=problem) as info:
        decode_row(data, schema, path="state/0/0/1.delta")
    assert info.value.path == "state/0/0/1.delta"


def test_huge_array_count_is_rejected_without_allocating() -> None:
    schema = S.StructType((field("a", S.ArrayType(S.BOOLEAN)),))
    array = struct.pack("<q", 2**62) + b"\x00" * 16
    data = b"\x00" * 8 + struct.pack("<Q", 16 << 32 | len(array)) + array
    with pytest.raises(FormatError, match="claims"):
        decode_row(data, schema)


def test_timestamp_out_of_python_range_is_a_format_error() -> None:
    schema = S.StructType((field("t", S.TIMESTAMP),))
    with pytest.raises(FormatError, match="outside Python"):
        decode_row(b"\x00" * 8 + struct.pack("<q", 2**62), schema)


def test_unknown_type_fails_at_compile_time() -> None:
    schema = S.StructType((field("g", S.UnknownType('"geometry"')),))
    with pytest.raises(FormatError, match="unknown"):
        make_decoder(schema)


# -- real Spark bytes ------------------------------------------------------------------------


def _hdfs_rows() -> list[tuple[bytes, bytes]]:
    """Key/value rows of the real lz4 .delta files (Appendix A framing, decoded here)."""
    import lz4.block

    out: dict[bytes, bytes] = {}
    for name in ("1.delta", "2.delta"):
        data = (DATA / "hdfs_types" / "store" / name).read_bytes()
        plain, pos = bytearray(), 0
        while pos < len(data):
            assert data[pos : pos + 8] == b"LZ4Block"
            method = data[pos + 8] & 0xF0
            clen, dlen, _check = struct.unpack_from("<iii", data, pos + 9)
            pos += 21
            payload = data[pos : pos + clen]
            pos += clen
            if method == 0x10:
                plain += payload
            else:
                plain += lz4.block.decompress(payload, uncompressed_size=dlen)
        pos = 0
        while True:
            (klen,) = struct.unpack_from(">i", plain, pos)
            pos += 4
            if klen == -1:
                break
            key = bytes(plain[pos : pos + klen])
            pos += klen
            (vlen,) = struct.unpack_from(">i", plain, pos)
            pos += 4
            out[key] = bytes(plain[pos : pos + vlen])
            pos += vlen
    return list(out.items())


def to_json_value(v: Any) -> Any:
    """The conversion the generator applied to Spark's rows (tests/formats/data_rows/README)."""
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(UTC).replace(tzinfo=None)
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): to_json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [to_json_value(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def canonical(rows: list[Any]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def spark_rows(path: Path) -> list[str]:
    return canonical([json.loads(line) for line in path.read_text().splitlines() if line])


def test_real_hdfs_delta_rows_equal_spark_statestore() -> None:
    store = DATA / "hdfs_types" / "store"
    schema = parse_state_schema("schema", (store / "_metadata" / "schema").read_bytes())
    key_dec = make_decoder(schema.key, as_tuple=True)
    value_dec = make_decoder(schema.value, as_tuple=True)
    rows = [to_json_value([key_dec(k), value_dec(v), 0]) for k, v in _hdfs_rows() if v is not None]
    assert canonical(rows) == spark_rows(DATA / "hdfs_types" / "statestore.jsonl")
    assert len(rows) == 4


# -- property-based: writer -> decoder round trip, and fuzzing ------------------------------

_ATOMIC_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "boolean": st.booleans(),
    "byte": st.integers(-(2**7), 2**7 - 1),
    "short": st.integers(-(2**15), 2**15 - 1),
    "integer": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "string": st.text(max_size=20),
    "binary": st.binary(max_size=20),
    "date": st.dates(),
    "timestamp": st.datetimes(timezones=st.just(UTC)),
    "timestamp_ntz": st.datetimes(),
    "interval": st.builds(
        CalendarInterval,
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-(2**63), 2**63 - 1),
    ),
}

atomic_types: st.SearchStrategy[S.DataType] = st.sampled_from(
    [S.AtomicType(n) for n in _ATOMIC_STRATEGIES]
    + [S.DecimalType(10, 2), S.DecimalType(18, 0), S.DecimalType(25, 5), S.DecimalType(38, 38)]
    + [S.YearMonthIntervalType(), S.DayTimeIntervalType(), S.NULL]
)


def _extend(children: st.SearchStrategy[S.DataType]) -> st.SearchStrategy[S.DataType]:
    return st.one_of(
        st.builds(S.ArrayType, children),
        st.builds(S.MapType, atomic_types.filter(lambda t: t != S.NULL), children),
        st.builds(S.MapType, structs(atomic_types, 2), children),
        structs(children, 3),
    )


def structs(
    children: st.SearchStrategy[S.DataType], max_size: int
) -> st.SearchStrategy[S.StructType]:
    return st.lists(children, max_size=max_size).map(
        lambda ts: S.StructType(tuple(field(f"f{i % 3}", t) for i, t in enumerate(ts)))
    )


data_types = st.recursive(atomic_types, _extend, max_leaves=8)
row_schemas = structs(data_types, 6)


def _hashable(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(v.items())
    return v


def values_for(t: S.DataType) -> st.SearchStrategy[Any]:
    if isinstance(t, S.AtomicType):
        if t.name == "void":
            return st.none()
        return _ATOMIC_STRATEGIES[t.name]
    if isinstance(t, S.DecimalType):
        bound = 10**t.precision - 1
        return st.integers(-bound, bound).map(lambda u: Decimal(u).scaleb(-t.scale, WIDE))
    if isinstance(t, S.YearMonthIntervalType):
        return st.integers(-(2**31), 2**31 - 1)
    if isinstance(t, S.DayTimeIntervalType):
        days = dt.timedelta(days=10**8)  # within an int64 of microseconds
        return st.timedeltas(-days, days)
    if isinstance(t, S.StructType):
        return st.tuples(*(st.none() | values_for(f.data_type) for f in t.fields)).map(
            lambda vs: dict(zip(t.unique_names(), vs, strict=True))
        )
    if isinstance(t, S.ArrayType):
        return st.lists(st.none() | values_for(t.element_type), max_size=4)
    if isinstance(t, S.MapType):
        values = st.none() | values_for(t.value_type)
        if isinstance(t.key_type, S.StructType):
            return st.lists(st.tuples(values_for(t.key_type), values), max_size=3)
        return st.dictionaries(values_for(t.key_type), values, max_size=3)
    raise AssertionError(t)


@st.composite
def schema_and_value(draw: st.DrawFn) -> tuple[S.StructType, dict[str, Any]]:
    schema = draw(row_schemas)
    return schema, draw(values_for(schema))


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(schema_and_value())
def test_round_trip(case: tuple[S.StructType, dict[str, Any]]) -> None:
    schema, value = case
    data = write_row(schema, value)
    assert len(data) % 8 == 0
    assert decode_row(data, schema) == value
    # Spark accepts (and sometimes leaves) bytes after the row's data.
    assert decode_row(data + b"\x00" * 8, schema) == value


def _decode_or_format_error(data: bytes, schema: S.StructType) -> None:
    with contextlib.suppress(FormatError):
        decode_row(data, schema)


@FAST
@given(row_schemas, st.binary(max_size=200))
def test_arbitrary_bytes_give_values_or_format_error(schema: S.StructType, data: bytes) -> None:
    _decode_or_format_error(data, schema)


@FAST
@given(schema_and_value(), st.data())
def test_mutated_rows_give_values_or_format_error(
    case: tuple[S.StructType, dict[str, Any]], data: st.DataObject
) -> None:
    schema, value = case
    raw = bytearray(write_row(schema, value))
    if raw:
        for _ in range(data.draw(st.integers(1, 4))):
            pos = data.draw(st.integers(0, len(raw) - 1))
            raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    _decode_or_format_error(bytes(raw[:cut]), schema)
    _decode_or_format_error(bytes(raw), schema)


flat_schemas = structs(atomic_types, 8)


def _outcome(decode: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "value", decode(data, 0, len(data))
    except Exception as exc:  # the general decoder's internal error type
        return "error", str(exc)


@FAST
@given(flat_schemas, st.data())
def test_generated_flat_decoder_equals_general_decoder(
    schema: S.StructType, data: st.DataObject
) -> None:
    """The generated fast path gives the general decoder's value or error on any bytes."""
    for as_tuple in (False, True):
        general = unsaferow._compile_struct(schema, as_tuple)
        fast = unsaferow._compile_flat_struct(schema, as_tuple, general)
        if fast is None:
            return
        values = data.draw(values_for(schema))
        raw = bytearray(write_row(schema, values))
        if raw and data.draw(st.booleans()):
            pos = data.draw(st.integers(0, len(raw) - 1))
            raw[pos] = data.draw(st.integers(0, 255))
        for row in (bytes(raw), bytes(raw[: data.draw(st.integers(0, len(raw)))])):
            assert repr(_outcome(fast, row)) == repr(_outcome(general, row))  # NaN-safe
