"""Benchmark: UnsafeRow decoding throughput (rows/s on one core) per schema, dict and tuple mode.

Decodes in-process, with a decoder compiled once per schema by ``make_decoder``, a list of
distinct rows (``--rows``, cycled from 1,000 generated ones) and prints the best of
``--repeat`` runs for:

* a 3-field aggregation value ``{count: long, sum: long, max: timestamp}`` (with and without
  a null ``max``)
* a 1-field string key ``{k: string}``
* a 3-field row ``{k: string, n: long, d: double}``
* the 15-field key and the 10-field value of the real Spark 4.3 rows in
  ``tests/formats/data_rows/hdfs_types`` (every type: decimals, date, timestamps, binary,
  array, struct, map), when that directory is there

    .venv/bin/python benchmarks/bench_unsaferow.py [--rows 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import struct
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from ckpt_cli.formats import schema as S  # noqa: E402
from ckpt_cli.formats.compression import decompressed_chunks  # noqa: E402
from ckpt_cli.formats.records import iter_kv_records  # noqa: E402
from ckpt_cli.formats.unsaferow import make_decoder  # noqa: E402

REAL = REPO / "tests" / "formats" / "data_rows" / "hdfs_types" / "store"
DISTINCT = 1000
TS_2024 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z in microseconds


def _struct(*fields: tuple[str, S.DataType]) -> S.StructType:
    return S.StructType(tuple(S.StructField(name, t) for name, t in fields))


def _string_row(prefix: bytes, text: bytes, suffix: bytes, slot_index: int) -> bytes:
    """A row whose field ``slot_index`` is a string placed right after the fixed part."""
    fixed = len(prefix) + 8 + len(suffix)
    slot = struct.pack("<Q", fixed << 32 | len(text))
    assert len(prefix) == 8 * (1 + slot_index)
    return prefix + slot + suffix + text + b"\x00" * (-len(text) % 8)


def value_rows(null_max: bool) -> list[bytes]:
    nulls = 0b100 if null_max else 0
    return [
        struct.pack("<Qqqq", nulls, i + 1, 7 * i, 0 if null_max else TS_2024 + 1_000_003 * i)
        for i in range(DISTINCT)
    ]


def string_key_rows() -> list[bytes]:
    return [_string_row(b"\x00" * 8, f"key-{i}".encode(), b"", 0) for i in range(DISTINCT)]


def string_long_double_rows() -> list[bytes]:
    return [
        _string_row(b"\x00" * 8, f"key-{i}".encode(), struct.pack("<qd", i, i / 7), 0)
        for i in range(DISTINCT)
    ]


def real_rows() -> tuple[S.StateSchema, list[bytes], list[bytes]] | None:
    """Schema, keys and values of the real hdfs_types deltas (None when they are missing)."""
    try:
        schema = S.parse_state_schema("schema", (REAL / "_metadata" / "schema").read_bytes())
        keys: list[bytes] = []
        values: list[bytes] = []
        for name in ("1.delta", "2.delta"):
            data = (REAL / name).read_bytes()
            chunks = decompressed_chunks(name, io.BytesIO(data))
            for key, value in iter_kv_records(name, chunks):
                if value is not None:
                    keys.append(bytes(key))
                    values.append(bytes(value))
    except (OSError, ValueError) as exc:
        print(f"(skipping the real hdfs_types rows: {exc})")
        return None
    if not keys:
        print("(skipping the real hdfs_types rows: no rows)")
        return None
    return schema, keys, values


def rate(decode: Callable[[bytes], Any], rows: list[bytes], repeat: int) -> float:
    """Best rows/s of ``repeat`` runs over ``rows``."""
    consume: Callable[[Any], None] = deque(maxlen=0).extend
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        consume(map(decode, rows))
        best = min(best, time.perf_counter() - start)
    return len(rows) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    value = _struct(("count", S.LONG), ("sum", S.LONG), ("max", S.TIMESTAMP))
    cases: list[tuple[str, S.StructType, list[bytes]]] = [
        ("value {count: long, sum: long, max: timestamp}", value, value_rows(False)),
        ("  same, max null", value, value_rows(True)),
        ("key {k: string}", _struct(("k", S.STRING)), string_key_rows()),
        (
            "{k: string, n: long, d: double}",
            _struct(("k", S.STRING), ("n", S.LONG), ("d", S.DOUBLE)),
            string_long_double_rows(),
        ),
    ]
    real = real_rows()
    if real is not None:
        state_schema, keys, values = real
        key, val = state_schema.key, state_schema.value
        cases.append((f"real key, {len(key.fields)} fields", key, keys))
        cases.append((f"real value, {len(val.fields)} fields", val, values))

    print(f"UnsafeRow decode, rows/s (best of {args.repeat} runs of {args.rows:,} rows)")
    width = max(len(name) for name, _, _ in cases)
    print(f"{'schema':<{width}}  {'dict':>10}  {'tuple':>10}")
    for name, schema, distinct in cases:
        rows = (distinct * (args.rows // len(distinct) + 1))[: args.rows]
        as_dict = rate(make_decoder(schema), rows, args.repeat)
        as_tuple = rate(make_decoder(schema, as_tuple=True), rows, args.repeat)
        print(f"{name:<{width}}  {as_dict:>10,.0f}  {as_tuple:>10,.0f}")


if __name__ == "__main__":
    main()
