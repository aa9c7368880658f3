"""The rows encoder: the schema-compiled JSON conversion gives what the generic ``json_value``
gives, and the compiled bytes-to-JSON path (``RowDecoder.line``) the JSON of the general
decoder (``RowDecoder.row``)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import struct
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.read import iter_file_records
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.state_schema import StateSchema
from ckpt_cli.state.decoders import RowDecoder, compile_row, json_value, struct_converter
from ckpt_cli.state.reader import covering_reads, decoder_for
from tests.conftest import CASES_DIR


def general(decoder: RowDecoder, partition: int, key: bytes, value: bytes) -> object:
    k, v = decoder.json_row(key, value)
    return {"partition_id": partition, "key": k, "value": v}


def test_every_fixture_row() -> None:
    compiled = 0
    for root in sorted(CASES_DIR.glob("*/checkpoint")):
        ckpt = Checkpoint.open(str(root))
        for f in ckpt.of_kind(FileKind.SNAPSHOT, FileKind.DELTA, FileKind.CHANGELOG):
            assert f.store is not None
            if covering_reads(ckpt, f.store.operator) != [{}]:
                continue  # several column families, read one at a time (test_replay_families)
            decoder = decoder_for(ckpt, f.store.operator, f.store.store)
            compiled += decoder.compiled
            for kind, k, v in iter_file_records(ckpt, f):
                if v is None:
                    continue
                assert json.loads(decoder.line(3, k, v)) == general(decoder, 3, k, v), (
                    f.path,
                    kind,
                )
    assert compiled > 0


FLAT = [
    S.BOOLEAN,
    S.BYTE,
    S.SHORT,
    S.INTEGER,
    S.LONG,
    S.FLOAT,
    S.DOUBLE,
    S.STRING,
    S.DATE,
    S.TIMESTAMP,
    S.TIMESTAMP_NTZ,
    S.NULL,
]


def _value(t: S.AtomicType) -> st.SearchStrategy[object]:
    return {
        "boolean": st.booleans(),
        "byte": st.integers(-128, 127),
        "short": st.integers(-(2**15), 2**15 - 1),
        "integer": st.integers(-(2**31), 2**31 - 1),
        "long": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(width=32),
        "double": st.floats(),
        "string": st.text(max_size=20),
        "date": st.integers(-800_000, 3_000_000),
        "timestamp": st.integers(-(2**62), 2**62),
        "timestamp_ntz": st.integers(-(2**62), 2**62),
        "void": st.none(),
    }[t.name]


@st.composite
def rows(draw: st.DrawFn) -> tuple[S.StructType, bytes]:
    types = draw(st.lists(st.sampled_from(FLAT), min_size=0, max_size=8))
    schema = S.StructType(tuple(S.StructField(f"c{i}", t) for i, t in enumerate(types)))
    n = len(types)
    bitset = 0
    slots: list[bytes] = []
    tail = b""
    fixed = 8 * ((n + 63) // 64) + 8 * n
    for i, t in enumerate(types):
        value = draw(_value(t))
        if value is None or draw(st.integers(0, 5)) == 0:
            bitset |= 1 << i
            slots.append(bytes(8))
            continue
        fmt = {
            "boolean": "<?",
            "byte": "<b",
            "short": "<h",
            "integer": "<i",
            "long": "<q",
            "float": "<f",
            "double": "<d",
            "date": "<i",
            "timestamp": "<q",
            "timestamp_ntz": "<q",
        }.get(t.name)
        if t.name == "string":
            assert isinstance(value, str)
            raw = value.encode()
            slots.append(struct.pack("<q", ((fixed + len(tail)) << 32) | len(raw)))
            tail += raw + b"\x00" * (-len(raw) % 8)
        else:
            assert fmt is not None
            slots.append(struct.pack(fmt, value).ljust(8, b"\x00"))
    words = b"".join(
        struct.pack("<Q", (bitset >> (64 * w)) & (2**64 - 1)) for w in range((n + 63) // 64)
    )
    return schema, words + b"".join(slots) + tail


@settings(max_examples=400, deadline=None)
@given(row=rows())
def test_generated_rows(row: tuple[S.StructType, bytes]) -> None:
    schema, data = row
    decoder = RowDecoder(StateSchema(schema, schema, 2), "hdfs")
    assert decoder.compiled and compile_row(schema) is not None
    try:
        want = general(decoder, 0, data, data)
    except FormatError:  # the general decoder refuses (e.g. a date outside years 1-9999)
        return
    assert json.loads(decoder.line(0, data, data)) == json.loads(json.dumps(want))


def test_not_flat_is_not_compiled() -> None:
    schema = S.StructType((S.StructField("a", S.ArrayType(S.LONG)),))
    assert compile_row(schema) is None


def test_rocksdb_rows_outside_the_row_fall_back(tmp_path: Path) -> None:
    schema = S.StructType((S.StructField("s", S.STRING),))
    decoder = RowDecoder(StateSchema(schema, schema, 2), "rocksdb")
    row = b"\x00" + bytes(8) + struct.pack("<q", (16 << 32) | 3) + b"abc\x00\x00\x00\x00\x00"
    assert json.loads(decoder.line(1, row, row))["key"] == {"s": "abc"}
    bad = b"\x00" + bytes(8) + struct.pack("<q", (16 << 32) | 300)
    with pytest.raises(FormatError):
        decoder.line(1, bad, bad)


# -- plain JSON values (struct_converter vs json_value) -------------------------------------

DATA = Path(__file__).parent / "formats" / "data_rows" / "hdfs_types"


def test_real_rows_of_many_types() -> None:
    if not (DATA / "store").is_dir():
        pytest.skip("no data_rows fixture")
    from ckpt_cli.formats.state_schema import parse_state_schema

    state_schema = parse_state_schema("schema", (DATA / "store/_metadata/schema").read_bytes())
    decoder = RowDecoder(state_schema, "hdfs")
    from ckpt_cli.formats.compression import decompress
    from ckpt_cli.formats.records import iter_kv_records

    seen = 0
    for delta in sorted((DATA / "store").glob("*.delta")):
        plain = decompress(delta.name, delta.read_bytes())
        for k, v in iter_kv_records(delta.name, [plain]):
            key, value = decoder(k, v)
            want = (json_value(key), json_value(value))
            assert decoder.json_row(k, v) == want
            seen += 1
    assert seen


def test_fixture_rows() -> None:
    root = Path(__file__).parent.parent / "fixtures" / "checkpoints"
    for ckpt_dir in sorted(root.glob("*/checkpoint")):
        ckpt = Checkpoint.open(str(ckpt_dir))
        for f in ckpt.of_kind(FileKind.SNAPSHOT, FileKind.DELTA, FileKind.CHANGELOG)[:4]:
            assert f.store is not None
            if covering_reads(ckpt, f.store.operator) != [{}]:
                continue  # several column families, read one at a time (test_replay_families)
            decoder = decoder_for(ckpt, f.store.operator, f.store.store)
            for _kind, k, v in iter_file_records(ckpt, f):
                key, value = decoder(k, v)
                assert decoder.json_row(k, v) == (json_value(key), json_value(value))


def test_converter_types() -> None:
    schema = S.StructType(
        (
            S.StructField("ts", S.TIMESTAMP),
            S.StructField("ntz", S.TIMESTAMP_NTZ),
            S.StructField("d", S.DATE),
            S.StructField("dec", S.DecimalType(10, 2)),
            S.StructField("b", S.BINARY),
            S.StructField("f", S.DOUBLE),
            S.StructField("arr", S.ArrayType(S.TIMESTAMP)),
            S.StructField("s", S.StructType((S.StructField("x", S.DATE),))),
        )
    )
    row = {
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc),
        "ntz": dt.datetime(1, 1, 1, 0, 0, 0),
        "d": dt.date(2024, 2, 29),
        "dec": Decimal("-1.50"),
        "b": b"\x00\xff",
        "f": float("nan"),
        "arr": [None, dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc)],
        "s": {"x": None},
    }
    assert struct_converter(schema)(copy.deepcopy(row)) == json_value(row)
