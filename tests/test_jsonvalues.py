"""The schema-compiled JSON conversion gives what the generic ``json_value`` gives."""

from __future__ import annotations

import copy
import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from ckpt_cli.formats import schema as S
from ckpt_cli.jsonvalues import struct_converter
from ckpt_cli.model import Checkpoint, FileKind
from ckpt_cli.state import RowDecoder, iter_file_records, json_value, store_schema

DATA = Path(__file__).parent / "formats" / "data_rows" / "hdfs_types"


def test_real_rows_of_many_types() -> None:
    if not (DATA / "store").is_dir():
        pytest.skip("no data_rows fixture")
    from ckpt_cli.formats.schema import parse_state_schema

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
            store = ckpt.operators[f.store.operator].stores[f.store.store]
            decoder = RowDecoder(
                store_schema(ckpt, f.store.operator, f.store.store), store.provider
            )
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
