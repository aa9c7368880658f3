"""The compiled bytes-to-JSON path gives the JSON the general decoder gives."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import schema as S
from ckpt_cli.jsonrows import LineEncoder, compile_row
from ckpt_cli.model import Checkpoint, FileKind
from ckpt_cli.state import RowDecoder, iter_file_records, store_schema
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
            provider = ckpt.operators[f.store.operator].stores[f.store.store].provider
            decoder = RowDecoder(store_schema(ckpt, f.store.operator, f.store.store), provider)
            enc = LineEncoder(decoder)
            compiled += enc.compiled
            for kind, k, v in iter_file_records(ckpt, f):
                if v is None:
                    continue
                assert json.loads(enc.line(3, k, v)) == general(decoder, 3, k, v), (f.path, kind)
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
    decoder = RowDecoder(S.StateSchema(schema, schema, 2), "hdfs")
    enc = LineEncoder(decoder)
    assert enc.compiled and compile_row(schema) is not None
    try:
        want = general(decoder, 0, data, data)
    except FormatError:  # the general decoder refuses (e.g. a date outside years 1-9999)
        return
    assert json.loads(enc.line(0, data, data)) == json.loads(json.dumps(want))


def test_not_flat_is_not_compiled() -> None:
    schema = S.StructType((S.StructField("a", S.ArrayType(S.LONG)),))
    assert compile_row(schema) is None


def test_rocksdb_rows_outside_the_row_fall_back(tmp_path: Path) -> None:
    schema = S.StructType((S.StructField("s", S.STRING),))
    decoder = RowDecoder(S.StateSchema(schema, schema, 2), "rocksdb")
    enc = LineEncoder(decoder)
    row = b"\x00" + bytes(8) + struct.pack("<q", (16 << 32) | 3) + b"abc\x00\x00\x00\x00\x00"
    assert json.loads(enc.line(1, row, row))["key"] == {"s": "abc"}
    bad = b"\x00" + bytes(8) + struct.pack("<q", (16 << 32) | 300)
    with pytest.raises(FormatError):
        enc.line(1, bad, bad)
