"""Benchmark: `ckpt validate` and `ckpt validate --deep` on 200 partitions x 100 versions.

Builds (once, under benchmarks/.data/) an HDFS-backed aggregation checkpoint whose files are
real: every delta holds valid records (lz4, in Spark's stream framing), a snapshot every 10
versions holds the whole state, every file has a correct Hadoop .crc sidecar, and the
offsets/commits logs and the state schema are the ones Spark writes. Then prints, for the
default check (what a restart needs) and for --deep (every file decoded and its .crc
verified): wall time, CPU time of this process and its workers (CPU/wall > 1 means more than
one core was busy), files checked, read requests and bytes read.

    .venv/bin/python benchmarks/bench_validate.py [--partitions 200] [--versions 100]
"""

from __future__ import annotations

import argparse
import os
import resource
import struct
import sys
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ckpt_cli.formats.compression import compress  # noqa: E402
from ckpt_cli.model import Checkpoint  # noqa: E402
from ckpt_cli.validate import validate  # noqa: E402

KEYS_PER_PARTITION = 50
# state/0/0/_metadata/schema of a Spark 4.3 groupBy(k).agg(count, sum, max(ts)): v2 header,
# then the key and value schemas as chunked JSON.
KEY_JSON = '{"type":"struct","fields":[{"name":"k","type":"string","nullable":true,"metadata":{}}]}'
VALUE_JSON = (
    '{"type":"struct","fields":[{"name":"count","type":"long","nullable":false,"metadata":{}},'
    '{"name":"sum","type":"long","nullable":true,"metadata":{}},'
    '{"name":"max","type":"timestamp","nullable":true,"metadata":{}}]}'
)


def schema_v2() -> bytes:
    def utf(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">H", len(raw)) + raw

    def chunked(text: str) -> bytes:
        return struct.pack(">i", 1) + utf(text)

    return utf("v2") + chunked(KEY_JSON) + chunked(VALUE_JSON)


def key_row(i: int) -> bytes:
    text = b"key-%06d" % i
    return bytes(8) + struct.pack("<q", (16 << 32) | len(text)) + text.ljust(16, b"\x00")


def value_row(version: int, i: int) -> bytes:
    return bytes(8) + struct.pack("<qqq", version, version * i, 1_704_067_200_000_000 + version)


def records(version: int, keys: range) -> bytes:
    pack = struct.Struct(">i").pack
    out = bytearray()
    for i in keys:
        k, v = key_row(i), value_row(version, i)
        out += pack(len(k)) + k + pack(len(v)) + v
    return bytes(out + pack(-1))


def hadoop_crc(data: bytes) -> bytes:
    sums = [zlib.crc32(data[i : i + 512]) for i in range(0, len(data), 512)]
    return b"crc\x00" + struct.pack(">i", 512) + struct.pack(f">{len(sums)}I", *sums)


def build(root: Path, partitions: int, versions: int) -> int:
    marker = root / ".complete"
    if marker.exists():
        return int(marker.read_text())
    count = 0

    def write(rel: str, data: bytes) -> None:
        nonlocal count
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        (path.parent / f".{path.name}.crc").write_bytes(hadoop_crc(data))
        count += 2

    write("metadata", b'{"id":"00000000-0000-0000-0000-000000000000"}')
    provider = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    conf = (
        f'{{"spark.sql.shuffle.partitions":"{partitions}",'
        f'"spark.sql.streaming.stateStore.providerClass":"{provider}"}}'
    )
    for batch in range(versions):
        write(
            f"offsets/{batch}",
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{batch},"conf":{conf}}}\n'
            f'{{"logOffset":{batch}}}'.encode(),
        )
        write(f"commits/{batch}", b'v1\n{"nextBatchWatermarkMs":0}')
    write("state/0/0/_metadata/schema", schema_v2())
    for part in range(partitions):
        for version in range(1, versions + 1):
            # Each batch updates a few keys; the snapshot holds them all.
            first = (version * 7) % KEYS_PER_PARTITION
            write(
                f"state/0/{part}/{version}.delta",
                compress(records(version, range(first, min(first + 5, KEYS_PER_PARTITION))), "lz4"),
            )
            if version % 10 == 0:
                write(
                    f"state/0/{part}/{version}.snapshot",
                    compress(records(version, range(KEYS_PER_PARTITION)), "lz4"),
                )
    marker.write_text(str(count))
    return count


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    args = parser.parse_args()
    root = HERE / ".data" / f"validate-{args.partitions}x{args.versions}"
    files = build(root, args.partitions, args.versions)
    print(
        f"checkpoint: {args.partitions} partitions x {args.versions} versions, {files} files, "
        f"{os.cpu_count()} cores"
    )
    for label, options in (
        ("validate", {}),
        ("validate --all-versions", {"all_versions": True}),
        ("validate --deep", {"deep": True}),
    ):
        wall, cpu = time.perf_counter(), cpu_seconds()
        report = validate(Checkpoint.open(str(root)), **options)  # type: ignore[arg-type]
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        bad = [f for f in report.findings if f.severity != "info"]
        assert not bad, bad[:3]
        s = report.stats
        print(
            f"{label:>24}: {wall:6.2f} s wall, {cpu:6.2f} s CPU (x{cpu / wall:.1f}) | "
            f"{s['files_checked']:,} files checked, {s['files_read']:,} reads, "
            f"{s['bytes_read'] / 1e6:.1f} MB | {s['list_calls']} listing calls"
        )


if __name__ == "__main__":
    main()
