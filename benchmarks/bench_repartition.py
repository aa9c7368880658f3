"""``ckpt repartition`` against Spark 4.3's own offline repartition, end to end.

The state: a streaming aggregation ``groupBy(k).agg(count, sum(v), max(ts))`` on the RocksDB
store, 2 partitions, written by a real PySpark query over ``--keys`` distinct keys (1M by
default; two batches, so the repartition reads a committed batch whose state came from a
snapshot). Built once into ``benchmarks/.data/repartition/`` and reused.

Each round copies that checkpoint twice (untimed, then :func:`common.warm`) and times, in
turn: ``ckpt repartition COPY --partitions 3 --apply --yes --force`` (a fresh Python process)
and a fresh Python process that starts a local Spark session and calls
``spark._streamingCheckpointManager.repartition(COPY, 3)`` (JVM start included). Both write
to local disk. CPU is the process tree's; memory is the peak of its summed RSS. The state
size is the bytes of the files the restart version loads (its zips and the SSTs they name).
A third row, ``ckpt --version``, is the floor under ckpt's peak: the interpreter and the
CLI's imports, before any work.

``--no-spark`` times ckpt's side alone (states too large to wait for Spark's side on a
loaded machine; the state itself is still written by the real query).

    .venv/bin/python benchmarks/bench_repartition.py [--keys 1000000] [--repeat 3] [--no-spark]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

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
    measure,
    report,
    row,
)

PYTHON = sys.executable
PARTITIONS_BEFORE, PARTITIONS_AFTER = 2, 3
SPARK_CONFS = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": str(PARTITIONS_BEFORE),
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
}


def _session() -> object:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("bench-repartition")
    for key, value in SPARK_CONFS.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def generate(keys: int, root: Path) -> None:
    """Run the query (in this process: call it in a child). Two input files: every key once,
    then a tenth of them again."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    input_dir = root / "input"
    input_dir.mkdir(parents=True)
    for step, count in enumerate((keys, max(1, keys // 10))):
        ids = range(0, keys, keys // count)
        table = pa.table(
            {
                "k": [f"key-{i:09d}" for i in ids],
                "v": list(ids),
                "ts": pa.array([1_704_067_200_000_000 + i for i in ids], pa.timestamp("us")),
            }
        )
        pq.write_table(table, input_dir / f"part-{step:03d}.parquet")
    from pyspark.sql import functions as F

    spark = _session()
    schema = "k string, v long, ts timestamp"
    stream = (
        spark.readStream.schema(schema)  # type: ignore[attr-defined]
        .option("maxFilesPerTrigger", 1)
        .parquet(str(input_dir))
        .groupBy("k")
        .agg(F.count("*").alias("count"), F.sum("v").alias("sum"), F.max("ts").alias("max"))
    )
    query = (
        stream.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(root / "checkpoint"))
        .start()
    )
    query.processAllAvailable()
    query.stop()
    spark.stop()  # type: ignore[attr-defined]


def spark_repartition(ckpt: Path) -> None:
    spark = _session()
    spark._streamingCheckpointManager.repartition(str(ckpt), PARTITIONS_AFTER)  # type: ignore[attr-defined]
    spark.stop()  # type: ignore[attr-defined]


def state_bytes(ckpt: Path) -> int:
    """Bytes of what a restart loads: the newest zip of each partition and the SSTs it names."""
    total = 0
    for part in sorted((ckpt / "state" / "0").glob("[0-9]*")):
        newest = max(part.glob("*.zip"), key=lambda p: int(p.name.split(".")[0].split("_")[0]))
        total += newest.stat().st_size
        with zipfile.ZipFile(newest) as zf:
            meta = json.loads(zf.read("metadata").decode().split("\n", 1)[1])
        total += sum(int(s["sizeBytes"]) for s in meta["sstFiles"])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--no-spark", action="store_true", help="time ckpt's side only")
    parser.add_argument("--generate", type=Path, help=argparse.SUPPRESS)  # internal: the child
    parser.add_argument("--spark-side", type=Path, help=argparse.SUPPRESS)  # internal
    add_options(parser)
    args = parser.parse_args()
    if args.generate:
        generate(args.keys, args.generate)
        return
    if args.spark_side:
        spark_repartition(args.spark_side)
        return
    keys = 20_000 if args.quick else args.keys
    base = data_dir("repartition", f"agg-rocksdb-{keys}")
    if not (base / "checkpoint" / "commits").is_dir():
        shutil.rmtree(base, ignore_errors=True)
        print(f"generating {keys} keys with a real query into {base} ...", flush=True)
        measure(
            [PYTHON, __file__, "--keys", str(keys), "--generate", str(base)],
            output=base.with_suffix(".log"),
        )
    src = base / "checkpoint"
    size = state_bytes(src)
    work = data_dir("repartition", "runs")

    def copy(name: str) -> Path:
        return fresh_copy(src, work / name)

    def ckpt_run() -> Measurement:
        args = ["repartition", str(work / "ckpt"), "--partitions", str(PARTITIONS_AFTER)]
        return ckpt(*args, "--apply", "--yes", "--force", output=work / "ckpt.out")

    def spark_run() -> Measurement:
        dest = work / "spark"
        cmd = [PYTHON, __file__, "--spark-side", str(dest)]
        return measure(cmd, output=work / "spark.out", cwd=HERE.parent)

    def startup() -> Measurement:
        return ckpt("--version", output=work / "startup.out")

    ours = "ckpt repartition --apply"
    spark = "Spark 4.3 repartition (JVM start included)"
    cases = [Case(ours, ckpt_run, lambda: copy("ckpt"))]
    if not args.no_spark:
        cases.append(Case(spark, spark_run, lambda: copy("spark")))
    cases.append(Case("ckpt --version (interpreter and imports)", startup))
    runs = alternate(cases, max(3, args.repeat))
    rows = [row(name, measured, **against_state(measured, size)) for name, measured in runs.items()]
    notes = (
        f"{machine()}. State loaded by a restart: {size / 1e6:.1f} MB. Each run on a fresh "
        "copy of the checkpoint."
    )
    if not args.no_spark:
        ckpt_wall = min(m.wall for m in runs[ours])
        spark_wall = min(m.wall for m in runs[spark])
        notes += (
            f" Rounds alternate ckpt and Spark. ckpt is {spark_wall / ckpt_wall:.1f}x faster "
            "(min wall)."
        )
    side = " (ckpt only)" if args.no_spark else ""
    report(
        args,
        f"repartition {PARTITIONS_BEFORE} -> {PARTITIONS_AFTER}, {keys:,} keys (RocksDB){side}",
        notes,
        rows,
    )


if __name__ == "__main__":
    main()
