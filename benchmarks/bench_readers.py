"""Benchmark: reading a large HDFS-backed store file (issue: readers).

Generates (once, under benchmarks/.data/) a ``.snapshot`` of an aggregation's state with
N records (default 1,000,000): key row ``{k: string}``, value row ``{count: long, sum: long,
max: timestamp}``, in the byte layout Spark writes, compressed with each codec in Spark's
stream framing; every key and value distinct. Then, reading the file through the storage
layer as ckpt does, each run in a forked child (benchmarks/common.py), the codecs
alternating, ``--repeat`` rounds:

* decompression alone (MB/s of decompressed bytes),
* raw record iteration (records/s and MB/s),
* full decoding of keys and values with the schema (rows/s),

with the peak RSS of each run (the interpreter included) next to the file sizes. Rates are
from the CPU time of the reading loop, measured in the child.

    .venv/bin/python benchmarks/bench_readers.py [--records 1000000] [--codec lz4 ...] [--quick]
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    Case,
    Measurement,
    add_options,
    alternate,
    figures,
    machine,
    measure_call,
    report,
    row,
)

from ckpt_cli.formats import spark_types as S  # noqa: E402
from ckpt_cli.formats.compression import CODECS, compress, decompressed_chunks  # noqa: E402
from ckpt_cli.formats.records import iter_kv_records  # noqa: E402
from ckpt_cli.formats.state_schema import StateSchema  # noqa: E402
from ckpt_cli.state.decoders import RowDecoder  # noqa: E402
from ckpt_cli.storage import Storage  # noqa: E402

KEY_SCHEMA = S.StructType((S.StructField("k", S.STRING),))
VALUE_SCHEMA = S.StructType(
    (
        S.StructField("count", S.LONG),
        S.StructField("sum", S.LONG),
        S.StructField("max", S.TIMESTAMP),
    )
)


def key_row(text: bytes) -> bytes:
    padded = text + b"\x00" * (-len(text) % 8)
    return bytes(8) + struct.pack("<q", (16 << 32) | len(text)) + padded


def value_row(i: int) -> bytes:
    return bytes(8) + struct.pack("<qqq", i % 97, i * 3, 1_704_067_200_000_000 + i * 1000)


def plain_snapshot(records: int) -> bytes:
    out = bytearray()
    pack = struct.Struct(">i").pack
    for i in range(records):
        k = key_row(b"key-%09d" % i)
        v = value_row(i)
        out += pack(len(k)) + k + pack(len(v)) + v
    out += pack(-1)
    return bytes(out)


def build(data_dir: Path, records: int, codecs: list[str]) -> tuple[int, dict[str, Path]]:
    data_dir.mkdir(parents=True, exist_ok=True)
    plain: bytes | None = None
    files = {}
    for codec in codecs:
        path = data_dir / f"{records}-{codec}" / "state" / "0" / "0" / "1.snapshot"
        if not path.exists():
            if plain is None:
                plain = plain_snapshot(records)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(compress(plain, codec))
        files[codec] = path
    size = len(plain) if plain is not None else len(plain_snapshot(1)) - 4
    if plain is None:
        # Every record has the same size: derive the plain size without building it.
        size = size * records + 4
    return size, files


def decompress_only(storage: Storage, rel: str) -> int:
    with storage.open_stream(rel) as fh:
        return sum(len(c) for c in decompressed_chunks(rel, fh))


def iterate(storage: Storage, rel: str) -> int:
    n = 0
    with storage.open_stream(rel) as fh:
        for _ in iter_kv_records(rel, decompressed_chunks(rel, fh), snapshot=True):
            n += 1
    return n


def decode(storage: Storage, rel: str, decoder: RowDecoder) -> int:
    n = 0
    key, value = decoder.key, decoder.value
    with storage.open_stream(rel) as fh:
        for k, v in iter_kv_records(rel, decompressed_chunks(rel, fh), snapshot=True):
            key(k)
            value(v)
            n += 1
    return n


def timed(fn: Callable[..., int], *args: object) -> tuple[float, int]:
    """CPU seconds of ``fn(*args)`` and what it counted."""
    start = time.process_time()
    counted = fn(*args)
    return time.process_time() - start, counted


def stage(
    name: str, spent: list[float], fn: Callable[..., int], *args: object, expect: int
) -> Case:
    def run() -> Measurement:
        measured, (seconds, counted) = measure_call(lambda: timed(fn, *args))
        assert counted == expect, (name, counted, expect)
        spent.append(seconds)
        return measured

    return Case(name, run)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--codec", action="append", choices=CODECS)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.records = 20_000
    codecs = args.codec or ["lz4", "zstd", "snappy"]
    plain_size, files = build(HERE / ".data" / "readers", args.records, codecs)
    decoder = RowDecoder(StateSchema(KEY_SCHEMA, VALUE_SCHEMA, 2), "hdfs", path="1.snapshot")
    rel = "state/0/0/1.snapshot"
    cases: list[Case] = []
    spent: dict[str, list[float]] = {}
    for codec, path in files.items():
        storage = Storage.from_url(str(path.parent.parent.parent.parent))
        n = args.records
        for label, fn, extra, expect in (
            ("decompress", decompress_only, (), plain_size),
            ("iterate records", iterate, (), n),
            ("decode key + value", decode, (decoder,), n),
        ):
            name = f"{codec}: {label}"
            spent[name] = []
            cases.append(stage(name, spent[name], fn, storage, rel, *extra, expect=expect))
    rows = []
    for name, measured in alternate(cases, args.repeat).items():
        codec = name.split(":")[0]
        best, median = figures(spent[name])
        if "decompress" in name:
            rate = f"{plain_size / best / 1e6:,.0f} / {plain_size / median / 1e6:,.0f} MB/s"
        else:
            rate = f"{args.records / best:,.0f} / {args.records / median:,.0f} rows/s"
        size = files[codec].stat().st_size
        rows.append(
            row(name, measured, **{"rate (best / median)": rate, "file MB": f"{size / 1e6:.1f}"})
        )
    report(
        args,
        f"Reading one snapshot: {args.records:,} records, {plain_size / 1e6:.1f} MB decompressed",
        f"Forked children, the stages and codecs alternating, {args.repeat} rounds; "
        f"{machine()}. Rates from the CPU time of the reading loop.",
        rows,
    )


if __name__ == "__main__":
    main()
