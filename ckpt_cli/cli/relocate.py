"""``ckpt relocate``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import RelocateRun, RelocateUndoResult, parse_inputs, run_relocate, undo_relocate
from ckpt_cli.cli.change import (
    ApplyOpt,
    BreakLockOpt,
    ChangeOptions,
    ForceOpt,
    MinAgeOpt,
    YesOpt,
    start_change,
)
from ckpt_cli.cli.common import PathArg, SharedOptions, error_boundary


@error_boundary
def relocate(
    path: PathArg,
    dest: Annotated[
        str,
        typer.Argument(
            metavar="DEST",
            help="The new home: a path or URL that does not exist or is empty.",
            show_default=False,
        ),
    ],
    inputs: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            metavar="OLD=NEW",
            help="The input files moved too: rewrite this prefix of their URLs in the file "
            "source's logs (repeatable; a plain /path is file:///path).",
            show_default=False,
        ),
    ] = None,
    spark_location: Annotated[
        str | None,
        typer.Option(
            "--spark-location",
            metavar="URL",
            help="DEST as the query names it in checkpointLocation (default: file:/path for "
            "a local DEST, s3a:// for s3://, else DEST).",
            show_default=False,
        ),
    ] = None,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    undo: Annotated[
        bool,
        typer.Option(
            "--undo",
            help="Remove the copy this command made (or began) in DEST, at once. Refused "
            "when the checkpoint is gone, or when DEST holds files the checkpoint does not "
            "(the query ran on the copy) unless --force.",
        ),
    ] = False,
    min_age: MinAgeOpt = "1h",
    force: ForceOpt = False,
    break_lock: BreakLockOpt = False,
    shared: SharedOptions = SharedOptions(),
) -> RelocateRun | RelocateUndoResult:
    """Copy a checkpoint to a new home (local, S3, ADLS, GCS), rewriting every absolute
    reference to its old one, so that the query restarts from the copy.

    transformWithState names its schema files by absolute path in the operator metadata
    (a copy made with cp or aws s3 cp still reads them from the old home); with --input, the
    file source's logs name the input files by URL (a query whose input moved would read
    them all again). Every other file is copied byte for byte, streamed. The source is only
    read (under its lock; refused while its query looks active unless --force).

    A dry run by default: what would be copied and rewritten. --apply copies (asks first
    unless --yes) and validates the copy. A copy that ends early is resumed by running the
    command again; --undo removes a copy, finished or not.

    Exit code 0 when the plan is made or the copy validates, 1 when the copy has errors, 2
    when it refuses or cannot run.

    Examples:

      ckpt relocate /data/ckpt/q1 s3://bucket/ckpt/q1

      ckpt relocate /old/q1 /new/q1 --apply --yes

      ckpt relocate /old/q1 /new/q1 --input /old/input=/new/input --apply

      ckpt relocate /old/q1 /new/q1 --undo
    """
    change = ChangeOptions(min_age=min_age, force=force, break_lock=break_lock, undo=undo)
    started = start_change("relocate", path, change, apply=apply, yes=yes, shared=shared)
    if undo:
        target = started.run.storage(dest)
        done = undo_relocate(started.storage, target, force=force, break_lock=break_lock)
        return started.render(done)
    result = run_relocate(
        started.storage,
        started.run.storage(dest),
        started.guards,
        inputs=parse_inputs(inputs or []),
        spark_home=spark_location,
    )
    return started.render(result)
