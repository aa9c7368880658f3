"""Synthetic checkpoints in Spark's exact formats, at sizes real queries take hours to reach.

Writes the checkpoint of a streaming aggregation ``groupBy(k).agg(count, sum, max(ts))`` on
the HDFS-backed store with the project's own writers (``compression.compress`` for the lz4
block stream, Spark's delta/snapshot record layout, UnsafeRow rows, the v2 schema file,
operator metadata, offsets/commits logs, Hadoop ``.crc`` sidecars). Real Spark reads it:
tests/test_synthetic_spark.py compares Spark's ``statestore`` source with ``ckpt replay`` on
one, and the layout mirrors fixtures/checkpoints/spark4-hdfs-agg.

Version 1 puts every key of a partition; each later version updates ``updates`` keys; a
snapshot every ``snapshot_every`` versions holds the whole map. Keys are spread over
partitions round-robin (the reader does not check Spark's hash partitioning).

    .venv/bin/python benchmarks/synthetic.py DIR --partitions 2000 --versions 100 --keys 10000000
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ckpt_cli.formats.compression import compress  # noqa: E402

HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
KEY_JSON = '{"type":"struct","fields":[{"name":"k","type":"string","nullable":true,"metadata":{}}]}'
VALUE_JSON = (
    '{"type":"struct","fields":[{"name":"count","type":"long","nullable":false,"metadata":{}},'
    '{"name":"sum","type":"long","nullable":true,"metadata":{}},'
    '{"name":"max","type":"timestamp","nullable":true,"metadata":{}}]}'
)
EPOCH_2024_US = 1_704_067_200_000_000
_INT = struct.Struct(">i")


def _utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def schema_v2() -> bytes:
    """``state/<op>/0/_metadata/schema``: writeUTF("v2"), then each schema as chunked UTF."""
    return (
        _utf("v2") + struct.pack(">i", 1) + _utf(KEY_JSON) + struct.pack(">i", 1) + _utf(VALUE_JSON)
    )


def key_row(i: int) -> bytes:
    """UnsafeRow of one string column: null bitset, (offset << 32 | size), padded bytes."""
    text = b"key-%09d" % i
    padded = text + b"\x00" * (-len(text) % 8)
    return bytes(8) + struct.pack("<q", (16 << 32) | len(text)) + padded


def value_row(version: int, i: int) -> bytes:
    return bytes(8) + struct.pack("<qqq", version, version * (i % 1000), EPOCH_2024_US + version)


def hadoop_crc(data: bytes) -> bytes:
    sums = [zlib.crc32(data[i : i + 512]) for i in range(0, len(data), 512)]
    return b"crc\x00" + struct.pack(">i", 512) + struct.pack(f">{len(sums)}I", *sums)


class Writer:
    def __init__(self, root: Path, crc: bool) -> None:
        self.root = root
        self.crc = crc
        self.files = 0
        self.bytes = 0

    def write(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.files += 1
        self.bytes += len(data)
        if self.crc:
            (path.parent / f".{path.name}.crc").write_bytes(hadoop_crc(data))
            self.files += 1


def records(rows: list[tuple[int, int]]) -> bytes:
    """Delta/snapshot records for (key index, version of its value) pairs, plus the -1."""
    out = bytearray()
    for i, version in rows:
        k, v = key_row(i), value_row(version, i)
        out += _INT.pack(len(k)) + k + _INT.pack(len(v)) + v
    out += _INT.pack(-1)
    return bytes(out)


def build(
    root: Path,
    *,
    partitions: int,
    versions: int,
    keys: int,
    updates: int = 5,
    snapshot_every: int = 10,
    crc: bool = True,
) -> dict[str, int]:
    """Write the checkpoint (once: a ``.complete`` marker holds its totals)."""
    marker = root / ".complete"
    if marker.exists():
        totals: dict[str, int] = json.loads(marker.read_text())
        return totals
    w = Writer(root, crc)
    w.write("metadata", b'{"id":"00000000-0000-4000-8000-000000000000"}')
    conf = {
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.streaming.stateStore.providerClass": HDFS_PROVIDER,
        "spark.sql.streaming.stateStore.compression.codec": "lz4",
        "spark.sql.streaming.aggregation.stateFormatVersion": "2",
    }
    for batch in range(versions):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_704_067_200_000 + batch, "conf": conf}
        w.write(f"offsets/{batch}", f'v1\n{json.dumps(meta)}\n{{"logOffset":{batch}}}'.encode())
        w.write(f"commits/{batch}", b'v1\n{"nextBatchWatermarkMs":0}')
    w.write("state/0/0/_metadata/schema", schema_v2())
    w.write(
        "state/0/_metadata/metadata",
        (
            'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},'
            '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,'
            f'"numPartitions":{partitions}}}]}}'
        ).encode(),
    )
    for part in range(partitions):
        mine = list(range(part, keys, partitions))
        current = dict.fromkeys(mine, 1)
        for version in range(1, versions + 1):
            if version == 1:
                changed = [(i, 1) for i in mine]
            else:
                start = (version * updates) % max(1, len(mine))
                picked = (mine[start : start + updates] or mine[:updates]) if mine else []
                changed = [(i, version) for i in picked]
                for i, _ in changed:
                    current[i] = version
            w.write(f"state/0/{part}/{version}.delta", compress(records(changed), "lz4"))
            if version % snapshot_every == 0:
                full = sorted(current.items())
                w.write(f"state/0/{part}/{version}.snapshot", compress(records(full), "lz4"))
    totals = {"files": w.files, "bytes": w.bytes, "keys": keys}
    marker.write_text(json.dumps(totals))
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--no-crc", action="store_true", help="object-store style: no .crc files")
    args = parser.parse_args()
    totals = build(
        args.dir,
        partitions=args.partitions,
        versions=args.versions,
        keys=args.keys,
        crc=not args.no_crc,
    )
    print(json.dumps(totals))


if __name__ == "__main__":
    main()
