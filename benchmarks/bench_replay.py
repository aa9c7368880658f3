"""Benchmark: `ckpt replay` against Spark's statestore source, both writing files.

Builds (once, under benchmarks/.data/) the checkpoint of a streaming aggregation
``groupBy(k).agg(count, sum(v), max(ts))`` holding ``--keys`` keys, distinct keys and values
(nothing cycled from a few rows):

* ``--source spark`` (default): with real PySpark, a file source of two input files, so a
  snapshot-free delta chain (versions 1 and 2), and a second checkpoint where maintenance
  wrote a snapshot of version 2;
* ``--source spark --provider rocksdb [--changelog] [--checkpoint-format 2]``: the same
  query on the RocksDB provider, three input files (the third updates a tenth of the keys):
  with changelog checkpointing (format 2 implies it) version 3 is the zip of version 2
  (``2.zip``, or ``2_<uniqueId>.zip`` in format v2) plus ``3.changelog``; without, ``3.zip``.
  The state's size is then its records as a snapshot would frame them;
* ``--source synthetic``: benchmarks/synthetic.py (Spark's exact formats, read back by real
  Spark in tests/test_synthetic_spark.py), any size without a JVM.

Then, for each output format (``--formats jsonl,parquet,csv``), alternating ckpt and Spark
(benchmarks/common.py: every run its own process tree, the checkpoint read once untimed
before each, ``--repeat`` rounds):

* ``ckpt replay CHECKPOINT --format F --output FILE``
* a PySpark script: ``spark.read.format("statestore").load(CHECKPOINT)`` written as JSON
  lines / Parquet files / CSV with a header, ``partition_id, key.*, value.*`` as flat
  columns (local[2])

and reports wall, CPU of the process tree (the JVM and its Python workers too), peak RSS
summed over the tree against the state's decompressed size, rows written by each side
(checked equal), and how many times faster ckpt is (Spark's median wall / ckpt's).

    .venv/bin/python benchmarks/bench_replay.py [--keys 1000000] [--partitions 4] [--quick]
    .venv/bin/python benchmarks/bench_replay.py --provider rocksdb --changelog
    .venv/bin/python benchmarks/bench_replay.py --provider rocksdb --checkpoint-format 2
    .venv/bin/python benchmarks/bench_replay.py --partitions 200 --formats jsonl,csv,parquet \
        --one-worker      # Spark's default partition count, against --workers 1 too

Needs PySpark and Java for the Spark side (``--no-spark`` leaves it out).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import synthetic  # noqa: E402
from common import (  # noqa: E402
    Case,
    Measurement,
    add_options,
    alternate,
    data_dir,
    machine,
    measure,
    report,
    row,
    warm,
)

from ckpt_cli.core.model import Checkpoint  # noqa: E402
from ckpt_cli.core.read import iter_state  # noqa: E402
from ckpt_cli.core.rebuild import plan_version  # noqa: E402
from ckpt_cli.formats.compression import decompressed_chunks  # noqa: E402

BUILD = """
import glob, json, os, sys, shutil, time
from pyspark.sql import SparkSession, functions as F
root, keys, parts, snapshot = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
confs = json.loads(sys.argv[5])  # provider, changelog, checkpoint format
rocksdb = bool(confs)
builder = SparkSession.builder
for name, value in confs.items():
    builder = builder.config(name, value)
if snapshot or rocksdb:
    # HDFS: maintenance snapshots a version as soon as it has more than one delta.
    # RocksDB with changelogs: a zip every 2 versions (2.zip; 3 is a changelog on it).
    builder = (builder.config("spark.sql.streaming.stateStore.minDeltasForSnapshot",
                              "2" if rocksdb else "1")
               .config("spark.sql.streaming.stateStore.maintenanceInterval", "200ms"))
