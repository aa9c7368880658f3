"""Benchmark: UnsafeRows decoded into Arrow (``formats/unsaferow_arrow``), and ``ckpt replay``
end to end with the columnar path and with the row path.

1. Decoding on one core (CPU seconds of this process), rows of DISTINCT values, each row a
   key and a value:
   * flat: the aggregation of ``bench_replay.py`` (key ``k`` string; value ``count`` long,
     ``sum`` long, ``max`` timestamp), 1M rows;
   * nested: a 15-field key (numbers, strings, timestamps, a date, a decimal, binary and a
     ``window`` struct) and a stream-stream join's value (the input row as a struct with an
     array of strings, and ``matched``), 200k rows.
   Next to it, the row decoder (``unsaferow.make_decoder``) on the same rows.
2. ``ckpt replay CKPT --format jsonl|parquet --output FILE`` in its own process, wall and CPU
   seconds (children included), columnar and row by row (``replay.columns.ENABLED``), on the
   state of ``synthetic.py`` (the same schema and layout as ``bench_replay.py``'s, written
   without Spark): 1M keys in 4 partitions, from deltas 1 and 2 and from the snapshot of
   version 2. ``--checkpoint DIR`` replays another checkpoint instead (e.g. the one
   ``bench_replay.py`` built with Spark under ``benchmarks/.data/``).

    .venv/bin/python benchmarks/bench_decode.py [--rows 1000000] [--keys 1000000]
        [--checkpoint DIR] [--skip-decode] [--skip-replay]

Not a test; figures on the shared 2-core machine vary by +-20% or more.
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import struct
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from ckpt_cli.formats import spark_types as S  # noqa: E402
from ckpt_cli.formats.unsaferow import make_decoder  # noqa: E402
from ckpt_cli.formats.unsaferow_arrow import decode_rows  # noqa: E402

UTC = dt.timezone.utc
EPOCH_2024_US = 1_704_067_200_000_000


def _field(name: str, t: S.DataType) -> S.StructField:
    return S.StructField(name, t)


FLAT_KEY = S.StructType((_field("k", S.STRING),))
FLAT_VALUE = S.StructType(
    (_field("count", S.LONG), _field("sum", S.LONG), _field("max", S.TIMESTAMP))
)
WINDOW = S.StructType((_field("start", S.TIMESTAMP), _field("end", S.TIMESTAMP)))
NESTED_KEY = S.StructType(
    (
        _field("user_id", S.LONG),
        _field("session", S.STRING),
        _field("country", S.STRING),
        _field("device", S.STRING),
        _field("shard", S.INTEGER),
        _field("bucket", S.SHORT),
        _field("flag", S.BOOLEAN),
        _field("level", S.BYTE),
        _field("score", S.DOUBLE),
        _field("day", S.DATE),
        _field("event_time", S.TIMESTAMP),
        _field("ingest_time", S.TIMESTAMP),
        _field("price", S.DecimalType(10, 2)),
        _field("digest", S.BINARY),
        _field("window", WINDOW),
    )
)
JOIN_ROW = S.StructType(
    (
        _field("id", S.LONG),
        _field("name", S.STRING),
        _field("ts", S.TIMESTAMP),
        _field("amount", S.DOUBLE),
        _field("tags", S.ArrayType(S.STRING)),
    )
)
NESTED_VALUE = S.StructType((_field("row", JOIN_ROW), _field("matched", S.BOOLEAN)))


# -- a small UnsafeRow writer (the layout of formats/unsaferow) --------------------------------


def _pad8(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % 8)


def _slot(t: S.DataType, v: Any) -> tuple[bytes, bytes]:
    """(8-byte slot, variable-length payload) of a non-null value."""
    if isinstance(t, S.DecimalType):
        return struct.pack("<q", int(v.scaleb(t.scale))), b""
    if isinstance(t, S.StructType):
        return b"", write_row(t, v)
    if isinstance(t, S.ArrayType):
        return b"", write_string_array(v)
    name = t.name  # type: ignore[union-attr]
    if name in ("string", "binary"):
        return b"", v.encode() if isinstance(v, str) else v
    if name == "timestamp":
        return struct.pack(
            "<q", (v - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)
        ), b""
    if name == "date":
        return struct.pack("<i4x", (v - dt.date(1970, 1, 1)).days), b""
    fmt = {
        "long": "<q",
        "integer": "<i4x",
        "short": "<h6x",
        "byte": "<b7x",
        "boolean": "<?7x",
        "double": "<d",
    }
    return struct.pack(fmt[name], v), b""


def write_row(schema: S.StructType, values: tuple[Any, ...]) -> bytes:
    n = len(schema.fields)
    head = (n + 63) // 64 * 8
    nulls = 0
    slots = []
    var = b""
    for i, (f, v) in enumerate(zip(schema.fields, values, strict=True)):
        if v is None:
            nulls |= 1 << i
            slots.append(bytes(8))
            continue
        slot, payload = _slot(f.data_type, v)
        if not slot:
            slot = struct.pack("<Q", (head + 8 * n + len(var)) << 32 | len(payload))
            var += _pad8(payload)
        slots.append(slot)
    return nulls.to_bytes(head, "little") + b"".join(slots) + var


def write_string_array(values: list[str]) -> bytes:
    n = len(values)
    header = 8 + (n + 63) // 64 * 8
    var = b""
    words = []
    for v in values:
        data = v.encode()
        words.append(struct.pack("<Q", (header + 8 * n + len(var)) << 32 | len(data)))
        var += _pad8(data)
    return struct.pack("<q", n) + bytes(header - 8) + b"".join(words) + var


def flat_rows(count: int) -> tuple[list[bytes], list[bytes]]:
    keys = []
    for i in range(count):
        text = b"key-%09d" % i
        keys.append(bytes(8) + struct.pack("<q", (16 << 32) | len(text)) + _pad8(text))
    values = [
        bytes(8) + struct.pack("<qqq", i % 7 + 1, i * 37, EPOCH_2024_US + i) for i in range(count)
    ]
    return keys, values


def nested_rows(count: int) -> tuple[list[bytes], list[bytes]]:
    keys, values = [], []
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    for i in range(count):
        t = base + dt.timedelta(seconds=i)
        window = (t.replace(second=0), t.replace(second=0) + dt.timedelta(minutes=1))
        key = (
            i,
            f"session-{i:08d}",
            ("DE", "FR", "US", "JP")[i % 4],
            f"device-{i % 997}",
            i % 200,
            i % 300,
            i % 2 == 0,
            i % 100,
            i / 7,
            t.date(),
            t,
            t + dt.timedelta(milliseconds=i % 1000),
            Decimal(i % 100000).scaleb(-2),
            i.to_bytes(8, "little"),
            window,
        )
        row = (i * 3, f"name-{i}", t, i * 0.25, [f"tag{i % 5}", f"t{i % 11}"][: i % 3])
        keys.append(write_row(NESTED_KEY, key))
        values.append(write_row(NESTED_VALUE, (row, i % 3 == 0)))
    return keys, values


# -- 1. decoding ---------------------------------------------------------------------------------


def _packed(rows: list[bytes]) -> tuple[bytes, Any, Any]:
    sizes = np.fromiter(map(len, rows), np.int64, len(rows))
    return b"".join(rows), np.cumsum(sizes) - sizes, sizes


def measure_decode(
    name: str, key: S.StructType, value: S.StructType, rows: tuple[list[bytes], list[bytes]]
) -> None:
    keys, values = rows
    n = len(keys)
    packed = [_packed(keys), _packed(values)]
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        decode_rows(*packed[0], key)
        decode_rows(*packed[1], value)
        best = min(best, time.process_time() - start)
    sample = min(n, 200_000)
    key_row, value_row = make_decoder(key), make_decoder(value)
    start = time.process_time()
    for k, v in zip(keys[:sample], values[:sample], strict=True):
        key_row(k)
        value_row(v)
    rows_s = sample / (time.process_time() - start)
    print(
        f"  {name:6s} {n:>9,} rows: Arrow {n / best / 1e6:5.2f}M rows/s "
        f"({best:.2f} s CPU, best of 3); row decoder {rows_s / 1e6:5.2f}M rows/s"
    )


# -- 2. replay end to end ------------------------------------------------------------------------

RUN = """
import sys
import ckpt_cli.state.columns as columns
columns.ENABLED = sys.argv.pop(1) == "columns"
from ckpt_cli.cli import main
sys.argv[0] = "ckpt"
main()
"""


def run_replay(ckpt: Path, fmt: str, path: str, out: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [
        sys.executable,
        "-c",
        RUN,
        path,
        "replay",
        str(ckpt),
        "--format",
        fmt,
        "--output",
        str(out),
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure_replay(ckpt: Path, label: str) -> None:
    print(f"  {label}")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("jsonl", "parquet"):
            figures: dict[str, tuple[float, float, int]] = {}
            for path in ("rows", "columns", "rows", "columns"):  # alternating, best of 2
                out = Path(tmp) / f"out.{fmt}"
                wall, cpu = run_replay(ckpt, fmt, path, out)
                size = out.stat().st_size
                best = figures.get(path)
                if best is None or wall < best[0]:
                    figures[path] = (wall, cpu, size)
            rows, cols = figures["rows"], figures["columns"]
            print(
                f"    --format {fmt:8s} row path {rows[0]:6.2f} s ({rows[1]:6.2f} s CPU), "
                f"columnar {cols[0]:6.2f} s ({cols[1]:6.2f} s CPU): {rows[0] / cols[0]:.1f}x wall, "
                f"{rows[1] / cols[1]:.1f}x CPU; "
                f"{cols[2] / 1e6:.0f} MB written"
            )


def synthetic_state(keys: int, snapshot: bool) -> Path:
    from synthetic import build

    root = HERE / ".data" / f"decode-{keys}-{'snap' if snapshot else 'deltas'}"
    build(root, partitions=4, versions=2, keys=keys, snapshot_every=2 if snapshot else 10)
    if snapshot:  # the snapshot of version 2 is the whole state: the deltas are not read
        for delta in root.glob("state/0/*/1.delta"):
            delta.unlink()
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="flat rows to decode")
    parser.add_argument("--nested-rows", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys of the replayed state")
    parser.add_argument("--checkpoint", type=Path, help="replay this checkpoint instead")
    parser.add_argument("--skip-decode", action="store_true")
    parser.add_argument("--skip-replay", action="store_true")
    args = parser.parse_args()
    if not args.skip_decode:
        print("decoding into Arrow, one core (key + value per row, distinct values):")
        measure_decode("flat", FLAT_KEY, FLAT_VALUE, flat_rows(args.rows))
        measure_decode("nested", NESTED_KEY, NESTED_VALUE, nested_rows(args.nested_rows))
    if not args.skip_replay:
        print("ckpt replay end to end, written to a file:")
        if args.checkpoint is not None:
            measure_replay(args.checkpoint, str(args.checkpoint))
        else:
            for snapshot in (False, True):
                root = synthetic_state(args.keys, snapshot)
                shape = "the snapshot of version 2" if snapshot else "deltas 1 and 2"
                measure_replay(root, f"{args.keys:,} keys in 4 partitions, from {shape}")


if __name__ == "__main__":
    main()
