"""The compiled replay kernel (``ckpt_cli/_kernel.c``) against its reference, the numpy/Arrow
path: the same merged records and the same bytes of JSON lines and CSV on every fixture's
stores, on random schemas and rows, and on damaged records and rows (where the kernel gives
either the reference's bytes or None, never other bytes); floats printed as repr, orjson and
Arrow print them.

Without the kernel built these tests skip, except where ``CKPT_REQUIRE_KERNEL=1`` (CI), where
that is a failure."""

from __future__ import annotations

import datetime
import json
import math
import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_cli.core import kernel
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.record_frames import frame
from ckpt_cli.formats.state_schema import StateSchema
from ckpt_cli.replay import read_state
from ckpt_cli.replay.csv_arrow import CsvSchema, schema_of
from ckpt_cli.state import bulk
from ckpt_cli.state.bulk import Packed, last_per_key, packed_batches
from ckpt_cli.state.columns import Columnar, columnar_for
from ckpt_cli.state.decoders import RowDecoder
from tests.conftest import CASES, CASES_DIR
from tests.formats.test_sst import _options, _write_db
from tests.formats.test_unsaferow import atomic_types, field, values_for, write_row

pa = pytest.importorskip("pyarrow")

# More under the sanitizers (tests/test_kernel_sanitized.py).
EXAMPLES = int(os.environ.get("CKPT_KERNEL_EXAMPLES", "80"))
PROPERTY = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.fixture(autouse=True)
def _kernel_built() -> Iterator[None]:
    if kernel.load() is None:
        reason = kernel.missing() or "no kernel"
        if os.environ.get("CKPT_REQUIRE_KERNEL") == "1":
            pytest.fail(f"{reason} (CKPT_REQUIRE_KERNEL=1)")
        pytest.skip(reason)
    yield


# -- schemas and rows ------------------------------------------------------------------------


def _columnar_type(t: S.DataType) -> bool:
    if isinstance(t, S.DecimalType):
        return t.precision <= 18
    return not (isinstance(t, S.AtomicType) and t.name == "interval")


def _nest(children: st.SearchStrategy[S.DataType]) -> st.SearchStrategy[S.DataType]:
    return st.one_of(st.builds(S.ArrayType, children), _structs(children, 3))


def _structs(children: st.SearchStrategy[S.DataType], size: int) -> st.SearchStrategy[Any]:
    # Names that repeat (f0, f0_1 ...) and need JSON escapes.
    names = st.sampled_from(["f0", "f1", 'q"t', "ü", "a\\b", "tab\t"])
    return st.lists(st.tuples(names, children), max_size=size).map(
        lambda fs: S.StructType(tuple(field(n, t) for n, t in fs))
    )


types = st.recursive(atomic_types.filter(_columnar_type), _nest, max_leaves=8)
schemas = _structs(types, 5)


def _has_array(*types: S.DataType) -> bool:
    """Whether an array is anywhere in ``types`` (the kernel leaves their columns to Arrow)."""
    for t in types:
        while isinstance(t, S.UserDefinedType):
            t = t.sql_type
        if isinstance(t, S.ArrayType):
            return True
        if isinstance(t, S.StructType) and _has_array(*(f.data_type for f in t.fields)):
            return True
    return False


def _has_non_finite(t: S.DataType, v: Any) -> bool:
    """Whether a value holds an infinite float (the reference path writes it its own way)."""
    if v is None:
        return False
    if isinstance(t, S.StructType):
        return any(
            _has_non_finite(f.data_type, v.get(n))
            for n, f in zip(t.unique_names(), t.fields, strict=True)
        )
    if isinstance(t, S.ArrayType):
        return any(_has_non_finite(t.element_type, x) for x in v)
    return isinstance(v, float) and not math.isfinite(v)


def _decoder(key: S.StructType, value: S.StructType, provider: str) -> RowDecoder:
    return RowDecoder(StateSchema(key, value, 2), provider)


def _record(row: bytes, provider: str, junk: bool) -> bytes:
    if provider == "rocksdb":
        return b"\x00" + row  # the encoding version byte
    return row + b"junk" if junk else row  # Spark < 2.3's 4 bytes after a value


def _reference_csv(columnar: Columnar, schema: CsvSchema, pid: int, batch: Packed) -> bytes:
    return schema.csv(columnar.table(pid, batch))


def _texts(columnar: Columnar, pid: int, batch: Packed) -> tuple[Any, Any]:
    fmt = columnar.kernel
    assert fmt is not None  # every columnar store has the kernel's text
    return fmt.jsonl(pid, batch), fmt.csv(pid, batch)


def _ids(pid: int, batch: Packed) -> Any:
    return pa.array([pid] * len(batch), pa.int64())


def _kernel_table(columnar: Columnar, pid: int, batch: Packed) -> Any:
    """The kernel's table of a batch (None where it hands the batch back), checked whole."""
    fmt = columnar.kernel
    assert fmt is not None
    made = fmt.arrays(batch, columnar.key_type, columnar.value_type)
    if made is None:
        return None
    table = pa.Table.from_arrays([_ids(pid, batch), *made], schema=columnar.arrow_schema)
    table.validate(full=True)
    return table


def _same_table(found: Any, expected: Any) -> None:
    assert found.schema == expected.schema
    assert found.to_pylist() == expected.to_pylist()
    assert found.equals(expected)


@PROPERTY
@given(schemas, schemas, st.sampled_from(["hdfs", "rocksdb"]), st.data())
def test_random_schemas_give_the_references_bytes(
    key: S.StructType, value: S.StructType, provider: str, data: st.DataObject
) -> None:
    decoder = _decoder(key, value, provider)
    columnar = columnar_for(decoder)
    assert columnar is not None
    csv_schema = schema_of(decoder)
    assert csv_schema is not None
    rows = data.draw(st.lists(st.tuples(values_for(key), values_for(value)), max_size=6))
    junk = data.draw(st.booleans())
    batch = Packed.of(
        [
            (
                _record(write_row(key, k), provider, False),
                _record(write_row(value, v), provider, junk),
            )
            for k, v in rows
        ]
    )
    lines, csv = _texts(columnar, 3, batch)
    vouched = not any(_has_non_finite(key, k) or _has_non_finite(value, v) for k, v in rows)
    assert (lines is not None) == vouched
    if lines is not None:
        assert lines == columnar.reference_line_bytes(3, batch)
    # Arrow columns: every schema without arrays (non-finite floats are values there).
    table = _kernel_table(columnar, 3, batch)
    assert (table is not None) == (not _has_array(key, value))
    if table is not None:
        _same_table(table, columnar.reference_table(_ids(3, batch), batch))
    # CSV: where two columns flatten to one name csv_arrow is left to itself.
    if csv is not None:
        assert csv == _reference_csv(columnar, csv_schema, 3, batch)
    elif vouched:
        names = csv_schema.header
        assert len(set(names)) < len(names)


