"""A RocksDB partition's state in bulk, for the columnar replay (``bulk.packed_batches``):
records as offsets into one buffer, never a Python object per record past the DB's own.

Spark loads a version from the newest zip at or below it and replays the changelogs after it
into the DB (``RocksDB.load`` -> ``replayChangelog``: ``put``, or ``remove`` for a delete).
Here:

* the zip's DB is iterated in chunks (``rocksdb.iter_db_chunks``: rocksdict's ``items()``,
  a pair a step in Rust), each chunk packed into one buffer;
* with no changelog after the zip, those chunks are the batches (memory: one chunk);
* with changelogs of puts and deletes (V1, and V3 of format v2: the stores without column
  families), their decompressed records are framed by offset like deltas
  (``bulk._frame``) and put after the zip's pairs in one buffer, and per key the last
  record wins (``bulk._same_keys``). Rows come in ``read.iter_state``'s order: the zip's
  (key order), then keys new in the changelogs.

Anything else returns None and ``read.iter_state`` streams it (naming any problem): row
checksums, V2/V4 changelogs (column families: merge records), a file that does not frame,
colliding key hashes, more than ``bulk.BULK_BYTES`` of SSTs and changelogs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ckpt_cli.formats import records, rocksdb
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.replay.bulk import (
    BULK_BYTES,
    Packed,
    decompressed,
    framed_records,
    joined,
    last_per_key,
    sliced,
)
from ckpt_cli.replay.plan import ReplayPlan
from ckpt_cli.replay.read import rebuilt_zip

# Changelog formats of puts and deletes only (V2/V4 carry column families and merges).
_UNTYPED = (1, 3)


def rocksdb_batches(ckpt: Checkpoint, plan: ReplayPlan, size: int) -> Iterator[Packed] | None:
    """The state of a RocksDB ``plan`` in batches of ``size`` records, or None when it is
    not one this module reads (``read.iter_state`` then does)."""
    if row_checksums(ckpt.conf) or plan.base is None and not plan.steps:
        return None
    if plan.base is not None and plan.base.kind is not FileKind.ZIP:
        return None
    if any(f.kind is not FileKind.CHANGELOG for f in plan.steps):
        return None
    if sum(f.entry.size or 0 for f in plan.steps) > BULK_BYTES:
        return None
    if not plan.steps:
        assert plan.base is not None
        return _zip_batches(ckpt, plan, plan.base, size)
    merged = _merged(ckpt, plan)
    return None if merged is None else sliced(merged, size)


def _zip_batches(
    ckpt: Checkpoint, plan: ReplayPlan, zip_file: CheckpointFile, size: int
) -> Iterator[Packed]:
    with rebuilt_zip(ckpt, zip_file, _partition(ckpt, plan)) as (tmp, _):
        for chunk in rocksdb.iter_db_chunks(tmp, path=zip_file.path, size=size):
            yield Packed.of(chunk)


def _partition(ckpt: Checkpoint, plan: ReplayPlan) -> Any:
    return ckpt.operators[plan.operator].stores[plan.store].partitions[plan.partition]


def _merged(ckpt: Checkpoint, plan: ReplayPlan) -> Packed | None:
    """The zip's pairs then the changelogs' records, the last per key winning; None when a
    changelog has merges or does not frame, the SSTs are too large, or hashes collide."""
    logs: list[Packed] = []
    for f in plan.steps:
        data = decompressed(ckpt, f)
        changelog = records.open_changelog(f.path, [data])
        if changelog.format_version not in _UNTYPED:
            return None
        framed = framed_records(data, False, changelog.records_offset)
        if framed is None:
            return None
        logs.append(framed)
    parts: list[Packed] = []
    if plan.base is not None:
        with rebuilt_zip(ckpt, plan.base, _partition(ckpt, plan)) as (tmp, metadata):
            if sum(f.size_bytes for f in metadata.sst_files) > BULK_BYTES:
                return None
            parts = [Packed.of(c) for c in rocksdb.iter_db_chunks(tmp, path=plan.base.path)]
    merged = joined(parts + logs)
    del parts, logs
    return last_per_key(merged)
