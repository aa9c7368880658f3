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
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_validate import build  # noqa: E402

from ckpt_cli.model import Checkpoint  # noqa: E402
from ckpt_cli.retention import apply_cleanup, plan_cleanup  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--retain", type=int, default=10)
    args = parser.parse_args()
    root = HERE / ".data" / f"validate-{args.partitions}x{args.versions}"
    files = build(root, args.partitions, args.versions)
    print(f"checkpoint: {args.partitions} partitions x {args.versions} versions, {files} files")
    start = time.perf_counter()
    ckpt = Checkpoint.open(str(root))
    plan = plan_cleanup(ckpt, retain=args.retain, min_age=0)
    took = time.perf_counter() - start
    stats = ckpt.storage.stats
    print(
        f"plan (retain {args.retain}): {took:.2f} s, {stats.list_calls} listing calls "
        f"(directories scanned in one recursive pass), {stats.read_calls} files read; "
        f"{len(plan.deletions):,} files, {plan.bytes / 1e6:.1f} MB to delete"
    )
    with tempfile.TemporaryDirectory(dir=HERE / ".data") as tmp:
        copy = Path(tmp) / "ckpt"
        shutil.copytree(root, copy)
        ckpt = Checkpoint.open(str(copy))
        plan = plan_cleanup(ckpt, retain=args.retain, min_age=0)
        start = time.perf_counter()
        # min_age=0 on files just built: force past the safety checks (nothing runs here).
        result = apply_cleanup(ckpt, plan, manifest=str(Path(tmp) / "manifest.json"), force=True)
        took = time.perf_counter() - start
        print(
            f"apply: {result.deleted:,} files deleted in {took:.2f} s, "
            f"{result.delete_requests:,} delete requests (local files: one unlink each; "
            f"object stores: ceil({result.deleted}/1000) = {-(-result.deleted // 1000)})"
        )


if __name__ == "__main__":
    main()