def _mutated(data: bytes, cuts: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for at, byte in cuts:
        if out:
            out[at % len(out)] = byte
    return bytes(out)


@PROPERTY
@given(schemas, st.sampled_from(["hdfs", "rocksdb"]), st.data())
def test_damaged_rows_give_the_references_bytes_or_none(
    value: S.StructType, provider: str, data: st.DataObject
) -> None:
    """Bytes changed, cut or added: the kernel gives the reference's text or hands the batch
    back (never other text); where the reference fails, it hands it back."""
    key = S.StructType((field("k", S.LONG),))
    decoder = _decoder(key, value, provider)
    columnar = columnar_for(decoder)
    csv_schema = schema_of(decoder)
    assert columnar is not None and csv_schema is not None
    rows = data.draw(st.lists(values_for(value), min_size=1, max_size=4))
    pairs = []
    for i, v in enumerate(rows):
        row = _record(write_row(value, v), provider, False)
        cuts = data.draw(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255))))
        row = _mutated(row, cuts)
        size = data.draw(st.sampled_from([len(row), len(row) // 2, len(row) + 8, 0]))
        pairs.append((_record(write_row(key, {"k": i}), provider, False), row[:size]))
    batch = Packed.of(pairs)
    lines, csv = _texts(columnar, 0, batch)
    try:
        reference = columnar.reference_line_bytes(0, batch)
    except FormatError:
        assert lines is None
    else:
        assert lines is None or lines == reference
    table = _kernel_table(columnar, 0, batch)
    try:
        expected = columnar.reference_table(_ids(0, batch), batch)
    except FormatError:
        assert table is None
    else:
        if table is not None:
            _same_table(table, expected)
    try:
        reference = _reference_csv(columnar, csv_schema, 0, batch)
    except FormatError:
        assert csv is None
    else:
        assert csv is None or csv == reference


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_columns_of_nulls_between_values(provider: str) -> None:
    """Nulls after values in every kind of column (a string's offsets stay where they were,
    a null struct's fields are null, booleans are bits), as the reference's table has them."""
    inner = S.StructType((field("s", S.STRING), field("t", S.TIMESTAMP)))
    value = S.StructType(
        (
            field("s", S.STRING),
            field("b", S.BOOLEAN),
            field("n", S.INTEGER),
            field("d", S.DOUBLE),
            field("day", S.DATE),
            field("hex", S.BINARY),
            field("in", inner),
            field("v", S.NULL),
        )
    )
    key = S.StructType((field("k", S.LONG),))
    at = datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc)
    full: dict[str, Any] = {
        "s": "abc",
        "b": True,
        "n": -7,
        "d": 1.5,
        "day": datetime.date(2024, 2, 29),
        "hex": b"\x01\xff",
        "in": {"s": "ü", "t": at},
        "v": None,
    }
    empty = dict.fromkeys(full)
    half = full | {"s": None, "b": False, "in": {"s": None, "t": at}}
    rows = [full, empty, half, full, empty, full | {"in": None}, full]
    decoder = _decoder(key, value, provider)
    columnar = columnar_for(decoder)
    assert columnar is not None
    batch = Packed.of(
        [
            (
                _record(write_row(key, {"k": i}), provider, False),
                _record(write_row(value, v), provider, False),
            )
            for i, v in enumerate(rows)
        ]
    )
    table = _kernel_table(columnar, 1, batch)
    assert table is not None
    _same_table(table, columnar.reference_table(_ids(1, batch), batch))
    assert table.column("value").combine_chunks().field("in").null_count == 3


def test_columns_whose_first_strings_are_empty() -> None:
    """Empty strings and binary before any text in their column (a column's text has no
    memory yet then; the sanitizer build checks nothing is copied from or to none)."""
    key = S.StructType((field("k", S.LONG),))
    value = S.StructType((field("s", S.STRING), field("b", S.BINARY)))
    decoder = _decoder(key, value, "hdfs")
    columnar = columnar_for(decoder)
    assert columnar is not None
    rows = [{"s": "", "b": b""}, {"s": "", "b": b"\x01"}, {"s": "x", "b": b""}]
    batch = Packed.of([(write_row(key, {"k": i}), write_row(value, v)) for i, v in enumerate(rows)])
    table = _kernel_table(columnar, 0, batch)
    _same_table(table, columnar.reference_table(_ids(0, batch), batch))


def test_dates_whose_days_share_a_slot_of_the_kernels_cache() -> None:
    """Days 1,024 apart share a slot of the kernel's cache of dates' text: each is written
    as its own (JSON lines, CSV, Arrow columns)."""
    key = S.StructType((field("k", S.LONG),))
    value = S.StructType((field("t", S.TIMESTAMP), field("d", S.DATE)))
    decoder = _decoder(key, value, "hdfs")
    columnar = columnar_for(decoder)
    csv_schema = schema_of(decoder)
    assert columnar is not None and csv_schema is not None
    first = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
    days = [0, 1024, 0, 2048, 1024, 1, 1025]
    rows = [
        {
            "t": first + datetime.timedelta(days=d, seconds=i),
            "d": (first + datetime.timedelta(days=d)).date(),
        }
        for i, d in enumerate(days)
    ]
    batch = Packed.of([(write_row(key, {"k": i}), write_row(value, v)) for i, v in enumerate(rows)])
    lines, csv = _texts(columnar, 0, batch)
    assert lines == columnar.reference_line_bytes(0, batch)
    assert csv == _reference_csv(columnar, csv_schema, 0, batch)
    table = _kernel_table(columnar, 0, batch)
    _same_table(table, columnar.reference_table(_ids(0, batch), batch))


def test_what_the_kernel_hands_back() -> None:
    """Values the reference writes its own way, and rows it cannot vouch for: None, and
    replay's text is then the reference's."""
    key = S.StructType((field("k", S.STRING),))
    value = S.StructType((field("d", S.DOUBLE), field("day", S.DATE), field("ts", S.TIMESTAMP)))
    columnar = columnar_for(_decoder(key, value, "hdfs"))
    assert columnar is not None and columnar.kernel is not None
    good = {"d": 1.5, "day": None, "ts": None}

    def batch(k: bytes, v: bytes) -> Packed:
        return Packed.of([(write_row(key, {"k": "a"}), write_row(value, good)), (k, v)])

    ok = batch(write_row(key, {"k": "ü"}), write_row(value, good))
    assert columnar.kernel.jsonl(0, ok) == columnar.reference_line_bytes(0, ok)
    year_0 = bytearray(write_row(value, good))
    year_0[0] = 0b010  # day null, ts not null: a microsecond before year 1
    year_0[24:32] = struct.pack("<q", -62135596800000000 - 1)
    invalid_utf8 = write_row(key, {"k": "ab"}).replace(b"ab", b"a\xff")
    for k, v in [
        (write_row(key, {"k": "x"}), write_row(value, {**good, "d": math.inf})),
        (write_row(key, {"k": "x"}), bytes(year_0)),
        (invalid_utf8, write_row(value, good)),
        (write_row(key, {"k": "x"})[:8], write_row(value, good)),  # shorter than its slots
    ]:
        damaged = batch(k, v)
        assert columnar.kernel.jsonl(0, damaged) is None
        assert columnar.kernel.csv(0, damaged) is None
        # replay's text, or error, is the reference's
        assert _outcome(columnar.line_bytes, damaged) == _outcome(
            columnar.reference_line_bytes, damaged
        )


def test_each_length_and_offset_is_checked() -> None:
    """A string running past its row (or into an HDFS value's 4 junk bytes), an array of
    more elements than its bytes, a nested row shorter than its slots: the reference fails
    on each, and the kernel hands each back."""
    key = S.StructType((field("k", S.LONG),))
    inner = S.StructType((field("x", S.LONG), field("y", S.LONG)))
    value = S.StructType((field("s", S.STRING), field("a", S.ArrayType(S.LONG)), field("n", inner)))
    columnar = columnar_for(_decoder(key, value, "hdfs"))
    assert columnar is not None and columnar.kernel is not None
    good = write_row(value, {"s": "abcdefgh", "a": [5, 6], "n": {"x": 1, "y": 2}})
    slots = [struct.unpack_from("<q", good, 8 + 8 * i)[0] for i in range(3)]
    (s_at, s_size), (a_at, _), (n_at, _) = ((w >> 32, w & 0xFFFFFFFF) for w in slots)
    empty = write_row(value, {"s": "abcdefgh", "a": [], "n": {"x": 1, "y": 2}})
    empty_at = struct.unpack_from("<q", empty, 16)[0] >> 32

    def word(row: bytes, at: int, value: int) -> bytes:
        return row[:at] + struct.pack("<q", value) + row[at + 8 :]

    damaged = [
        word(good, 8, s_at << 32 | (len(good) - s_at + 1)),  # past the row
        word(good, 8, (len(good) + 8) << 32 | 0),  # starts past the row
        # its string ends in the 4 bytes Spark < 2.3 added after a value
        word(good, 8, s_at << 32 | (len(good) - s_at + 4)) + b"junk",
        word(good, a_at, 2**40),  # more elements than bytes
        word(good, a_at, -1),
        word(good, a_at, 2**61),
        # header + count * 8 wraps around 2^64 to 16 bytes: only the count's own bound
        # (at most one element a byte) stops it
        word(good, a_at, 2270368501379637122),
        word(empty, 16, empty_at << 32 | 4),  # no room for its element count (0)
        word(good, 24, n_at << 32 | 8),  # shorter than its null bits and two slots
    ]
    assert good.count(b"abcdefgh") == 1 and s_size == 8
    k = write_row(key, {"k": 1})
    ok = Packed.of([(k, good)])
    assert columnar.kernel.jsonl(0, ok) == columnar.reference_line_bytes(0, ok)
    for row in damaged:
        batch = Packed.of([(k, good), (k, row)])
        with pytest.raises(FormatError):
            columnar.reference_line_bytes(0, batch)
        assert columnar.kernel.jsonl(0, batch) is None
        assert columnar.kernel.csv(0, batch) is None


def _outcome(lines: Any, batch: Packed) -> tuple[str, Any]:
    try:
        return "text", lines(0, batch)
    except FormatError as exc:
        return "error", str(exc)


TRICKY = S.StructType(
    (
        field("dt", S.DayTimeIntervalType()),
        field("small", S.DecimalType(18, 18)),
        field("mid", S.DecimalType(18, 9)),
        field("whole", S.DecimalType(18, 0)),
        field("ym", S.YearMonthIntervalType()),
        field("b", S.BYTE),
        field("s", S.SHORT),
        field("day", S.DATE),
        field("ts", S.TIMESTAMP_NTZ),
        field("bin", S.BINARY),
    )
)
_US = 86_400_000_000


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.sampled_from(
        [0, 1, -1, _US, -_US, 2 * _US, -2 * _US, _US - 1, -_US + 1, 2**63 - 1, -(2**63)]
    )
    | st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 10**17, -(10**17), 10**18 - 1, -(2**63), 2**63 - 1, 100, 5])
    | st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([-719162, 2932896, 0, -1]) | st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=8),
)
def test_intervals_decimals_dates_and_hex_give_the_references_bytes(
    us: int, unscaled: int, day: int, blob: bytes
) -> None:
    columnar = columnar_for(_decoder(S.StructType((field("k", S.LONG),)), TRICKY, "hdfs"))
    csv_schema = schema_of(columnar.decoder) if columnar is not None else None
    assert columnar is not None and csv_schema is not None
    values: dict[str, Any] = dict.fromkeys(TRICKY.unique_names())
    row = bytearray(write_row(TRICKY, {**values, "bin": blob}))  # the slots then overwritten
    row[:8] = bytes(8)  # none null
    narrow = [unscaled % 2**31 - 2**30, us % 256 - 128, us % 2**16 - 2**15]
    for i, raw in enumerate([us, unscaled, unscaled, unscaled, *narrow, day, us]):
        row[8 + 8 * i : 16 + 8 * i] = struct.pack("<q", raw)
    batch = Packed.of([(write_row(columnar.schema.key, {"k": 1}), bytes(row))])
    lines, csv = _texts(columnar, 0, batch)
    if lines is None:  # a date or time outside years 1-9999, as the reference finds
        with pytest.raises((FormatError, ValueError, OverflowError)):
            columnar.reference_line_bytes(0, batch)
        return
    assert lines == columnar.reference_line_bytes(0, batch)
    assert csv == _reference_csv(columnar, csv_schema, 0, batch)


