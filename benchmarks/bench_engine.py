"""Benchmark: scaling of validate --deep and replay-to-dataset over engines and sizes.

Builds synthetic checkpoints (benchmarks/synthetic.py: Spark's exact formats, read back by
real Spark in tests/test_synthetic_spark.py) of growing size, and times on each:

* `validate --all-versions --deep` (every state file decoded, every .crc verified),
* replaying the latest batch of every partition into a jsonl dataset (`--output DIR/`),

with the local engine at 1 and 2 workers and the Spark engine on local[2]. Prints seconds,
the cost per file and per key, and the peak resident memory of this process and its children.

    .venv/bin/python benchmarks/bench_engine.py [--sizes 100x20x100000,200x20x200000]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from synthetic import build  # noqa: E402

from ckpt_cli.engine import Engine, LocalEngine, SparkEngine  # noqa: E402
from ckpt_cli.model import Checkpoint  # noqa: E402
from ckpt_cli.replay import read_state  # noqa: E402
from ckpt_cli.replay.sinks import write_dataset  # noqa: E402
from ckpt_cli.validate import validate  # noqa: E402


def peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def run_validate(root: Path, engine: Engine) -> tuple[float, int]:
    start = time.perf_counter()
    report = validate(Checkpoint.open(str(root)), all_versions=True, deep=True, engine=engine)
    bad = [f for f in report.findings if f.severity == "error"]
    assert not bad, bad[:2]
    return time.perf_counter() - start, int(report.stats["files_checked"])


def run_replay(root: Path, engine: Engine) -> tuple[float, int]:
    start = time.perf_counter()
    rows = read_state(Checkpoint.open(str(root)))
    with tempfile.TemporaryDirectory(dir=HERE / ".data") as out:
        counts = write_dataset(rows, f"{out}/rows", "jsonl", engine=engine)
    return time.perf_counter() - start, sum(counts.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100x20x100000,200x20x200000,400x20x400000")
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()
    engines: list[tuple[str, Any]] = [("local x1", LocalEngine(1)), ("local x2", LocalEngine(2))]
    if not args.no_spark:
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        session = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        engines.append(("spark local[2]", SparkEngine(session)))
    print(f"{os.cpu_count()} cores")
    print(
        f"{'size':>18} {'engine':>15} | {'validate --deep':>22} | {'replay -> jsonl dataset':>26} "
        "| peak MB"
    )
    for size in args.sizes.split(","):
        partitions, versions, keys = (int(x) for x in size.split("x"))
        root = HERE / ".data" / f"synthetic-{size}"
        totals = build(root, partitions=partitions, versions=versions, keys=keys)
        for name, engine in engines:
            t_val, files = run_validate(root, engine)
            t_rep, rows = run_replay(root, engine)
            print(
                f"{size:>18} {name:>15} | {t_val:6.2f} s {t_val / files * 1e6:7.0f} us/file "
                f"| {t_rep:6.2f} s {t_rep / rows * 1e6:7.2f} us/key | {peak_mb():7.0f}"
            )
        print(f"{'':>18} ({totals['files']:,} files, {rows:,} keys)")
    if os.environ.get("CKPT_BENCH_CLEAN"):
        shutil.rmtree(HERE / ".data", ignore_errors=True)


if __name__ == "__main__":
    main()
