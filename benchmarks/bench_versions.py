"""Benchmark: `ckpt versions` on a checkpoint of 200 partitions x 100 state versions.

Builds (once, under benchmarks/.data/) a checkpoint with the file layout an HDFS-backed
aggregation leaves on local disk: 100 offsets/commits entries, per partition 100 deltas and a
snapshot every 10 versions, each with its Hadoop .crc sidecar (about 45,000 files). Only names
and sizes matter to `versions`; the state files' contents are placeholders.

Measures (benchmarks/common.py, alternating, ``--repeat`` rounds): opening the checkpoint and
building the versions report in a forked child (the work after interpreter start-up), the
CLI end to end with its JSON written to a file, and the interpreter + imports alone.

    .venv/bin/python benchmarks/bench_versions.py [--partitions 200] [--versions 100] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    Case,
    Measurement,
    add_options,
    alternate,
    data_dir,
    machine,
    measure,
    measure_call,
    report,
    row,
)

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


def open_and_report(root: str) -> tuple[int, int, int]:
    """Partitions reported, directories scanned, files read."""
    checkpoint = Checkpoint.open(root)
    described = describe_versions(checkpoint)
    stats = checkpoint.storage.stats
    return len(described.operators[0].stores[0].partitions), stats.list, stats.files_read


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.versions = 10, 10
    root = data_dir(f"versions-{args.partitions}x{args.versions}")
    files = build(root, args.partitions, args.versions)
    counts: list[tuple[int, int, int]] = []

    def in_process() -> Measurement:
        measured, result = measure_call(lambda: open_and_report(str(root)))
        counts.append(result)
        return measured

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "versions.json"
        cli = [sys.executable, "-m", "ckpt_cli", "versions", str(root), "--json"]
        # What `ckpt versions` imports: the CLI loads only the command it runs.
        startup = [sys.executable, "-c", "import ckpt_cli.cli as c; c.make_app(['versions'])"]
        nothing = Path(tmp) / "startup.out"
        runs = alternate(
            [
                Case("open + versions report (in-process)", in_process),
                Case("ckpt versions --json > file (CLI)", lambda: measure(cli, output=out)),
                Case("  of which interpreter + imports", lambda: measure(startup, output=nothing)),
            ],
            args.repeat,
        )
        assert json.loads(out.read_text())["operators"], "the CLI reported no operators"
    parts, lists, reads = counts[-1]
    assert parts == args.partitions, parts
    report(
        args,
        f"versions: {args.partitions} partitions x {args.versions} versions ({files:,} files)",
        f"Alternating, {args.repeat} rounds; {machine()}. The in-process run scanned {lists} "
        f"directories and read {reads} files.",
        [row(name, measured) for name, measured in runs.items()],
    )


if __name__ == "__main__":
    main()
