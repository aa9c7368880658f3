"""``ckpt convert --provider`` of a 1M-key state, HDFS -> RocksDB and back, against
``ckpt repartition`` of the same state (Spark has no conversion to compare with: its answer
is a new checkpoint and a full recomputation).

The state: the HDFS-backed aggregation ``bench_replay.py`` builds with a real PySpark query
(``--keys`` distinct keys, 4 partitions, deltas only; built once into
``benchmarks/.data/replay-<keys>-4/``). The RocksDB state converted back is ckpt's own
conversion of it, made once, untimed.

Each round copies the source afresh (untimed, then :func:`common.warm`) and times, in turn,
a fresh process of: ``ckpt convert COPY --provider rocksdb --apply --yes --force``; the same
``--provider hdfs`` and ``--format-version 2`` on copies of the converted state;
``ckpt repartition COPY --partitions 3 --apply --yes --force`` of the HDFS state. All write
to local disk. CPU is the process tree's; memory is the peak of its summed RSS, also given
against the state's decompressed records.

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
    against_state,
    alternate,
    ckpt,
    data_dir,
    fresh_copy,
    machine,
    report,
    row,
)

PARTITIONS = 4
APPLY = ("--apply", "--yes", "--force")


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
        ckpt(
            "convert",
            str(rocksdb),
            "--provider",
            "rocksdb",
            *APPLY,
            output=work.with_suffix(".log"),
        )
        shutil.rmtree(f"{rocksdb}.ckpt-quarantine")
    size, _ = state_bytes(hdfs)

    def case(label: str, source: Path, name: str, *command: str) -> Case:
        """``ckpt COMMAND COPY OPTIONS --apply`` on a fresh copy of ``source`` called ``name``."""
        dest = work / name

        def run() -> Measurement:
            args = [command[0], str(dest), *command[1:], *APPLY]
            return ckpt(*args, output=work / f"{name}.out")

        return Case(label, run, lambda: fresh_copy(source, dest))

    cases = [
        case(
            "ckpt convert --provider rocksdb (HDFS -> RocksDB)",
            hdfs,
            "to-rocksdb",
            *("convert", "--provider", "rocksdb"),
        ),
        case(
            "ckpt convert --provider hdfs (RocksDB -> HDFS)",
            rocksdb,
            "to-hdfs",
            *("convert", "--provider", "hdfs"),
        ),
        case(
            "ckpt convert --format-version 2 (RocksDB v1 -> v2)",
            rocksdb,
            "to-v2",
            *("convert", "--format-version", "2"),
        ),
        case(
            f"ckpt repartition --partitions 3 (HDFS, {PARTITIONS} -> 3)",
            hdfs,
            "repartition",
            *("repartition", "--partitions", "3"),
        ),
    ]
    runs = alternate(cases, max(3, args.repeat))
    rows = [row(name, measured, **against_state(measured, size)) for name, measured in runs.items()]
    notes = (
        f"{machine()}. State: {keys:,} keys in {PARTITIONS} partitions, {size / 1e6:.1f} MB of "
        "decompressed records (a real query's HDFS-backed aggregation). Each run on a fresh "
        "copy; rounds alternate the four."
    )
    report(args, f"convert, {keys:,} keys", notes, rows)


if __name__ == "__main__":
    main()
