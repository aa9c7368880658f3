"""Benchmark: `ckpt cleanup` on 200 partitions x 100 versions.

Uses the checkpoint of bench_validate.py (real deltas, snapshots every 10 versions, Hadoop
.crc sidecars; built once under benchmarks/.data/). Measures (benchmarks/common.py: forked
children, alternating, ``--repeat`` rounds) planning with retention 10, and applying the
plan to a fresh copy (the copy is made untimed before each apply). On local disk a delete
request is one unlink; on S3 the same plan is deleted in ceil(files/1000) requests
(tests/test_s3_deletes.py counts them on a moto server, bench_s3.py times them).

    .venv/bin/python benchmarks/bench_cleanup.py [--retain 10] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_validate import build  # noqa: E402
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

from ckpt_cli.cleanup import apply_cleanup, plan_cleanup  # noqa: E402
from ckpt_cli.core.model import Checkpoint  # noqa: E402


def plan(root: Path, retain: int) -> tuple[int, float, int, int]:
    """Files and MB the plan deletes, directories scanned, files read."""
    ckpt = Checkpoint.open(str(root))
    planned = plan_cleanup(ckpt, retain=retain, min_age=0)
    stats = ckpt.storage.stats
    return len(planned.deletions), planned.bytes / 1e6, stats.list, stats.files_read


def apply(root: Path, retain: int, manifest: Path) -> tuple[int, int]:
    """Open, plan and delete; files deleted and delete requests."""
    ckpt = Checkpoint.open(str(root))
    planned = plan_cleanup(ckpt, retain=retain, min_age=0)
    # min_age=0 on files just copied: forced past the age checks (no query runs here).
    result = apply_cleanup(ckpt, planned, manifest=str(manifest), force=True)
    return result.deleted, result.delete_requests


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--retain", type=int, default=10)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.versions, args.retain = 10, 20, 5
    root = data_dir(f"validate-{args.partitions}x{args.versions}")
    files = build(root, args.partitions, args.versions)
    planned: list[tuple[int, float, int, int]] = []
    applied: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        copy = Path(tmp) / "ckpt"

        def fresh_copy() -> None:
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(root, copy)

        def run_plan() -> Measurement:
            measured, result = measure_call(lambda: plan(root, args.retain))
            planned.append(result)
            return measured

        def run_apply() -> Measurement:
            manifest = Path(tmp) / "manifest.json"
            measured, result = measure_call(lambda: apply(copy, args.retain, manifest))
            applied.append(result)
            return measured

        runs = alternate(
            [
                Case(f"plan (retain {args.retain})", run_plan),
                Case("open + plan + apply (fresh copy)", run_apply, prepare=fresh_copy),
            ],
            args.repeat,
        )
    deletions, mb, lists, reads = planned[-1]
    deleted, requests = applied[-1]
    assert deleted == deletions, (deleted, deletions)
    (plan_name, plan_runs), (apply_name, apply_runs) = runs.items()
    report(
        args,
        f"cleanup: {args.partitions} partitions x {args.versions} versions ({files:,} files)",
        f"Forked children, alternating, {args.repeat} rounds; {machine()}. The plan deletes "
        f"{deletions:,} files ({mb:.1f} MB) after one recursive listing ({lists} directories "
        f"scanned) and {reads} reads; local disk: one unlink per file.",
        [
            row(plan_name, plan_runs, **{"files to delete": f"{deletions:,}"}),
            row(apply_name, apply_runs, **{"delete requests": f"{requests:,}"}),
        ],
    )


if __name__ == "__main__":
    main()
