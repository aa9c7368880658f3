"""Benchmark: scaling of validate --deep and replay-to-dataset over engines and sizes.

Builds synthetic checkpoints (benchmarks/synthetic.py: Spark's exact formats, read back by
real Spark in tests/test_synthetic_spark.py) of growing size, and times on each:

* `validate --all-versions --deep` (every state file decoded, every .crc verified),
* replaying the latest batch of every partition into a jsonl dataset (`--output-dir DIR`),

with the local engine at 1 and 2 workers and the Spark engine on local[2] (its session made in
the measured run, JVM start-up included). Each run in a forked child (benchmarks/common.py),
the engines alternating, ``--repeat`` rounds; reports wall, CPU and peak RSS of the whole
process tree (the engine's workers and the JVM too), the cost per file and per key.

    .venv/bin/python benchmarks/bench_engine.py [--sizes 100x20x100000,200x20x200000] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
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
    measure_call,
    report,
    row,
)
from synthetic import build  # noqa: E402

from ckpt_cli.core.model import Checkpoint  # noqa: E402
from ckpt_cli.engine import Engine, LocalEngine, SparkEngine  # noqa: E402
from ckpt_cli.replay import read_state  # noqa: E402
from ckpt_cli.replay.datasets import write_dataset  # noqa: E402
from ckpt_cli.validate import validate  # noqa: E402


def spark_engine() -> Engine:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return SparkEngine(session)


def run_validate(root: Path, make_engine: Callable[[], Engine]) -> int:
    report = validate(
        Checkpoint.open(str(root)), all_versions=True, deep=True, engine=make_engine()
    )
    bad = [f for f in report.findings if f.severity == "error"]
    assert not bad, bad[:2]
    return int(report.stats["files_checked"])


def run_replay(root: Path, make_engine: Callable[[], Engine]) -> int:
    rows = read_state(Checkpoint.open(str(root)))
    with tempfile.TemporaryDirectory(dir=root.parent) as out:
        counts = write_dataset(rows, f"{out}/rows", "jsonl", engine=make_engine())
    return sum(counts.values())


def counting(
    name: str,
    counted: dict[str, int],
    fn: Callable[[Path, Callable[[], Engine]], int],
    root: Path,
    make: Callable[[], Engine],
) -> Case:
    """A case running ``fn(root, make)`` in a forked child; its count goes to ``counted``."""

    def run() -> Measurement:
        measured, counted[name] = measure_call(functools.partial(fn, root, make))
        return measured

    return Case(name, run)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100x20x100000,200x20x200000,400x20x400000")
    parser.add_argument("--no-spark", action="store_true")
    add_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.no_spark = "4x6x2000", True
    engines: list[tuple[str, Callable[[], Engine]]] = [
        ("local x1", lambda: LocalEngine(1)),
        ("local x2", lambda: LocalEngine(2)),
    ]
    if not args.no_spark:
        engines.append(("spark local[2]", spark_engine))
    rows: list[dict[str, str]] = []
    for size in args.sizes.split(","):
        partitions, versions, keys = (int(x) for x in size.split("x"))
        root = data_dir(f"synthetic-{size}")
        totals = build(root, partitions=partitions, versions=versions, keys=keys)
        counted: dict[str, int] = {}
        cases = []
        for name, make in engines:
            cases.append(
                counting(f"{size} validate --deep, {name}", counted, run_validate, root, make)
            )
            cases.append(
                counting(f"{size} replay -> jsonl dataset, {name}", counted, run_replay, root, make)
            )
        for name, measured in alternate(cases, args.repeat).items():
            wall = statistics.median(m.wall for m in measured)
            unit = "file" if "validate" in name else "key"
            rows.append(
                row(
                    name,
                    measured,
                    **{f"per {unit} (us, median wall)": f"{wall / counted[name] * 1e6:.1f}"},
                )
            )
        rows.append({"case": f"{size}: {totals['files']:,} files, {keys:,} keys"})
    if os.environ.get("CKPT_BENCH_CLEAN"):
        shutil.rmtree(HERE / ".data", ignore_errors=True)
    report(
        args,
        "Engines: validate --deep and replay to a dataset by size",
        f"Forked children, engines alternating, {args.repeat} rounds; {machine()}.",
        rows,
    )


if __name__ == "__main__":
    main()
