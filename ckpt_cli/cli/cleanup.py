"""``ckpt orphans`` and ``ckpt cleanup``."""

from __future__ import annotations

from typing import Annotated

import typer

from ckpt_cli.api import (
    CleanupPlan,
    CleanupRun,
    Guards,
    OrphanScan,
    plan_cleanup,
    run_cleanup,
    scan_orphans,
)
from ckpt_cli.cli.change import ApplyOpt, BreakLockOpt, ForceOpt, MinAgeOpt, RetainOpt, YesOpt
from ckpt_cli.cli.common import (
    EngineOptions,
    PathArg,
    SharedOptions,
    error_boundary,
    files_option,
    manifest_option,
    parse_duration,
    start,
)


@error_boundary
def orphans(
    path: PathArg,
    retain: RetainOpt = None,
    min_age: MinAgeOpt = "1h",
    show_files: Annotated[
        bool, files_option("List every file, not only the totals per class.")
    ] = False,
    recursive: Annotated[
        bool,
        typer.Option(
            "--recursive",
            "-r",
            help="CHECKPOINT is a prefix: find every checkpoint under it and scan them all.",
        ),
    ] = False,
    engine_options: EngineOptions = EngineOptions(),
    shared: SharedOptions = SharedOptions(),
) -> CleanupPlan | OrphanScan:
    """List the files no retained version needs, by class, with their bytes.

    Classes: state versions older than the retention window, RocksDB SST/log files no
    retained zip names, format-v2 files of task attempts the commit log did not choose, temp
    files of interrupted writes, old offsets/commits entries, superseded file-source log
    entries, and checksum sidecars of all of these. SST/log files no zip names that Spark's
    rule keeps (not older than every file a zip names) are listed as kept, with their bytes.
    Exit code 1 when there are files to remove (a cron job can alert), 0 when there are none.
    Changes nothing: `ckpt cleanup` removes them.

    Examples:

      ckpt orphans /data/ckpt/q1

      ckpt orphans /data/ckpt/q1 --retain 10 --json
    """
    run = start(shared, show_files=show_files, title="Orphans")
    age = parse_duration(min_age)
    if recursive:
        storage, where = run.storage(path), engine_options.make()
        scan = scan_orphans(storage, where, retain=retain, min_age=age, progress=run.progress)
        return run.render(scan)
    return run.render(plan_cleanup(run.open(path), retain=retain, min_age=age))


@error_boundary
def cleanup(
    path: PathArg,
    retain: RetainOpt = None,
    min_age: MinAgeOpt = "1h",
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    force: ForceOpt = False,
    break_lock: BreakLockOpt = False,
    manifest: Annotated[
        str | None,
        manifest_option(
            "Where to write the JSON manifest of what is deleted (default: beside the "
            "checkpoint, <checkpoint>.ckpt-cleanup-<time>.json)."
        ),
    ] = None,
    show_files: Annotated[bool, files_option("List every file of the plan.")] = False,
    shared: SharedOptions = SharedOptions(),
) -> CleanupRun:
    """Remove what no retained version needs, without ever breaking a restart.

    A dry run by default: prints the plan (files and bytes per class) and changes nothing.
    With --apply (and --yes for cron), writes a manifest of the plan, then deletes in an order
    that keeps every retained version loadable if interrupted: temp files, unchosen format-v2
    attempts and old versions' own files first, old log entries next, the SST/log files they
    referenced last. Files younger than --min-age are never deleted, and --apply refuses while
    the query looks active (its last batch planned and offsets/ written within --min-age; a
    copy's new files alone are not) unless --force; a --min-age below the default 1h needs
    --force too. The dry run warns of these instead. --apply holds the checkpoint lock
    (.ckpt-lock): a second cleanup or repair fails naming the holder. Deleted files are gone
    (cleanup has no --undo): its manifest lists them.

    Examples:

      ckpt cleanup /data/ckpt/q1

      ckpt cleanup /data/ckpt/q1 --retain 10 --min-age 3d --apply

      ckpt cleanup s3://bucket/ckpt/q1 --apply --yes
    """
    run = start(shared, show_files=show_files, title="Cleanup plan")
    guards = Guards(
        apply=apply,
        force=force,
        min_age=parse_duration(min_age),
        break_lock=break_lock,
        confirm=run.confirm(yes=yes, action="delete", unattended="delete"),
        progress=run.progress,
    )
    cleanup_run = run_cleanup(run.storage(path), guards, retain=retain, manifest=manifest)
    return run.render(cleanup_run)
