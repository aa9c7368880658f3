"""What the listing alone shows: temp files, unknown files, empty RocksDB files and log
entries, checksums of files that are gone; and, with ``--deep``, every file to decode."""

from __future__ import annotations

from ckpt_cli.core.model import CHECKSUM_KINDS, CheckpointFile, FileKind
from ckpt_cli.validate.codes import EMPTY_FILE, ORPHAN_FILE, TEMP_FILE, UNKNOWN_FILE, WARNING
from ckpt_cli.validate.context import ValidationRun


def check_files(run: ValidationRun) -> None:
    ckpt = run.ckpt
    for f in ckpt.temp_files:
        run.add(
            TEMP_FILE,
            f"{f.path}: temp file of an interrupted write"
            + (f" of {f.target}" if f.target else ""),
            [f.path],
        )
    for f in ckpt.of_kind(FileKind.SST, FileKind.ROCKSDB_LOG):
        if f.entry.size == 0:
            # RocksDB uploads with copyFromLocalFile under the final name: a killed upload
            # leaves an empty file (seen in the spark4-crash-rocksdb-sst fixture).
            run.add(
                EMPTY_FILE,
                f"{f.path}: empty RocksDB file, left by an interrupted upload; no version "
                "can use it",
                [f.path],
                severity=WARNING,
            )
    for f in ckpt.unknown_files:
        run.add(UNKNOWN_FILE, f"{f.path}: not a file Spark writes", [f.path])
    sidecars = ckpt.of_kind(*CHECKSUM_KINDS)
    missing = run.missing_targets(sidecars)
    for f in sidecars if missing else ():
        if f.target in missing:
            run.add(
                ORPHAN_FILE,
                f"{f.path}: checksum of {f.target}, which is not in the checkpoint",
                [f.path],
            )
    if run.deep:
        _queue_everything(run, sidecars)
    # Log entries a restart does not read (deep: the root metadata file too).
    kinds = [FileKind.OFFSETS, FileKind.COMMIT] + ([FileKind.METADATA] if run.deep else [])
    for f in ckpt.of_kind(*kinds):
        if f.entry.size == 0 and f.path not in run.needed_logs:
            run.add(EMPTY_FILE, f"{f.path}: empty file", [f.path], severity=WARNING)


def _queue_everything(run: ValidationRun, sidecars: list[CheckpointFile]) -> None:
    """``--deep``: every state file, and every other file a checksum sidecar covers
    (operator metadata, schemas, SSTs, RocksDB logs, source logs): Hadoop refuses to read
    one whose .crc differs."""
    for f in run.ckpt.of_kind(FileKind.DELTA, FileKind.SNAPSHOT, FileKind.CHANGELOG, FileKind.ZIP):
        run.queue(f)
    for target in dict.fromkeys(f.target for f in sidecars if f.target):
        covered = run.ckpt.file(target)
        if (
            covered is not None
            and covered.entry.size > 0
            and covered.kind not in (FileKind.TEMP, FileKind.UNKNOWN)
            and target not in run.sidecars_checked
        ):
            run.queue(covered)
