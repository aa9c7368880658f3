"""``ckpt du``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import DEFAULT_TOP, DiskUsageReport, disk_usage
from ckpt_cli.cli.common import PathArg, SharedOptions, error_boundary, start


@error_boundary
def du(
    path: PathArg,
    top: Annotated[
        int, typer.Option("--top", "-n", min=0, help="How many of the largest partitions.")
    ] = DEFAULT_TOP,
    summarize: Annotated[
        bool,
        typer.Option(
            "--summarize", "-s", help="Totals only: no line (no --json list) per partition."
        ),
    ] = False,
    tsv: Annotated[
        bool,
        typer.Option(
            "--tsv",
            help="One tab-separated line per figure (level, name, files, bytes; exact bytes), "
            "for sort, awk and cut, instead of tables.",
        ),
    ] = False,
    shared: SharedOptions = SharedOptions(),
) -> DiskUsageReport:
    """Where the bytes are: sizes and file counts by file class, by area
    (offsets/, commits/, sources/, state/), per operator, store and partition;
    the largest partitions and each store's skew (largest partition / median).

    From the one listing: no state file is read. Tables, on a terminal or
    not; with --tsv, one tab-separated line per figure (level, name, files,
    bytes), for sort, awk and cut.

    Examples:

      ckpt du /data/ckpt/q1 --top 5

      ckpt du s3://bucket/ckpt/q1 --tsv | sort -t$'\\t' -k4 -n | tail

      ckpt du /data/ckpt/q1 --summarize --json
    """
    run = start(shared, tsv=tsv)
    return run.render(disk_usage(run.open(path), top=top, summarize=summarize))