@settings(max_examples=2 * EXAMPLES, deadline=None)
@given(
    st.binary(max_size=12)
    | st.sampled_from(
        [b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\x9f\xbf", b"\xf4\x90\x80\x80"]
        + [b"\xf4\x8f\xbf\xbf", b"\xe2\x82", b"\xf0\x9f\x98\x80", bytes(range(32)) + b'"\\']
    )
)
def test_strings_are_valid_utf8_or_handed_back(text: bytes) -> None:
    key = S.StructType((field("k", S.STRING),))
    value = S.StructType((field("v", S.ArrayType(S.STRING)),))
    columnar = columnar_for(_decoder(key, value, "hdfs"))
    csv_schema = schema_of(columnar.decoder) if columnar is not None else None
    assert columnar is not None and csv_schema is not None
    k = bytearray(write_row(key, {"k": "x" * len(text)}))
    k[16 : 16 + len(text)] = text
    batch = Packed.of([(bytes(k), write_row(value, {"v": ["a", None]}))])
    lines, csv = _texts(columnar, 0, batch)
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        assert lines is None and csv is None
        return
    assert lines == columnar.reference_line_bytes(0, batch)
    assert csv == _reference_csv(columnar, csv_schema, 0, batch)


def test_text_that_outgrows_its_room_is_whole() -> None:
    """A batch's text is given room by the store's last batch (64 bytes a row at first):
    batches longer and shorter than the last one, from one row to many, each come out whole
    (a batch that outgrows its room goes on in other memory and is copied at the end)."""
    key = S.StructType((field("k", S.STRING),))
    value = S.StructType((field("v", S.LONG),))
    columnar = columnar_for(_decoder(key, value, "hdfs"))
    csv_schema = schema_of(columnar.decoder) if columnar is not None else None
    assert columnar is not None and csv_schema is not None
    assert columnar_for(columnar.decoder) is columnar  # one per decoder: the room is kept
    for rows, width in [(1, 500), (300, 3), (300, 400), (2, 5), (1000, 150), (50, 3000)]:
        batch = Packed.of(
            [
                (write_row(key, {"k": "k" * width + str(i)}), write_row(value, {"v": i}))
                for i in range(rows)
            ]
        )
        lines, csv = _texts(columnar, 7, batch)
        assert lines == columnar.reference_line_bytes(7, batch)
        assert csv == _reference_csv(columnar, csv_schema, 7, batch)


# -- floats ---------------------------------------------------------------------------------


@settings(max_examples=5 * EXAMPLES, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(0, 2**64 - 1).map(lambda bits: struct.unpack("<d", struct.pack("<Q", bits))[0])
)
def test_floats_print_as_repr_orjson_and_arrow_print_them(x: float) -> None:
    K = kernel.load()
    if not math.isfinite(x):
        assert K.float_text(x, 0) is None
        return
    assert K.float_text(x, 0) == repr(x)
    assert K.float_text(x, 1) == orjson.dumps(x).decode()
    assert K.float_text(x, 2) == pa.array([x]).cast(pa.string())[0].as_py()


def test_floats_either_side_of_each_notation_switch() -> None:
    """Each printer's switch between fixed and exponent notation, and its neighbours."""
    K = kernel.load()
    values = [
        sign * m * 10.0**k
        for k in range(-26, 26)
        for m in (1, 1.5, 9.999999999999999, 1.2345678901234567)
        for sign in (1, -1)
    ]
    arrow = pa.array(values).cast(pa.string()).to_pylist()
    for x, a in zip(values, arrow, strict=True):
        assert (K.float_text(x, 0), K.float_text(x, 1), K.float_text(x, 2)) == (
            repr(x),
            orjson.dumps(x).decode(),
            a,
        )


# -- framing and merging ----------------------------------------------------------------------

_INT = struct.Struct(">i")
keys = st.sampled_from([b"", b"a", b"k1", b"k2" * 4, b"\x00" * 8, b"\x00" * 9, b"x" * 17])
values = st.none() | st.binary(max_size=12)


def _file(records: Sequence[tuple[bytes, bytes | None]], end: int = -1) -> bytes:
    out = bytearray()
    for k, v in records:
        out += _INT.pack(len(k)) + k
        out += _INT.pack(-1) if v is None else _INT.pack(len(v)) + v
    return bytes(out + _INT.pack(end))


def _reference_merge(data: bytes, segments: list[tuple[int, int, bool]], dedupe: bool) -> Any:
    """``bulk._merged``'s numpy merge of the same segments (each framed as the file it is)."""
    framed = []
    for start, end, snapshot in segments:
        records = frame(data[:end], snapshot, start)
        if records is None:
            return None
        framed.append(records)
    if not framed:
        return []
    at, key_sizes, value_sizes = (np.concatenate(c) for c in zip(*framed, strict=True))
    merged: Packed | None = Packed(data, at + 4, key_sizes, at + 8 + key_sizes, value_sizes)
    if dedupe:
        merged = last_per_key(merged)  # type: ignore[arg-type]
    assert merged is not None  # no two of these few keys hash alike
    return _records(merged)


def _records(packed: Packed) -> list[tuple[bytes, bytes | None]]:
    data = bytes(packed.data)
    return [
        (data[k : k + ks], None if vs < 0 else data[v : v + vs])
        for k, ks, v, vs in zip(
            packed.key_offsets.tolist(),
            packed.key_sizes.tolist(),
            packed.value_offsets.tolist(),
            packed.value_sizes.tolist(),
            strict=True,
        )
    ]


def _kernel_merge(data: bytes, segments: list[tuple[int, int, bool]], dedupe: bool) -> Any:
    buf = bytearray(data)
    merged = kernel.merge(buf, segments, dedupe=dedupe)
    return None if merged is None else _records(bulk.kernel_packed(buf, merged))


damages = st.lists(
    st.tuples(st.integers(0, 1 << 12), st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x01])),
    max_size=3,
)


