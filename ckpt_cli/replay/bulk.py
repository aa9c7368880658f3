"""A partition's state merged in bulk, for the columnar replay: records as offsets into one
buffer (``Packed``), never a Python object per record.

HDFS-backed stores (a snapshot and/or deltas, no row checksums) whose files are small
enough to hold at once (``BULK_BYTES`` compressed per partition): every file is decompressed
into one buffer, its records framed by offset (``[int32 BE keySize][key][int32 BE
valueSize][value]``, -1 a remove, -1 key size the end), the keys hashed in bulk with numpy
(records of one hash compared word by word), and per key the last record wins, as applying
the files in order does. Rows come in the order a key first appears (a snapshot's order,
then keys new in the deltas), as ``read.iter_state`` gives them from a snapshot.

Anything else (RocksDB, row checksums, a large partition) and any file that does not frame
cleanly go through ``read.iter_state`` (which streams, and names the problem in its error),
its pairs packed a batch at a time.
"""

from __future__ import annotations

import array
import itertools
import struct
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from ckpt_cli.formats import compression
from ckpt_cli.formats.records import MAX_RECORD_BYTES
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.model import Checkpoint, FileKind
from ckpt_cli.replay.plan import ReplayPlan, codec_of
from ckpt_cli.replay.read import iter_state

BATCH_ROWS = 16384  # large enough that per-batch costs vanish, small to bound memory
# Partitions whose files are at most this many compressed bytes are merged in memory.
BULK_BYTES = 64 << 20

_INT = struct.Struct(">i")


@dataclass
class Packed:
    """A batch of ``(key, value)`` records: ``data[key_offsets[i]:][:key_sizes[i]]`` and the
    same for values (numpy int64 arrays)."""

    data: bytes | bytearray
    key_offsets: Any
    key_sizes: Any
    value_offsets: Any
    value_sizes: Any

    def __len__(self) -> int:
        return len(self.key_offsets)

    @classmethod
    def of(cls, pairs: Sequence[tuple[bytes, bytes]]) -> Packed:
        import numpy as np

        rows = [k for k, _ in pairs] + [v for _, v in pairs]
        sizes = np.fromiter(map(len, rows), np.int64, len(rows))
        offsets = np.cumsum(sizes) - sizes
        n = len(pairs)
        return cls(b"".join(rows), offsets[:n], sizes[:n], offsets[n:], sizes[n:])

    def pairs(self) -> list[tuple[bytes, bytes]]:
        """The records as bytes (for the row path)."""
        data = self.data if isinstance(self.data, bytes) else bytes(self.data)
        return [
            (data[k : k + ks], data[v : v + vs])
            for k, ks, v, vs in zip(
                self.key_offsets.tolist(),
                self.key_sizes.tolist(),
                self.value_offsets.tolist(),
                self.value_sizes.tolist(),
                strict=True,
            )
        ]


def packed_batches(
    ckpt: Checkpoint, plan: ReplayPlan, limit: int | None = None, size: int | None = None
) -> Iterator[Packed]:
    """The state of ``plan`` (at most ``limit`` rows) in batches of ``size`` (default
    ``BATCH_ROWS``)."""
    size = size or BATCH_ROWS
    merged = _merged(ckpt, plan) if _bulk(ckpt, plan) else None
    if merged is None:
        with closing(iter_state(ckpt, plan)) as pairs:
            rows = itertools.islice(pairs, limit)
            while chunk := list(itertools.islice(rows, size)):
                yield Packed.of(chunk)
        return
    total = len(merged) if limit is None else min(limit, len(merged))
    for start in range(0, total, size):
        end = min(start + size, total)
        yield Packed(
            merged.data,
            merged.key_offsets[start:end],
            merged.key_sizes[start:end],
            merged.value_offsets[start:end],
            merged.value_sizes[start:end],
        )


def _bulk(ckpt: Checkpoint, plan: ReplayPlan) -> bool:
    if plan.provider != "hdfs" or row_checksums(ckpt.conf):
        return False
    if any(f.kind is not FileKind.DELTA for f in plan.steps):
        return False
    if plan.base is not None and plan.base.kind is not FileKind.SNAPSHOT:
        return False
    return sum(f.entry.size or 0 for f in plan.files) <= BULK_BYTES


