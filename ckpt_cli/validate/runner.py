"""``validate()``: the checks of :mod:`ckpt_cli.validate`, in order, and the report."""

from __future__ import annotations

import time

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import Engine, LocalEngine
from ckpt_cli.errors import CkptError
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.units import natural_key
from ckpt_cli.validate.codes import ERROR, SEVERITY_RANK
from ckpt_cli.validate.context import ValidationRun
from ckpt_cli.validate.links import check_symlinks
from ckpt_cli.validate.listing import check_files
from ckpt_cli.validate.logs import check_logs, check_metadata
from ckpt_cli.validate.orphans import check_orphans
from ckpt_cli.validate.pool import run_file_checks
from ckpt_cli.validate.repartition import (
    check_unfinished_conversion,
    check_unfinished_repartition,
)
from ckpt_cli.validate.report import ValidationReport
from ckpt_cli.validate.sources import check_sources
from ckpt_cli.validate.spark4 import (
    check_column_families,
    check_row_layouts,
    check_rows_decodable,
    check_schema_homes,
)
from ckpt_cli.validate.state import check_state
from ckpt_cli.validate.upgrade import check_zip_metadata_v2


def validate(
    ckpt: Checkpoint,
    *,
    batch: int | None = None,
    all_versions: bool = False,
    deep: bool = False,
    workers: int | None = None,
    progress: ProgressSink = NULL_PROGRESS,
    engine: Engine | None = None,
    decode_limit: int | None = None,
    fail_on: str = ERROR,
) -> ValidationReport:
    """Check ``ckpt`` against every rule; see :mod:`ckpt_cli.validate` for what is read.
    ``engine`` runs the file checks (default: this machine's threads or processes).
    ``decode_limit`` (bytes) is for a quick verdict (the headline): when the deltas,
    snapshots and changelogs in scope total more, they are planned and found but not
    decoded (every other check still runs, RocksDB zips and the SSTs they name included),
    and the report's target says so (``not_decoded``): its "ok" then means "nothing found",
    not "restartable". ``fail_on``: the severity from which a finding makes the report not
    ok (``--fail-on``)."""
    started = time.perf_counter()
    before = (ckpt.storage.stats.files_read, ckpt.storage.stats.bytes_read)
    if batch is not None and batch not in ckpt.batches.commits:
        committed = ckpt.batches.commits
        raise CkptError(
            f"{ckpt.storage.url}: batch {batch} has no commit in the checkpoint "
            f"(committed: {committed[0]}-{committed[-1]})"
            if committed
            else f"{ckpt.storage.url}: no committed batches"
        )
    # A damaged checkpoint is read as far as it can be (an unreadable latest log entry is a
    # finding, not an error), on a view of the caller's checkpoint.
    run = ValidationRun(ckpt.tolerant_view(), batch=batch, all_versions=all_versions, deep=deep)
    # Movement from the start: these read every log entry (and --deep every version's plan).
    progress.start("Checking logs, sources and state versions")
    try:
        check_metadata(run)
        check_logs(run)
        check_unfinished_repartition(run)
        check_unfinished_conversion(run)
        check_sources(run)
        check_state(run)
        check_files(run)
        held_back = run.hold_back_streams(decode_limit) if decode_limit is not None else []
        pool_reads, pool_bytes = run_file_checks(run, engine or LocalEngine(workers), progress)
        check_zip_metadata_v2(run)
        progress.start("Checking column families, rows and orphans")
        check_column_families(run)
        check_schema_homes(run)
        check_rows_decodable(run)
        check_row_layouts(run)
        check_orphans(run)
        check_symlinks(run)
    finally:
        progress.close()
    run.findings.sort(
        key=lambda f: (-SEVERITY_RANK[f.severity], f.code, [natural_key(p) for p in f.paths])
    )
    stats = ckpt.storage.stats
    target = run.target_version()
    return ValidationReport(
        checkpoint=ckpt.storage.url,
        target={
            "batch": target - 1 if target else None,
            "version": target,
            "scope": "all-versions" if all_versions else "restart",
            "deep": deep,
            **(
                {
                    "decoded": False,
                    "not_decoded": {
                        "files": len(held_back),
                        "bytes": sum(t.size for t in held_back),
                    },
                }
                if held_back
                else {}
            ),
        },
        findings=run.findings,
        fail_on=fail_on,
        stats={
            "files_listed": len(ckpt.files),
            "files_checked": len(run.tasks),
            "versions_checked": run.versions_checked,
            "orphans_unresolved": run.orphans_unresolved,
            "list_calls": stats.list,
            # Reads made in worker processes are counted by the workers.
            "files_read": stats.files_read - before[0] + pool_reads,
            "bytes_read": stats.bytes_read - before[1] + pool_bytes,
            "seconds": round(time.perf_counter() - started, 3),
        },
    )