@PROPERTY
@given(
    st.lists(st.lists(st.tuples(keys, values), max_size=12), min_size=1, max_size=4),
    st.booleans(),
    st.data(),
)
def test_merges_equal_the_numpy_merge(
    files: list[list[tuple[bytes, bytes | None]]], snapshot: bool, data: st.DataObject
) -> None:
    """Files of puts and removes (the first a snapshot, or not), intact or damaged (bytes
    changed, cut short, another end marker): the same records, or both None."""
    damaged = data.draw(st.booleans())
    buf, segments = b"", []
    for i, records in enumerate(files):
        is_snapshot = snapshot and i == 0
        if is_snapshot:
            records = [(k, v if v is not None else b"") for k, v in records]
        body = _file(records, data.draw(st.sampled_from([-1, -1, -2])) if damaged else -1)
        if damaged:
            body = _mutated(body, data.draw(damages))
            body = (
                body[: data.draw(st.integers(0, len(body)))] if data.draw(st.booleans()) else body
            )
        segments.append((len(buf), len(buf) + len(body), is_snapshot))
        buf += body + (b"trailing" if damaged else b"")
    dedupe = not (snapshot and len(files) == 1)
    expected = _reference_merge(buf, segments, dedupe)
    got = _kernel_merge(buf, segments, dedupe)
    assert got == expected
    if not damaged:
        assert got is not None


