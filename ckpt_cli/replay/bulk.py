"""A partition's state merged in bulk, for the columnar replay: records as offsets into one
buffer (``Packed``), never a Python object per record.

HDFS-backed stores (a snapshot and/or deltas, no row checksums) whose files are small
enough to hold at once (``BULK_BYTES`` compressed per partition): every file is decompressed
into one buffer, its records framed by offset (``[int32 BE keySize][key][int32 BE
valueSize][value]``, -1 a remove, -1 key size the end), the keys hashed in bulk by Arrow
(``dictionary_encode``), and per key the last record wins, as applying the files in order
does. Rows come in the order a key first appears (a snapshot's order, then keys new in the
deltas), as ``read.iter_state`` gives them from a snapshot.

Anything else (RocksDB, row checksums, a large partition) and any file that does not frame
cleanly go through ``read.iter_state`` (which streams, and names the problem in its error),
its pairs packed a batch at a time.
"""

from __future__ import annotations

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

BATCH_ROWS = 65536
# Partitions whose files are at most this many compressed bytes are merged in memory.
BULK_BYTES = 64 << 20

_INT = struct.Struct(">i")


@dataclass
class Packed:
    """A batch of ``(key, value)`` records: ``data[key_offsets[i]:][:key_sizes[i]]`` and the
    same for values (numpy int64 arrays)."""

    data: bytes
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
        data = self.data
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


def _frame(data: bytes, snapshot: bool) -> Any:
    """The start of each record of one decompressed file, or None when the file does not
    end cleanly with its end marker (the streamed reader then names the problem)."""
    import numpy as np

    unpack = _INT.unpack_from
    starts: list[int] = []
    append = starts.append
    pos = 0
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
    at = np.array(starts, np.int64)
    key_sizes = _read_ints(data, at)
    value_sizes = _read_ints(data, at + 4 + key_sizes)
    bad = (key_sizes > MAX_RECORD_BYTES) | (value_sizes > MAX_RECORD_BYTES)
    bad |= value_sizes < (0 if snapshot else -1)
    ends = at + 8 + key_sizes + np.maximum(value_sizes, 0)
    if bool(bad.any()) or (len(ends) and int(ends[-1]) > len(data) - 4):
        return None
    return at, key_sizes, value_sizes


def _read_ints(data: bytes, at: Any) -> Any:
    """Big-endian int32s at the byte offsets ``at``."""
    import numpy as np

    view = np.ndarray((max(0, len(data) - 3),), ">i4", buffer=data, strides=(1,))
    return view[at].astype(np.int64)


def _merged(ckpt: Checkpoint, plan: ReplayPlan) -> Packed | None:
    """The plan's files merged, or None when one does not frame cleanly."""
    import numpy as np
    import pyarrow as pa

    parts: list[bytes] = []
    framed = []
    size = 0
    for f in plan.files:
        with ckpt.storage.open_stream(f.path) as fh:
            data = b"".join(compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt)))
        records = _frame(data, f.kind is FileKind.SNAPSHOT)
        if records is None:
            return None
        at, key_sizes, value_sizes = records
        framed.append((at + size, key_sizes, value_sizes))
        parts.append(data)
        size += len(data)
    buf = parts[0] if len(parts) == 1 else b"".join(parts)
    del parts
    at = np.concatenate([r[0] for r in framed]) if framed else np.zeros(0, np.int64)
    key_sizes = np.concatenate([r[1] for r in framed]) if framed else at
    value_sizes = np.concatenate([r[2] for r in framed]) if framed else at
    key_offsets = at + 4
    value_offsets = key_offsets + key_sizes + 4
    n = len(key_offsets)
    if n == 0 or not plan.steps and plan.base is not None:
        # A snapshot alone holds each key once.
        return Packed(buf, key_offsets, key_sizes, value_offsets, value_sizes)
    # The keys in one Arrow array (records are in buffer order, so a filter over the buffer
    # cuts them out), hashed in bulk: one dictionary index per record, numbered in the order
    # the keys first appear.
    bounds = np.empty(2 * n + 1, np.int64)
    bounds[0] = 0
    bounds[1::2] = key_offsets
    bounds[2::2] = key_offsets + key_sizes
    pieces = pa.Array.from_buffers(
        pa.large_binary(), 2 * n, [None, pa.py_buffer(bounds), pa.py_buffer(buf)]
    )
    keep = np.zeros(2 * n, np.bool_)
    keep[1::2] = True
    ids = pieces.filter(pa.array(keep)).dictionary_encode().indices.to_numpy().astype(np.int64)
    # Per key: its first record (the row's position) and its last (its value).
    seen = np.maximum.accumulate(ids)
    first = np.flatnonzero(np.concatenate(([True], ids[1:] > seen[:-1])))
    last = np.zeros(len(first), np.int64)
    np.maximum.at(last, ids, np.arange(n, dtype=np.int64))
    alive = value_sizes[last] >= 0
    first, last = first[alive], last[alive]
    return Packed(buf, key_offsets[first], key_sizes[first], value_offsets[last], value_sizes[last])
