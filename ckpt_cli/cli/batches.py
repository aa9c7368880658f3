"""``ckpt batches``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import BatchesReport, batch_timeline
from ckpt_cli.cli.common import PathArg, SharedOptions, error_boundary, start


@error_boundary
def batches(
    path: PathArg,
    last: Annotated[
        int | None,
        typer.Option("--last", "-n", min=1, help="Only the last K batches.", show_default=False),
    ] = None,
    since: Annotated[
        int | None,
        typer.Option(
            "--since", min=0, metavar="BATCH", help="From this batch id on.", show_default=False
        ),
    ] = None,
    until: Annotated[
        int | None,
        typer.Option(
            "--until", min=0, metavar="BATCH", help="Up to this batch id.", show_default=False
        ),
    ] = None,
    shared: SharedOptions = SharedOptions(),
) -> BatchesReport:
    """One row per batch: when it was planned, the watermark, each source's
    offsets, and whether it committed.

    From offsets/<batch> (batchTimestampMs, batchWatermarkMs, the sources'
    offsets as Spark wrote them) and commits/<batch>. A file source shows the
    files the batch read (from its log, sources/<i>/); Kafka the offsets per
    topic-partition and the records read since the previous batch; other
    sources their offset JSON. Holes in the logs are rows of their own; batches
    planned after the last commit are in flight (Spark re-runs them).

    Examples:

      ckpt batches /data/ckpt/q1 --last 20

      ckpt batches s3://bucket/ckpt/q1 --since 1200 --until 1250 --json
    """
    run = start(shared)
    return run.render(batch_timeline(run.open(path), last=last, since=since, until=until))