def test_keys_whose_hashes_collide() -> None:
    """Every key hashed alike: told apart byte for byte; past MAX_PROBE of them the merge is
    handed back (the streamed merge then does it), never slowed to a crawl."""
    K = kernel.load()
    few = [(b"k%d" % (i % 50), b"v%d" % i) for i in range(200)]
    many = [(b"k%d" % i, b"v") for i in range(K.MAX_PROBE + 2)]
    try:
        K._hash_bits(0)
        data = _file(few)
        assert _kernel_merge(data, [(0, len(data), False)], True) == _reference_merge(
            data, [(0, len(data), False)], True
        )
        data = _file(many)
        assert _kernel_merge(data, [(0, len(data), False)], True) is None
        assert _kernel_merge(data, [(0, len(data), False)], False) is not None  # not merged
    finally:
        K._hash_bits(2**64 - 1)


@PROPERTY
@given(st.lists(st.tuples(keys, values), max_size=20), st.lists(keys, max_size=20))
def test_lookup_finds_each_changed_key(
    changes: list[tuple[bytes, bytes | None]], probes: list[bytes]
) -> None:
    data = bytearray(b"head" + _file(changes))
    merged = kernel.load().merge(data, [(4, len(data), False)], True, True)
    assert merged is not None
    ids = {k: i for i, (k, _) in enumerate(_records(bulk.kernel_packed(data, merged)))}
    batch = Packed.of([(k, b"") for k in probes])
    found = np.frombuffer(merged.lookup(batch.data, batch.key_offsets, batch.key_sizes), np.int64)
    assert found.tolist() == [ids.get(k, -1) for k in probes]
    used = np.frombuffer(merged.used, np.bool_)
    assert sorted(np.flatnonzero(used).tolist()) == sorted({ids[k] for k in probes if k in ids})


@pytest.mark.parametrize("collide", [False, True])
@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 100])
def test_lookup_of_more_keys_than_it_hashes_ahead(n: int, collide: bool) -> None:
    """The lookup hashes keys ahead of the one it probes (and prefetches their slots): every
    key still finds its own id, whatever the count around that window, and with every hash
    alike."""
    K = kernel.load()
    changes = [(b"k%d" % i, b"v%d" % i) for i in range(0, 120, 3)]
    probes = [b"k%d" % i for i in range(n)]
    try:
        if collide:
            K._hash_bits(0)
        data = bytearray(b"head" + _file(changes))
        merged = K.merge(data, [(4, len(data), False)], True, True)
        assert merged is not None
        ids = {k: i for i, (k, _) in enumerate(_records(bulk.kernel_packed(data, merged)))}
        batch = Packed.of([(k, b"") for k in probes])
        found = np.frombuffer(
            merged.lookup(batch.data, batch.key_offsets, batch.key_sizes), np.int64
        )
        assert found.tolist() == [ids.get(k, -1) for k in probes]
    finally:
        K._hash_bits(2**64 - 1)


@pytest.mark.parametrize("bad_at", [0, 5, 16, 17, 40])
def test_a_lookup_key_outside_its_buffer_is_refused_wherever_it_is(bad_at: int) -> None:
    data = bytearray(b"head" + _file([(b"k1", b"v")]))
    merged = kernel.load().merge(data, [(4, len(data), False)], True, True)
    batch = Packed.of([(b"k%d" % i, b"") for i in range(50)])
    offsets = np.array(batch.key_offsets, dtype=np.int64)
    offsets[bad_at] = len(batch.data)  # a key that runs past the end
    with pytest.raises(ValueError, match="outside its buffer"):
        merged.lookup(batch.data, offsets, batch.key_sizes)


# -- the fixtures ---------------------------------------------------------------------------


def _columnar_stores(root: Path) -> Iterator[tuple[Any, Columnar]]:
    ckpt = Checkpoint.open(str(root))
    for op in ckpt.operators.values():
        for name in op.stores:
            try:
                rows = read_state(str(root), operator=op.id, store=name)
            except Exception:  # noqa: BLE001 - stores a plain read refuses (state variables...)
                continue
            columnar = columnar_for(rows.decoder) if rows.state_var is None else None
            if columnar is not None:
                yield rows, columnar


