"""Decoding one file end to end, with the checksum sidecars that cover it.

This is what the pool runs (in threads, or in worker processes for ``--deep`` on local
disk): a :class:`FileTask` in, a :class:`FileResult` of plain findings out, so both pickle.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field

from ckpt_cli.core.loadable import decode_stream
from ckpt_cli.core.model import FileKind
from ckpt_cli.core.rebuild import StateUnavailable
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import checksums, rocksdb_zip
from ckpt_cli.storage import Storage
from ckpt_cli.validate.codes import CRC_MISMATCH, EMPTY_FILE, format_error_code

# Files up to this size are read in one request and decoded from memory.
READ_WHOLE_BYTES = 64 << 20


@dataclass(frozen=True)
class FileTask:
    """One file to decode end to end, with the checksum sidecars that cover it."""

    path: str
    kind: FileKind
    size: int
    codec: str
    sidecars: tuple[tuple[str, FileKind], ...] = ()
    deep: bool = False  # zips: also rebuild the RocksDB and iterate it
    shared: tuple[tuple[str, int], ...] = ()  # zips: SST/log paths present, with sizes


# A finding as the pool returns it: code, message, paths (the run adds severity and hint).
RawFinding = tuple[str, str, list[str]]


@dataclass
class FileResult:
    path: str
    findings: list[RawFinding] = field(default_factory=list)
    zip_metadata: rocksdb_zip.RocksDBCheckpointMetadata | None = None
    bytes_read: int = 0
    reads: int = 0


def check_file(storage: Storage, task: FileTask) -> FileResult:
    """Decode ``task.path`` to its end and verify its sidecars; problems become findings."""
    # The decoders here, not at import: a restart check without decoding (``ckpt versions``)
    # imports this module for FileTask only.
    from ckpt_cli.core.read import WHOLE_ZIP_BYTES
    from ckpt_cli.formats.state_schema import parse_state_schema

    result = FileResult(task.path)
    # One request per file where it fits in memory: the same bytes are decoded and checked
    # against the sidecars (object-store requests cost money); large files are streamed.
    # A large zip whose bytes nothing else needs is read by range for its metadata.
    ranged_zip = (
        task.kind is FileKind.ZIP
        and not task.deep
        and not task.sidecars
        and task.size > WHOLE_ZIP_BYTES
    )
    whole = 0 < task.size <= READ_WHOLE_BYTES and not ranged_zip
    data = storage.read_bytes(task.path) if whole else None
    try:
        if task.size == 0:
            result.findings.append((EMPTY_FILE, f"{task.path}: empty file", [task.path]))
        elif task.kind in (FileKind.DELTA, FileKind.SNAPSHOT, FileKind.CHANGELOG):
            decode_stream(storage, task.path, task.kind, task.codec, data)
        elif task.kind is FileKind.ZIP:
            result.zip_metadata = _decode_zip(storage, task, data)
        elif task.kind is FileKind.STATE_SCHEMA:
            parse_state_schema(task.path, data or storage.read_bytes(task.path))
        if task.sidecars and task.size:
            if data is None:
                data = storage.read_bytes(task.path)
            result.findings.extend(sidecar_findings(storage, task.path, task.sidecars, data))
    except FormatError as exc:
        result.findings.append((format_error_code(exc, task.kind), str(exc), [task.path]))
    except StateUnavailable as exc:
        result.findings.append((exc.reason, exc.message, list(exc.paths)))
    return result


def _decode_zip(
    storage: Storage, task: FileTask, data: bytes | None
) -> rocksdb_zip.RocksDBCheckpointMetadata:
    from ckpt_cli.core.read import read_zip_metadata
    from ckpt_cli.formats import rocksdb

    if data is None and not task.deep:
        return read_zip_metadata(storage, task.path, task.size)
    if data is None:
        data = storage.read_bytes(task.path)
    meta = rocksdb_zip.read_zip(task.path, data).metadata
    if not task.deep:
        return meta
    present = dict(task.shared)
    store_dir = task.path.rsplit("/", 1)[0]
    for subdir, files in (("SSTs", meta.sst_files), ("logs", meta.log_files)):
        for f in files:
            path = f"{store_dir}/{subdir}/{f.dfs_file_name}"
            if present.get(path) != f.size_bytes:
                return meta  # reported from the listing; RocksDB cannot be rebuilt
    with tempfile.TemporaryDirectory(prefix="ckpt-validate-") as tmp:
        rocksdb_zip.rebuild_db_dir(
            data, lambda rel: storage.read_bytes(f"{store_dir}/{rel}"), tmp, path=task.path
        )
        count = sum(1 for _ in rocksdb.iter_db(tmp, path=task.path))
    keys_known = meta.num_keys is not None and meta.num_keys >= 0
    if keys_known and not meta.uses_column_families and count != meta.num_keys:
        raise FormatError(
            task.path, f"metadata says numKeys={meta.num_keys}, its SSTs hold {count} keys"
        )
    return meta


def sidecar_findings(
    storage: Storage, covered: str, sidecars: Iterable[tuple[str, FileKind]], data: bytes
) -> list[RawFinding]:
    """CRC_MISMATCH findings for the sidecars of ``covered`` whose checksums ``data`` fails."""
    found: list[RawFinding] = []
    for path, kind in sidecars:
        raw = storage.read_bytes(path)
        try:
            if kind is FileKind.HADOOP_CRC:
                problem = checksums.verify_hadoop_crc(checksums.parse_hadoop_crc(path, raw), data)
            else:
                problem = checksums.verify_spark_checksum(
                    checksums.parse_spark_checksum(path, raw), data
                )
        except FormatError as exc:
            problem = exc.problem
        if problem:
            found.append((CRC_MISMATCH, f"{path}: {problem} (covers {covered})", [path, covered]))
    return found


# -- in a worker process ------------------------------------------------------------------------

_WORKER_STORAGE: Storage | None = None


def init_worker(storage: Storage) -> None:
    global _WORKER_STORAGE
    _WORKER_STORAGE = storage


def check_in_worker(task: FileTask) -> FileResult:
    """In a worker process: its own storage, so it counts its own requests."""
    assert _WORKER_STORAGE is not None
    stats = _WORKER_STORAGE.stats
    before = (stats.files_read, stats.bytes_read)
    result = check_file(_WORKER_STORAGE, task)
    result.reads = stats.files_read - before[0]
    result.bytes_read = stats.bytes_read - before[1]
    return result
