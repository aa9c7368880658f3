"""A RocksDB partition's state in bulk, for the columnar replay (``bulk.packed_batches``):
records as offsets into a buffer, never a Python object per record past the DB's own.

Spark loads a version from the newest zip at or below it and replays the changelogs after it
into the DB (``RocksDB.load`` -> ``replayChangelog``: ``put``, or ``remove`` for a delete).
Here the changelogs come first and the zip streams past them:

* the changelogs of puts and deletes (V1, and V3 of format v2: stores without column
  families) are decompressed whole, their records framed by offset like deltas
  (``bulk.framed_records``), and reduced to the last record per key (``bulk.last_changes``,
  keys hashed in bulk; their hashes, sorted there, are kept for the lookup);
* the zip's DB is read in runs of records: from its SSTs by ``formats/sst`` (decoded in
  bulk, a run of blocks at a time) when ``read.zip_tables`` finds their key ranges apart
  and nothing RocksDB would add (a write-ahead log), else through RocksDB in chunks
  (``rocksdb.iter_db_flat``: rocksdict's ``items()``, a pair a step in Rust), each packed
  into one buffer; its keys are hashed the same way and looked up among the changes'
  (``searchsorted``, then compared byte for byte): a changed key takes its new value or is
  dropped;
* the changes no zip key took, in the order they first appear, come last.

So rows come in ``read.iter_state``'s order (the zip's, then keys new in the changelogs),
and memory is the changelogs plus one chunk (and, read by ``formats/sst``, the version's
SST files, compressed). Anything else returns None and
``read.iter_state`` streams it (naming any problem): row checksums, V2/V4 changelogs (column
families: merge records), a changelog that does not frame, two changed keys whose hashes
collide, more than ``bulk.BULK_BYTES`` of changelogs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ckpt_cli.core import kernel
from ckpt_cli.core.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.core.read import rebuilt_zip, zip_tables
from ckpt_cli.core.rebuild import ReplayPlan
from ckpt_cli.formats import records, rocksdb, sst
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.state.bulk import (
    BULK_BYTES,
    Changes,
    Packed,
    decompressed,
    decompressed_files,
    framed_records,
    joined,
    kernel_packed,
    key_hashes,
    keys_equal,
    last_changes,
    sliced,
)

# Changelog formats of puts and deletes only (V2/V4 carry column families and merges).
_UNTYPED = (1, 3)


def rocksdb_batches(ckpt: Checkpoint, plan: ReplayPlan, size: int) -> Iterator[Packed] | None:
    """The state of a RocksDB ``plan`` in batches of up to ``size`` records, or None when it
    is not one this module reads (``read.iter_state`` then does)."""
    if row_checksums(ckpt.conf) or plan.base is None and not plan.steps:
        return None
    if plan.base is not None and plan.base.kind is not FileKind.ZIP:
        return None
    if any(f.kind is not FileKind.CHANGELOG for f in plan.steps):
        return None
    if sum(f.entry.size or 0 for f in plan.steps) > BULK_BYTES:
        return None
    lookup: _Lookup | _KernelLookup | None
    if kernel.load() is not None:
        lookup = _kernel_changes(ckpt, plan)
    else:
        changes = changelog_changes(ckpt, plan)
        lookup = None if changes is None else _Lookup(changes)
    if lookup is None:
        return None
    return _batches(ckpt, plan, lookup, size)


def _kernel_changes(ckpt: Checkpoint, plan: ReplayPlan) -> _KernelLookup | None:
    """``changelog_changes`` by the compiled kernel: the changelogs' records after their
    headers, framed and merged in one buffer (removes kept), looked up by its key table."""
    buf, spans = decompressed_files(ckpt, plan.steps)
    segments = []
    for f, (start, end) in zip(plan.steps, spans, strict=True):
        changelog = records.open_changelog(f.path, _pieces(buf, start, end))
        if changelog.format_version not in _UNTYPED:
            return None
        segments.append((start + changelog.records_offset, end, False))
    merged = kernel.merge(buf, segments, dedupe=True, removes=True)
    return None if merged is None else _KernelLookup(buf, merged)


def _pieces(buf: bytes | bytearray, start: int, end: int, size: int = 1 << 16) -> Iterator[bytes]:
    """``buf[start:end]`` a piece at a time (a changelog's header is read from the first,
    without copying the records after it)."""
    for at in range(start, end, size):
        yield bytes(buf[at : min(at + size, end)])  # bytes of bytes is no copy


def changelog_changes(ckpt: Checkpoint, plan: ReplayPlan) -> Changes | None:
    """The last record per key of the plan's changelogs (value size -1: a delete), ordered
    by first record, with their key hashes; None when one has merges or does not frame, or
    changed keys collide."""
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
    return last_changes(joined(logs))


def _batches(
    ckpt: Checkpoint, plan: ReplayPlan, lookup: _Lookup | _KernelLookup, size: int
) -> Iterator[Packed]:
    import numpy as np

    changes = lookup.changes
    if plan.base is not None:
        for batch in _zip_batches(ckpt, plan.base, plan, size):
            yield from sliced(lookup.applied(batch), size)
    new = np.flatnonzero(~lookup.used & (changes.value_sizes >= 0))
    yield from sliced(
        Packed(
            changes.data,
            changes.key_offsets[new],
            changes.key_sizes[new],
            changes.value_offsets[new],
            changes.value_sizes[new],
        ),
        size,
    )


def _zip_batches(
    ckpt: Checkpoint, f: CheckpointFile, plan: ReplayPlan, size: int
) -> Iterator[Packed]:
    """The pairs of the zip ``f``'s DB in key order: from its SSTs by ``formats/sst`` where
    ``read.zip_tables`` can, a run of blocks at a time, else by RocksDB (rocksdict) in
    batches of ``size``."""
    import numpy as np

    part = ckpt.operators[plan.operator].stores[plan.store].partitions[plan.partition]
    read: dict[str, bytes] = {}  # the files zip_tables read, for the rebuild not to read again
    tables = zip_tables(ckpt, f, part, read)
    if tables is None:
        with rebuilt_zip(ckpt, f, part, read) as tmp:
            for flat, sizes in rocksdb.iter_db_flat(tmp, path=f.path, size=size):
                yield Packed.of_flat(flat, sizes)
        return
    compiled = kernel.load() is not None
    decode = kernel.sst_block_records if compiled else None
    records = sst.db_records(tables, decode=decode, read=kernel.sst_run if compiled else None)
    del tables  # each table's bytes go once it is read
    for got in records:
        # The newest record of a key decides: a put is its value, a delete drops it.
        put = np.flatnonzero((got.kinds == sst.VALUE) & ~got.repeats)
        yield Packed(
            got.data,
            got.key_offsets[put],
            got.key_sizes[put],
            got.value_offsets[put],
            got.value_sizes[put],
        )


class _Lookup:
    """The changes by key hash; ``used`` marks those a zip key took."""

    def __init__(self, latest: Changes) -> None:
        import numpy as np

        changes, hashes = latest.records, latest.hashes
        self.changes, self.hashes, self.order = changes, hashes, latest.order
        self.used = np.zeros(len(changes), bool)
        # A table of the hashes' low bits rules most zip keys out with one lookup each
        # (a search among the sorted hashes costs a dozen cache misses a key).
        size = 1 << max(10, min(24, (8 * len(changes)).bit_length()))
        self.mask = np.uint64(size - 1)
        self.seen = np.zeros(size, bool)
        self.seen[hashes & self.mask] = True

    def applied(self, batch: Packed) -> Packed:
        """``batch`` (distinct keys) with the changes of its keys applied."""
        if not len(self.changes) or not len(batch):
            return batch
        row, took = self.matches(batch)
        return _applied(batch, self.changes, row, took, self.used)

    def matches(self, batch: Packed) -> tuple[Any, Any]:
        """The rows of ``batch`` whose keys changed, and the index of each one's change."""
        import numpy as np

        changes = self.changes
        hashes = key_hashes(batch.data, batch.key_offsets, batch.key_sizes)
        maybe = np.flatnonzero(self.seen[hashes & self.mask])
        probe = hashes[maybe]
        at = np.minimum(np.searchsorted(self.hashes, probe), len(self.hashes) - 1)
        hit = self.hashes[at] == probe
        candidates, at = maybe[hit], at[hit]
        # Equal hashes: the keys compared byte for byte (a change's hash is unique among them).
        took = self.order[at]
        sizes = batch.key_sizes[candidates]
        same = sizes == changes.key_sizes[took]
        key_at, log_at = batch.key_offsets[candidates], changes.key_offsets[took]
        same[same] = keys_equal(batch.data, key_at[same], changes.data, log_at[same], sizes[same])
        return candidates[same], took[same]


