"""``ckpt convert``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import ConvertRun, UndoResult, run_convert, undo_convert
from ckpt_cli.cli.change import ApplyOpt, ChangeOptions, YesOpt, start_change
from ckpt_cli.cli.common import EngineOptions, PathArg, SharedOptions, error_boundary, given


@error_boundary
def convert(
    path: PathArg,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            metavar="hdfs|rocksdb",
            help="The state store provider to move the state to.",
            show_default=False,
        ),
    ] = None,
    format_version: Annotated[
        int | None,
        typer.Option(
            "--format-version",
            metavar="1|2",
            min=1,
            max=2,
            help="The RocksDB checkpoint format to move the state to.",
            show_default=False,
        ),
    ] = None,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    engine_options: EngineOptions = EngineOptions(),
    change: ChangeOptions = ChangeOptions(),
    shared: SharedOptions = SharedOptions(),
) -> ConvertRun | UndoResult:
    """Move a stateful query's state to the other state store provider (HDFS-backed <->
    RocksDB) or RocksDB checkpoint format (v1 <-> v2) offline; Spark pins both and will
    not change them.

    The last committed batch is N: batch N+1 becomes a conversion batch (offsets/N+1 naming
    the provider class, commits/N+1 in the format's header), every partition gets a full
    snapshot of state version N+2 in the new files, and the old files move to the
    quarantine beside the checkpoint. The query then resumes at batch N+2, reading no input
    twice. Aggregations, dropDuplicates (within watermark too), flatMapGroupsWithState,
    session windows and stream-stream joins in state format 1-2 change provider either way;
    every RocksDB operator changes format. --format-version 2 on a Spark 4.0 format-v2 checkpoint
    rewrites its zips for Spark 4.1+.

    A dry run by default: prints the plan (keys and bytes per operator and store, files to
    move). --apply writes it (asks first unless --yes; refuses while the query looks active
    unless --force; holds the checkpoint lock) and ends with a validation. --undo puts back
    every byte from the manifest of the newest conversion (--manifest picks another); it
    refuses when the query ran batches after the conversion, unless --force.

    --engine spark reads and writes the store partitions as Spark tasks (a state larger
    than one machine), staged beside the checkpoint and moved in by this process.

    Exit code 0 when the plan is made, the conversion is written and validates, or it is
    undone (already), 1 when the checkpoint has errors after it, 2 when it refuses or cannot
    run.

    Examples:

      ckpt convert /data/ckpt/q1 --provider rocksdb

      ckpt convert s3://bucket/q1 --provider rocksdb --apply --yes

      ckpt convert /data/ckpt/q1 --format-version 1

      ckpt convert /data/ckpt/q1 --undo
    """
    started = start_change("convert", path, change, apply=apply, yes=yes, shared=shared)
    if change.undo:
        return started.undo(undo_convert, force=change.force)
    if provider is None and format_version is None:
        given(None, "give --provider hdfs|rocksdb, --format-version 1|2 (or --undo)")
    # The local engine converts in this process, a partition at a time.
    engine_of = engine_options.distributed()
    run = run_convert(
        started.storage,
        started.guards,
        provider=provider,
        format_version=format_version,
        quarantine=change.quarantine,
        engine=engine_of,
    )
    return started.render(run)
