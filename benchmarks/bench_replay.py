"""Benchmark: `ckpt replay` against Spark's statestore source on a state of ~1M keys.

Builds (once, under benchmarks/.data/, with real PySpark) a checkpoint of a streaming
aggregation `groupBy(k).agg(count, sum(v), max(ts))` whose one operator holds about 1M keys:
a file source with two input files, so there is a snapshot-free delta chain (versions 1 and
2). Then runs, each end to end as a user would and each in its own process tree:

* `ckpt replay CHECKPOINT --format jsonl > /dev/null`
* a PySpark script: `spark.read.format("statestore").load(CHECKPOINT)` written as JSON

and prints wall times, their ratio, and the peak resident memory of each process tree
(PSS, sampled from /proc every 20 ms), next to the state's uncompressed size (the decompressed
bytes of the state files replayed).

    .venv/bin/python benchmarks/bench_replay.py [--keys 1000000] [--partitions 4]

Needs PySpark and Java (./scripts/bootstrap spark installs PySpark).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from ckpt_cli.formats.compression import decompressed_chunks  # noqa: E402
from ckpt_cli.model import Checkpoint, FileKind  # noqa: E402
from ckpt_cli.replay.plan import plan_version  # noqa: E402

BUILD = """
import os, sys, shutil
from pyspark.sql import SparkSession, functions as F
root, keys, parts, snapshot = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
builder = SparkSession.builder
if snapshot:
    # Maintenance writes a snapshot as soon as a version has more than one delta.
    builder = (builder.config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "1")
               .config("spark.sql.streaming.stateStore.maintenanceInterval", "200ms"))
spark = (builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", parts)
         .config("spark.driver.memory", "3g")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
src = os.path.join(root, "input")
half = keys // 2
for step, (lo, hi) in enumerate([(0, half), (half, keys)]):
    (spark.range(lo, hi).selectExpr("concat('key-', cast(id as string)) as k", "id as v",
        "timestamp_seconds(1704067200 + id) as ts")
        .coalesce(1).write.mode("overwrite").parquet(os.path.join(root, f"staging{step}")))
os.makedirs(src)
schema = spark.read.parquet(os.path.join(root, "staging0")).schema
stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
          .groupBy("k").agg(F.count(F.lit(1)).alias("count"), F.sum("v").alias("sum"),
                            F.max("ts").alias("max")))
q = (stream.writeStream.format("noop").outputMode("update")
     .option("checkpointLocation", os.path.join(root, "checkpoint")).start())
for step in range(2):
    staged = os.path.join(root, f"staging{step}")
    for name in os.listdir(staged):
        if name.endswith(".parquet"):
            shutil.copy(os.path.join(staged, name), os.path.join(src, f"{step}-{name}"))
    q.processAllAvailable()
if snapshot:
    import glob, time
    deadline = time.time() + 60
    while time.time() < deadline:
        snaps = glob.glob(os.path.join(root, "checkpoint/state/0/*/2.snapshot"))
        if len(snaps) == int(parts):
            break
        time.sleep(0.5)
q.stop()
spark.stop()
"""

SPARK_READ = """
import sys
from pyspark.sql import SparkSession
ckpt, out = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "3g")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.read.format("statestore").load(ckpt).write.mode("overwrite").json(out)
spark.stop()
"""


def build(root: Path, keys: int, partitions: int, snapshot: bool) -> Path:
    ckpt = root / "checkpoint"
    if (root / ".complete").exists():
        return ckpt
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"building a {keys:,}-key checkpoint with PySpark (once)...", flush=True)
    subprocess.run(
        [sys.executable, "-c", BUILD, str(root), str(keys), str(partitions), str(int(snapshot))],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for step in range(2):
        shutil.rmtree(root / f"staging{step}", ignore_errors=True)
    (root / ".complete").write_text("ok")
    return ckpt


def tree_rss_kib(pid: int) -> int:
    """Proportional resident memory of ``pid`` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        # Pss: shared pages (the modules forked workers share with their parent) counted once
        # across the tree, not once per process as VmRSS would.
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


def run_measured(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak resident KiB of the whole process tree of ``cmd``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_kib(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {err.decode()[-2000:]}")
    return wall, peak


def state_bytes(ckpt_path: Path) -> tuple[int, int, int]:
    """Keys (from the last batch's plans), decompressed bytes of the files replayed, files."""
    ckpt = Checkpoint.open(str(ckpt_path))
    latest = ckpt.batches.latest_committed
    assert latest is not None
    total = files = 0
    for part in ckpt.operators[0].stores["default"].partitions:
        plan = plan_version(ckpt, 0, part, latest + 1)
        for f in plan.files:
            files += 1
            with ckpt.storage.open_stream(f.path) as fh:
                total += sum(len(c) for c in decompressed_chunks(f.path, fh))
    deltas = len(ckpt.of_kind(FileKind.DELTA))
    return total, files, deltas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    for snapshot in (False, True):
        root = HERE / ".data" / f"replay-{args.keys}-{args.partitions}{'-snap' if snapshot else ''}"
        measure(build(root, args.keys, args.partitions, snapshot), args.keys, snapshot)


def measure(ckpt: Path, keys: int, snapshot: bool) -> None:
    plain, files, _ = state_bytes(ckpt)
    ckpt_bin = str(Path(sys.executable).with_name("ckpt"))
    shape = "snapshot of version 2" if snapshot else "deltas 1 and 2, no snapshot"
    print(f"state: {keys:,} keys, {files} state files ({shape}), {plain / 1e6:.1f} MB uncompressed")
    wall_ckpt, rss_ckpt = run_measured([ckpt_bin, "replay", str(ckpt), "--format", "jsonl"])
    with tempfile.TemporaryDirectory() as tmp:
        read = textwrap.dedent(SPARK_READ)
        wall_spark, rss_spark = run_measured(
            [sys.executable, "-c", read, str(ckpt), os.path.join(tmp, "out")]
        )
    print(
        f"  ckpt replay --format jsonl > /dev/null: {wall_ckpt:6.2f} s, peak PSS "
        f"{rss_ckpt * 1024 / 1e6:7.1f} MB ({rss_ckpt * 1024 / plain:.1f}x the state)"
    )
    print(
        f"  Spark statestore -> json:               {wall_spark:6.2f} s, peak PSS "
        f"{rss_spark * 1024 / 1e6:7.1f} MB"
    )
    print(f"  ckpt is {wall_spark / wall_ckpt:.1f}x faster end to end")


if __name__ == "__main__":
    main()