class _KernelLookup:
    """``_Lookup`` over the compiled kernel's merge of the changelogs: keys looked up in its
    table (``used`` is its array, marked as keys are found)."""

    def __init__(self, data: bytes | bytearray, merged: Any) -> None:
        import numpy as np

        self.merged = merged
        self.changes = kernel_packed(data, merged)
        self.used = np.frombuffer(merged.used, np.bool_)

    def applied(self, batch: Packed) -> Packed:
        """``batch`` (distinct keys) with the changes of its keys applied."""
        import numpy as np

        if not len(self.changes) or not len(batch):
            return batch
        offsets, sizes = (np.ascontiguousarray(a) for a in (batch.key_offsets, batch.key_sizes))
        found = np.frombuffer(self.merged.lookup(batch.data, offsets, sizes), np.int64)
        row = np.flatnonzero(found >= 0)
        return _applied(batch, self.changes, row, found[row], None)


def _applied(batch: Packed, changes: Packed, row: Any, took: Any, used: Any) -> Packed:
    """``batch`` with row ``row[i]`` taking change ``took[i]``: its new value, or out for a
    delete (``used`` marks the changes taken)."""
    import numpy as np

    if not len(row):
        return batch
    mine, theirs = batch.data, changes.data
    if used is not None:
        used[took] = True
    value_sizes = changes.value_sizes[took]
    put = value_sizes >= 0
    # The new values go after the batch's bytes, gathered from the changes' buffer.
    lengths = value_sizes[put]
    ends = np.cumsum(lengths)
    gather = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(
        changes.value_offsets[took[put]] - (ends - lengths), lengths
    )
    values_at, values_size = batch.value_offsets.copy(), batch.value_sizes.copy()
    values_at[row[put]] = len(mine) + ends - lengths
    values_size[row[put]] = lengths
    keep = np.ones(len(batch), bool)
    keep[row[~put]] = False
    return Packed(
        mine + np.frombuffer(theirs, np.uint8)[gather].tobytes(),
        batch.key_offsets[keep],
        batch.key_sizes[keep],
        values_at[keep],
        values_size[keep],
    )
