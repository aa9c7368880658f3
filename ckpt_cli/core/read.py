"""The raw key/value records of a store's files, and the state of a plan rebuilt from them.

Per provider: HDFS ``.delta``/``.snapshot`` files (lz4/zstd-framed UnsafeRow records),
RocksDB ``.zip`` files (their SSTs rebuilt into a temporary RocksDB directory and iterated)
and ``.changelog`` files. ``iter_state`` merges a plan's base with the changes after it;
``iter_file_records`` is also the change feed's reader. Keys and values stay bytes as
stored; ``replay.rows`` decodes them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ckpt_cli.core import kernel
from ckpt_cli.core.model import Checkpoint, CheckpointFile, FileKind, Partition
from ckpt_cli.core.rebuild import ReplayPlan, StateUnavailable, codec_of
from ckpt_cli.errors import CkptError
from ckpt_cli.formats import compression, records, rocksdb, rocksdb_zip, sst
from ckpt_cli.formats.state_encoders import (
    row_checksums,
    strip_hdfs_value_checksum,
    strip_key_checksum,
)
from ckpt_cli.formats.state_schema import StateSchema, parse_state_schema
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.storage import Storage

# Zips up to this size are read in one request; larger ones by ranges (two small requests:
# the central directory and the metadata entry, not a MANIFEST of megabytes inside).
WHOLE_ZIP_BYTES = 1 << 20


def read_zip_metadata(
    storage: Storage, path: str, size: int | None
) -> rocksdb_zip.RocksDBCheckpointMetadata:
    """The metadata of a ``<v>.zip``: whole when small (or of unknown size), else by range."""
    if size is None or size <= WHOLE_ZIP_BYTES:
        return rocksdb_zip.read_zip(path, storage.read_bytes(path)).metadata
    with storage.open_random(path) as fh:
        return rocksdb_zip.read_zip(path, fh).metadata


def iter_file_records(
    ckpt: Checkpoint, f: CheckpointFile, stats: records.RecordStats | None = None
) -> Iterator[tuple[str, bytes, bytes | None]]:
    """``(type, key, value)`` of a delta, snapshot or changelog, streamed from storage."""
    with ckpt.storage.open_stream(f.path) as fh:
        chunks = compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt))
        if f.kind is FileKind.CHANGELOG:
            changelog = records.open_changelog(f.path, chunks)
            yield from changelog.records()
            if stats is not None:
                stats.__dict__.update(changelog.stats.__dict__)
            return
        kv = records.iter_kv_records(
            f.path, chunks, snapshot=f.kind is FileKind.SNAPSHOT, stats=stats
        )
        if row_checksums(ckpt.conf):
            kv = _verified(f.path, kv)
        for key, value in kv:
            yield (records.PUT, key, value) if value is not None else (records.DELETE, key, None)


def _snapshot_rows(ckpt: Checkpoint, f: CheckpointFile) -> Iterator[tuple[bytes, bytes]]:
    """A snapshot's (key, value) pairs, with no per-record repacking (the replay hot path)."""
    with ckpt.storage.open_stream(f.path) as fh:
        chunks = compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt))
        kv = records.iter_kv_records(f.path, chunks, snapshot=True)
        yield from _verified(f.path, kv) if row_checksums(ckpt.conf) else kv  # type: ignore[misc]


def _verified(
    path: str, kv: Iterator[tuple[bytes, bytes | None]]
) -> Iterator[tuple[bytes, bytes | None]]:
    """HDFS records of a store with row checksums: each value without its CRC32C header,
    which must match the key and value rows; a remove's key carries one over the key."""
    for key, value in kv:
        if value is None:
            key, checksum = strip_key_checksum(key, path=path)
        else:
            value, checksum = strip_hdfs_value_checksum(key, value, path=path)
        if not checksum.ok:
            raise CkptError(
                f"{path}: row checksum mismatch for key {key.hex()} (stored "
                f"{checksum.stored}, computed {checksum.computed})"
            )
        yield key, value


def _zip_rows(
    ckpt: Checkpoint, f: CheckpointFile, part: Partition
) -> Iterator[tuple[bytes, bytes]]:
    with rebuilt_zip(ckpt, f, part) as tmp:
        yield from rocksdb.iter_db(tmp, path=f.path)


def _shared_file(ckpt: Checkpoint, f: CheckpointFile, part: Partition, rel: str) -> str:
    """The path of the zip ``f``'s shared file ``rel`` (``SSTs/...``), which must be listed."""
    path = f"{part.path}/{rel}"
    if ckpt.listing.get(path) is None:
        raise StateUnavailable(
            f"{path}: named by {f.path} but not in the checkpoint",
            reason="MISSING_SST",
            paths=(path,),
        )
    return path


# SSTs of one version read into memory by ``zip_tables``; more are read by RocksDB itself.
TABLE_BYTES = 256 << 20


