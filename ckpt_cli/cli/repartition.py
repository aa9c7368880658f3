"""``ckpt repartition``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.cli.common import (
    STATE,
    BreakLockOpt,
    EngineOpt,
    ForceOpt,
    JsonOpt,
    MasterOpt,
    PathArg,
    QuietOpt,
    StorageOpt,
    error_boundary,
    parse_duration,
    start,
)
from ckpt_cli.engine import make_engine
from ckpt_cli.errors import UsageError
from ckpt_cli.repair import UndoResult
from ckpt_cli.repartition.run import RepartitionRun, run_repartition, undo_repartition


@error_boundary
def repartition(
    path: PathArg,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions",
            "-p",
            help="The new number of state partitions (spark.sql.shuffle.partitions).",
            show_default=False,
        ),
    ] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Write it (without: a dry run).")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (scripts).")] = False,
    undo: Annotated[
        bool,
        typer.Option(
            "--undo", help="Put back the checkpoint as it was before the last repartition."
        ),
    ] = False,
    quarantine: Annotated[
        str | None,
        typer.Option(
            "--quarantine",
            help="Where the manifest and replaced files go (default: "
            "<checkpoint>.ckpt-quarantine/repartition-<time>/); with --undo, where to find it.",
            show_default=False,
        ),
    ] = None,
    min_age: Annotated[
        str,
        typer.Option(
            "--min-age",
            help="Refuse to apply while the last batch was planned and offsets/ written within "
            "this (a running query), unless --force. Below the default 1h, --apply needs "
            "--force.",
        ),
    ] = "1h",
    force: ForceOpt = False,
    break_lock: BreakLockOpt = False,
    engine: EngineOpt = "local",
    master: MasterOpt = None,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    storage_option: StorageOpt = None,
) -> RepartitionRun | UndoResult:
    """Change a stateful query's number of state partitions offline, as Spark 4.3's own
    repartition does, for HDFS-backed and RocksDB stores.

    The last committed batch is N: batch N+1 becomes a repartition batch (offsets/N+1 with the
    new spark.sql.shuffle.partitions, commits/N+1), every new partition gets a full snapshot of
    state version N+2 holding the keys Spark's shuffle sends it, and the operator metadata
    says the new count. The query then resumes at batch N+2 reading no input twice.

    A dry run by default: prints the plan (keys and bytes per new partition, the skew before
    and after, files to write). --apply writes it (asks first unless --yes; refuses while the
    query looks active unless --force, of which the dry run warns; holds the checkpoint lock)
    and ends with a validation.
    A repartition left unfinished (by ckpt or Spark) is finished by running it again with the
    same count. --undo restores every byte from the manifest.

    Examples:

      ckpt repartition /data/ckpt/q1 --partitions 8

      ckpt repartition s3://bucket/q1 --partitions 8 --apply --yes

      ckpt repartition /data/ckpt/q1 --undo

    --engine spark reads and writes the partitions as Spark tasks (a state larger than one
    machine), staging the records in the quarantine directory beside the checkpoint; the
    result is the same.

    Exit code 0 when the plan is made or the repartition is written and validates, 1 when
    the checkpoint has errors after it, 2 when it refuses or cannot run.
    """
    run = start(json_output, quiet, storage_option)
    age = parse_duration(min_age)
    if undo:
        undone = undo_repartition(
            path,
            run.storage_options,
            quarantine=quarantine,
            force=force,
            break_lock=break_lock,
            stats=STATE.requests,
        )
        return run.render(undone)
    if partitions is None:
        raise UsageError("give the new partition count: --partitions M (or --undo)")
    result = run_repartition(
        run.storage(path),
        partitions=partitions,
        apply=apply,
        quarantine=quarantine,
        force=force,
        min_age=age,
        break_lock=break_lock,
        confirm=run.confirm(yes=yes, action="repartition", unattended="repartition"),
        engine=make_engine(engine, master=master),
        progress=run.progress,
    )
    return run.render(result)
