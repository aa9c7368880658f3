"""Benchmark: `ckpt cleanup` on 200 partitions x 100 versions.

Uses the checkpoint of bench_validate.py (real deltas, snapshots every 10 versions, Hadoop
.crc sidecars; built once under benchmarks/.data/). Prints the time to plan with retention 10,
the listing calls and reads it made, the plan's size, and then applies it to a copy and
prints the delete requests and time. On S3 the same plan is deleted in ceil(files/1000)
requests (tests/test_s3.py counts them on a moto server).

    .venv/bin/python benchmarks/bench_cleanup.py [--retain 10]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_validate import build  # noqa: E402

from ckpt_cli.cleanup import apply_cleanup, plan_cleanup  # noqa: E402
from ckpt_cli.model import Checkpoint  # noqa: E402


def _cpu() -> float:
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _figures(values: list[float]) -> str:
    return f"min {min(values):.2f} s, median {statistics.median(values):.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--retain", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3, help="plan/apply rounds (alternating)")
    args = parser.parse_args()
    root = HERE / ".data" / f"validate-{args.partitions}x{args.versions}"
    files = build(root, args.partitions, args.versions)
    print(f"checkpoint: {args.partitions} partitions x {args.versions} versions, {files} files")
    plans: list[float] = []
    applies: list[float] = []
    cpu: list[float] = []
    for _ in range(args.runs):
        # Plan, then apply on a fresh copy: the two alternate, each round the same work.
        start, cpu0 = time.perf_counter(), _cpu()
        ckpt = Checkpoint.open(str(root))
        plan = plan_cleanup(ckpt, retain=args.retain, min_age=0)
        plans.append(time.perf_counter() - start)
        cpu.append(_cpu() - cpu0)
        stats = ckpt.storage.stats
        with tempfile.TemporaryDirectory(dir=HERE / ".data") as tmp:
            copy = Path(tmp) / "ckpt"
            shutil.copytree(root, copy)
            ckpt = Checkpoint.open(str(copy))
            to_apply = plan_cleanup(ckpt, retain=args.retain, min_age=0)
            start = time.perf_counter()
            # min_age=0 on files just built: force past the safety checks (nothing runs here).
            result = apply_cleanup(
                ckpt, to_apply, manifest=str(Path(tmp) / "manifest.json"), force=True
            )
            applies.append(time.perf_counter() - start)
    # Cleanup runs in this one process (threads, no children): its peak RSS is the tree's.
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"plan (retain {args.retain}), {args.runs} runs: {_figures(plans)}, CPU "
        f"{_figures(cpu)}; {stats.list} listing calls (directories scanned in one "
        f"recursive pass), {stats.files_read} files read; {len(plan.deletions):,} files, "
        f"{plan.bytes / 1e6:.1f} MB to delete"
    )
    print(
        f"apply, {args.runs} runs: {_figures(applies)}; {result.deleted:,} files deleted, "
        f"{result.delete_requests:,} delete requests (local files: one unlink each; object "
        f"stores: ceil({result.deleted}/1000) = {-(-result.deleted // 1000)})"
    )
    print(f"peak RSS: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