def zip_tables(
    ckpt: Checkpoint, f: CheckpointFile, part: Partition, read: dict[str, bytes] | None = None
) -> list[sst.Table] | None:
    """The SSTs of the zip ``f``, for ``formats/sst.db_records``, when they hold the pairs
    RocksDB would read: no write-ahead log to replay, every SST one the module reads, and
    no two whose key ranges meet (a DB just compacted, or written in one flush). None
    otherwise: ``rebuilt_zip`` then gives RocksDB the directory, from the files this read
    left in ``read`` (by path) rather than reading them again."""
    read = {} if read is None else read
    read[f.path] = ckpt.storage.read_bytes(f.path)
    contents = rocksdb_zip.read_zip(f.path, read[f.path])
    metadata = contents.metadata
    # A write-ahead log with records (in the zip, or archived under logs/) is replayed by
    # RocksDB on open; Spark's are empty (it flushes before the checkpoint).
    if metadata.log_files or any(e.name.endswith(".log") and e.size for e in contents.entries):
        return None
    if sum(s.size_bytes for s in metadata.sst_files) > TABLE_BYTES:
        return None
    tables = []
    decode = kernel.sst_block_records if kernel.load() is not None else None
    for shared in metadata.sst_files:
        path = _shared_file(ckpt, f, part, f"SSTs/{shared.dfs_file_name}")
        read[path] = data = ckpt.storage.read_bytes(path)
        if len(data) != shared.size_bytes:
            raise rocksdb_zip.size_differs(path, len(data), shared.size_bytes, f.path)
        table = sst.open_table(path, data, decode)
        if table is None:
            return None
        if table.entries:
            tables.append(table)
    if sst.overlapping(tables):
        return None
    read.clear()  # the tables hold what they need
    return tables