@pytest.mark.skipif(not CASES, reason="no fixtures")
@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_fixture_stores_give_the_references_records_and_bytes(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every columnar store of every fixture (at most 3 partitions each): the kernel's merged
    records are the numpy merge's, its JSON lines and CSV the reference's bytes."""
    root = CASES_DIR / case / "checkpoint"
    for rows, columnar in _columnar_stores(root):
        csv_schema = schema_of(rows.decoder)
        assert csv_schema is not None
        for plan in rows.plans[:3]:
            with monkeypatch.context() as m:
                m.setattr(kernel, "ENABLED", False)
                expected = [p for b in packed_batches(rows.ckpt, plan) for p in b.pairs()]
            batches = list(packed_batches(rows.ckpt, plan))
            assert [p for b in batches for p in b.pairs()] == expected
            for batch in batches:
                lines, csv = _texts(columnar, plan.partition, batch)
                assert lines == columnar.reference_line_bytes(plan.partition, batch)
                assert csv == _reference_csv(columnar, csv_schema, plan.partition, batch)
                table = _kernel_table(columnar, plan.partition, batch)
                expected = columnar.reference_table(_ids(plan.partition, batch), batch)
                if table is not None or not _has_array(
                    rows.decoder.schema.key, rows.decoder.schema.value
                ):
                    _same_table(table, expected)


def test_replay_writes_the_same_bytes_with_and_without_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ckpt replay`` of deltas and of a RocksDB zip with changelogs, to JSON lines, CSV and
    Parquet: the same output when the kernel is turned off."""
    from typer.testing import CliRunner

    from ckpt_cli.cli import app

    for case in ("spark4-hdfs-agg", "spark4-rocksdb-changelog"):
        checkpoint = CASES_DIR / case / "checkpoint"
        if not checkpoint.is_dir():
            pytest.skip("no fixtures")
        outputs: dict[bool, list[Any]] = {}
        for enabled in (True, False):
            monkeypatch.setattr(kernel, "ENABLED", enabled)
            got = []
            for fmt in ("jsonl", "csv", "parquet"):
                out = tmp_path / f"{case}-{enabled}.{fmt}"
                run = CliRunner().invoke(
                    app, ["replay", str(checkpoint), "--format", fmt, "--output", str(out)]
                )
                assert run.exit_code == 0, run.output
                if fmt == "parquet":
                    got.append(pa.parquet.read_table(out))
                else:
                    got.append(out.read_bytes())
            outputs[enabled] = got
        assert outputs[True][:2] == outputs[False][:2]
        assert outputs[True][0].count(b"\n") > 0
        assert outputs[True][2].equals(outputs[False][2])


def test_debug_says_once_that_replay_runs_without_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from ckpt_cli.cli import app

    checkpoint = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
    if not checkpoint.is_dir():
        pytest.skip("no fixtures")
    out = tmp_path / "out.jsonl"
    args = ["replay", str(checkpoint), "--format", "jsonl", "--output", str(out)]
    for enabled in (True, False):
        monkeypatch.setattr(kernel, "ENABLED", enabled)
        for debug in (True, False):
            run = CliRunner().invoke(app, ["--debug", *args] if debug else args)
            assert run.exit_code == 0, run.output
            said = run.stderr.count("numpy/Arrow")
            assert said == (1 if debug and not enabled else 0), run.stderr
            assert [json.loads(line) for line in out.read_text().splitlines()]


def test_a_stale_build_is_not_loaded(tmp_path: Path) -> None:
    """A kernel built from other source than the _kernel.c beside it is not loaded."""
    import subprocess
    import sys

    script = (
        "import hashlib, pathlib, sys\n"
        "from ckpt_cli import _kernel\n"
        "from ckpt_cli.core import kernel\n"
        "real = hashlib.sha256\n"
        "class Other:\n"
        "    def __init__(self, data): self.h = real(data + b'edited')\n"
        "    def hexdigest(self): return self.h.hexdigest()\n"
        "hashlib.sha256 = Other\n"
        "print(kernel.load() is None, kernel.missing())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(bulk.__file__).parents[2])},
        check=True,
    )
    assert done.stdout.startswith("True ") and "built from other source" in done.stdout


# -- SST data blocks ----------------------------------------------------------------------------


def _sst_rows(got: Any) -> list[tuple[bytes, bytes, int, bool]]:
    return [
        (
            got.key(i),
            got.data[int(got.value_offsets[i]) : int(got.value_offsets[i] + got.value_sizes[i])],
            int(got.kinds[i]),
            bool(got.repeats[i]),
        )
        for i in range(len(got))
    ]


def _sst_outcome(decode: Any, blocks: list[bytes]) -> Any:
    try:
        return _sst_rows(decode("t.sst", blocks))
    except FormatError as exc:
        return str(exc)


@PROPERTY
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=4))
def test_arbitrary_sst_blocks_decode_as_the_module_decodes_them(blocks: list[bytes]) -> None:
    from ckpt_cli.formats import sst

    assert _sst_outcome(kernel.sst_block_records, blocks) == _sst_outcome(sst.block_records, blocks)


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(st.tuples(st.binary(min_size=1, max_size=12), st.none() | st.binary(max_size=40))),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["none", "lz4"]),
    st.integers(1, 16),
    st.booleans(),
    st.data(),
)
def test_sst_blocks_decode_as_the_module_decodes_them(
    tmp_path_factory: pytest.TempPathFactory,
    flushes: list[list[tuple[bytes, bytes | None]]],
    compression: str,
    restart: int,
    snapshots: bool,
    data: st.DataObject,
) -> None:
    """Tables RocksDB wrote (keys written again under snapshots, deletes, any restart
    interval), intact or with bytes of a block changed: each run of blocks gives the same
    records (kinds and repeats too) as ``formats/sst``, or the same error."""
    from ckpt_cli.formats import sst

    path = tmp_path_factory.mktemp("db") / "db"
    writes = [[(bytes([i]) + k, v) for k, v in w] for i, w in enumerate(flushes)]
    _write_db(path, _options(compression, "xxh3", 5, restart), writes, snapshots)
    for file in sorted(path.glob("*.sst")):
        table = sst.open_table(str(file), file.read_bytes())
        assert table is not None
        for start in range(len(table.blocks)):
            blocks = table.read_blocks(table.blocks[start : start + 2])
            if data.draw(st.booleans()):
                i = data.draw(st.integers(0, len(blocks) - 1))
                damaged = bytearray(blocks[i])
                for _ in range(data.draw(st.integers(1, 4))):
                    damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(
                        st.integers(0, 255)
                    )
                blocks[i] = bytes(damaged)
            expected = _sst_outcome(sst.block_records, blocks)
            assert _sst_outcome(kernel.sst_block_records, blocks) == expected


