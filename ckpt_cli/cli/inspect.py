"""``ckpt inspect``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import DEFAULT_LIMIT, FileReport, inspect_file, split_file_location
from ckpt_cli.cli.common import SharedOptions, error_boundary, start


@error_boundary
def inspect(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help="The file: its full path or URL inside a checkpoint, or a path relative to "
            "--checkpoint.",
            show_default=False,
        ),
    ],
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            "-c",
            metavar="CHECKPOINT",
            help="The checkpoint root, when FILE is relative to it.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="How many rows to decode and show.")
    ] = DEFAULT_LIMIT,
    shared: SharedOptions = SharedOptions(),
) -> FileReport:
    """Show what one checkpoint file is and what is in it.

    For a .delta, .snapshot or .changelog: the codec found in the bytes, the
    changelog format version and lineage (checkpoint format v2), record
    counts (puts, deletes, merges) and whether the end-of-file marker is
    there. For a RocksDB .zip: its entries, the SST/log files its metadata
    names (present? right size?) and numKeys. For log entries, schema and
    metadata files: their parsed contents. The first --limit rows are
    decoded with the store's schema file (hex when there is none). Checksum
    sidecars (Hadoop .crc, Spark <name>.crc) that cover the file are
    verified.

    Offsets and commit entries: their times (batchTimestampMs, watermarks) as
    ISO-8601 UTC with their age, and one line per source offset.

    Exit code 1 when the file is damaged (the report says how), 2 when it
    cannot be read.

    Examples:

      ckpt inspect /data/ckpt/q1/offsets/1200

      ckpt inspect -c s3://bucket/ckpt/q1 state/0/3/1201.delta --limit 5 --json
    """
    run = start(shared)
    root, rel = split_file_location(file) if checkpoint is None else (checkpoint, file)
    return run.render(inspect_file(run.open(root), rel, limit=limit))
