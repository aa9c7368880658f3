"""Benchmark: `ckpt validate` and `ckpt validate --deep` on 200 partitions x 100 versions.

Builds (once, under benchmarks/.data/) an HDFS-backed aggregation checkpoint whose files are
real: every delta holds valid records (lz4, in Spark's stream framing), a snapshot every 10
versions holds the whole state, every file has a correct Hadoop .crc sidecar, and the
offsets/commits logs and the state schema are the ones Spark writes. Then measures
(benchmarks/common.py: each in a forked child, alternating, ``--repeat`` rounds) the default
check (what a restart needs), --all-versions and --deep (every file decoded and its .crc
verified): wall, CPU of the process tree (CPU/wall > 1 means more than one core was busy),
peak tree RSS, files checked, read requests and bytes read.

    .venv/bin/python benchmarks/bench_validate.py [--partitions 200] [--versions 100] [--quick]
"""

from __future__ import annotations

import argparse
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    Case,
    add_options,
    alternate,
    data_dir,
    machine,
    measure_call,
    row,  # noqa: E402
)
from common import report as write_report  # noqa: E402

from ckpt_cli.core.model import Checkpoint  # noqa: E402
from ckpt_cli.formats.compression import compress  # noqa: E402
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


def checked(root: str, options: dict[str, Any]) -> dict[str, int]:
    """Validate; the report's counts (every finding must be info: the checkpoint is sound)."""
    result = validate(Checkpoint.open(root), **options)
    bad = [f for f in result.findings if f.severity != "info"]
    assert not bad, bad[:3]
    return {k: int(v) for k, v in result.stats.items() if isinstance(v, int)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.versions = 10, 10
    root = data_dir(f"validate-{args.partitions}x{args.versions}")
    files = build(root, args.partitions, args.versions)
    stats: dict[str, dict[str, int]] = {}

    def case(label: str, options: dict[str, Any]) -> Case:
        def run() -> Any:
            measured, stats[label] = measure_call(lambda: checked(str(root), options))
            return measured

        return Case(label, run)

    runs = alternate(
        [
            case("validate", {}),
            case("validate --all-versions", {"all_versions": True}),
            case("validate --deep", {"deep": True}),
        ],
        args.repeat,
    )
    rows = []
    for label, measured in runs.items():
        s = stats[label]
        rows.append(
            row(
                label,
                measured,
                **{
                    "files checked": f"{s['files_checked']:,}",
                    "reads": f"{s['files_read']:,}",
                    "MB read": f"{s['bytes_read'] / 1e6:.1f}",
                    "listing calls": str(s["list_calls"]),
                },
            )
        )
    write_report(
        args,
        f"validate: {args.partitions} partitions x {args.versions} versions ({files:,} files)",
        f"Each in a forked child, alternating, {args.repeat} rounds; {machine()}.",
        rows,
    )


if __name__ == "__main__":
    main()
