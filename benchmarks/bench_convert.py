"""``ckpt convert --provider`` of a 1M-key state, HDFS -> RocksDB and back, against
``ckpt repartition`` of the same state (Spark has no conversion to compare with: its answer
is a new checkpoint and a full recomputation).

The state: the HDFS-backed aggregation ``bench_replay.py`` builds with a real PySpark query
(``--keys`` distinct keys, 4 partitions, deltas only; built once into
``benchmarks/.data/replay-<keys>-4/``). The RocksDB state converted back is ckpt's own
conversion of it, made once, untimed.

Each round copies the source afresh (untimed, then :func:`common.warm`) and times, in turn,
a fresh process of: ``ckpt convert COPY --provider rocksdb --apply --yes --force``; the same
``--provider hdfs`` on a copy of the converted state; ``ckpt repartition COPY --partitions 3
--apply --yes --force`` of the HDFS state. All write to local disk. CPU is the process
tree's; memory is the peak of its summed RSS, also given against the state's decompressed
records.

    .venv/bin/python benchmarks/bench_convert.py [--keys 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_replay import build_spark, state_bytes  # noqa: E402
from common import (  # noqa: E402
    Case,
    Measurement,
    add_options,
    alternate,
    data_dir,
    fresh_copy,
    machine,
    measure,
    report,
    row,
)

PYTHON = sys.executable
PARTITIONS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    add_options(parser)
    args = parser.parse_args()
    keys = 20_000 if args.quick else args.keys
    hdfs = build_spark(data_dir(f"replay-{keys}-{PARTITIONS}"), keys, PARTITIONS, False)
    work = data_dir("convert", "runs")
    rocksdb = data_dir("convert", f"rocksdb-{keys}") / "checkpoint"
    if not (rocksdb / "commits").is_dir():
        shutil.rmtree(rocksdb.parent, ignore_errors=True)
        shutil.copytree(hdfs, rocksdb)
        measure(
            [PYTHON, "-m", "ckpt_cli", "convert", str(rocksdb), "--provider", "rocksdb"]
            + ["--apply", "--yes", "--force"],
            output=work.with_suffix(".log"),
            cwd=HERE.parent,
        )
        shutil.rmtree(f"{rocksdb}.ckpt-quarantine")
    size, _ = state_bytes(hdfs)

    def copy(src: Path, name: str) -> Path:
        return fresh_copy(src, work / name)

    def ckpt(name: str, *args: str) -> Measurement:
        cmd = [PYTHON, "-m", "ckpt_cli", *args[:1], str(work / name), *args[1:]]
        cmd += ["--apply", "--yes", "--force"]
        return measure(cmd, output=work / f"{name}.out", cwd=HERE.parent)

    to_rocksdb = "ckpt convert --provider rocksdb (HDFS -> RocksDB)"
    to_hdfs = "ckpt convert --provider hdfs (RocksDB -> HDFS)"
    repartition = f"ckpt repartition --partitions 3 (HDFS, {PARTITIONS} -> 3)"
    cases = [
        Case(
            to_rocksdb,
            lambda: ckpt("to-rocksdb", "convert", "--provider", "rocksdb"),
            lambda: copy(hdfs, "to-rocksdb"),
        ),
        Case(
            to_hdfs,
            lambda: ckpt("to-hdfs", "convert", "--provider", "hdfs"),
            lambda: copy(rocksdb, "to-hdfs"),
        ),
        Case(
            repartition,
            lambda: ckpt("repartition", "repartition", "--partitions", "3"),
            lambda: copy(hdfs, "repartition"),
        ),
    ]
    runs = alternate(cases, max(3, args.repeat))
    rows = []
    for name, measured in runs.items():
        peak = sorted(m.peak_rss for m in measured)[len(measured) // 2]
        rows.append(row(name, measured, **{"peak RSS / state": f"{peak / size:.2f}x"}))
    notes = (
        f"{machine()}. State: {keys:,} keys in {PARTITIONS} partitions, {size / 1e6:.1f} MB of "
        "decompressed records (a real query's HDFS-backed aggregation). Each run on a fresh "
        "copy; rounds alternate the three."
    )
    report(args, f"convert, {keys:,} keys", notes, rows)


if __name__ == "__main__":
    main()
