"""``ckpt repair``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.cli.common import (
    STATE,
    BreakLockOpt,
    ForceOpt,
    JsonOpt,
    QuietOpt,
    StorageOpt,
    error_boundary,
    parse_duration,
    start,
)
from ckpt_cli.errors import CkptError
from ckpt_cli.repair import RepairRun, UndoResult, run_repair, undo_repair


@error_boundary
def repair(
    path: Annotated[
        str | None,
        typer.Argument(
            metavar="CHECKPOINT",
            help="The checkpoint location (not needed with --undo).",
            show_default=False,
        ),
    ] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Carry the plan out.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (scripts).")] = False,
    rollback_to: Annotated[
        int | None,
        typer.Option(
            "--rollback-to",
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
    quarantine: Annotated[
        str | None,
        typer.Option(
            "--quarantine",
            help="Where removed files go (default: <checkpoint>.ckpt-quarantine/<time>/).",
            show_default=False,
        ),
    ] = None,
    undo: Annotated[
        str | None,
        typer.Option(
            "--undo",
            help="Put back everything the repair with this manifest changed.",
            show_default=False,
        ),
    ] = None,
    min_age: Annotated[
        str,
        typer.Option(
            "--min-age",
            help="Refuse to move or rewrite files modified more recently than this, and to "
            "repair while the last batch was planned and offsets/ written within it (a running "
            "query). Below the default 1h, --apply needs --force.",
        ),
    ] = "1h",
    force: ForceOpt = False,
    break_lock: BreakLockOpt = False,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    storage_option: StorageOpt = None,
) -> RepairRun | UndoResult:
    """Bring a broken checkpoint back to one Spark restarts from, losing nothing.

    Reads validate's findings and plans the known repairs: quarantine temp files and damaged
    files of unfinished batches; roll back to the last batch Spark can restart from
    (--rollback-to N to choose it); rewrite checksum sidecars that no longer match files that
    read correctly; with --snapshot, write snapshots of the restart version. A dry run unless
    --apply. Nothing is deleted: removed files move to a quarantine folder with a manifest,
    and `ckpt repair --undo MANIFEST` restores the checkpoint byte for byte. Every apply ends
    with a validation. --apply and --undo hold the checkpoint lock (.ckpt-lock), and --apply
    refuses while the query looks active or a file to change is younger than --min-age,
    unless --force (the dry run warns instead).

    Exit code 0 when the checkpoint is (now) healthy or there is nothing to do, 1 when the
    plan has repairs to apply or the checkpoint still has errors, 2 when repair refuses or
    cannot run.

    [bold]Examples[/]

      ckpt repair /data/ckpt/q1

      ckpt repair /data/ckpt/q1 --rollback-to 41 --apply

      ckpt repair --undo /data/ckpt/q1.ckpt-quarantine/20260101T120000Z/manifest.json
    """
    run = start(json_output, quiet, storage_option)
    age = parse_duration(min_age)
    if undo is not None:
        return run.render(
            undo_repair(undo, run.storage_options, break_lock=break_lock, stats=STATE.requests)
        )
    if path is None:
        raise CkptError("give the checkpoint location (or --undo MANIFEST)")
    repair_run = run_repair(
        run.storage(path),
        rollback_to=rollback_to,
        snapshot=snapshot,
        apply=apply,
        quarantine=quarantine,
        force=force,
        min_age=age,
        break_lock=break_lock,
        confirm=run.confirm(yes=yes, action="change the checkpoint", unattended="repair"),
        progress=run.progress,
    )
    return run.render(repair_run)