def _run_outcome(table: Any, handles: list[tuple[int, int]], read: Any) -> Any:
    from ckpt_cli.errors import LimitExceededError
    from ckpt_cli.formats import sst

    try:
        return _sst_rows(table._run(handles, sst.block_records, read))
    except (FormatError, LimitExceededError) as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(st.tuples(st.binary(min_size=1, max_size=12), st.none() | st.binary(max_size=60))),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["none", "lz4", "snappy"]),
    st.sampled_from(["xxh3", "crc32c"]),
    st.sampled_from([None, 40, 300]),
    st.data(),
)
def test_sst_runs_read_from_the_file_as_the_module_reads_them(
    tmp_path_factory: pytest.TempPathFactory,
    flushes: list[list[tuple[bytes, bytes | None]]],
    compression: str,
    checksum: str,
    most: int | None,
    data: st.DataObject,
) -> None:
    """Tables RocksDB wrote, intact or with bytes of the file changed anywhere in its data
    blocks and their trailers, under the inflation limits or tighter ones: each run of
    blocks ``sst_run`` reads from the file gives the module's records, or is handed back
    and the module's error is the one raised."""
    from ckpt_cli.formats import sst
    from ckpt_cli.formats.limits import DECOMPRESSED_ENV

    path = tmp_path_factory.mktemp("db") / "db"
    writes = [[(bytes([i]) + k, v) for k, v in w] for i, w in enumerate(flushes)]
    _write_db(path, _options(compression, checksum, 5, 4), writes)
    for file in sorted(path.glob("*.sst")):
        table = sst.open_table(str(file), file.read_bytes())
        assert table is not None
        end = table.blocks[-1][0] + table.blocks[-1][1] + sst.BLOCK_TRAILER_BYTES
        damaged = bytearray(table.data)
        for _ in range(data.draw(st.integers(0, 3))):
            damaged[data.draw(st.integers(0, end - 1))] = data.draw(st.integers(0, 255))
        runs = [table.blocks[i : i + 3] for i in range(0, len(table.blocks), 3)]
        found = sst.Table(**{**table.__dict__, "data": bytes(damaged), "_decoded": 0})
        expected = sst.Table(**{**table.__dict__, "data": bytes(damaged), "_decoded": 0})
        with pytest.MonkeyPatch.context() as m:
            if most is not None:
                m.setenv(DECOMPRESSED_ENV, str(most))
            for run in runs:
                assert _run_outcome(found, run, kernel.sst_run) == _run_outcome(expected, run, None)
        assert found._decoded == expected._decoded


def test_sst_runs_whose_keys_outgrow_their_blocks(tmp_path: Path) -> None:
    """Long keys sharing long prefixes and empty values: the keys rebuilt are many times the
    blocks' bytes (past the room made for them in the run's buffer), and still the module's."""
    from ckpt_cli.formats import sst

    prefix = b"p" * 2000
    writes: list[list[tuple[bytes, bytes | None]]] = [
        [(prefix + b"%06d" % i, b"") for i in range(400)]
    ]
    # Blocks of 64 KB: many keys a block, each after the one before it.
    _write_db(tmp_path / "db", _options("lz4", "xxh3", 5, 16, block_size=64 << 10), writes)
    for file in sorted((tmp_path / "db").glob("*.sst")):
        table = sst.open_table(str(file), file.read_bytes())
        assert table is not None
        run = table.blocks
        found = kernel.sst_run(table.data, run, table.checksum_type, 1 << 40)
        assert found is not None
        records, decompressed = found
        assert sum(records.key_sizes) > decompressed
        assert _sst_rows(records) == _sst_rows(sst.block_records(str(file), table.read_blocks(run)))


def test_sst_runs_of_spark_4_tables_are_read_by_the_kernel() -> None:
    """The fixtures' Spark 4 tables (XXH3, LZ4): every run is the kernel's, not handed back,
    and gives the module's records."""
    from ckpt_cli.formats import sst

    taken = 0
    for file in sorted(CASES_DIR.glob("spark4-rocksdb*/checkpoint/state/**/SSTs/*.sst"))[:40]:
        table = sst.open_table(str(file), file.read_bytes())
        if table is None or table.checksum_type != sst.XXH3 or not table.blocks:
            continue
        run = table.blocks[:8]
        found = kernel.sst_run(table.data, run, table.checksum_type, 1 << 40)
        assert found is not None, file
        assert _sst_rows(found[0]) == _sst_rows(
            sst.block_records(str(file), table.read_blocks(run))
        )
        taken += 1
    assert taken >= 10


def test_each_record_type_decodes_as_the_module_decodes_it() -> None:
    """A put, a delete, a single delete; any other record type is the module's error."""
    from ckpt_cli.formats import sst

    for kind in range(256):
        key = b"k" + bytes([kind]) + bytes(7)  # the user key, then type and sequence
        entry = bytes([0, len(key), 1]) + key + b"v"
        block = entry + struct.pack("<II", 0, 1)  # one restart at 0, its count
        got = _sst_outcome(kernel.sst_block_records, [block, block])
        assert got == _sst_outcome(sst.block_records, [block, block])
        assert isinstance(got, list) == (kind in sst.KINDS)