def _frame(data: bytearray, snapshot: bool, pos: int) -> Any:
    """The start of each record of the decompressed file at ``data[pos:]``, or None when
    the file does not end cleanly with its end marker (the streamed reader then names the
    problem)."""
    import numpy as np

    unpack = _INT.unpack_from
    starts = array.array("q")  # 8 bytes a record, not a Python int's 36
    append = starts.append
    try:
        while True:
            (key_size,) = unpack(data, pos)
            if key_size < 0:
                break
            key_end = pos + 4 + key_size
            (value_size,) = unpack(data, key_end)
            append(pos)
            pos = key_end + 4 + (value_size if value_size > 0 else 0)
    except struct.error:
        return None  # truncated
    if key_size != -1:
        return None
    at = np.frombuffer(starts, np.int64) if len(starts) else np.zeros(0, np.int64)
    key_sizes = _read_ints(data, at)
    value_sizes = _read_ints(data, at + 4 + key_sizes)
    bad = (key_sizes > MAX_RECORD_BYTES) | (value_sizes > MAX_RECORD_BYTES)
    bad |= value_sizes < (0 if snapshot else -1)
    ends = at + 8 + key_sizes + np.maximum(value_sizes, 0)
    if bool(bad.any()) or (len(ends) and int(ends[-1]) > len(data) - 4):
        return None
    return at, key_sizes, value_sizes


def _read_ints(data: bytes | bytearray, at: Any) -> Any:
    """Big-endian int32s at the byte offsets ``at``."""
    import numpy as np

    view = np.ndarray((max(0, len(data) - 3),), ">i4", buffer=data, strides=(1,))
    return view[at].astype(np.int64)


def _merged(ckpt: Checkpoint, plan: ReplayPlan) -> Packed | None:
    """The plan's files merged, or None when one does not frame cleanly."""
    import numpy as np

    # Every file decompressed straight into one buffer: no list of chunks beside its join.
    buf = bytearray()
    framed = []
    for f in plan.files:
        start = len(buf)
        with ckpt.storage.open_stream(f.path) as fh:
            for chunk in compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt)):
                buf += chunk
        # Framed before the next file is added: a truncated file ends the buffer.
        records = _frame(buf, f.kind is FileKind.SNAPSHOT, start)
        if records is None:
            return None
        framed.append(records)
    if not framed:
        framed.append((np.zeros(0, np.int64),) * 3)
    # 8 bytes a record per array, several per record: no copy kept beside another.
    key_offsets, key_sizes, value_sizes = (
        np.concatenate(column) if len(column) > 1 else column[0]
        for column in zip(*framed, strict=True)
    )
    del framed
    key_offsets += 4  # the record's start, then its key's
    n = len(key_offsets)
    if n == 0 or not plan.steps and plan.base is not None:
        # A snapshot alone holds each key once.
        return Packed(buf, key_offsets, key_sizes, key_offsets + key_sizes + 4, value_sizes)
    groups = _same_keys(buf, key_offsets, key_sizes)
    if groups is None:
        return None
    first, last = groups
    alive = value_sizes[last] >= 0
    first, last = first[alive], last[alive]
    value_offsets = key_offsets[last] + key_sizes[last] + 4  # only the values kept
    return Packed(buf, key_offsets[first], key_sizes[first], value_offsets, value_sizes[last])


_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def _same_keys(buf: bytes | bytearray, offsets: Any, sizes: Any) -> tuple[Any, Any] | None:
    """Per distinct key, the index of its first and of its last record, ordered by first;
    None when the keys are not whole 8-byte words (not UnsafeRows) or two keys' hashes
    collide (the streamed merge then does it).

    Keys are hashed in bulk, a word at a time over every key still that long (FNV-1a on
    64-bit words); records of one hash are compared word by word with its first."""
    import numpy as np

    if bool((sizes % 8).any()):
        return None
    n = len(offsets)
    words = sizes // 8
    view = np.ndarray((max(0, len(buf) - 7),), "<u8", buffer=buf, strides=(1,))
    hashes = np.full(n, _FNV_OFFSET, np.uint64) ^ words.astype(np.uint64)
    prime, shift = np.uint64(_FNV_PRIME), np.uint64(29)
    shortest = int(words.min())
    for j in range(int(words.max())):
        if j < shortest:  # every key this long: in place, no index arrays
            hashes ^= view[offsets + 8 * j]
            hashes *= prime
            hashes ^= hashes >> shift
            continue
        live = np.flatnonzero(words > j)
        mixed = (hashes[live] ^ view[offsets[live] + 8 * j]) * prime
        hashes[live] = mixed ^ (mixed >> shift)
    order = np.argsort(hashes, kind="stable")  # records of one hash stay in file order
    ordered = hashes[order]
    del hashes
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    del ordered
    ends = np.concatenate((starts[1:], [n])) - 1
    # Every record must equal the first of its hash group, word for word.
    leader = order[np.repeat(starts, np.diff(np.concatenate((starts, [n]))))]
    repeated = np.flatnonzero(leader != order)
    if len(repeated):
        mine, theirs = order[repeated], leader[repeated]
        if bool((words[mine] != words[theirs]).any()):
            return None
        for j in range(int(words[mine].max(initial=0))):
            live = np.flatnonzero(words[mine] > j)
            if bool(
                (view[offsets[mine[live]] + 8 * j] != view[offsets[theirs[live]] + 8 * j]).any()
            ):
                return None
    first, last = order[starts], order[ends]
    by_first = np.argsort(first, kind="stable")
    return first[by_first], last[by_first]
