"""A state repartition left unfinished, by Spark's offline repartition or by ckpt's.

Both write ``offsets/N+1`` first (a copy of ``offsets/N`` with another
``spark.sql.shuffle.partitions``), then the new layout's state at version N+2, then
``commits/N+1``. Spark 4.3 refuses to start a query whose latest offsets entry is such a
batch without a commit (``MicroBatchExecution.checkUnfinishedRepartitionBatch``: the latest
offsets batch L > the last committed one >= 0, and ``OfflineStateRepartitionUtils
.isRepartitionBatch(L)``: L > 0 and offsets L and L-1 pin different shuffle partitions)
with ``STREAMING_UNFINISHED_REPARTITION_DETECTED``, unless
``spark.sql.streaming.checkUnfinishedRepartitionOnRestart`` is off.
"""

from __future__ import annotations

from ckpt_cli.core.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.core.unfinished import (
    UnfinishedRepartition,
    find_unfinished_conversion,
    find_unfinished_repartition,
    other_provider_stores,
    unique_id_zips_in_v1,
)
from ckpt_cli.core.untracked import untracked_shared_files, zip_names
from ckpt_cli.errors import FormatError
from ckpt_cli.validate.codes import (
    UNCOMMITTED_BATCH,
    UNFINISHED_CONVERSION,
    UNFINISHED_REPARTITION,
    WARNING,
)
from ckpt_cli.validate.context import ValidationRun

_STATE_KINDS = (FileKind.DELTA, FileKind.SNAPSHOT, FileKind.ZIP, FileKind.CHANGELOG)


def attempt_files(ckpt: Checkpoint, attempt: UnfinishedRepartition) -> list[CheckpointFile]:
    """The state files the unfinished attempt wrote: state files of versions after the
    committed batch's (N+2), and the RocksDB SST/log files no other zip names that are
    either named by those zips, in a partition of the new layout only, or written after
    ``offsets/<batch>`` (the attempt writes its offsets entry first)."""
    # Only an unfinished repartition reads zips: not imported for every restart check.
    from ckpt_cli.core.read import read_zip_metadata

    top = attempt.batch  # the version a restart from the last commit loads (N+1)
    offsets_entry = ckpt.listing.get(f"offsets/{attempt.batch}")
    started = offsets_entry.mtime if offsets_entry is not None else None
    out: list[CheckpointFile] = []
    for op in ckpt.operators.values():
        for store in op.stores.values():
            for part in store.partitions.values():
                written = [
                    f
                    for f in part.files
                    if f.kind in _STATE_KINDS and f.version is not None and f.version > top
                ]
                out += written
                kept = [f for f in part.files if f.kind in _STATE_KINDS and f not in written]
                shared = part.shared_files
                if not shared:
                    continue
                attempt_zips = [f for f in written if f.kind is FileKind.ZIP]
                known = {z.path: None for z in attempt_zips}
                unnamed = untracked_shared_files(ckpt.storage, [part], known)
                if part.path in unnamed.unreadable:
                    continue  # which files the kept zips need is unknown: leave them all
                leftover = unnamed.files.get(part.path, [])
                named: set[str] = set()
                for z in attempt_zips:
                    try:
                        named |= zip_names(
                            part, read_zip_metadata(ckpt.storage, z.path, z.entry.size)
                        )
                    except FormatError:
                        continue
                for f in leftover:
                    mtime = f.entry.mtime
                    if (
                        f.path in named
                        or not kept
                        or (started is not None and mtime is not None and mtime >= started)
                    ):
                        out.append(f)
    return out


def check_unfinished_conversion(run: ValidationRun) -> None:
    """UNFINISHED_CONVERSION where a restart fails; it replaces the batch's UNCOMMITTED_BATCH
    finding (Spark's re-run of the batch fails). Before its offsets entry, a conversion
    leaves stores with the other provider's files: a warning (a restart loads the configured
    provider's files; where those are gone, the state check's errors say so)."""
    attempt = find_unfinished_conversion(run.ckpt)
    zips = unique_id_zips_in_v1(run.ckpt)
    if zips:
        run.add(
            UNFINISHED_CONVERSION,
            f"{zips[0]}{f' and {len(zips) - 1} more' if len(zips) > 1 else ''}: a zip named "
            "with a uniqueId (checkpoint format v2) in a checkpoint whose commit log is "
            "format v1; Spark's format-v1 loader parses every zip name as a version and "
            "fails (NumberFormatException): a conversion to format v2 was interrupted",
            zips,
            undo="ckpt convert CKPT --undo",
        )
    if attempt is None:
        stores = other_provider_stores(run.ckpt)
        if stores and not zips:
            run.add(
                UNFINISHED_CONVERSION,
                f"{', '.join(stores)}: files of another state store provider than the offsets "
                "conf names, or of another checkpoint format than the commit log's: a "
                "conversion (ckpt convert) was interrupted before its batch",
                severity=WARNING,
                stores=stores,
                undo="ckpt convert CKPT --undo",
            )
        return
    entry = f"offsets/{attempt.batch}"
    run.findings = [
        f for f in run.findings if not (f.code == UNCOMMITTED_BATCH and entry in f.paths)
    ]
    run.add(
        UNFINISHED_CONVERSION,
        attempt.describe(),
        [entry],
        batch=attempt.batch,
        from_class=attempt.from_class,
        to_class=attempt.to_class,
        undo="ckpt convert CKPT --undo",
    )


def check_unfinished_repartition(run: ValidationRun) -> None:
    """UNFINISHED_REPARTITION where Spark refuses to start; it replaces the batch's
    UNCOMMITTED_BATCH finding (Spark does not re-run such a batch)."""
    attempt = find_unfinished_repartition(run.ckpt)
    if attempt is None:
        return
    entry = f"offsets/{attempt.batch}"
    run.findings = [
        f for f in run.findings if not (f.code == UNCOMMITTED_BATCH and entry in f.paths)
    ]
    written = [f.path for f in attempt_files(run.ckpt, attempt)]
    run.add(
        UNFINISHED_REPARTITION,
        f"{attempt.describe()} (STREAMING_UNFINISHED_REPARTITION_DETECTED)"
        + (f"; the attempt wrote {len(written)} state files" if written else ""),
        [entry],
        **attempt.to_json(),
        last_committed=run.ckpt.batches.latest_committed,
        finish=f"ckpt repartition CKPT --partitions {attempt.to_partitions}",
        written=written,
    )
