"""``ckpt versions``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import VersionsReport, describe_versions
from ckpt_cli.cli.common import (
    PathArg,
    SharedOptions,
    error_boundary,
    operator_option,
    partition_option,
    start,
)


@error_boundary
def versions(
    path: PathArg,
    operator: Annotated[int | None, operator_option("Only this operator id.")] = None,
    partition: Annotated[
        list[int] | None, partition_option("Only this partition id (repeatable).")
    ] = None,
    every: Annotated[
        bool,
        typer.Option(
            "--all",
            help="A row for every partition (by default, many partitions alike share a row: "
            "their ids as ranges, plus a row for each outlier). --json always lists each.",
        ),
    ] = False,
    shared: SharedOptions = SharedOptions(),
) -> VersionsReport:
    """List batches, operators, stores, partitions and state store versions.

    First a headline: last activity, watermark, last committed batch, and
    "restartable: yes / no, because ..." (validate's restart checks, without
    decoding the state files).

    Versions are state store versions: after batch N commits, every store is at
    version N+1 (so version 1 is the state after batch 0). A snapshot version is
    one with a full copy of the state: an HDFS-backed store's N.snapshot, or a
    RocksDB store's N.zip.

    Reads the listing once plus metadata, the latest offsets and commit entries,
    each operator's metadata file and the sources' newest log files.

    Examples:

      ckpt versions /data/ckpt/q1

      ckpt versions /data/ckpt/q1 --all

      ckpt versions s3://bucket/ckpt/q1 --operator 0 -p 3 --json
    """
    run = start(shared, all=every)
    return run.render(describe_versions(run.open(path), operator=operator, partitions=partition))
