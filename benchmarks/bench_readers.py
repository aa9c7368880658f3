"""Benchmark: reading a large HDFS-backed store file (issue: readers).

Generates (once, under benchmarks/.data/) a ``.snapshot`` of an aggregation's state with
N records (default 1,000,000): key row ``{k: string}``, value row ``{count: long, sum: long,
max: timestamp}``, in the byte layout Spark writes, compressed with each codec in Spark's
stream framing. Then, reading the file through the storage layer as ckpt does:

* decompression alone (MB/s of decompressed bytes),
* raw record iteration (records/s and MB/s),
* full decoding of keys and values with the schema (rows/s),
* peak Python memory of streaming the whole file (tracemalloc), against the file sizes.

    .venv/bin/python benchmarks/bench_readers.py [--records 1000000] [--codec lz4 ...]
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ckpt_cli.formats import schema as S  # noqa: E402
from ckpt_cli.formats.compression import CODECS, compress, decompressed_chunks  # noqa: E402
from ckpt_cli.formats.records import iter_kv_records  # noqa: E402
from ckpt_cli.replay.rows import RowDecoder  # noqa: E402
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


def best_of(runs: int, fn: Callable[..., int], *args: object) -> tuple[float, int]:
    best, result = float("inf"), 0
    for _ in range(runs):
        start = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, result


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--codec", action="append", choices=CODECS)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    codecs = args.codec or ["lz4", "zstd", "snappy"]
    plain_size, files = build(HERE / ".data" / "readers", args.records, codecs)
    print(f"snapshot: {args.records:,} records, {plain_size / 1e6:.1f} MB decompressed")
    decoder = RowDecoder(S.StateSchema(KEY_SCHEMA, VALUE_SCHEMA, 2), "hdfs", path="1.snapshot")

    for codec, path in files.items():
        storage = Storage.from_url(str(path.parent.parent.parent.parent))
        rel = "state/0/0/1.snapshot"
        size = path.stat().st_size

        t_dec, nbytes = best_of(args.runs, decompress_only, storage, rel)
        t_iter, n = best_of(args.runs, iterate, storage, rel)
        t_full, n2 = best_of(args.runs, decode, storage, rel, decoder)
        assert n == n2 == args.records and nbytes == plain_size
        tracemalloc.start()
        iterate(storage, rel)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"{codec:>6}: file {size / 1e6:6.1f} MB | decompress {nbytes / t_dec / 1e6:7.0f} MB/s"
            f" | raw iteration {n / t_iter:>10,.0f} records/s ({nbytes / t_iter / 1e6:4.0f} MB/s)"
            f" | decode key+value {n / t_full:>9,.0f} rows/s | peak memory streaming "
            f"{peak / 1e6:.1f} MB"
        )


if __name__ == "__main__":
    main()