def _damaged_copies(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Real fixtures, each damaged one way: a key size past any row, a delta cut short, a
    changelog cut short, an SST byte changed."""
    import shutil

    from ckpt_cli.formats.compression import compress, decompressed_chunks

    def copy(case: str, name: str) -> Path:
        root = tmp_path / name
        shutil.copytree(CASES_DIR / case / "checkpoint", root)
        return root

    def rewrite(path: Path, change: Any) -> None:
        with open(path, "rb") as fh:
            data = b"".join(decompressed_chunks(str(path), fh, codec="lz4"))
        path.write_bytes(compress(change(data), "lz4"))

    root = copy("spark4-hdfs-agg", "key-size")
    rewrite(root / "state/0/0/10.delta", lambda d: struct.pack(">i", 1 << 29) + d[4:])
    yield "a key size past any row", root
    root = copy("spark4-hdfs-agg", "cut-delta")
    rewrite(root / "state/0/0/10.delta", lambda d: d[: len(d) // 2])
    yield "a delta cut short", root
    root = copy("spark4-rocksdb-changelog", "cut-changelog")
    rewrite(root / "state/0/0/10.changelog", lambda d: d[: len(d) - 6])
    yield "a changelog cut short", root
    root = copy("spark4-rocksdb-changelog", "sst-byte")
    sst_file = sorted((root / "state/0/1/SSTs").glob("*.sst"))[-1]
    data = bytearray(sst_file.read_bytes())
    data[40] ^= 0xFF
    sst_file.write_bytes(bytes(data))
    yield "an SST byte changed", root


def test_damaged_files_give_the_same_one_line_error_with_and_without_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from ckpt_cli.cli import app

    if not (CASES_DIR / "spark4-hdfs-agg").is_dir():
        pytest.skip("no fixtures")
    failed = 0
    for what, root in _damaged_copies(tmp_path):
        for fmt in ("jsonl", "csv", "parquet"):
            seen = []
            for enabled in (True, False):
                monkeypatch.setattr(kernel, "ENABLED", enabled)
                out = tmp_path / f"out-{enabled}.{fmt}"
                run = CliRunner().invoke(
                    app, ["replay", str(root), "--format", fmt, "--output", str(out)]
                )
                seen.append((run.exit_code, run.stderr))
            assert seen[0] == seen[1], (what, fmt, seen)
            if seen[0][0] == 2:
                failed += 1
                assert seen[0][1].startswith("error: state/"), seen  # names the file
    assert failed >= 9  # the SST's block may not be read by a replay of the latest batch


# -- Spark's lz4 streams ---------------------------------------------------------------------


def _python_lz4(data: bytes) -> bytes | None:
    from ckpt_cli.formats import compression

    try:
        return compression.decompress("f", data)
    except FormatError:
        return None


def _lz4_block(payload: bytes, size: int, raw: bytes | None, method: int = 0x20) -> bytes:
    import xxhash

    checksum = 0 if raw is None else xxhash.xxh32_intdigest(raw, seed=0x9747B28C) & 0x0FFFFFFF
    head = struct.pack("<Biii", method | 6, len(payload), size, checksum)
    return b"LZ4Block" + head + payload


def test_every_fixture_lz4_file_decompresses_as_the_reader_does() -> None:
    from ckpt_cli.formats import compression

    checked = 0
    for path in sorted(CASES_DIR.glob("*/checkpoint/state/**/*")):
        if path.suffix not in (".delta", ".snapshot", ".changelog") or not path.is_file():
            continue
        data = path.read_bytes()
        if not data.startswith(compression.LZ4_MAGIC):
            continue
        found = kernel.lz4_files([data, data])
        expected = compression.decompress(str(path), data)
        assert found == (expected + expected, [len(expected), 2 * len(expected)]), path
        checked += 1
    assert checked > 100


@PROPERTY
@given(
    st.lists(st.sampled_from([b"ab", b"abc", b"\x00", b"zzzz"]), max_size=300).map(b"".join),
    st.binary(max_size=40),
    st.integers(0, 3),
    st.data(),
)
def test_damaged_lz4_blocks_decompress_as_the_reader_does_or_are_handed_back(
    text: bytes, noise: bytes, how: int, data: st.DataObject
) -> None:
    # The block's checksum is made right for whatever python-lz4 makes of the damaged
    # payload, so the lz4 decoding itself is what is compared: never bytes of its own, and
    # never a block the reader refuses.
    import lz4.block

    raw = text + noise
    payload = bytearray(lz4.block.compress(raw, store_size=False))
    size = len(raw)
    if how == 0 and payload:
        for _ in range(data.draw(st.integers(1, 3))):
            payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    elif how == 1:
        payload = payload[: data.draw(st.integers(0, len(payload)))]
    elif how == 2:
        size = max(0, size + data.draw(st.integers(-5, 5)))
    if not payload or not size:
        return
    try:
        made: bytes | None = lz4.block.decompress(bytes(payload), uncompressed_size=size)
    except Exception:
        made = None
    stream = _lz4_block(bytes(payload), size, made)
    expected = _python_lz4(stream)
    found = kernel.lz4_files([stream])
    if found is not None:
        assert found[0] == expected
    elif expected is not None:
        # Stricter than the library is allowed (the reader then reads the file), but only
        # for damaged payloads: every block lz4 itself made decodes.
        assert how != 3


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"key-", b"0123456789abcdef" * 2, b"\x00" * 7, b"x", b"value=" * 9])
        | st.tuples(st.binary(min_size=1, max_size=12), st.integers(1, 6)).map(
            lambda piece: piece[0] * piece[1]  # repeats at short distances
        ),
        min_size=100,
        max_size=4000,
    ).map(b"".join),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=3),
)
def test_long_lz4_blocks_decompress_as_the_reader_does(text: bytes, cuts: list[Any]) -> None:
    """Blocks of up to 64 KB with runs and matches of every length and distance: the copies
    made 16 and 32 bytes at a time away from a block's ends give the reader's bytes, damaged
    or not."""
    import lz4.block

    payload = _mutated(lz4.block.compress(text, store_size=False), cuts)
    try:
        made: bytes | None = lz4.block.decompress(payload, uncompressed_size=len(text))
    except Exception:
        made = None
    stream = _lz4_block(payload, len(text), made)
    expected = _python_lz4(stream)
    found = kernel.lz4_files([stream])
    if found is not None:
        assert found[0] == expected
    elif not cuts:
        pytest.fail("an undamaged block was handed back")


def test_lz4_streams_hand_back_what_the_reader_refuses() -> None:
    from ckpt_cli.formats import compression

    good = compression.compress(b"x" * 5000 + bytes(range(256)) * 10, "lz4")
    cut = [good[:n] for n in (0, 5, 8, 20, 21, 30, len(good) - 1)]
    flipped = bytearray(good)
    flipped[-30] ^= 0xFF  # in the payload: the checksum no longer matches
    bad_token = good[:8] + b"\x35" + good[9:]
    not_lz4 = compression.compress(b"hello", "zstd")
    end_mark = b"LZ4Block" + struct.pack("<Biii", 0x10, 0, 0, 0)
    bad_end = b"LZ4Block" + struct.pack("<Biii", 0x10, 0, 0, 7)
    for damaged in [*cut, bytes(flipped), bad_token, not_lz4, bad_end, b"LZ4Bloc"]:
        assert kernel.lz4_files([damaged]) is None
        assert kernel.lz4_files([good, damaged]) is None
    # Streams one after another, end marks between them, as lz4-java writes them.
    assert kernel.lz4_files([good + end_mark + good]) == (
        _python_lz4(good + end_mark + good),
        [2 * (5000 + 2560)],
    )
    # Held to the inflation limits block by block: a bomb is handed back, and the reader
    # raises LimitExceededError for it.
    import io

    from ckpt_cli.errors import LimitExceededError
    from ckpt_cli.formats.limits import Limits

    bomb = compression.compress(b"\x00" * 60000, "lz4")
    tight = Limits(max_inflation=5, floor=100)
    with pytest.raises(LimitExceededError):
        b"".join(compression.decompressed_chunks("f", io.BytesIO(bomb), limits=tight))
    assert kernel.load().lz4_streams([bomb], 5.0, 100, 1 << 30) is None
    assert kernel.load().lz4_streams([bomb], 5.0, 100, 50000) is None  # over max_bytes
    assert kernel.load().lz4_streams([bomb], 5.0, 1 << 20, 1 << 30) is not None  # the floor