@contextmanager
def rebuilt_zip(
    ckpt: Checkpoint, f: CheckpointFile, part: Partition, read: dict[str, bytes] | None = None
) -> Iterator[str]:
    """A temporary RocksDB directory rebuilt from the zip ``f`` and its SSTs: those in
    ``read`` (by path, as ``zip_tables`` leaves them) written from memory, the others
    streamed from the checkpoint."""
    read = {} if read is None else read
    zip_bytes = read.pop(f.path, None) or ckpt.storage.read_bytes(f.path)

    def fetch(rel: str) -> bytes:
        path = _shared_file(ckpt, f, part, rel)
        return read.pop(path, None) or ckpt.storage.read_bytes(path)

    def copy(rel: str, dest: Path) -> int:
        path = _shared_file(ckpt, f, part, rel)
        if (data := read.pop(path, None)) is not None:
            return dest.write_bytes(data)
        size = 0
        with ckpt.storage.open_stream(path) as src, open(dest, "wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
                size += len(chunk)
        return size

    with tempfile.TemporaryDirectory(prefix="ckpt-rocksdb-") as tmp:
        rocksdb_zip.rebuild_db_dir(zip_bytes, fetch, tmp, path=f.path, copy_shared=copy)
        yield tmp


def _check_row_checksums(ckpt: Checkpoint, plan: ReplayPlan) -> None:
    # HDFS stores' checksums are verified as their records are read (``_verified``).
    provider = ckpt.operators[plan.operator].stores[plan.store].provider
    if provider == "rocksdb" and row_checksums(ckpt.conf):
        raise CkptError(
            f"{plan.path}: rows carry checksums (rowChecksum.enabled=true), which ckpt does "
            "not decode yet"
        )


# Pending changes, collected from the deltas/changelogs after the base: key -> new value, or
# None for a remove. Plain values, not (kind, value) tuples: a tuple costs 56 bytes a key,
# which is most of the memory of a large change set.
_Changes = dict[bytes, bytes | None]
_ABSENT: Any = object()


def _merge(old: bytes | None, value: bytes) -> bytes:
    # RocksDB's StringAppend merge operator, as Spark configures it.
    return value if old is None else old + rocksdb.MERGE_DELIMITER + value


def iter_state(
    ckpt: Checkpoint,
    plan: ReplayPlan,
    progress: ProgressSink = NULL_PROGRESS,
    *,
    checksummed: bool = False,
) -> Generator[tuple[bytes, bytes], None, None]:
    """The raw ``(key, value)`` pairs of the store at ``plan.version``, streamed.

    The changes of the deltas/changelogs after the base are collected first (memory in
    proportion to them, as bytes); then the base snapshot or zip is streamed and each of its
    rows is emitted as it is, replaced, or dropped; keys only the changes know come last.
    Keys and values are as stored (raw UnsafeRows for HDFS, Spark's RocksDB encoding for
    RocksDB). Row order is the base's, then the changes'. ``checksummed``: the caller
    verifies row checksums (a delete's key carries one, stripped here).
    """
    if not checksummed:
        _check_row_checksums(ckpt, plan)
    part = ckpt.operators[plan.operator].stores[plan.store].partitions[plan.partition]
    progress.start(f"Rebuilding {plan.path} version {plan.version}", total=len(plan.files))
    try:
        changes: _Changes = {}
        merges: dict[bytes, list[bytes]] = {}
        # With no base, the first delta (usually the largest: every key's first put) is
        # streamed like a snapshot instead of held in memory.
        first = None
        if plan.base is None and plan.steps and plan.steps[0].kind is FileKind.DELTA:
            first = plan.steps[0]
        for step in plan.steps[1:] if first is not None else plan.steps:
            for kind, key, value in iter_file_records(ckpt, step):
                if kind == records.MERGE:
                    assert value is not None
                    if key in changes:
                        changes[key] = _merge(changes[key], value)
                    else:
                        merges.setdefault(key, []).append(value)
                    continue
                if checksummed and kind == records.DELETE:
                    key, checksum = strip_key_checksum(key, path=step.path)
                    if not checksum.ok:
                        raise CkptError(f"{step.path}: row checksum mismatch, key {key.hex()}")
                changes[key] = value if kind == records.PUT else None
                merges.pop(key, None)
            progress.advance()
        base: Iterator[tuple[bytes, bytes]] | None = None
        if first is not None:
            base = _first_delta_rows(ckpt, first)
        elif plan.base is not None and plan.base.kind is FileKind.ZIP:
            base = _zip_rows(ckpt, plan.base, part)
        elif plan.base is not None:
            base = _snapshot_rows(ckpt, plan.base)
        if base is not None:
            for key, value in base:
                change = changes.pop(key, _ABSENT) if changes else _ABSENT
                if change is not _ABSENT:
                    if change is not None:
                        yield key, change
                    continue
                pending = merges.pop(key, None) if merges else None
                if pending is not None:
                    for extra in pending:
                        value = _merge(value, extra)
                yield key, value
            progress.advance()
        for key, change in changes.items():
            if change is not None:
                yield key, change
        for key, pending in merges.items():
            merged: bytes | None = None
            for extra in pending:
                merged = _merge(merged, extra)
            assert merged is not None
            yield key, merged
    finally:
        progress.close()


# Bits of the key-hash bitmaps per compressed byte of the delta: a record takes >= ~10
# compressed bytes, so false "repeated" flags (each costing one held entry) stay under ~5%.
_BITMAP_BITS_PER_BYTE = 2
_BITMAP_BITS: int | None = None  # a fixed size, for tests


def _bitmap_bits(compressed_size: int) -> int:
    if _BITMAP_BITS is not None:
        return _BITMAP_BITS
    wanted = max(1 << 16, compressed_size * _BITMAP_BITS_PER_BYTE)
    return min(1 << 30, 1 << (wanted - 1).bit_length())


def _first_delta_rows(ckpt: Checkpoint, delta: CheckpointFile) -> Iterator[tuple[bytes, bytes]]:
    """The rows of a delta applied to the empty state, each key once, in bounded memory: a
    base to stream like a snapshot.

    A delta may name a key more than once (the last record wins) or remove a key. A first
    pass flags possibly-repeated keys in a bitmap of key hashes (no false negatives); in the
    second, keys never repeated are emitted as they stream by, and only the flagged ones are
    held until the end of the file.
    """
    bits = _bitmap_bits(delta.entry.size)
    seen = bytearray(bits // 8)
    repeated = bytearray(bits // 8)
    mask = bits - 1
    for _kind, key, _value in iter_file_records(ckpt, delta):
        h = hash(key) & mask
        byte, bit = h >> 3, 1 << (h & 7)
        if seen[byte] & bit:
            repeated[byte] |= bit
        else:
            seen[byte] |= bit
    del seen
    held: dict[bytes, bytes | None] = {}
    for kind, key, value in iter_file_records(ckpt, delta):
        h = hash(key) & mask
        if repeated[h >> 3] & (1 << (h & 7)):
            held[key] = value if kind == records.PUT else None
        elif kind == records.PUT and value is not None:
            yield key, value
        # else: removing a key the empty state does not have
    for key, value in held.items():
        if value is not None:
            yield key, value


# -- schemas ---------------------------------------------------------------------------------


def store_schema(ckpt: Checkpoint, operator: int, store: str) -> StateSchema | None:
    """The key/value schema Spark wrote for a store (``_metadata/schema`` of partition 0, or
    the newest ``_stateSchema`` file of Spark 4.x), or None when there is none."""
    st = ckpt.operators[operator].stores.get(store)
    candidates = list(st.schema_files) if st else []
    if not candidates:
        op_files = ckpt.operators[operator].schema_files
        candidates = [f for f in op_files if f"/_stateSchema/{store}/" in f"/{f.path}/"]
    if not candidates:
        return None
    newest = max(candidates, key=lambda f: (f.entry.mtime or 0, f.path))
    return parse_state_schema(newest.path, ckpt.storage.read_bytes(newest.path))
