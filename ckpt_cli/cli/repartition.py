"""``ckpt repartition``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import RepartitionRun, UndoResult, run_repartition, undo_repartition
from ckpt_cli.cli.change import ApplyOpt, ChangeOptions, YesOpt, start_change
from ckpt_cli.cli.common import EngineOptions, PathArg, SharedOptions, error_boundary, given


@error_boundary
def repartition(
    path: PathArg,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions",
            metavar="M",
            help="The new number of state partitions (spark.sql.shuffle.partitions).",
            show_default=False,
        ),
    ] = None,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    change: ChangeOptions = ChangeOptions(),
    engine_options: EngineOptions = EngineOptions(),
    shared: SharedOptions = SharedOptions(),
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
    and ends with a validation. A repartition left unfinished (by ckpt or Spark) is finished
    by running it again with the same count. --undo restores every byte from the manifest of
    the newest repartition (--manifest picks another); it refuses when the query ran batches
    after the repartition, unless --force.

    --engine spark reads and writes the partitions as Spark tasks (a state larger than one
    machine), staging the records in the quarantine directory beside the checkpoint; the
    result is the same.

    Exit code 0 when the plan is made, the repartition is written and validates, or it is
    undone (already), 1 when the checkpoint has errors after it, 2 when it refuses or cannot
    run.

    Examples:

      ckpt repartition /data/ckpt/q1 --partitions 8

      ckpt repartition s3://bucket/q1 --partitions 8 --apply --yes

      ckpt repartition /data/ckpt/q1 --undo
    """
    started = start_change("repartition", path, change, apply=apply, yes=yes, shared=shared)
    if change.undo:
        return started.undo(undo_repartition, force=change.force)
    count = given(partitions, "give the new partition count: --partitions M (or --undo)")
    engine_of = engine_options.make()
    result = run_repartition(
        started.storage,
        started.guards,
        partitions=count,
        quarantine=change.quarantine,
        engine=engine_of,
    )
    return started.render(result)
