"""``ckpt repair``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import RepairRun, UndoResult, run_repair, undo_repair
from ckpt_cli.cli.change import ApplyOpt, ChangeOptions, YesOpt, start_change
from ckpt_cli.cli.common import PathArg, SharedOptions, error_boundary


@error_boundary
def repair(
    path: PathArg,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    rollback_to: Annotated[
        int | None,
        typer.Option(
            "--rollback-to",
            metavar="BATCH",
            help="Make this committed batch the last one (Spark re-runs the batches after it).",
            show_default=False,
        ),
    ] = None,
    snapshot: Annotated[
        bool,
        typer.Option(
            "--snapshot",
            help="Write a .snapshot of the restart version of every HDFS-backed partition.",
        ),
    ] = False,
    change: ChangeOptions = ChangeOptions(),
    shared: SharedOptions = SharedOptions(),
) -> RepairRun | UndoResult:
    """Bring a broken checkpoint back to one Spark restarts from, losing nothing.

    Reads validate's findings and plans the known repairs: quarantine temp files and damaged
    files of unfinished batches; roll back to the last batch Spark can restart from
    (--rollback-to N to choose it); rewrite checksum sidecars that no longer match files that
    read correctly; with --snapshot, write snapshots of the restart version. A dry run unless
    --apply. Nothing is deleted: removed files move to a quarantine folder with a manifest,
    and `ckpt repair CHECKPOINT --undo` restores the checkpoint byte for byte. Every apply
    ends with a validation. --apply and --undo hold the checkpoint lock (.ckpt-lock), and
    --apply refuses while the query looks active or a file to change is younger than
    --min-age, unless --force (the dry run warns instead).

    Exit code 0 when the checkpoint is (now) healthy, there is nothing to do or the repair
    is undone (already), 1 when the plan has repairs to apply or the checkpoint still has
    errors, 2 when repair refuses or cannot run.

    Examples:

      ckpt repair /data/ckpt/q1

      ckpt repair /data/ckpt/q1 --rollback-to 41 --apply

      ckpt repair /data/ckpt/q1 --undo
    """
    started = start_change("repair", path, change, apply=apply, yes=yes, shared=shared)
    if change.undo:
        return started.undo(undo_repair)
    result = run_repair(
        started.storage,
        started.guards,
        rollback_to=rollback_to,
        snapshot=snapshot,
        quarantine=change.quarantine,
    )
    return started.render(result)
