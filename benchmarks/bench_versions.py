"""Benchmark: `ckpt versions` on a checkpoint of 200 partitions x 100 state versions.

Builds (once, under benchmarks/.data/) a checkpoint with the file layout an HDFS-backed
aggregation leaves on local disk: 100 offsets/commits entries, per partition 100 deltas and a
snapshot every 10 versions, each with its Hadoop .crc sidecar (about 45,000 files). Only names
and sizes matter to `versions`; the state files' contents are placeholders.

Prints the time to open the checkpoint and build the versions report in-process (the work
after interpreter start-up, best of N), the listing calls made, and the end-to-end time of the
CLI with and without interpreter start-up.

    .venv/bin/python benchmarks/bench_versions.py [--partitions 200] [--versions 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ckpt_cli.model import Checkpoint  # noqa: E402
from ckpt_cli.versions import describe_versions  # noqa: E402


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
        crc = path.parent / f".{path.name}.crc"
        crc.write_bytes(b"crc\x00\x00\x00\x02\x00" + b"\x00" * 4)
        count += 2

    write("metadata", b'{"id":"00000000-0000-0000-0000-000000000000"}')
    conf = f'{{"spark.sql.shuffle.partitions":"{partitions}"}}'
    for batch in range(versions):
        write(
            f"offsets/{batch}",
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{batch},"conf":{conf}}}\n'
            f'{{"logOffset":{batch}}}'.encode(),
        )
        write(f"commits/{batch}", b'v1\n{"nextBatchWatermarkMs":0}')
    for part in range(partitions):
        for version in range(1, versions + 1):
            write(f"state/0/{part}/{version}.delta", b"\x00" * 64)
            if version % 10 == 0:
                write(f"state/0/{part}/{version}.snapshot", b"\x00" * 256)
    marker.write_text(str(count))
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    root = HERE / ".data" / f"versions-{args.partitions}x{args.versions}"
    files = build(root, args.partitions, args.versions)

    timings = []
    list_calls = reads = 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        checkpoint = Checkpoint.open(str(root))
        report = describe_versions(checkpoint)
        timings.append(time.perf_counter() - start)
        list_calls = checkpoint.storage.stats.list
        reads = checkpoint.storage.stats.files_read
    parts = len(report.operators[0].stores[0].partitions)

    cli = [sys.executable, "-m", "ckpt_cli", "versions", str(root), "--json"]
    start = time.perf_counter()
    out = subprocess.run(cli, capture_output=True, check=True).stdout
    cli_time = time.perf_counter() - start
    json.loads(out)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import ckpt_cli.cli"], check=True)
    startup = time.perf_counter() - start

    print(f"checkpoint: {args.partitions} partitions x {args.versions} versions, {files} files")
    print(f"partitions reported: {parts}")
    print(f"versions in-process (open + report), best of {args.repeat}: {min(timings):.3f} s")
    print(f"listing calls (directories scanned): {list_calls}; files read: {reads}")
    print(f"CLI end to end (ckpt versions --json): {cli_time:.3f} s")
    print(f"  of which interpreter + imports: {startup:.3f} s")


if __name__ == "__main__":
    main()
