"""Benchmark: `versions`, `validate` and cleanup planning stay linear in the number of files.

On the checkpoints of bench_validate.py (real deltas and snapshots, Hadoop .crc sidecars) of
N partitions x 100 versions (220 files per partition), each operation runs in a forked
child (:func:`common.measure_call`: open + report, imports already paid), the operations
alternating, ``--repeat`` rounds per size. The growth column divides each size's median CPU
by the smallest size's: linear is the ratio of the file counts.

    .venv/bin/python benchmarks/bench_listing.py [--sizes 200,400,800] [--versions 100]
        [--only versions]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_validate import build  # noqa: E402
from common import Case, add_options, alternate, data_dir, machine, measure_call, report, row  # noqa: E402

from ckpt_cli.cleanup import plan_cleanup  # noqa: E402
from ckpt_cli.core.model import Checkpoint  # noqa: E402
from ckpt_cli.validate import validate  # noqa: E402
from ckpt_cli.versions import describe_versions  # noqa: E402


def operations(root: str) -> dict[str, Callable[[], int]]:
    """Each operation from the listing on; returns a count that shows it did the work."""
    return {
        "versions": lambda: len(describe_versions(Checkpoint.open(root)).operators),
        "validate": lambda: len(validate(Checkpoint.open(root)).findings),
        "cleanup plan (retain 10)": lambda: len(
            plan_cleanup(Checkpoint.open(root), retain=10, min_age=0).deletions
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,400,800", help="partition counts")
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument(
        "--only",
        action="append",
        choices=["versions", "validate", "cleanup"],
        help="only these operations (repeatable; default all)",
    )
    add_options(parser)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        sizes, args.versions = [s // 20 for s in sizes], 10
    rows: list[dict[str, str]] = []
    base: dict[str, float] = {}
    for partitions in sizes:
        root = data_dir(f"validate-{partitions}x{args.versions}")
        files = build(root, partitions, args.versions)
        cases = [
            Case(name, lambda op=op: measure_call(op)[0])  # type: ignore[misc]
            for name, op in operations(str(root)).items()
            if not args.only or name.split()[0] in args.only
        ]
        for name, runs in alternate(cases, args.repeat).items():
            cpu = statistics.median(m.cpu for m in runs)
            base.setdefault(name, cpu / files)
            growth = cpu / (base[name] * files)
            rows.append(
                row(
                    f"{name}, {partitions} x {args.versions}",
                    runs,
                    files=f"{files:,}",
                    **{"CPU per 1,000 files (ms)": f"{cpu / files * 1e6:.1f}"},
                    **{"CPU per file vs smallest": f"{growth:.2f}x"},
                )
            )
    report(
        args,
        "Listing: versions, validate, cleanup plan by checkpoint size",
        f"Each operation in a forked child, alternating, {args.repeat} rounds; {machine()}. "
        "Linear means the same CPU per file at every size (the last column near 1.00x).",
        rows,
    )


if __name__ == "__main__":
    main()
