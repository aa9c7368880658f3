"""Benchmark: `ckpt versions` on a checkpoint of 200 partitions x 100 state versions.

Builds (once, under benchmarks/.data/, shared with bench_validate.py) the checkpoint an
HDFS-backed aggregation leaves on local disk: 100 offsets/commits entries, per partition 100
deltas and a snapshot every 10 versions, each with its Hadoop .crc sidecar (about 45,000
files), real records in every file: the headline decodes what a restart loads, as
`validate` does.

Measures (benchmarks/common.py, alternating, ``--repeat`` rounds): opening the checkpoint and
building the versions report in a forked child (the work after interpreter start-up), the
CLI end to end with its JSON written to a file, and the interpreter + imports alone.

    .venv/bin/python benchmarks/bench_versions.py [--partitions 200] [--versions 100] [--quick]
"""

from __future__ import annotations

import argparse
import json
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
    measure,
    measure_call,
    report,
    row,
)

from ckpt_cli.core.model import Checkpoint  # noqa: E402
from ckpt_cli.versions import describe_versions  # noqa: E402


def open_and_report(root: str) -> tuple[int, int, int]:
    """Partitions reported, directories scanned, files read."""
    checkpoint = Checkpoint.open(root)
    described = describe_versions(checkpoint)
    stats = checkpoint.storage.stats
    return len(described.operators[0].stores[0].partitions), stats.list, stats.files_read


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.versions = 10, 10
    root = data_dir(f"validate-{args.partitions}x{args.versions}")
    files = build(root, args.partitions, args.versions)
    counts: list[tuple[int, int, int]] = []

    def in_process() -> Measurement:
        measured, result = measure_call(lambda: open_and_report(str(root)))
        counts.append(result)
        return measured

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "versions.json"
        cli = [sys.executable, "-m", "ckpt_cli", "versions", str(root), "--json"]
        # What `ckpt versions` imports: the CLI loads only the command it runs.
        startup = [sys.executable, "-c", "import ckpt_cli.cli as c; c.make_app(['versions'])"]
        nothing = Path(tmp) / "startup.out"
        runs = alternate(
            [
                Case("open + versions report (in-process)", in_process),
                Case("ckpt versions --json > file (CLI)", lambda: measure(cli, output=out)),
                Case("  of which interpreter + imports", lambda: measure(startup, output=nothing)),
            ],
            args.repeat,
        )
        written = json.loads(out.read_text())
        assert written["operators"], "the CLI reported no operators"
        # The restart's state files were decoded (the headline's "yes"), as validate's are.
        assert written["headline"]["restartable"] is True, written["headline"]
    parts, lists, reads = counts[-1]
    assert parts == args.partitions, parts
    report(
        args,
        f"versions: {args.partitions} partitions x {args.versions} versions ({files:,} files)",
        f"Alternating, {args.repeat} rounds; {machine()}. The in-process run scanned {lists} "
        f"directories and read {reads} files.",
        [row(name, measured) for name, measured in runs.items()],
    )


if __name__ == "__main__":
    main()