spark = (builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", parts)
         .config("spark.driver.memory", "3g")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
src = os.path.join(root, "input")
half = keys // 2
# RocksDB: a third batch updates a tenth of the keys (a changelog of puts over 2.zip).
steps = [(0, half), (half, keys)] + ([(0, keys // 10)] if rocksdb else [])
for step, (lo, hi) in enumerate(steps):
    (spark.range(lo, hi).selectExpr("concat('key-', cast(id as string)) as k",
        f"id + {step // 2} as v", f"timestamp_seconds(1704067200 + id + {step // 2}) as ts")
        .coalesce(1).write.mode("overwrite").parquet(os.path.join(root, f"staging{step}")))
os.makedirs(src)
schema = spark.read.parquet(os.path.join(root, "staging0")).schema
stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
          .groupBy("k").agg(F.count(F.lit(1)).alias("count"), F.sum("v").alias("sum"),
                            F.max("ts").alias("max")))
q = (stream.writeStream.format("noop").outputMode("update")
     .option("checkpointLocation", os.path.join(root, "checkpoint")).start())
state = os.path.join(root, "checkpoint/state/0")
for step in range(len(steps)):
    staged = os.path.join(root, f"staging{step}")
    for name in os.listdir(staged):
        if name.endswith(".parquet"):
            shutil.copy(os.path.join(staged, name), os.path.join(src, f"{step}-{name}"))
    q.processAllAvailable()
    if rocksdb and step == 1:
        # Version 2's zips are uploaded by maintenance: wait for them before version 3.
        deadline = time.time() + 300
        while len(glob.glob(os.path.join(state, "*/2.zip")) +
                  glob.glob(os.path.join(state, "*/2_*.zip"))) < int(parts):
            if time.time() > deadline:
                raise SystemExit("no zip of version 2 after 300 s")
            time.sleep(0.5)
if snapshot:
    deadline = time.time() + 60
    while time.time() < deadline:
        snaps = glob.glob(os.path.join(state, "*/2.snapshot"))
        if len(snaps) == int(parts):
            break
        time.sleep(0.5)
q.stop()
spark.stop()
"""

SPARK_READ = """
import sys
from pyspark.sql import SparkSession
ckpt, out, fmt, version = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
# Spark 4.1+ reads a format-v2 state only when the reading session says format v2 too.
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "3g")
         .config("spark.sql.streaming.stateStore.checkpointFormatVersion", version)
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
state = spark.read.format("statestore").load(ckpt)
if fmt == "csv":  # CSV has no structs: the key's and value's columns side by side
    state = state.select("partition_id", "key.*", "value.*")
writer = state.write.mode("overwrite")
if fmt == "jsonl":
    writer.json(out)
elif fmt == "csv":
    writer.csv(out, header=True)
else:
    writer.parquet(out)
spark.stop()
"""


def build_spark(
    root: Path, keys: int, partitions: int, snapshot: bool, confs: dict[str, str] | None = None
) -> Path:
    """A real query's checkpoint (HDFS unless ``confs`` name the RocksDB provider)."""
    ckpt = root / "checkpoint"
    if (root / ".complete").exists():
        return ckpt
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"building a {keys:,}-key checkpoint with PySpark (once)...", flush=True)
    subprocess.run(
        [
            sys.executable,
            "-c",
            BUILD,
            str(root),
            str(keys),
            str(partitions),
            str(int(snapshot)),
            json.dumps(confs or {}),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for step in range(3):
        shutil.rmtree(root / f"staging{step}", ignore_errors=True)
    (root / ".complete").write_text("ok")
    return ckpt


def state_bytes(ckpt_path: Path) -> tuple[int, int]:
    """The state the latest batch replays, in bytes, and the number of its files: HDFS
    files decompressed; for RocksDB (whose SSTs are compressed blocks) the state's records
    as an HDFS snapshot would frame them (two 4-byte sizes and the key and value rows)."""
    ckpt = Checkpoint.open(str(ckpt_path))
    latest = ckpt.batches.latest_committed
    assert latest is not None
    total = files = 0
    store = ckpt.operators[0].stores["default"]
    for part in store.partitions:
        plan = plan_version(ckpt, 0, part, latest + 1)
        files += len(plan.files)
        if store.provider == "rocksdb":
            total += sum(8 + len(k) + len(v) - 2 for k, v in iter_state(ckpt, plan))
            continue
        for f in plan.files:
            with ckpt.storage.open_stream(f.path) as fh:
                total += sum(len(c) for c in decompressed_chunks(f.path, fh))
    return total, files


def rows_written(output: Path, fmt: str) -> int:
    """Rows in a JSON lines / CSV / Parquet file, or in the part files of a Spark output
    folder (CSV: each file's header left out)."""
    parts = sorted(output.rglob("part-*")) if output.is_dir() else [output]
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
    total = 0
    for part in parts:
        with open(part, "rb") as fh:
            lines = sum(1 for _ in fh)
        total += max(lines - 1, 0) if fmt == "csv" else lines
    return total


def states(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """(label, checkpoint) to measure."""
    if args.source == "synthetic":
        partitions = args.partitions
        root = data_dir(f"replay-synthetic-{args.keys}-{partitions}x{args.versions}")
        synthetic.build(root, partitions=partitions, versions=args.versions, keys=args.keys)
        every = f"snapshot every 10 versions, {args.versions} versions"
        return [(f"synthetic, {every}", root)]
    if args.provider == "rocksdb":
        return [rocksdb_state(args)]
    found = []
    for snapshot in (False, True):
        if ("snapshot" if snapshot else "deltas") not in args.states.split(","):
            continue
        suffix = "-snap" if snapshot else ""
        root = data_dir(f"replay-{args.keys}-{args.partitions}{suffix}")
        label = "Spark-built, snapshot of version 2" if snapshot else "Spark-built, deltas only"
        found.append((label, build_spark(root, args.keys, args.partitions, snapshot)))
    return found


PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"


def rocksdb_state(args: argparse.Namespace) -> tuple[str, Path]:
    """A RocksDB checkpoint of three batches: with changelogs, version 3 is 2.zip (or
    ``2_<id>.zip`` in format v2) plus 3.changelog; without, 3.zip."""
    changelog = args.changelog or args.checkpoint_format == 2
    confs = {PROVIDER: ROCKSDB, CHANGELOG: str(changelog).lower()}
    name = f"replay-rocksdb-{args.keys}-{args.partitions}"
    if args.checkpoint_format == 2:
        confs[FORMAT_VERSION] = "2"
        name += "-v2"
        label = "RocksDB format v2, zip of version 2 + changelog"
    elif changelog:
        name += "-changelog"
        label = "RocksDB, zip of version 2 + changelog"
    else:
        label = "RocksDB, zip of version 3"
    root = data_dir(name)
    return label, build_spark(root, args.keys, args.partitions, False, confs)


def compare(
    args: argparse.Namespace, label: str, ckpt: Path, out_dir: Path
) -> list[dict[str, str]]:
    plain, files = state_bytes(ckpt)
    ckpt_bin = str(Path(sys.executable).with_name("ckpt"))
    spark_script = textwrap.dedent(SPARK_READ)
    rows: list[dict[str, str]] = []
    log = out_dir / "stdout"  # both sides write their rows to --output / the Spark folder
    for fmt in args.formats.split(","):
        ours = out_dir / f"ckpt.{fmt}"
        theirs = out_dir / f"spark-{fmt}"

        def run_ckpt(fmt: str = fmt, ours: Path = ours) -> Measurement:
            ours.unlink(missing_ok=True)
            cmd = [ckpt_bin, "replay", str(ckpt), "--format", fmt, "--output", str(ours)]
            return measure(cmd, output=log)

        def run_spark(fmt: str = fmt, theirs: Path = theirs) -> Measurement:
            shutil.rmtree(theirs, ignore_errors=True)
            version = str(args.checkpoint_format)
            cmd = [sys.executable, "-c", spark_script, str(ckpt), str(theirs), fmt, version]
            return measure(cmd, output=log)

        def run_one(fmt: str = fmt, ours: Path = ours) -> Measurement:
            ours.unlink(missing_ok=True)
            cmd = [ckpt_bin, "replay", str(ckpt), "--format", fmt, "--output", str(ours)]
            return measure([*cmd, "--workers", "1"], output=log)

        folder = out_dir / f"ckpt-dataset-{fmt}"

        def run_dataset(fmt: str = fmt, folder: Path = folder) -> Measurement:
            shutil.rmtree(folder, ignore_errors=True)
            cmd = [ckpt_bin, "replay", str(ckpt), "--format", fmt, "-O", str(folder)]
            return measure(cmd, output=log)

        cases = [Case(f"ckpt replay -> {fmt}", run_ckpt, prepare=lambda: warm(ckpt))]
        if args.dataset and fmt in ("jsonl", "parquet"):
            # A file per partition, as Spark writes a part file per task.
            dataset = Case(f"ckpt replay -O DIR -> {fmt}", run_dataset, prepare=lambda: warm(ckpt))
            cases.append(dataset)
        if args.one_worker:
            one = Case(f"ckpt replay --workers 1 -> {fmt}", run_one, prepare=lambda: warm(ckpt))
            cases.append(one)
        if not args.no_spark:
            cases.append(Case(f"Spark statestore -> {fmt}", run_spark, prepare=lambda: warm(ckpt)))
        try:
            runs = alternate(cases, args.repeat)
        except SystemExit as failed:
            if len(cases) == 1 or args.no_spark:
                raise
            # Should Spark's reader fail on a state, ckpt is still measured (and the table
            # says Spark's side failed).
            print(f"Spark's side failed ({str(failed)[:200]}); ckpt measured alone", flush=True)
            cases = [c for c in cases if not c.name.startswith("Spark")]
            runs = alternate(cases, args.repeat)
            failure = {"case": f"{label}: Spark statestore -> {fmt}", "runs": "failed"}
            rows.append(failure)
        counts = {"ckpt": rows_written(ours, fmt)}
        if any(c.name.startswith("ckpt replay -O") for c in cases):
            assert rows_written(folder, fmt) == counts["ckpt"], folder
        if any(c.name.startswith("Spark") for c in cases):
            counts["spark"] = rows_written(theirs, fmt)
            assert counts["ckpt"] == counts["spark"], counts
        walls = {name: statistics.median(m.wall for m in r) for name, r in runs.items()}
        ckpt_wall = walls[cases[0].name]
        for case in cases:
            measured = runs[case.name]
            rss = statistics.median(m.peak_rss for m in measured)
            rows.append(
                row(
                    f"{label}: {case.name}",
                    measured,
                    **{
                        "RSS / state": f"{rss / plain:.2f}x",
                        "rows written": f"{counts['ckpt']:,}",
                        "median wall vs ckpt": f"{walls[case.name] / ckpt_wall:.1f}x",
                    },
                )
            )
    rows.append({"case": f"{label}: state", "rows written": f"{files} files, {plain / 1e6:.1f} MB"})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--source", choices=["spark", "synthetic"], default="spark")
    parser.add_argument("--versions", type=int, default=20, help="synthetic source only")
    parser.add_argument("--provider", choices=["hdfs", "rocksdb"], default="hdfs")
    parser.add_argument(
        "--changelog", action="store_true", help="rocksdb: changelog checkpointing on"
    )
    parser.add_argument(
        "--checkpoint-format", type=int, choices=[1, 2], default=1, help="rocksdb (2: changelog)"
    )
    parser.add_argument("--formats", default="jsonl,parquet")
    parser.add_argument(
        "--states", default="deltas,snapshot", help="--source spark, HDFS: which states to measure"
    )
    parser.add_argument("--no-spark", action="store_true", help="ckpt's side only")
    parser.add_argument(
        "--dataset",
        action="store_true",
        help="also ckpt with -O DIR (a file per partition, as Spark writes a part file per task)",
    )
    parser.add_argument(
        "--one-worker",
        action="store_true",
        help="also ckpt with --workers 1 (partitions one after another)",
    )
    add_options(parser)
    args = parser.parse_args(argv)
    if args.provider == "rocksdb" and args.source != "spark":
        parser.error("--provider rocksdb builds its state with Spark (--source spark)")
    if args.quick:
        args.source, args.keys, args.partitions, args.versions = "synthetic", 2000, 2, 12
        args.no_spark = True  # a smoke test of the harness: no JVM
    rows: list[dict[str, str]] = []
    for label, ckpt in states(args):
        with tempfile.TemporaryDirectory(dir=data_dir("out").parent) as tmp:
            rows += compare(args, label, ckpt, Path(tmp))
    sides = "ckpt only" if args.no_spark else "ckpt and Spark alternating"
    report(
        args,
        f"replay: {args.keys:,} keys, {args.partitions} partitions",
        f"{sides}, {args.repeat} rounds, each its own process tree writing files, the "
        f"checkpoint read once untimed before each run; {machine()}. RSS is the peak of the "
        "summed RSS of the whole tree against the decompressed state replayed.",
        rows,
    )


if __name__ == "__main__":
    main()
