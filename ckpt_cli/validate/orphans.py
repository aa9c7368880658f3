"""Files no retained version needs (ORPHAN_FILE, info), decided as ``ckpt orphans`` decides
them (:mod:`ckpt_cli.retention`)."""

from __future__ import annotations

from ckpt_cli.core.model import CheckpointFile, FileKind, Partition
from ckpt_cli.core.untracked import untracked_shared_files
from ckpt_cli.formats import rocksdb_zip
from ckpt_cli.validate.codes import ORPHAN_FILE, WARNING, format_error_code
from ckpt_cli.validate.context import ValidationRun

# Restart scope: to see which SSTs/logs no zip names, the older zips of a partition are read
# when there are at most this many (settling it can take every one of them: a partition with
# more is left to --all-versions, and its unnamed files are counted in the stats).
RESTART_SCOPE_ZIP_READS = 3


def check_orphans(run: ValidationRun) -> None:
    """Files no retained version needs, as info, decided as ``ckpt orphans`` decides
    (``retention``): format-v2 files of attempts the commit log did not choose, and
    SSTs/logs no zip names (Spark keeps those until they are older than every file a zip
    names, so they can sit there unseen). Restart scope reads only the commits of
    versions with files of several attempts, and per partition only the zips it takes to
    name every SST/log present (the plans' zips are already read)."""
    candidates: list[tuple[int, str, Partition, CheckpointFile]] = []
    for op in run.ckpt.operators.values():
        for store in op.stores.values():
            for part in store.partitions.values():
                for sv in part.versions.values():
                    several = len(sv.files) > 1 and len(sv.unique_ids) > 1
                    if several or (run.every and sv.unique_ids):
                        candidates += [(op.id, store.name, part, f) for f in sv.files]
    versions = {f.version for *_, f in candidates if f.version is not None}
    run.ckpt.storage.prefetch(
        [f"commits/{v - 1}" for v in sorted(versions) if v - 1 in run.ckpt.batches.commits]
    )
    for op_id, store_name, part, f in candidates:
        chosen = run.unchosen(op_id, store_name, part.id, f)
        if chosen is not None and f.version is not None:
            run.add(
                ORPHAN_FILE,
                f"{f.path}: written by a task attempt the commit log did not choose "
                f"(commits/{f.version - 1} records {chosen}); Spark never reads it",
                [f.path],
                operator=op_id,
                store=store_name,
                partition=part.id,
                version=f.version,
                bytes=f.entry.size,
            )
    for op in run.ckpt.operators.values():
        for store in op.stores.values():
            _check_untracked(run, op.id, store.name, list(store.partitions.values()))


def _check_untracked(run: ValidationRun, op: int, store: str, parts: list[Partition]) -> None:
    known = dict[str, rocksdb_zip.RocksDBCheckpointMetadata | None](run.zip_metadata)
    found = untracked_shared_files(
        run.ckpt.storage, parts, known, None if run.every else RESTART_SCOPE_ZIP_READS
    )
    for exc in found.unreadable.values():
        if exc.path in run.tasks:
            continue  # decoded by the pool, which reported it
        # A zip no other check reads (restart scope): a rollback to it fails.
        run.add(
            format_error_code(exc),
            f"{exc} (read to see which SSTs it names: a rollback to it fails, and which "
            "SSTs of its partition no zip names is unknown)",
            [exc.path],
            severity=WARNING,
            operator=op,
            store=store,
        )
    run.orphans_unresolved += sum(found.unresolved.values())
    by_path = {p.path: p for p in parts}
    for part_path, files in sorted(found.files.items()):
        for f in files:
            if f.entry.size == 0:
                continue  # EMPTY_FILE says it (an interrupted upload)
            what = "SST" if f.kind is FileKind.SST else "RocksDB log"
            run.add(
                ORPHAN_FILE,
                f"{f.path}: no zip names this {what} file ({f.entry.size} bytes); Spark "
                "deletes it only once it is older than every file a zip names",
                [f.path],
                operator=op,
                store=store,
                partition=by_path[part_path].id,
                bytes=f.entry.size,
            )
